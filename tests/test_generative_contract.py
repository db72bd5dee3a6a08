"""The declared-once contract (DESIGN.md §3) for every generative estimator, in one
parametrized test: the NumPyro declaration (``model_``) evaluated at the fitted
parameters (``params_``) by NumPyro's own ``log_likelihood`` is the log-likelihood
that ``score`` reports, with and without NaN entries where the model takes them; the
EM trace is monotone and ends at the objective it names (the log-likelihood, or the
log joint density for MAP fits); a saved and loaded model scores the same.

Model-specific oracles (closed forms, scikit-learn, dense SciPy densities) stay in
each model's own test file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import numpy as np
import pytest
from numpyro.infer.util import log_density, log_likelihood
from oracles import hide_at_random, is_monotone, planted_low_rank

import latentlab
from latentlab import (
    PLSA,
    PPCA,
    BayesianPCA,
    ConfirmatoryFactorAnalysis,
    FactorAnalysis,
    GaussianMixture,
    SupervisedPCA,
)


def low_rank(missing):
    X, _, _ = planted_low_rank(n=200, d=8, rank=3, noise=0.3, seed=0)
    return (hide_at_random(X, 0.2, seed=1)[0] if missing else X,)


def supervised(missing):
    X, _, _ = planted_low_rank(n=200, d=7, rank=2, noise=0.3, seed=2)
    X, y = X[:, :6], X[:, 6]
    if missing:
        X = hide_at_random(X, 0.2, seed=1)[0]
        y = np.where(np.random.default_rng(2).random(len(y)) < 0.2, np.nan, y)
    return X, y


def clusters(missing):
    rng = np.random.default_rng(1)
    means = np.array([[0.0, 0.0, 0.0, 0.0], [3.0, 1.0, 0.0, -1.0], [0.0, -3.0, 2.0, 1.0]])
    X = np.concatenate([m + rng.normal(size=(100, 4)) @ rng.normal(size=(4, 4)) for m in means])
    return (hide_at_random(X, 0.2, seed=1)[0] if missing else X,)


def counts(missing):
    rng = np.random.default_rng(0)
    phi = rng.dirichlet(np.full(30, 1.0), size=3)
    theta = rng.dirichlet(np.full(3, 0.5), size=60)
    return (np.stack([rng.multinomial(200, p) for p in theta @ phi]).astype(float),)


@dataclass(frozen=True)
class Case:
    make: Callable  # () -> an unfitted estimator
    data: Callable  # (missing) -> the fit's arguments
    missing: bool
    trace: str | None  # what log_likelihoods_ ends at: "loglik", "joint" or None

    def total_score(self, est, args):
        """The log-likelihood the estimator reports for ``args``, summed over rows."""
        if isinstance(est, SupervisedPCA):
            return float(np.sum(est.score_samples(*args)))
        return float(len(args[0]) * est.score(*args))


CASES = {
    "PPCA": Case(lambda: PPCA(3, random_state=0), low_rank, False, "loglik"),
    "PPCA-missing": Case(lambda: PPCA(3, random_state=0), low_rank, True, "loglik"),
    "PPCA-closed_form": Case(lambda: PPCA(3, method="closed_form"), low_rank, False, "loglik"),
    "FA": Case(lambda: FactorAnalysis(3, random_state=0), low_rank, False, "loglik"),
    "FA-missing": Case(lambda: FactorAnalysis(3, random_state=0), low_rank, True, "loglik"),
    **{
        f"CFA{suffix}": Case(
            # three factors of the planted rank-3 data, two markers' worth of indicators
            lambda: ConfirmatoryFactorAnalysis({"a": [0, 1, 2], "b": [3, 4, 5], "c": [6, 7]}),
            low_rank,
            missing,
            "loglik",
        )
        for suffix, missing in (("", False), ("-missing", True))
    },
    "BPCA": Case(lambda: BayesianPCA(6, random_state=0), low_rank, False, "joint"),
    "BPCA-missing": Case(lambda: BayesianPCA(6, random_state=0), low_rank, True, "joint"),
    # its trace is the alpha-weighted objective (its oracle: test_supervised_pca.py)
    "SPCA": Case(lambda: SupervisedPCA(2, alpha=0.5, random_state=0), supervised, False, None),
    "SPCA-missing": Case(
        lambda: SupervisedPCA(2, alpha=0.5, random_state=0), supervised, True, None
    ),
    **{
        f"GMM-{ct}": Case(
            lambda ct=ct: GaussianMixture(3, covariance_type=ct, random_state=0),
            clusters,
            False,
            "loglik",
        )
        for ct in ("full", "tied", "diag", "spherical")
    },
    **{
        # maximum likelihood (covariance_prior="auto" would penalise full covariances)
        f"GMM-{ct}-missing": Case(
            lambda ct=ct: GaussianMixture(
                3, covariance_type=ct, covariance_prior=0.0, random_state=0
            ),
            clusters,
            True,
            "loglik",
        )
        for ct in ("full", "diag")
    },
    # the penalised fit: its trace is EM's objective, the declaration's log density
    # with the covariance penalty on the scale site; score stays the log-likelihood
    **{
        f"GMM-{ct}-missing-penalised": Case(
            lambda ct=ct: GaussianMixture(
                3, covariance_type=ct, covariance_prior=5.0, random_state=0
            ),
            clusters,
            True,
            "joint",
        )
        for ct in ("full", "spherical")
    },
    "PLSA": Case(lambda: PLSA(3, random_state=0), counts, False, "loglik"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_declared_once_contract(name, tmp_path):
    case = CASES[name]
    args = case.data(case.missing)
    assert np.isnan(args[0]).any() == case.missing
    est = case.make().fit(*args)
    params = {key: value[None] for key, value in est.params_.items()}
    with jax.enable_x64(True):
        sites = log_likelihood(est.model_, params, *args)
        declared = float(sum(np.sum(np.asarray(v)) for v in sites.values()))
        joint = float(log_density(est.model_, args, {}, est.params_)[0])

    trace = np.asarray(est.log_likelihoods_)
    assert is_monotone(trace)
    if case.trace == "loglik":
        assert trace[-1] == pytest.approx(declared, rel=1e-10)
    elif case.trace == "joint":
        assert trace[-1] == pytest.approx(joint, rel=1e-10)
        assert joint > declared - 1e3  # the prior term is finite

    if isinstance(est, PLSA):
        # score folds each document's topic weights in afresh, stopping within ~2e-5
        # nats per document of the maximum the fit reached
        n = len(args[0])
        assert case.total_score(est, args) == pytest.approx(declared, rel=0, abs=1e-6 * n)
    else:
        assert case.total_score(est, args) == pytest.approx(declared, rel=1e-10)

    path = tmp_path / f"{name}.npz"
    est.save(path)
    loaded = latentlab.load(path)
    np.testing.assert_allclose(
        case.total_score(loaded, args), case.total_score(est, args), rtol=1e-12
    )
