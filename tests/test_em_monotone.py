"""EM never lowers the likelihood: a seeded property test over small, awkward data sets
(integer values with ties, missing entries, complete rows), every covariance type, with
and without SQUAREM, and the constrained M-step against its closed form."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import hide_at_random, is_monotone, mixture_covariance_penalty
from sklearn.exceptions import ConvergenceWarning

from latentlab import GaussianMixture
from latentlab.inference.em import run_em

COVARIANCE_TYPES = ["full", "tied", "diag", "spherical"]
N, D = 40, 3  # one shape for every data set: few compiled programs


def awkward_data_sets():
    """Two dozen (name, X) pairs of shape (N, D); no row or column entirely missing."""
    sets = []
    for seed in range(8):  # the fuzzer's case: small integers, many ties, 20% NaN
        rng = np.random.default_rng(seed)
        X = rng.integers(0, 3, (N, D)).astype(float)
        sets.append((f"int3-nan-{seed}", hide_at_random(X, 0.2, seed=100 + seed)[0]))
    for seed in range(6):  # wider integers, more missing
        rng = np.random.default_rng(10 + seed)
        X = rng.integers(0, 5, (N, D)).astype(float)
        sets.append((f"int5-nan-{seed}", hide_at_random(X, 0.3, seed=200 + seed)[0]))
    for seed in range(5):  # two continuous clusters with missing entries
        rng = np.random.default_rng(20 + seed)
        X = rng.normal(size=(N, D)) + np.repeat([[0.0] * D, [3.0] * D], N // 2, axis=0)
        sets.append((f"normal-nan-{seed}", hide_at_random(X, 0.2, seed=300 + seed)[0]))
    for seed in range(5):  # complete integer data: ties only
        rng = np.random.default_rng(30 + seed)
        sets.append((f"int3-complete-{seed}", rng.integers(0, 3, (N, D)).astype(float)))
    return sets


DATA_SETS = awkward_data_sets()


@pytest.mark.parametrize("accelerate", [True, False])
@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_em_trace_is_monotone_and_ends_at_the_score(covariance_type, accelerate):
    failures = []
    for name, X in DATA_SETS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est = GaussianMixture(
                2,
                covariance_type=covariance_type,
                covariance_prior=0.0,  # maximum likelihood ("auto" penalises full + NaN)
                accelerate=accelerate,
                random_state=0,
            ).fit(X)
        trace = est.log_likelihoods_
        if not (np.all(np.isfinite(trace)) and is_monotone(trace)):
            failures.append((name, float(np.min(np.diff(trace))) if len(trace) > 1 else None))
        np.testing.assert_allclose(trace[-1], N * est.score(X), rtol=1e-9, err_msg=name)
    assert not failures, f"trace decreases on {len(failures)} data sets: {failures}"


def test_the_auto_penalised_trace_is_monotone_and_ends_at_its_objective():
    """Full covariances on the awkward sets with NaN: covariance_prior="auto" penalises
    them (tau = 1), and EM's trace of the penalised log-likelihood still never falls
    and ends at log p(X) + the penalty, computed apart in NumPy."""
    failures = []
    for name, X in DATA_SETS:
        if not np.isnan(X).any():
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est = GaussianMixture(2, random_state=0).fit(X)
        assert est.covariance_prior_ == 1.0, name
        trace = est.log_likelihoods_
        if not (np.all(np.isfinite(trace)) and is_monotone(trace)):
            failures.append((name, float(np.min(np.diff(trace))) if len(trace) > 1 else None))
        objective = N * est.score(X) + mixture_covariance_penalty(est)
        np.testing.assert_allclose(trace[-1], objective, rtol=1e-9, err_msg=name)
    assert not failures, f"trace decreases on {len(failures)} data sets: {failures}"


def floored_sample_covariance(X, reg):
    """ML covariance (ddof=0) with eigenvalues below ``reg`` raised to it, by NumPy."""
    S = np.cov(X, rowvar=False, bias=True)
    values, vectors = np.linalg.eigh(S)
    return (vectors * np.maximum(values, reg)) @ vectors.T


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_single_component_fit_is_the_floored_sample_covariance(covariance_type):
    """With K = 1 the constrained ML solution is closed form: the sample mean and the
    sample covariance with its eigenvalues floored at reg_covar (here a constant column
    and a near-duplicate pair of columns give eigenvalues below the floor)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    X[:, 1] = X[:, 0] + 1e-3 * rng.normal(size=N)  # variance 1e-6 along x0 - x1
    X[:, 2] = 2.0  # zero variance
    reg = 1e-2
    est = GaussianMixture(1, covariance_type=covariance_type, reg_covar=reg).fit(X)
    np.testing.assert_allclose(est.means_[0], X.mean(axis=0), rtol=1e-12, atol=1e-12)
    var = X.var(axis=0)
    expected = {
        "full": floored_sample_covariance(X, reg)[None],
        "tied": floored_sample_covariance(X, reg),
        "diag": np.maximum(var, reg)[None],
        "spherical": np.array([max(var.mean(), reg)]),
    }[covariance_type]
    np.testing.assert_allclose(est.covariances_, expected, rtol=1e-10, atol=1e-14)


