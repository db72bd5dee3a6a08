"""scikit-learn's own unit tests for PCA, KernelPCA, FactorAnalysis, GaussianMixture and
CCA, run against latentlab's classes.

The test modules ship inside the installed scikit-learn package; nothing is copied here.
Each module is imported, its ``test_*`` functions are expanded over their own
``pytest.mark.parametrize`` grids, and every case runs with the module's global name for
the class under test (``PCA``, ``KernelPCA``, ...) replaced by latentlab's class, and
parameter values that are scikit-learn's class replaced by ours. The assertions are
scikit-learn's, untouched.

Only cases that exercise the class under test are generated: for a grid over estimator
classes (``test_pls.py`` runs CCA, PLSCanonical, PLSRegression and PLSSVD through one
function) only the cases with that class, otherwise the functions that name the class.
Cases that cannot be a fair comparison, or exercise a feature latentlab does not have
yet, are listed in ``EXCLUDED`` with the reason and are reported as skipped.  To keep
this file's time near half a minute (XLA compiles dominate it), cases that only repeat
another's behaviour -- a seed, a size, a container class -- are skipped as "repeat of"
it: ``KEPT_PARAMS`` names the parametrisations of a grid that run, ``REPEATS`` whole
functions covered elsewhere.

scikit-learn's conftest fixtures are given their scikit-learn defaults:
``global_random_seed`` = 42 and ``global_dtype`` = float64 (scikit-learn runs more seeds
and float32 only when asked to through environment variables).
"""

import importlib
import inspect
import itertools
from typing import Any, NamedTuple

import numpy as np
import pytest
from sklearn.base import BaseEstimator

import latentlab

# key -> (installed test module, global name of the class under test, latentlab's class)
SUITES = {
    "pca": ("sklearn.decomposition.tests.test_pca", "PCA", latentlab.PCA),
    "fa": (
        "sklearn.decomposition.tests.test_factor_analysis",
        "FactorAnalysis",
        latentlab.FactorAnalysis,
    ),
    "kpca": ("sklearn.decomposition.tests.test_kernel_pca", "KernelPCA", latentlab.KernelPCA),
    "gmm": (
        "sklearn.mixture.tests.test_gaussian_mixture",
        "GaussianMixture",
        latentlab.GaussianMixture,
    ),
    "cca": ("sklearn.cross_decomposition.tests.test_pls", "CCA", latentlab.CCA),
}

# scikit-learn's conftest fixtures, at scikit-learn's defaults.
FIXTURES = {"global_random_seed": 42, "global_dtype": np.float64}


