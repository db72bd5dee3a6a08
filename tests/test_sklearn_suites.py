"""scikit-learn's own unit tests for PCA, KernelPCA, FactorAnalysis, GaussianMixture and
the cross-decomposition classes (CCA, PLSRegression, PLSCanonical, PLSSVD), run against
latentlab's classes by the harness in ``tests/_sklearn_suites.py`` (its docstring
explains SUITES, EXCLUDED, KEPT_PARAMS and REPEATS).  The other suites are in
``tests/test_sklearn_suites_*.py``, one file per pytest-xdist worker.

XLA compiles dominate this file's time: 340 s on one of two workers in a fresh-clone
run of the suite (2026-11-29), the longest file but one.  To keep it from growing, cases
that only repeat another's behaviour -- a seed, a size, a container class -- are
skipped as "repeat of" it.
"""

from _sklearn_suites import ARRAY_API, PRIVATE, SLOW, Adapt, Suite, suite_tests

import latentlab

SUITES = {
    "pca": Suite("sklearn.decomposition.tests.test_pca", {"PCA": latentlab.PCA}),
    "fa": Suite(
        "sklearn.decomposition.tests.test_factor_analysis",
        {"FactorAnalysis": latentlab.FactorAnalysis},
    ),
    "kpca": Suite(
        "sklearn.decomposition.tests.test_kernel_pca", {"KernelPCA": latentlab.KernelPCA}
    ),
    "gmm": Suite(
        "sklearn.mixture.tests.test_gaussian_mixture",
        {"GaussianMixture": latentlab.GaussianMixture},
    ),
    "pls": Suite(
        "sklearn.cross_decomposition.tests.test_pls",
        {
            "CCA": latentlab.CCA,
            "PLSRegression": latentlab.PLSRegression,
            "PLSCanonical": latentlab.PLSCanonical,
            "PLSSVD": latentlab.PLSSVD,
        },
    ),
}

WHITENED_SCORE = (
    "last assertion: whitened score < unwhitened score. scikit-learn's get_covariance "
    "rescales the components by sqrt(explained_variance_) when whiten=True and then "
    "weights them by the variances again, so its whitened density differs; latentlab's "
    "density of x does not depend on how projections are scaled (documented in PCA), so "
    "the two scores agree to round-off and the strict > holds or fails by chance"
)

