"""Factor rotations (latentlab.closed_form.rotation) against independent oracles:
statsmodels' ``rotate_factors`` and factor_analyzer's ``Rotator``, each run from the
identity to its own convergence, compared up to column order and sign; criteria
recomputed here in NumPy, written from the papers' formulas."""

import itertools
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from compile_counter import count_compiles
from sklearn.datasets import load_wine
from sklearn.decomposition import FactorAnalysis

from latentlab.closed_form.rotation import ROTATION_METHODS, rotate

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from factor_analyzer.rotator import Rotator
    from statsmodels.multivariate.factor_rotation import rotate_factors

# oracles: their Armijo tests stall near |Gp| ~ 1e-8 (round-off), which leaves their
# loadings accurate to ~1e-8; a bounded number of iterations keeps them quick
ORACLE_TOL, ORACLE_ITER = 1e-9, 600
AGREE = 1e-6  # loadings, up to column order and sign


def _wine_loadings(K):
    X = load_wine().data
    X = (X - X.mean(0)) / X.std(0)
    return FactorAnalysis(K, random_state=0).fit(X).components_.T  # unrotated, 13 x K


WINE = {K: _wine_loadings(K) for K in (2, 3)}


# ----------------------------------------------------------------------------- criteria
# written here from the definitions (Harman's orthomax; Jennrich 2002's oblimin;
# Yates' geomin; least squares to a target), independent of the module's JAX code


def orthomax_q(L, gamma):
    L2 = L**2
    return -0.25 * (np.sum(L2**2) - gamma / L.shape[0] * np.sum(L2.sum(0) ** 2))


def oblimin_q(L, gamma):
    d, K = L.shape
    L2 = L**2
    N = np.ones((K, K)) - np.eye(K)
    C = np.full((d, d), 1.0 / d)
    return 0.25 * np.sum(L2 * ((np.eye(d) - gamma * C) @ L2 @ N))


def geomin_q(L, epsilon=0.01):
    return np.sum(np.prod(L**2 + epsilon, axis=1) ** (1.0 / L.shape[1]))


def target_q(L, H, W=1.0):
    return np.sum((W * (L - H)) ** 2)


# ----------------------------------------------------------------------------- helpers


def signed_match(L, M):
    """The least max-abs difference of L and M's columns under a signed permutation,
    and that permutation (order, signs) of M's columns."""
    best = (np.inf, None, None)
    for order in itertools.permutations(range(L.shape[1])):
        Mp = M[:, order]
        signs = np.where(np.sum(Mp * L, axis=0) < 0, -1.0, 1.0)
        gap = np.abs(L - Mp * signs).max()
        if gap < best[0]:
            best = (gap, list(order), signs)
    return best


def check_conventions(result, A):
    L, T, Phi = result.loadings, result.rotation_matrix, result.factor_correlation
    K = A.shape[1]
    np.testing.assert_allclose(L @ Phi @ L.T, A @ A.T, atol=1e-12)
    np.testing.assert_allclose(result.structure, L @ Phi, atol=1e-14)
    np.testing.assert_allclose(Phi, T.T @ T if result.oblique else np.eye(K), atol=1e-12)
    if result.oblique:
        np.testing.assert_allclose(np.sum(T**2, axis=0), 1.0, atol=1e-12)
        np.testing.assert_allclose(L, A @ np.linalg.inv(T.T), atol=1e-12)
    else:
        np.testing.assert_allclose(T.T @ T, np.eye(K), atol=1e-12)
        np.testing.assert_allclose(L, A @ T, atol=1e-12)
    if result.method not in ("target", "partial_target"):  # a target fixes the columns
        # canonical columns: decreasing sums of squares, positive sums
        assert np.all(np.diff(np.sum(L**2, axis=0)) <= 1e-12)
        assert np.all(np.sum(L, axis=0) > 0)
    for array in (L, T, Phi, result.structure):
        assert isinstance(array, np.ndarray) and array.dtype == np.float64


# ----------------------------------------------------------------------------- statsmodels


def _sm(A, *args):
    return rotate_factors(A, *args, tol=ORACLE_TOL, max_tries=ORACLE_ITER)[0]