def test_floored_cholesky_takes_the_cheap_factor_only_clear_of_the_floor():
    """Both routes of the M-step's covariance factor against NumPy's floored
    eigendecomposition: a stack clear of the floor (the plain Cholesky factor) and one
    with a matrix below it (the eigenvalue route, for the whole stack)."""
    from latentlab.models._gmm_covariances import _clear_of_floor, floored_cholesky

    rng = np.random.default_rng(3)
    B = rng.normal(size=(6, 6))
    clear = B @ B.T + 0.5 * np.eye(6)
    values, vectors = np.linalg.eigh(clear)
    below = (vectors * np.r_[1e-4, values[1:]]) @ vectors.T  # one eigenvalue under 1e-2
    floor = 1e-2
    for stack, is_clear in (([clear, 2.0 * clear], True), ([clear, below], False)):
        with jax.enable_x64(True):
            cov = jnp.asarray(np.stack(stack))
            assert bool(_clear_of_floor(cov, jnp.full(6, floor))) is is_clear
            L = np.asarray(floored_cholesky(cov, floor))
        for factor, matrix in zip(L, stack, strict=True):
            values, vectors = np.linalg.eigh(matrix)
            expected = (vectors * np.maximum(values, floor)) @ vectors.T
            np.testing.assert_allclose(factor @ factor.T, expected, rtol=1e-10, atol=1e-13)
            assert np.all(np.diag(factor) > 0) and np.allclose(factor, np.tril(factor))


# -- numerical breakdown ---------------------------------------------------------------


def _toy_e_step(theta, data, hyper):
    """Objective -(theta - 5)^2, but not finite once theta > 3 (a breakdown)."""
    objective = jnp.where(theta > 3.0, jnp.nan, -((theta - 5.0) ** 2))
    return theta, objective


def _toy_m_step(stats, theta, hyper):
    return stats + 1.0


@pytest.mark.parametrize("accelerate", [False, True])
def test_run_em_returns_the_last_finite_iterate(accelerate):
    """Iterates 0, 1, 2, ... (one per cycle without SQUAREM, whose jumps the NaN
    objective rejects): 4 breaks down, so EM stops at 3 with the objectives of 1, 2, 3."""
    with jax.enable_x64(True):
        result = run_em(
            _toy_e_step,
            _toy_m_step,
            jnp.zeros((1,)),
            None,
            None,
            jnp.asarray(1.0),
            jnp.asarray(0.0),
            max_iter=20,
            accelerate=accelerate,
        )
    assert bool(result.breakdown) and not bool(result.converged)
    if not accelerate:
        assert float(result.params) == 3.0 and int(result.n_iter) == 3
        np.testing.assert_array_equal(result.trace[:3], [-16.0, -9.0, -4.0])
    assert np.isfinite(float(result.params))
    assert float(result.objective) == -((float(result.params) - 5.0) ** 2)
    n = int(result.n_iter)
    if n:
        assert float(result.trace[n - 1]) == float(result.objective)