# (suite key, "test_name", "test_name[param-id]" or a "prefix*") -> why it is not run.
EXCLUDED: dict[tuple[str, str], str] = {
    # -- PCA
    ("pca", "test_pca_svd_solver_auto"): PRIVATE + " (_fit_svd_solver; ours is svd_solver_)",
    ("pca", "test_pca_score[*"): WHITENED_SCORE,
    ("pca", "test_pca_singular_values[randomized]"): (
        "refits on X_trans @ components_ expecting orthogonal score columns: scikit-learn's "
        "randomized fit_transform returns U * S, latentlab's returns transform(X) = Xc V^T "
        "(a past bug fix), orthogonal only to ~1e-7 for approximate randomized axes"
    ),
    ("pca", "test_pca_score_consistency_solvers[randomized]"): (
        "rtol=5e-6 between randomized and full scores on digits is met by scikit-learn's "
        "random sketch by a small margin (off by 4.6e-4) and missed by latentlab's JAX sketch "
        "(off by 9.2e-4, 6.5e-6 relative): both are the default 4 power iterations' accuracy"
    ),
    ("pca", "test_pca_zero_noise_variance_edge_cases"): (
        "second half scores 3 samples in 100 dimensions with noise_variance_ 0: the PPCA "
        "covariance is singular and the likelihood undefined; scikit-learn returns a number "
        "from inverting it, latentlab raises a ValueError naming it (DESIGN 7). The first "
        "half (n_components == n_features) passes"
    ),
    # -- FactorAnalysis (latentlab/estimators/factor_analysis.py)
    ("fa", "test_factor_analysis"): (
        "fits 3 factors to 5 features (and later 5 to 5): past the Ledermann bound (2 for "
        "d = 5), where the factors are not identified, so latentlab refuses them with a "
        "ValueError naming the bound; scikit-learn fits them. (Before that refusal it passed "
        "up to cov @ precision == I to 12 decimals at a Heywood optimum of K = 5.)"
    ),
    # -- KernelPCA
    ("kpca", "test_precomputed_kernel_not_psd[randomized]"): (
        "second half expects an error for n_components=2 because scikit-learn's randomized "
        "solver ranks eigenvalues by modulus; latentlab's returns the two largest correctly "
        "(the first half, the error for n_components=7, passes)"
    ),
    # -- GaussianMixture
    ("gmm", "test_gaussian_mixture_array_api_compliance"): ARRAY_API,
    ("gmm", "test_gaussian_mixture_raises_where_array_api_not_implemented"): ARRAY_API,
    ("gmm", "test_gaussian_mixture_precisions_init"): PRIVATE + " (_set_parameters)",
    ("gmm", "test_gaussian_mixture_all_init_does_not_estimate_gaussian_parameters"): (
        PRIVATE + " (patches _estimate_gaussian_parameters)"
    ),
    ("gmm", "test_gaussian_mixture_verbose"): SLOW.format(
        "12 s for separate verbose programs per covariance type, to check that text is printed"
    ),
    ("gmm", "test_check_weights"): (
        "its range case (weights all above 1) expects scikit-learn's exact text, which prints "
        "the minimum as 'max value' and the maximum as 'min value'; latentlab reports those "
        "weights by their sum ('should be normalized, but got sum(weights) = ...') and does "
        "not print swapped labels. The shape and normalization cases match"
    ),
    ("gmm", "test_regularisation"): (
        "expects a ValueError for collapsing components with reg_covar=0; latentlab keeps "
        "them finite at a variance floor and warns (DESIGN 7: degenerate data gives finite "
        "parameters)"
    ),
    # -- CCA (test_pls.py)
    ("pls", "test_copy"): (
        "asserts that copy=False overwrites the caller's X in place (scikit-learn's centring); "
        "latentlab accepts copy but never writes into its inputs"
    ),
    ("pls", "test_scale_and_stability[X1-y1-CCA]"): (
        "singular X covariance; unregularized CCA is rejected there (DESIGN 9: set reg > 0)"
    ),
    ("pls", "test_scale_and_stability[X2-y2-CCA]"): (
        "n_features_x + n_features_y >= n_samples - 1: unregularized CCA is degenerate and "
        "rejected (DESIGN 9: set reg > 0)"
    ),
    ("pls", "test_scale_and_stability[X3-y3-CCA]"): "as X2-y2: degenerate unregularized CCA",
    ("pls", "test_scale_and_stability[X4-y4-CCA]"): "as X2-y2: degenerate unregularized CCA",
    ("pls", "test_loadings_converges"): (
        "max_iter and ConvergenceWarning of scikit-learn's NIPALS iteration; latentlab's CCA "
        "is closed form"
    ),
}