def _statsmodels_cases(K):
    A, d = WINE[K], WINE[K].shape[0]
    H = np.where(np.abs(A) > 0.4, np.sign(A), 0.0)
    W = (np.arange(d * K).reshape(d, K) % 3 != 0).astype(float)
    # (name, our call, the oracle's loadings, the criterion both are scored by)
    return [
        ("varimax", dict(method="varimax"), lambda: _sm(A, "varimax"), lambda L: orthomax_q(L, 1)),
        ("quartimax", dict(method="quartimax"), lambda: _sm(A, "quartimax"),
         lambda L: orthomax_q(L, 0)),
        # statsmodels' "equamax" is orthomax with gamma = 1/d, not equamax; Crawford-
        # Ferguson's kappa = K/(2d) is (GPArotation's cfT), equal to orthomax gamma = K/2
        ("equamax", dict(method="equamax"), lambda: _sm(A, "CF", K / (2 * d), "orthogonal"),
         lambda L: orthomax_q(L, K / 2)),
        ("orthomax 0.5", dict(method="orthomax", gamma=0.5), lambda: _sm(A, "orthomax", 0.5),
         lambda L: orthomax_q(L, 0.5)),
        ("quartimin", dict(method="quartimin"), lambda: _sm(A, "quartimin"),
         lambda L: oblimin_q(L, 0)),
        ("oblimin 0.5", dict(method="oblimin", gamma=0.5),
         lambda: _sm(A, "oblimin", 0.5, "oblique"), lambda L: oblimin_q(L, 0.5)),
        ("oblimin 0 orthogonal", dict(method="oblimin", oblique=False),
         lambda: _sm(A, "oblimin", 0, "orthogonal"), lambda L: oblimin_q(L, 0)),
        ("target", dict(method="target", target=H), lambda: _sm(A, "target", H, "orthogonal"),
         lambda L: target_q(L, H)),
        ("target analytic", dict(method="target", target=H),
         lambda: rotate_factors(A, "target", H, "orthogonal", algorithm="analytic")[0],
         lambda L: target_q(L, H)),
        ("target oblique", dict(method="target", target=H, oblique=True),
         lambda: _sm(A, "target", H, "oblique"), lambda L: target_q(L, H)),
        ("partial_target", dict(method="partial_target", target=H, target_weights=W),
         lambda: _sm(A, "partial_target", H, W), lambda L: target_q(L, H, W)),
    ]  # fmt: skip


@pytest.mark.parametrize("K", [2, 3])
def test_agrees_with_statsmodels(K):
    A = WINE[K]
    gaps = {}
    for name, kwargs, oracle, q in _statsmodels_cases(K):
        ours = rotate(A, **kwargs)
        assert ours.converged, name
        theirs = oracle()
        gaps[name] = signed_match(ours.loadings, theirs)[0]
        # the best of 10 starts is no worse than the oracle's solution
        best = rotate(A, **kwargs, n_starts=10, random_state=0)
        assert q(best.loadings) <= q(theirs) + 1e-12, name
        assert best.criterion <= ours.criterion + 1e-12, name
        np.testing.assert_allclose(best.criterion, q(best.loadings), rtol=1e-12, atol=1e-15)
    assert max(gaps.values()) < AGREE, gaps


# ----------------------------------------------------------------------------- factor_analyzer


def _fa(A, **kwargs):
    rotator = Rotator(**kwargs, max_iter=ORACLE_ITER)
    return rotator.fit_transform(A), rotator.phi_


def _factor_analyzer_cases(K):
    d = WINE[K].shape[0]
    return [
        # factor_analyzer's varimax is the SVD iteration (Kaiser normalization by
        # default); its tol is relative to the criterion, so it can go much lower
        ("varimax", dict(method="varimax"), dict(method="varimax", normalize=False, tol=1e-14),
         lambda L: orthomax_q(L, 1)),
        ("varimax kaiser", dict(method="varimax", normalize=True),
         dict(method="varimax", normalize=True, tol=1e-14), None),
        ("quartimax", dict(method="quartimax"), dict(method="quartimax", tol=ORACLE_TOL),
         lambda L: orthomax_q(L, 0)),
        ("equamax", dict(method="equamax"),
         dict(method="equamax", kappa=K / (2 * d), tol=ORACLE_TOL),
         lambda L: orthomax_q(L, K / 2)),
        ("quartimin", dict(method="quartimin"), dict(method="quartimin", tol=ORACLE_TOL),
         lambda L: oblimin_q(L, 0)),
        ("geomin", dict(method="geomin"), dict(method="geomin_obl", tol=ORACLE_TOL),
         geomin_q),
        ("geomin orthogonal", dict(method="geomin", oblique=False),
         dict(method="geomin_ort", tol=ORACLE_TOL), geomin_q),
        ("promax", dict(method="promax"), dict(method="promax", normalize=False, tol=1e-14),
         None),
        ("promax kaiser", dict(method="promax", normalize=True),
         dict(method="promax", normalize=True, tol=1e-14), None),
    ]  # fmt: skip