def test_collapsing_fit_without_regularisation_keeps_finite_parameters():
    """reg_covar=0 and three identical rows: a component collapses onto one row, and its
    likelihood is unbounded.  Before, fit raised "non-finite values"; scikit-learn
    returns a finite iterate.  Now the variance stops at the round-off floor, the fit
    is finite, monotone and ends at n * score, and it warns."""
    rng = np.random.default_rng(57)
    X = np.vstack([rng.normal(size=(6, 2)), np.repeat(rng.normal(size=(1, 2)), 3, axis=0)])
    for covariance_type in COVARIANCE_TYPES:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            est = GaussianMixture(
                3, covariance_type=covariance_type, reg_covar=0.0, max_iter=1, random_state=57
            ).fit(X)
        collapsed = any("collapsed" in str(w.message) for w in record)
        assert collapsed == (covariance_type != "tied")  # a pooled covariance cannot
        warned = any(issubclass(w.category, ConvergenceWarning) for w in record)
        assert warned == (not est.converged_) and est.n_iter_ == 1
        for value in est.params_.values():
            assert np.all(np.isfinite(value))
        np.testing.assert_allclose(est.log_likelihoods_[-1], len(X) * est.score(X), rtol=1e-9)
        if covariance_type != "tied":  # the collapsed component sits on one row
            variances = est.covariances_.reshape(3, -1)
            k = int(np.argmin(variances.max(axis=1)))
            assert variances[k].max() < 1e-13
            assert np.min(np.linalg.norm(X - est.means_[k], axis=1)) < 1e-12
            assert est.weights_[k] == pytest.approx(1 / 9, abs=1e-9)


def _shrinking_m_step(stats, params, hyper):
    """Not an M-step: halves every standard deviation, until their squares underflow
    and the log-likelihood stops being finite."""
    return params._replace(scale=0.5 * params.scale)


def test_estimator_keeps_the_last_finite_iterate_and_warns(monkeypatch):
    from latentlab.models import gmm

    e_step, _ = gmm.step_functions("diag")
    monkeypatch.setattr(gmm, "step_functions", lambda covariance_type: (e_step, _shrinking_m_step))
    X = DATA_SETS[-1][1]  # complete, N x D
    with pytest.warns(ConvergenceWarning, match="broke down"):
        est = GaussianMixture(
            2, covariance_type="diag", accelerate=False, max_iter=5000, random_state=0
        ).fit(X)
    assert not est.converged_ and 100 < est.n_iter_ < 5000
    scale = est.params_["scale"]
    assert np.all(np.isfinite(scale)) and np.all(scale > 0)
    # the next halving is the first iterate without a finite log-likelihood
    assert np.isfinite(est.score(X))
    np.testing.assert_allclose(est.log_likelihoods_[-1], N * est.score(X), rtol=1e-9)
    est.params_["scale"] = 0.5 * scale
    assert not np.isfinite(est.score(X))


# -- run_em's options: blockwise (pLSA's fold-in) and lazy_objective (pLSA's fit) ------


def _weights_e_step(params, likelihoods, hyper, with_objective=True):
    """Mixture weights w_b of fixed component likelihoods L (B, n, K), one problem per
    block b: stats = expected counts, objective = sum_i log sum_k w_bk L_bik per block."""
    del hyper
    joint = params[:, None, :] * likelihoods
    total = jnp.sum(joint, axis=-1)
    stats = jnp.sum(joint / total[..., None], axis=1)
    return stats, jnp.sum(jnp.log(total), axis=-1)


def _weights_m_step(stats, params, hyper):
    return stats / jnp.sum(stats, axis=-1, keepdims=True)


def _single_block_e_step(params, likelihoods, hyper):
    stats, objective = _weights_e_step(params, likelihoods, hyper)
    return stats, objective[0]


def _weights_problem():
    rng = np.random.default_rng(0)
    likelihoods = rng.gamma(0.5, size=(5, 30, 4)) + 1e-3
    start = np.full((5, 4), 0.25)
    return jnp.asarray(likelihoods), jnp.asarray(start)


