"""scikit-learn's own unit tests for NMF, FastICA, LinearDiscriminantAnalysis and the
random projections (GaussianRandomProjection, SparseRandomProjection,
johnson_lindenstrauss_min_dim), run against latentlab's by the harness in
``tests/_sklearn_suites.py`` (its docstring explains the tables)."""

from _sklearn_suites import PRIVATE, Suite, suite_tests

import latentlab
from latentlab.closed_form.random_projection import johnson_lindenstrauss_min_dim

SUITES = {
    "nmf": Suite("sklearn.decomposition.tests.test_nmf", {"NMF": latentlab.NMF}),
    "ica": Suite("sklearn.decomposition.tests.test_fastica", {"FastICA": latentlab.FastICA}),
    "lda": Suite(
        "sklearn.tests.test_discriminant_analysis",
        {"LinearDiscriminantAnalysis": latentlab.LinearDiscriminantAnalysis},
    ),
    "rp": Suite(
        "sklearn.tests.test_random_projection",
        {
            "GaussianRandomProjection": latentlab.GaussianRandomProjection,
            "SparseRandomProjection": latentlab.SparseRandomProjection,
            "johnson_lindenstrauss_min_dim": johnson_lindenstrauss_min_dim,
        },
    ),
}

# (suite key, "test_name", "test_name[param-id]" or a "prefix*") -> why it is not run.
EXCLUDED: dict[tuple[str, str], str] = {
    # -- NMF
    ("nmf", "test_nmf_custom_init_dtype_error"): (
        "expects a TypeError for float32 W/H with float64 X: latentlab casts a custom "
        "start to X's precision (float64) instead"
    ),
    ("nmf", "test_nmf_n_components_auto"): PRIVATE + " (_n_components)",
    ("nmf", "test_non_negative_factorization_consistency"): (
        "compares latentlab's NMF with scikit-learn's own non_negative_factorization "
        "function element-wise at rtol=1e-7 after a fixed number of iterations: the two "
        "solvers take different iterates (latentlab's coordinate descent sweeps and "
        "KL/Frobenius multiplicative steps are ordered and accelerated differently), so "
        "equality of unconverged factors is not a fair comparison (tests/test_nmf.py "
        "compares converged fits)"
    ),
    ("nmf", "test_nmf_minibatchnmf_equivalence[1]"): (
        "compares with scikit-learn's MiniBatchNMF iterates at tol=0 after max_iter steps: "
        "latentlab's Kullback-Leibler multiplicative update is the exact EM step "
        "(documented in NMF), not scikit-learn's, so the unconverged factors differ"
    ),
    ("nmf", "test_nmf_minibatchnmf_equivalence[2]"): (
        "compares with scikit-learn's MiniBatchNMF iterates at tol=0 after max_iter steps: "
        "latentlab's Frobenius multiplicative passes (several inner passes per outer step) "
        "differ from scikit-learn's single update, so the unconverged factors differ"
    ),
    # -- FastICA
    # -- LinearDiscriminantAnalysis
    ("lda", "test_lda_predict"): (
        "its last part expects NotImplementedError for shrinkage with solver='svd'; "
        "latentlab refuses the setting with a ValueError (bad input, DESIGN: ValueError)"
    ),
    # -- random projections
}

# (suite key, test name) -> (the param ids that run, what the others only vary)
KEPT_PARAMS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    # 200 cases [compute_inverse_components-class-n_features-n_samples-container]: each
    # value of each parameter still runs once
    ("rp", "test_inverse_transform"): (
        (
            "True-GaussianRandomProjection-1000-11-coo_matrix",
            "False-SparseRandomProjection-9-1000-coo_array",
            "True-SparseRandomProjection-10-2-coo_array",
            "False-GaussianRandomProjection-11-9-coo_matrix",
            "True-SparseRandomProjection-2-10-coo_matrix",
        ),
        "the other combinations of sizes, container class and the inverse flag",
    ),
}

REPEATS: dict[tuple[str, str], str] = {}

test_sklearn_suite, test_tables_name_existing_cases = suite_tests(
    SUITES, EXCLUDED, KEPT_PARAMS, REPEATS
)