@pytest.mark.parametrize("K", [2, 3])
def test_agrees_with_factor_analyzer(K):
    A = WINE[K]
    gaps = {}
    for name, kwargs, oracle, q in _factor_analyzer_cases(K):
        ours = rotate(A, **kwargs)
        assert ours.converged, name
        theirs, phi = _fa(A, **oracle)
        gap, order, signs = signed_match(ours.loadings, theirs)
        gaps[name] = gap
        if ours.oblique:  # their Φ, permuted and signed as their columns
            phi = phi[np.ix_(order, order)] * np.outer(signs, signs)
            gaps[name + " phi"] = np.abs(ours.factor_correlation - phi).max()
        if q is not None:
            best = rotate(A, **kwargs, n_starts=10, random_state=1)
            assert q(best.loadings) <= q(theirs) + 1e-12, name
    assert max(gaps.values()) < AGREE, gaps


# ----------------------------------------------------------------------------- conventions

METHOD_CALLS = [
    dict(method="varimax"),
    dict(method="quartimax", normalize=True),
    dict(method="equamax"),
    dict(method="oblimin", gamma=-0.5),
    dict(method="quartimin", normalize=True),
    dict(method="geomin"),
    dict(method="geomin", oblique=False),
    dict(method="promax", kappa=3),
    dict(method="target", target=np.eye(13, 3), oblique=True),
    dict(method="partial_target", target=np.eye(13, 3), target_weights=np.eye(13, 3) == 0,
         oblique=True),
]  # fmt: skip


@pytest.mark.parametrize("kwargs", METHOD_CALLS, ids=lambda kw: kw["method"])
def test_conventions_hold_exactly(kwargs):
    A = WINE[3]
    result = rotate(A, **kwargs)
    check_conventions(result, A)
    assert result.method == kwargs["method"]
    default = kwargs["method"] in ("oblimin", "quartimin", "geomin", "promax")
    assert result.oblique == kwargs.get("oblique", default)


def test_orthomax_family_members():
    A = WINE[3]
    for gamma, named in [(0.0, "quartimax"), (1.0, "varimax"), (1.5, "equamax")]:
        family = rotate(A, "orthomax", gamma=gamma)
        member = rotate(A, named)
        np.testing.assert_allclose(family.loadings, member.loadings, atol=1e-12)
        np.testing.assert_allclose(family.criterion, orthomax_q(family.loadings, gamma))
    # K = 2: equamax's gamma = K/2 = 1 is varimax
    np.testing.assert_allclose(
        rotate(WINE[2], "equamax").loadings, rotate(WINE[2], "varimax").loadings, atol=1e-12
    )


def test_kaiser_normalization_rotates_the_unit_rows():
    A = WINE[3]
    h = np.linalg.norm(A, axis=1)
    for method in ("varimax", "quartimin"):
        scaled = rotate(A / h[:, None], method)
        result = rotate(A, method, normalize=True)
        np.testing.assert_allclose(result.loadings, scaled.loadings * h[:, None], atol=1e-10)
        np.testing.assert_allclose(result.rotation_matrix, scaled.rotation_matrix, atol=1e-10)
        assert result.criterion == pytest.approx(scaled.criterion, rel=1e-10)


def test_planted_simple_structure_is_recovered():
    rng = np.random.default_rng(3)
    d, K = 13, 3
    pattern = np.zeros((d, K))
    for i, j in enumerate([0] * 5 + [1] * 4 + [2] * 4):
        pattern[i, j] = rng.uniform(0.5, 0.9)
    Phi = np.array([[1.0, 0.4, 0.2], [0.4, 1.0, -0.3], [0.2, -0.3, 1.0]])
    w, V = np.linalg.eigh(Phi)
    Q, _ = np.linalg.qr(rng.standard_normal((K, K)))
    A = pattern @ (V * np.sqrt(w)) @ V.T @ Q  # Λ Φ^{1/2} Q: the same A Aᵀ
    for method, atol in [("quartimin", 1e-7), ("oblimin", 1e-7), ("geomin", 0.02)]:
        result = rotate(A, method, n_starts=5, random_state=0)
        gap, order, signs = signed_match(result.loadings, pattern)
        assert gap < atol, (method, gap)
        truth = Phi[np.ix_(order, order)] * np.outer(signs, signs)
        np.testing.assert_allclose(result.factor_correlation, truth, atol=5 * atol)
    # with noise on the pattern the recovery is approximate
    noisy = pattern + 0.03 * rng.standard_normal((d, K))
    A = noisy @ (V * np.sqrt(w)) @ V.T @ Q
    for method in ("quartimin", "geomin"):
        assert signed_match(rotate(A, method).loadings, noisy)[0] < 0.06, method


