"""The one multi-start MAP/SVI driver (latentlab.inference.svi.fit_best_of)."""

import numpy as np
import pytest
from oracles import planted_low_rank

import latentlab
from latentlab.inference.svi import fit_best_of, start_seeds


def _data():
    X, _, _ = planted_low_rank(n=60, d=5, rank=2, noise=0.5, seed=0)
    return X


ESTIMATORS = {
    "PPCA": lambda **kw: latentlab.PPCA(2, **kw),
    "FactorAnalysis": lambda **kw: latentlab.FactorAnalysis(2, **kw),
    "BayesianPCA": lambda **kw: latentlab.BayesianPCA(2, **kw),
}


@pytest.mark.parametrize(
    ("name", "method"), [("PPCA", "map"), ("FactorAnalysis", "svi"), ("BayesianPCA", "map")]
)
def test_random_state_reproduces_the_fit(name, method):
    X = _data()

    def fit(seed):
        est = ESTIMATORS[name](method=method, svi_steps=60, n_init=2, random_state=seed)
        return est.fit(X)

    a, b, c = fit(3), fit(3), fit(4)
    for key in a.params_:
        np.testing.assert_array_equal(a.params_[key], b.params_[key])
    np.testing.assert_array_equal(a.log_likelihoods_, b.log_likelihoods_)
    # another random_state reaches the SVI itself (its starts and its gradient noise)
    assert not np.array_equal(a.log_likelihoods_, c.log_likelihoods_)


def test_supervised_pca_random_state_reproduces_the_fit():
    X = _data()
    y = X[:, 0] + 0.1 * np.random.default_rng(0).standard_normal(len(X))

    def fit(seed):
        est = latentlab.SupervisedPCA(2, method="svi", svi_steps=60, random_state=seed)
        return est.fit(X[:, 1:], y)

    a, b, c = fit(3), fit(3), fit(4)
    np.testing.assert_array_equal(a.log_likelihoods_, b.log_likelihoods_)
    assert not np.array_equal(a.log_likelihoods_, c.log_likelihoods_)


def test_start_seeds_follow_random_state():
    assert np.array_equal(start_seeds(0, 3), start_seeds(0, 3))
    assert not np.array_equal(start_seeds(0, 3), start_seeds(1, 3))
    assert len(set(start_seeds(0, 5))) == 5


def test_best_of_keeps_the_highest_log_density_and_its_trace():
    """Two MAP starts on a normal-mean model: the best is the one whose point has the
    larger log density, and the trace ends at that log density minus the Jacobian."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.stats import norm
    from numpyro import handlers

    x = jnp.asarray(np.random.default_rng(0).normal(2.0, 1.0, size=50))

    def model(x):
        with handlers.mask(mask=False):
            mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        with numpyro.plate("rows", x.shape[0]):
            numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)

    # 3 steps from far apart starts: they end at different points
    best = fit_best_of(
        model,
        (x,),
        [{"mu": jnp.asarray(-30.0)}, {"mu": jnp.asarray(1.0)}],
        method="map",
        num_steps=3,
        learning_rate=0.01,
        random_state=0,
        log_jacobian=1.5,
    )
    mu = float(best.params["mu"])
    assert abs(mu - 1.0) < 0.1  # the start near the optimum won
    exact = float(jnp.sum(norm.logpdf(x, mu, 1.0)))
    assert best.objective == pytest.approx(exact - 1.5, rel=1e-12)
    assert best.trace[-1] == pytest.approx(exact - 1.5, rel=1e-12)
    assert best.start_objectives.argmax() == 1
    with pytest.raises(ValueError, match="method must be"):
        fit_best_of(model, (x,), [{}], method="em", num_steps=1, learning_rate=0.1)
