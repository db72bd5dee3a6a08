"""Coverage of 95% Wald intervals by simulation: over many data sets drawn from a
planted model, how often does ``confidence_intervals(X, level=0.95)`` hold the true
identified parameter?

Cases (each with complete data and with 20% of the entries missing completely at
random): PPCA (the loadings on their principal axes, mu, sigma2), factor analysis
(unrotated loadings on the principal axes of W scaled by the model's standard
deviations, mu, psi, communalities) and a well-separated two-component Gaussian
mixture (weights, means, full covariances; components matched by their means).
The true values are the planted model's quantities in the frame the fit reports
(principal axes signed as the fit's columns).  A nominal interval covers 95% of the
time; with N data sets the coverage's Monte Carlo standard error is
sqrt(0.95 * 0.05 / N) per quantity (1.5% for N = 200).

Run:  python benchmarks/study_coverage.py [--sets 200] [--cases ppca,fa,gmm]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def principal_axes(W, units):
    U, S, _ = np.linalg.svd(W / units[:, None], full_matrices=False)
    return U * S * units[:, None]


def signed_like(frame, reference):
    return frame * np.sign(np.sum(frame * reference, axis=0))


def planted_gaussian_latent(kind):
    rng = np.random.default_rng(12345)
    d, K = 6, 2
    W = rng.normal(size=(d, K)) * np.array([1.5, 1.0])
    mu = rng.normal(size=d)
    noise = np.full(d, 0.5) if kind == "ppca" else rng.uniform(0.2, 0.8, size=d)
    return W, mu, noise


def draw_gaussian_latent(W, mu, noise, n, rng):
    d, K = W.shape
    return rng.normal(size=(n, K)) @ W.T + mu + rng.normal(size=(n, d)) * np.sqrt(noise)


def truth_gaussian_latent(kind, W, mu, noise, fitted_W):
    """The planted quantities in the fit's reported frame."""
    if kind == "ppca":
        frame = signed_like(principal_axes(W, np.ones(len(mu))), fitted_W)
        return {"W": frame, "mu": mu, "sigma2": noise[:1]}
    sd = np.sqrt(np.sum(W**2, axis=1) + noise)  # the model's standard deviations
    frame = signed_like(principal_axes(W, sd), fitted_W)
    return {"W": frame, "mu": mu, "psi": noise, "communality": np.sum(frame**2, axis=1)}


def planted_mixture():
    rng = np.random.default_rng(54321)
    means = np.array([[-3.0, 0.0, 1.0], [3.0, 1.0, -1.0]])
    A = rng.normal(size=(2, 3, 3)) * 0.4
    covariances = A @ np.swapaxes(A, 1, 2) + np.eye(3)
    return np.array([0.4, 0.6]), means, covariances


def draw_mixture(weights, means, covariances, n, rng):
    labels = rng.choice(len(weights), size=n, p=weights)
    chol = np.linalg.cholesky(covariances)
    return means[labels] + np.einsum("nij,nj->ni", chol[labels], rng.normal(size=(n, 3)))


def truth_mixture(weights, means, covariances, fitted_means):
    order = np.argsort(fitted_means[:, 0])  # planted components are sorted by mean[0]
    inverse = np.argsort(order)
    upper = np.triu_indices(3)
    return {
        "weights": weights[inverse],
        "means": means[inverse],
        "covariances": covariances[inverse][:, upper[0], upper[1]],
    }


def coverage(case, missing, n_sets, n_rows):
    import latentlab

    rng = np.random.default_rng(2026)
    hits, counts = {}, {}
    for _ in range(n_sets):
        if case == "gmm":
            planted = planted_mixture()
            X = draw_mixture(*planted, n_rows, rng)
        else:
            planted = planted_gaussian_latent(case)
            X = draw_gaussian_latent(*planted, n_rows, rng)
        if missing:
            X = X.copy()
            hide = rng.random(X.shape) < missing
            hide[np.arange(len(X)), rng.integers(0, X.shape[1], len(X))] = False
            X[hide] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if case == "gmm":
                model = latentlab.GaussianMixture(2, random_state=0).fit(X)
                truth = truth_mixture(*planted, model.means_)
            else:
                Model = latentlab.PPCA if case == "ppca" else latentlab.FactorAnalysis
                model = Model(2, tol=1e-10, max_iter=20000).fit(X)
                truth = truth_gaussian_latent(case, *planted, model.params_["W"])
            try:
                table = model.confidence_intervals(X, level=0.95)
            except ValueError:  # a Heywood case or a fit short of the maximum: skipped
                continue
        for name, value in truth.items():
            rows = table.loc[table.parameter == name]
            inside = (rows.lower.to_numpy() <= np.ravel(value)) & (
                np.ravel(value) <= rows.upper.to_numpy()
            )
            hits[name] = hits.get(name, 0) + int(inside.sum())
            counts[name] = counts.get(name, 0) + inside.size
    return {name: hits[name] / counts[name] for name in hits}, counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=200)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--cases", default="ppca,fa,gmm")
    args = parser.parse_args()
    for case in args.cases.split(","):
        for missing in (0.0, 0.2):
            start = time.perf_counter()
            rates, counts = coverage(case, missing, args.sets, args.rows)
            total = sum(rates[n] * counts[n] for n in rates) / sum(counts.values())
            parts = ", ".join(f"{n} {rate:.3f}" for n, rate in rates.items())
            print(
                f"{case:<5} missing {missing:.0%}: overall {total:.3f} | {parts} | "
                f"{args.sets} sets, {time.perf_counter() - start:.0f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