def test_user_criterion_matches_the_named_one():
    A = WINE[3]

    def varimax(L):
        L2 = L * L
        return -0.25 * jnp.sum((L2 - jnp.mean(L2, axis=0)) ** 2)

    def quartimin(L):
        L2 = L * L
        return 0.25 * (jnp.sum(jnp.sum(L2, axis=1) ** 2) - jnp.sum(L2 * L2))

    for criterion, named, oblique in [(varimax, "varimax", None), (quartimin, "quartimin", True)]:
        custom = rotate(A, "custom", criterion=criterion, oblique=oblique)
        reference = rotate(A, named)
        assert custom.method == "custom" and custom.oblique == bool(oblique)
        np.testing.assert_allclose(custom.loadings, reference.loadings, atol=1e-9)
        np.testing.assert_allclose(custom.factor_correlation, reference.factor_correlation,
                                   atol=1e-9)  # fmt: skip
        assert custom.criterion == pytest.approx(reference.criterion, rel=1e-10)


def test_programs_compile_once_per_criterion_and_shape():
    A = WINE[3]

    def varimax(L):
        L2 = L * L
        return -0.25 * jnp.sum((L2 - jnp.mean(L2, axis=0)) ** 2)

    for method in ("oblimin", "geomin", "varimax"):
        rotate(A, method)
    rotate(A, "custom", criterion=varimax)
    with count_compiles() as compiles:
        rotate(A, "quartimin", n_starts=3, random_state=0)
        rotate(A * 0.9, "oblimin", gamma=-0.3)  # gamma is an input, not a constant
        rotate(A, "geomin", epsilon=0.05)
        rotate(A, "equamax", normalize=True)  # the orthomax program of varimax
        rotate(A, "promax", kappa=2)
        rotate(A, "custom", criterion=varimax)  # the same callable: no new program
    assert compiles() == 0


def test_random_starts_are_reproducible_and_never_worse():
    A = WINE[3]
    one = rotate(A, "geomin", n_starts=1)
    many = rotate(A, "geomin", n_starts=8, random_state=np.random.default_rng(5))
    again = rotate(A, "geomin", n_starts=8, random_state=np.random.default_rng(5))
    np.testing.assert_array_equal(many.loadings, again.loadings)
    assert many.criterion <= one.criterion + 1e-15


def test_one_start_is_the_identity_whatever_the_seed():
    A = WINE[3]
    for method in ("oblimin", "varimax"):
        plain = rotate(A, method)
        for seed in (0, np.random.default_rng(1)):
            seeded = rotate(A, method, random_state=seed)
            np.testing.assert_array_equal(seeded.loadings, plain.loadings)
            np.testing.assert_array_equal(seeded.rotation_matrix, plain.rotation_matrix)
            assert (seeded.criterion, seeded.n_iter) == (plain.criterion, plain.n_iter)
    with pytest.raises(TypeError):  # a bad seed is refused even when unused
        rotate(A, "varimax", random_state="seed")


def test_one_factor_is_returned_sign_canonical():
    a = -np.linspace(0.2, 0.8, 5)[:, None]
    for method in ("varimax", "oblimin", "promax", "geomin"):
        result = rotate(a, method)
        np.testing.assert_allclose(result.loadings, -a)
        np.testing.assert_allclose(result.rotation_matrix, [[-1.0]])
        np.testing.assert_allclose(result.factor_correlation, [[1.0]])
        assert result.converged and result.n_iter == 0


