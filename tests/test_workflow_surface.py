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


@pytest.mark.parametrize(
    ("make", "args", "expected"),
    [
        # d K + d + 1 - K (K - 1) / 2: loadings up to rotation, mean, one variance
        (lambda: latentlab.PPCA(2), (X,), 5 * 2 + 5 + 1 - 1),
        # d K + 2 d - K (K - 1) / 2: loadings up to rotation, mean, uniquenesses
        (lambda: latentlab.FactorAnalysis(1), (X,), 5 * 1 + 2 * 5),
        # K - 1 weights, K d means, K d (d + 1) / 2 covariances
        (lambda: latentlab.GaussianMixture(2, random_state=0), (X,), 1 + 10 + 30),
        # (d_x + d_y) K + d_x + d_y + 2 variances
        (lambda: latentlab.SupervisedPCA(1), (X[:, 1:], Y), 5 * 1 + 5 + 2),
        # K (W - 1) topics + D (K - 1) document mixtures
        (lambda: latentlab.PLSA(2, random_state=0), (COUNTS,), 2 * 11 + 20 * 1),
    ],
)
def test_n_parameters_is_public_and_is_what_bic_counts(make, args, expected):
    est = make()
    assert not hasattr(est, "n_parameters_")  # not fitted
    est.fit(*args)
    assert est.n_parameters_ == expected
    n = len(args[0])
    loglik = n * est.score(*args) if len(args) == 1 else est.score_samples(*args).sum()
    assert est.bic(*args) == pytest.approx(-2 * loglik + expected * np.log(n), rel=1e-12)