# Why a case is not run, by category.
ARRAY_API = "array API namespaces (torch, cupy, array-api-strict): latentlab computes in JAX"
PRIVATE = "reads or patches scikit-learn private internals of the class"
MESSAGE = (
    "matches scikit-learn's exact message text; latentlab raises ValueError/warns with its own"
)
SLOW = "kept out to hold this file near a minute: {} (cold XLA compiles)"
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
    ("pca", "test_pca_validation[arpack-0-*"): MESSAGE,
    ("pca", "test_pca_validation[randomized-0-*"): MESSAGE,
    ("pca", "test_pca_validation[auto-3-*"): MESSAGE,
    ("pca", "test_n_components_mle_error"): MESSAGE,
    ("pca", "test_fit_mle_too_few_samples"): MESSAGE,
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
    # -- FactorAnalysis (latentlab/estimators/factor_analysis.py)
    ("fa", "test_factor_analysis"): (
        "fits 3 factors to 5 features (and later 5 to 5): past the Ledermann bound (2 for "
        "d = 5), where the factors are not identified, so latentlab refuses them with a "
        "ValueError naming the bound; scikit-learn fits them. (Before that refusal it passed "
        "up to cov @ precision == I to 12 decimals at a Heywood optimum of K = 5.)"
    ),
    # -- KernelPCA
    ("kpca", "test_kernel_pca"): (
        "its callable kernel calls numpy (np.histogram-style) on its inputs: latentlab's "
        "callable kernels must be JAX-traceable (documented)"
    ),
    ("kpca", "test_kernel_pca_invalid_parameters"): MESSAGE,
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
    ("gmm", "test_sample"): MESSAGE,
    ("gmm", "test_gaussian_mixture_verbose"): SLOW.format(
        "12 s for separate verbose programs per covariance type, to check that text is printed"
    ),
    ("gmm", "test_check_weights"): MESSAGE,
    ("gmm", "test_check_means"): MESSAGE,
    ("gmm", "test_check_precisions"): MESSAGE,
    ("gmm", "test_gaussian_mixture_fit_convergence_warning"): MESSAGE,
    ("gmm", "test_regularisation"): (
        "expects a ValueError for collapsing components with reg_covar=0; latentlab keeps "
        "them finite at a variance floor and warns (DESIGN 7: degenerate data gives finite "
        "parameters)"
    ),
    # -- CCA (test_pls.py)
    ("cca", "test_copy"): (
        "asserts that copy=False overwrites the caller's X in place (scikit-learn's centring); "
        "latentlab accepts copy but never writes into its inputs"
    ),
    ("cca", "test_scale_and_stability[X1-y1-CCA]"): (
        "singular X covariance; unregularized CCA is rejected there (DESIGN 9: set reg > 0)"
    ),
    ("cca", "test_scale_and_stability[X2-y2-CCA]"): (
        "n_features_x + n_features_y >= n_samples - 1: unregularized CCA is degenerate and "
        "rejected (DESIGN 9: set reg > 0)"
    ),
    ("cca", "test_scale_and_stability[X3-y3-CCA]"): "as X2-y2: degenerate unregularized CCA",
    ("cca", "test_scale_and_stability[X4-y4-CCA]"): "as X2-y2: degenerate unregularized CCA",
    ("cca", "test_n_components_upper_bounds"): MESSAGE,
    ("cca", "test_loadings_converges"): (
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


def _excluded(suite, test_id, func_name):
    for (key, pattern), reason in EXCLUDED.items():
        if key != suite:
            continue
        if pattern in (test_id, func_name) or (
            pattern.endswith("*") and test_id.startswith(pattern[:-1])
        ):
            return reason
    for (key, pattern), reason in REPEATS.items():
        if key == suite and pattern in (test_id, func_name):
            return reason
    kept = KEPT_PARAMS.get((suite, func_name))
    if kept is not None and test_id != func_name:
        ids, varies = kept
        if test_id[len(func_name) + 1 : -1] not in ids:
            return f"repeat of {func_name}[{' | '.join(ids)}]: only varies {varies}"
    return None


class Case(NamedTuple):
    suite: str
    name: str
    kwargs: dict[str, Any]


def _value_id(value, argname, index):
    # pytest's own rule for ids of values it cannot print.
    if value is None or isinstance(value, (str, int, float, bool, complex)):
        return str(value)
    if inspect.isclass(value) or inspect.isfunction(value):
        return value.__name__
    return f"{argname}{index}"


def _grid(mark):
    """The cases of one parametrize mark: list of (kwargs, id, marks)."""
    argnames = mark.args[0]
    if isinstance(argnames, str):
        argnames = [a.strip() for a in argnames.split(",") if a.strip()]
    values = list(mark.args[1])
    ids = mark.kwargs.get("ids")
    cases = []
    for index, value in enumerate(values):
        marks, explicit_id = (), None
        if isinstance(value, type(pytest.param(None))):
            marks, explicit_id, value = value.marks, value.id, value.values
        elif len(argnames) == 1:
            value = (value,)
        if explicit_id is None and ids is not None:
            if callable(ids):
                explicit_id = ids(value[0]) if len(argnames) == 1 else None
            else:
                explicit_id = ids[index]
        if explicit_id is None:
            explicit_id = "-".join(
                _value_id(v, a, index) for a, v in zip(argnames, value, strict=True)
            )
        cases.append((dict(zip(argnames, value, strict=True)), str(explicit_id), tuple(marks)))
    return cases


def _expand(func):
    """All parametrized cases of one test function: (kwargs, id, marks)."""
    grids = [_grid(m) for m in getattr(func, "pytestmark", []) if m.name == "parametrize"]
    other = tuple(m for m in getattr(func, "pytestmark", []) if m.name != "parametrize")
    if not grids:
        return [({}, "", other)]
    out = []
    for combo in itertools.product(*grids):
        kwargs = {k: v for kw, _, _ in combo for k, v in kw.items()}
        marks = other + tuple(m for _, _, ms in combo for m in ms)
        out.append((kwargs, "-".join(i for _, i, _ in combo), marks))
    return out


def _is_estimator_class(value):
    return inspect.isclass(value) and issubclass(value, BaseEstimator)


def _cases():
    params = []
    for suite, (module_name, name, ours) in SUITES.items():
        module = importlib.import_module(module_name)
        theirs = getattr(module, name)
        for func_name, func in vars(module).items():
            if not func_name.startswith("test_") or not inspect.isfunction(func):
                continue
            names_class = name in _global_names(func.__code__)
            for kwargs, param_id, marks in _expand(func):
                classes = [v for v in kwargs.values() if _is_estimator_class(v)]
                if classes:
                    if theirs not in classes:
                        continue  # a case for another estimator (PLS*, PCA in kPCA's module)
                elif not names_class:
                    continue  # a test of a private helper: no class under test
                kwargs = {k: ours if v is theirs else v for k, v in kwargs.items()}
                test_id = f"{func_name}[{param_id}]" if param_id else func_name
                reason = _excluded(suite, test_id, func_name)
                if reason:
                    marks = marks + (pytest.mark.skip(reason=reason),)
                params.append(
                    pytest.param(
                        Case(suite, func_name, kwargs), id=f"{suite}::{test_id}", marks=marks
                    )
                )
    return params


def _global_names(code):
    """Global names a function reads, including those of nested functions/comprehensions."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


@pytest.mark.parametrize("case", _cases())
def test_sklearn_suite(case, monkeypatch):
    module_name, name, ours = SUITES[case.suite]
    module = importlib.import_module(module_name)
    monkeypatch.setattr(module, name, ours)
    func = getattr(module, case.name)
    kwargs = dict(case.kwargs)
    for arg in inspect.signature(func).parameters:
        if arg in kwargs:
            continue
        kwargs[arg] = monkeypatch if arg == "monkeypatch" else FIXTURES[arg]
    func(**kwargs)


def test_kept_params_name_existing_cases():
    # a kept id that no longer exists (scikit-learn renamed a parameter value) would
    # silently skip the whole grid
    ids = {p.id for p in _cases()}
    for (suite, name), (kept, _) in KEPT_PARAMS.items():
        for param_id in kept:
            assert f"{suite}::{name}[{param_id}]" in ids, (suite, name, param_id)