def test_partial_target_ignores_unweighted_nan_targets():
    A = WINE[2]
    H = np.where(np.abs(A) > 0.4, np.sign(A), 0.0)
    W = np.abs(A) > 0.4
    result = rotate(A, "partial_target", target=np.where(W, H, np.nan), target_weights=W)
    reference = rotate(A, "partial_target", target=H, target_weights=W.astype(int))
    np.testing.assert_allclose(result.loadings, reference.loadings, atol=1e-14)


# ----------------------------------------------------------------------------- bad input

A3 = WINE[3]


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((np.ones(5),), {}, "2-D"),
        ((np.full((4, 2), np.nan),), {}, "non-finite"),
        ((np.ones((2, 3)),), {}, "more columns"),
        ((np.ones((0, 0)),), {}, "at least one row"),
        (([["a", "b"]],), {}, "numeric"),
        ((A3, "varimaxx"), {}, "Unknown rotation method.*'varimax'.*'partial_target'"),
        ((A3, "orthomax"), {}, "needs gamma"),
        ((A3, "orthomax"), dict(gamma=-1), "gamma=-1.0 is out of range"),
        ((A3, "oblimin"), dict(gamma=2), "gamma=2.0 is out of range"),
        ((A3, "oblimin"), dict(gamma=np.nan), "gamma=nan is out of range"),
        ((A3, "varimax"), dict(gamma=1), "gamma applies to"),
        ((A3, "promax"), dict(kappa=0.5), "kappa=0.5 is out of range"),
        ((A3, "geomin"), dict(epsilon=0), "epsilon=0.0 is out of range"),
        ((A3, "target"), {}, "needs target="),
        ((A3, "partial_target"), dict(target=A3), "needs target_weights="),
        ((A3, "target"), dict(target=np.ones((13, 2))), r"target must have .* \(13, 3\)"),
        ((A3, "partial_target"), dict(target=A3, target_weights=np.ones((3, 3))),
         r"target_weights must have"),
        ((A3, "partial_target"), dict(target=A3, target_weights=np.full((13, 3), 0.5)),
         "0/1 or boolean"),
        ((A3, "target"), dict(target=A3, target_weights=np.ones((13, 3))),
         "for method='partial_target'"),
        ((A3, "varimax"), dict(target=A3), "target methods"),
        ((A3, "varimax"), dict(criterion=lambda L: 0.0), "criterion= is for method='custom'"),
        ((A3, "custom"), {}, "needs criterion="),
        ((A3, "custom"), dict(criterion=3.0), "criterion must be callable"),
        ((A3, "varimax"), dict(oblique=True), "orthogonal only"),
        ((A3, "promax"), dict(oblique=False), "oblique by construction"),
        ((A3, "geomin"), dict(oblique="yes"), "oblique must be"),
        ((A3, "varimax"), dict(n_starts=0), "n_starts must be an integer >= 1"),
        ((A3, "varimax"), dict(n_starts=2.5), "n_starts must be an integer >= 1"),
        ((A3, "varimax"), dict(tol=0), "tol=0.0 is out of range"),
        ((A3, "varimax"), dict(max_iter=-1), "max_iter must be"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_by_name(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        rotate(*args, **kwargs)


def test_custom_criterion_must_return_a_scalar():
    with pytest.raises(ValueError, match="must return a scalar"):
        rotate(WINE[2], "custom", criterion=lambda L: L**2)


def test_every_method_is_listed():
    assert set(ROTATION_METHODS) == {
        "varimax", "quartimax", "equamax", "orthomax", "oblimin", "quartimin", "geomin",
        "promax", "target", "partial_target", "custom",
    }  # fmt: skip


def test_custom_criterion_that_depends_on_column_order_keeps_it():
    A = WINE[2]
    H = np.where(np.abs(A) > 0.4, -np.sign(A), 0.0)[:, ::-1].copy()

    def to_target(L):
        return jnp.sum((L - H) ** 2)

    custom = rotate(A, "custom", criterion=to_target)
    reference = rotate(A, "target", target=H)
    np.testing.assert_allclose(custom.loadings, reference.loadings, atol=1e-9)
    assert custom.criterion == pytest.approx(target_q(custom.loadings, H), rel=1e-12)


def test_an_unbounded_oblique_criterion_is_refused_by_name():
    def varimax(L):  # bounded under orthogonal rotation only
        L2 = L * L
        return -0.25 * jnp.sum((L2 - jnp.mean(L2, axis=0)) ** 2)

    with pytest.raises(ValueError, match="degenerated from every start"):
        rotate(WINE[3], "custom", criterion=varimax, oblique=True)