# Selection: parametrisations that repeat another case's behaviour -- a seed, a size,
# a scale, or a container class that validation turns into the same array -- are not
# run.  (suite key, test name) -> (the param ids that are run, what the rest only vary).
# Every other id of that test is skipped with the reason "repeat of" the kept ids.
# Chosen so that each value of each parameter still runs at least once (per solver).
KEPT_PARAMS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    # 216 cases: [scale-solver-container-n_components-density].  arpack with
    # n_components=10 runs in the two tests below (the Lanczos path's dearest setting)
    ("pca", "test_pca_sparse"): (
        (
            "1-arpack-csr_matrix-1-0.01",
            "100-arpack-csc_array-2-0.3",
            "1-covariance_eigh-csc_matrix-1-0.3",
            "100-covariance_eigh-csr_array-10-0.01",
        ),
        "the other combinations of scale, container class, n_components and density",
    ),
    ("pca", "test_sparse_pca_solver_error"): (
        ("csr_matrix-randomized", "csc_array-full"),
        "the same refusal for the other container classes",
    ),
    ("pca", "test_pca_sparse_fit_transform"): (
        ("csc_array",),
        "the other container classes (validated into the same CSR/CSC arrays; "
        "test_pca_sparse runs each class)",
    ),
    ("pca", "test_sparse_pca_auto_arpack_singular_values_consistency"): (
        ("csr_matrix",),
        "the other container classes (validated into the same CSR/CSC arrays; "
        "test_pca_sparse runs each class)",
    ),
    ("kpca", "test_kernel_pca_solvers_equivalence"): (
        ("4",),
        "n_components 10 and 20: the same three solvers on the same 1000 x 1000 kernel",
    ),
    # [seed-max_iter-tol]: fit_predict must end with the E-step of the returned
    # parameters, which matters where EM stops early (max_iter=2); with max_iter=300 the
    # fit converges and the same code runs, but latentlab compiles max_iter into the EM
    # program, so each max_iter costs four more programs (one per covariance type)
    ("gmm", "test_gaussian_mixture_fit_predict"): (
        ("0-2-1e-07",),
        "the seed, and max_iter=300 with tol 1e-7 or 0.1 (converged fits)",
    ),
}

# Whole test functions whose behaviour another case (or latentlab's own tests)
# already asserts, each at the price of its own compiled programs: -> "repeat of ...".
REPEATS: dict[tuple[str, str], str] = {
    ("kpca", "test_gridsearch_pipeline"): (
        "repeat of test_gridsearch_pipeline_precomputed (kPCA cloned, set and refitted in a "
        "Pipeline by GridSearchCV) and test_nested_circles (rbf kPCA at gamma=2 makes the "
        "circles separable); its folds of 266 and 267 rows and the refit on 400 compile "
        "eleven programs"
    ),
    ("gmm", "test_gaussian_mixture_n_parameters"): (
        "repeat of tests/test_gmm.py::test_matches_sklearn_from_the_same_start, where bic "
        "and aic equal scikit-learn's to 1e-6 for every covariance type (so do the parameter "
        "counts); its four fits at another shape cost four more EM programs"
    ),
    ("gmm", "test_gaussian_mixture_aic_bic"): (
        "repeat of tests/test_gmm.py::test_matches_sklearn_from_the_same_start (aic and bic "
        "equal to scikit-learn's to 1e-6, each covariance type); eight more EM programs"
    ),
    ("gmm", "test_init"): (
        "repeat of test_gaussian_mixture_fit_best_params: n_init keeps the best of its starts "
        "(there against ten single fits, each covariance type); this one repeats it over 15 "
        "seeds with max_iter=1, two more EM programs"
    ),
    ("gmm", "test_multiple_init"): (
        "repeat of test_gaussian_mixture_fit_best_params, which checks n_init more strictly "
        "(n_init=5 vs 1 on four covariance types: eight more EM programs)"
    ),
}


def _with_private_scores(cls):
    """``cls`` with scikit-learn's private ``_x_scores``/``_y_scores`` read from
    latentlab's public ``x_scores_``/``y_scores_`` (the same training scores)."""
    return type(
        cls.__name__,
        (cls,),
        {
            "_x_scores": property(lambda self: self.x_scores_),
            "_y_scores": property(lambda self: self.y_scores_),
        },
    )


PRIVATE_SCORES = tuple(
    Adapt(name, _with_private_scores, "reads the private _x_scores/_y_scores")
    for name in ("PLSRegression", "PLSCanonical", "PLSSVD")
)
ADAPTED = {
    ("pls", name): PRIVATE_SCORES
    for name in (
        "test_pls_canonical_basics",
        "test_sanity_check_pls_canonical",
        "test_sanity_check_pls_canonical_random",
    )
}

test_sklearn_suite, test_tables_name_existing_cases = suite_tests(
    SUITES, EXCLUDED, KEPT_PARAMS, REPEATS, ADAPTED
)