@pytest.mark.parametrize("cycles", [1, 3])
def test_blockwise_squarem_equals_one_run_per_block(cycles):
    # Oracle: each block fitted alone by the ordinary driver.  Blockwise mode must take
    # every decision (step length, fallback) per block; a shared step length would
    # give other iterates after the first cycle.
    with jax.enable_x64(True):
        likelihoods, start = _weights_problem()
        together = run_em(
            _weights_e_step, _weights_m_step, start[None], likelihoods, None,
            jnp.ones(5), 0.0, max_iter=cycles, blockwise=True,
        )  # fmt: skip
        for b in range(5):
            alone = run_em(
                _single_block_e_step, _weights_m_step, start[b : b + 1][None],
                likelihoods[b : b + 1], None, 1.0, 0.0, max_iter=cycles,
            )  # fmt: skip
            np.testing.assert_allclose(together.params[b], alone.params[0], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(together.objective[b], alone.objective, rtol=1e-12)
        assert is_monotone(np.asarray(together.trace)[: int(together.n_iter)])


def test_blockwise_stops_when_every_block_has_converged():
    with jax.enable_x64(True):
        likelihoods, start = _weights_problem()
        tol = 1e-9
        result = run_em(
            _weights_e_step, _weights_m_step, start[None], likelihoods, None,
            jnp.full(5, 30.0), tol, max_iter=500, blockwise=True,
        )  # fmt: skip
        assert bool(result.converged) and int(result.n_iter) < 500
        # at the maximum the gradient of sum_i log(w L_i) is n on the support of w
        mixture = np.einsum("bik,bk->bi", likelihoods, result.params)
        grad = np.einsum("bik,bi->bk", likelihoods, 1.0 / mixture)
        support = np.asarray(result.params) > 1e-6
        np.testing.assert_allclose(grad[support], 30.0, rtol=1e-4)


def test_lazy_objective_keeps_the_trace_monotone_and_skips_half_the_objectives():
    calls = []

    def e_step(params, likelihoods, hyper, with_objective=True):
        calls.append(with_objective)  # traced once: the flag is a tracer in the cycle
        stats, objective = _weights_e_step(params[None], likelihoods[None], hyper)
        objective = jax.lax.cond(with_objective, lambda: objective[0], lambda: jnp.nan)
        return stats[0], objective

    def m_step(stats, params, hyper):
        return stats / jnp.sum(stats)

    with jax.enable_x64(True):
        likelihoods, start = _weights_problem()
        lazy = run_em(e_step, m_step, start[:1], likelihoods[0], None, 1.0, 0.0,
                      max_iter=30, lazy_objective=True)  # fmt: skip
        eager = run_em(_single_block_e_step, _weights_m_step, start[:1][None],
                       likelihoods[:1], None, 1.0, 0.0, max_iter=30)  # fmt: skip
    trace = np.asarray(lazy.trace)[: int(lazy.n_iter)]
    assert np.all(np.isfinite(trace)) and is_monotone(trace)
    # both reach the maximum of this concave problem
    np.testing.assert_allclose(lazy.objective, eager.objective, rtol=1e-9)
    assert any(not isinstance(flag, bool) for flag in calls)


# -- SQUAREM's safeguard ---------------------------------------------------------------


def _overshoot_e_step(theta, data, hyper):
    return theta, -((theta - 5.0) ** 2)


def _overshoot_m_step(stats, theta, hyper):
    """An EM map that converges to 5 from below, faster and faster (d -> d^2 / 4 for
    the distance d to 5), so SQUAREM's extrapolation, which assumes a constant rate,
    overshoots.  Beyond 5 it steps back below 5 (closer: monotone), except from
    [5.05, 5.1), which it maps to 5.15, and from [5.1, 5.2], which it maps to 9.
    Those two intervals are reached only by extrapolation (no output of the map lies
    in them), as a mixture's EM step in floating point can misbehave from extreme
    points that only a jump reaches: from every point plain EM reaches, and from
    every point it maps to, it never lowers the objective."""
    a = stats
    below = 5.0 - (5.0 - a) ** 2 / 4.0
    back = 5.0 - 0.5 * (a - 5.0)
    jumped_only = jnp.where(a < 5.1, 5.15, 9.0)
    beyond = jnp.where((a >= 5.05) & (a <= 5.2), jumped_only, back)
    return jnp.where(a <= 5.0, below, beyond)


def test_squarem_discards_an_extrapolated_iterate_that_lost_ground():
    """From 4: plain EM gives 4.75, 4.984375; the jump lands at 5.0909, its first EM
    step at 5.15 (closer to 5 than 4.75: accepted), its second at 9, with an
    objective far below the start's.  That iterate is discarded for plain EM's
    (4.984375), so the trace rises at every step and the fit reaches 5.  Without the
    safeguard the trace read -16 after the first cycle."""
    with jax.enable_x64(True):
        result = run_em(
            _overshoot_e_step,
            _overshoot_m_step,
            jnp.full((1,), 4.0),
            None,
            None,
            jnp.asarray(1.0),
            jnp.asarray(1e-14),
            max_iter=20,
            accelerate=True,
        )
    n = int(result.n_iter)
    trace = np.asarray(result.trace[:n])
    # trace[0] is the objective after the first cycle: theta2's, the jump discarded
    assert trace[0] == -((5.0 - 4.984375) ** 2)
    assert np.all(np.diff(trace) >= 0), trace
    assert bool(result.converged) and abs(float(result.params) - 5.0) < 1e-6
    assert float(result.objective) == trace[-1]
