"""sample_posterior end to end on the two heaviest declarations (supervised PCA, pLSA).

The engines are model-agnostic and tested on PPCA, FA, BPCA and GMM elsewhere; here
they run once on each remaining declaration (compiling them costs ~10 s apiece), in
a file of its own so the parallel workers share the cost.
"""

import numpy as np
import pytest
from oracles import planted_low_rank

import latentlab

N, D = 100, 5


def test_end_to_end_on_the_supervised_and_topic_declarations():
    """The engines on the two heaviest declarations, once each (compiling them costs
    ~10 s apiece): supervised PCA by Laplace, whose flat-prior marginal of mu_y is
    N(mu_y, C_yy / n) at the MLE; pLSA by SVI, the method its NUTS warning points to."""
    data, _, _ = planted_low_rank(n=N, d=D, rank=2, noise=0.5, seed=0)
    y = data[:, :2] @ np.array([1.0, -1.0]) + 0.3 * np.random.default_rng(1).normal(size=N)
    spca = latentlab.SupervisedPCA(2).fit(data, y)
    tree = spca.sample_posterior(data, y, method="laplace", num_samples=2000, random_state=0)
    W_y, sigma2_y = spca.params_["W_y"], spca.params_["sigma2_y"]
    C_yy = float(np.sum(W_y**2) + np.ravel(sigma2_y)[0])
    sd = float(tree.posterior["mu_y"].std(("chain", "draw")).values.ravel()[0])
    assert sd == pytest.approx(np.sqrt(C_yy / N), rel=0.05)  # measured 0.1307 vs 0.1323
    assert tree.log_likelihood["xy"].shape == (1, 2000, N)

    rng = np.random.default_rng(0)
    phi = np.array([[0.14] * 5 + [0.06] * 5, [0.06] * 5 + [0.14] * 5])
    theta = rng.dirichlet([2.0, 2.0], size=20)
    X = np.vstack([rng.multinomial(100, t @ phi) for t in theta])
    plsa = latentlab.PLSA(2, random_state=0).fit(X)
    tree = plsa.sample_posterior(X, method="svi", num_samples=300, svi_steps=1000, random_state=0)
    draws = tree.posterior["phi"].values[0]
    # relabelled draws centre on the fitted topics (measured TV 0.04) with a spread
    tv = 0.5 * np.abs(draws.mean(axis=0) - plsa.params_["phi"]).sum(axis=1)
    assert np.all(tv < 0.08) and 0.002 < draws.std(axis=0).mean() < 0.05
    assert tree.attrs["aligned"] == "relabelled"
    assert np.all(np.isfinite(tree.log_likelihood["x"].values))
