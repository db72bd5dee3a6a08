"""The workflow layer (plots, compare, impute, cli) asks estimators, not their classes:
each fitted iterative estimator names what its trace is."""

import numpy as np
import pytest
from oracles import planted_low_rank

import latentlab

X, _, _ = planted_low_rank(n=40, d=5, rank=2, noise=0.5, seed=0)
COUNTS = np.random.default_rng(0).poisson(2.0, size=(20, 12))
Y = X[:, 0]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: latentlab.PPCA(2).fit(X), "log-likelihood"),
        (lambda: latentlab.PPCA(2, method="svi", svi_steps=5).fit(X), "ELBO"),
        (lambda: latentlab.FactorAnalysis(2).fit(X), "log-likelihood"),
        (lambda: latentlab.BayesianPCA(2).fit(X), "log joint density"),
        (
            lambda: latentlab.SupervisedPCA(2, alpha=0.5).fit(X[:, 1:], Y),
            "alpha-weighted log-likelihood",
        ),
        (lambda: latentlab.SupervisedPCA(2).fit(X[:, 1:], Y), "log-likelihood"),
        (lambda: latentlab.GaussianMixture(2, random_state=0).fit(X), "log-likelihood"),
        (
            lambda: latentlab.GaussianMixture(2, method="map", prior=True, svi_steps=5).fit(X),
            "log joint density",
        ),
        (lambda: latentlab.PLSA(2, random_state=0).fit(COUNTS), "log-likelihood"),
        (
            lambda: latentlab.PLSA(2, tempering=0.9, random_state=0).fit(COUNTS),
            "tempered objective",
        ),
        (
            lambda: latentlab.PLSA(2, doc_topic_prior=1.1, random_state=0).fit(COUNTS),
            "log joint density",
        ),
    ],
)
def test_estimators_name_their_objective(make, expected):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = make()
    assert est.objective_name_ == expected
    # the convergence plot labels its axis with it
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from latentlab import plots

    ax = plots.convergence(est)
    assert expected in ax.get_ylabel()
