"""pLSA EM against scikit-learn's KL-NMF (multiplicative updates), side by side.

pLSA's EM and NMF with the generalised KL divergence share their fixed points
(Gaussier & Goutte 2005): ``N_d theta_d Phi`` is NMF's ``W H``.  One synthetic sparse
corpus, one random start given to both, and:

* **same iteration count**: ``NMF(beta_loss="kullback-leibler", solver="mu", tol=0)``
  and ``latentlab.PLSA(accelerate=False, tol=0)``, both ``--iterations`` iterations.
  One NMF iteration updates W and then H (two passes over the nonzeros), one EM
  iteration both factors from one E-step.  ``PLSA.fit`` also ends with a fold-in of
  every document at the final topics; the EM loop alone is timed as well (the
  engine: ``run_em`` on the nonzeros);
* **defaults**: ``PLSA()`` (SQUAREM, tol=1e-8) against ``NMF()`` (tol=1e-4,
  max_iter=200), each with the objective it reaches;
* optionally (``--lda``) scikit-learn's ``LatentDirichletAllocation`` (batch
  variational Bayes) for the same number of iterations: a different model, timed
  for orientation only.

The sides are interleaved, warm medians reported, first calls (with XLA compilation)
apart, and the thread settings printed beside the ratios.

Usage::

    python benchmarks/bench_plsa.py                # 2,000 docs x 1,000 words, K = 10
    python benchmarks/bench_plsa.py --quick        # 300 x 200, K = 5
    python benchmarks/bench_plsa.py --threads 1    # one thread on each side
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings

import numpy as np
from _threads import apply_thread_option

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def make_corpus(n_docs: int, n_words: int, n_topics: int, seed: int = 0):
    """Sparse counts from pLSA's own story: sparse topics, sparse mixtures."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n_words, 0.05), size=n_topics)
    theta = rng.dirichlet(np.full(n_topics, 0.2), size=n_docs)
    lengths = rng.integers(50, 300, size=n_docs)
    rows = [rng.multinomial(n, t @ phi) for n, t in zip(lengths, theta, strict=True)]
    return sp.csr_matrix(np.vstack(rows).astype(np.float64))


def kl_divergence(X, Y_at_nonzeros, Y_total) -> float:
    """D(X || Y) = sum x log(x / y) - x + y, with Y given at X's nonzeros and in total."""
    x = X.data
    return float(np.sum(x * np.log(x / Y_at_nonzeros)) - x.sum() + Y_total)


def product_at_nonzeros(X, W, H):
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    return np.einsum("ik,ik->i", W[rows], H.T[X.indices])


def divergences(models, X, lengths) -> dict:
    """KL divergence of every fit (lower is better); pLSA as N_d theta_d Phi."""
    out = {}
    for name, model in models.items():
        if hasattr(model, "params_"):
            W = lengths[:, None] * model.params_["theta"]
            H = model.params_["phi"]
        elif hasattr(model, "components_") and name.startswith("sklearn NMF"):
            W, H = model.W_, model.components_
        else:
            continue
        out[name] = kl_divergence(X, product_at_nonzeros(X, W, H), float(W.sum(0) @ H.sum(1)))
    return out


def make_fits(X, K: int, iterations: int, theta0, phi0, lda: bool):
    from sklearn.decomposition import NMF, LatentDirichletAllocation

    import latentlab

    lengths = np.asarray(X.sum(axis=1)).ravel()

    def nmf(**settings):
        def fit(X):
            model = NMF(K, beta_loss="kullback-leibler", solver="mu", init="custom", **settings)
            model.W_ = model.fit_transform(X, W=lengths[:, None] * theta0, H=phi0.copy())
            return model

        return fit

    start = dict(doc_topic_init=theta0, topic_word_init=phi0)
    fits = {
        "sklearn NMF kl/mu": nmf(tol=0.0, max_iter=iterations),
        "PLSA em, plain": lambda X: latentlab.PLSA(
            K, accelerate=False, tol=0.0, max_iter=iterations, **start
        ).fit(X),
        "sklearn NMF default": nmf(),
        "PLSA default": lambda X: latentlab.PLSA(K, **start).fit(X),
    }
    if lda:
        fits["sklearn LDA (other model)"] = lambda X: LatentDirichletAllocation(
            K, learning_method="batch", max_iter=iterations, random_state=0
        ).fit(X)
    return fits


def em_loop_timer(X, K: int, iterations: int, theta0, phi0):
    """The EM engine alone: ``iterations`` plain EM steps on the nonzeros, no fold-in."""
    import jax
    import jax.numpy as jnp
    from latentlab.models import plsa

    from latentlab.estimators.plsa import _corpus, _driver

    with jax.enable_x64(True):
        corpus = _corpus(X, jnp.float64)
        n_pad = corpus.doc_mask.shape[0]
        theta = np.vstack([theta0, np.full((n_pad - X.shape[0], K), 1.0 / K)])
        starts = plsa.Params(jnp.asarray(theta)[None], jnp.asarray(phi0)[None])
        hyper = plsa.Hyper(*(jnp.asarray(v, jnp.float64) for v in (1.0, 1.0, 0.0, 1.0)))
        run = _driver("em", corpus, K)

    def fit(_):
        with jax.enable_x64(True):
            result = run(
                plsa.e_step,
                plsa.m_step,
                starts,
                corpus,
                hyper,
                jnp.asarray(float(X.shape[0])),
                jnp.asarray(0.0),
                max_iter=iterations,
                accelerate=False,
            )
            return jax.block_until_ready(result)

    return fit


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-docs", type=int, default=2000)
    parser.add_argument("--n-words", type=int, default=1000)
    parser.add_argument("--n-components", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="1: one thread each side")
    parser.add_argument("--lda", action="store_true", help="also time scikit-learn's LDA")
    parser.add_argument("--quick", action="store_true", help="300 x 200, K = 5")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_docs, args.n_words, args.n_components, args.repeats = 300, 200, 5, 2
    apply_thread_option(args.threads)  # before JAX starts

    import jax
    import sklearn
    from bench_ppca import CompileCounter, print_settings, run_timings, thread_settings
    from threadpoolctl import threadpool_limits

    import latentlab

    K, iterations = args.n_components, args.iterations
    X = make_corpus(args.n_docs, args.n_words, K)
    rng = np.random.default_rng(1)
    theta0 = rng.dirichlet(np.ones(K), X.shape[0])
    phi0 = rng.dirichlet(np.ones(X.shape[1]), K)
    lengths = np.asarray(X.sum(axis=1)).ravel()
    versions = {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scikit-learn": sklearn.__version__,
        "jax": jax.__version__,
        "latentlab": latentlab.__version__,
    }
    print(
        f"pLSA benchmark: {X.shape[0]:,} documents x {X.shape[1]:,} words, K = {K}, "
        f"nnz = {X.nnz:,} ({X.nnz / np.prod(X.shape):.1%}), {int(X.sum()):,} tokens, "
        f"{iterations} iterations, {args.repeats} repeats"
    )
    print_settings(thread_settings(), versions)
    fits = make_fits(X, K, iterations, theta0, phi0, args.lda)
    fits["PLSA EM loop only"] = em_loop_timer(X, K, iterations, theta0, phi0)
    counter = CompileCounter()
    with warnings.catch_warnings(), threadpool_limits(args.threads):
        warnings.simplefilter("ignore")  # ConvergenceWarning at a fixed iteration count
        cold, warm, compiles, models = run_timings(fits, X, args.repeats, counter)

    median = {name: statistics.median(times) for name, times in warm.items()}
    kl = divergences(models, X, lengths)
    print("\n== timings (s): first call, warm median, warm min; KL divergence D(X || fit)")
    for name in fits:
        extra = f"   KL {kl[name]:14.4f}" if name in kl else ""
        n_iter = getattr(models[name], "n_iter_", None)
        extra += f"   n_iter {n_iter}" if n_iter is not None else ""
        print(
            f"  {name:28s}{cold[name]:9.3f}{median[name]:9.3f}{min(warm[name]):9.3f}"
            f"   compiles {compiles[name]['cold_count']:3d} / {compiles[name]['warm_count']}"
            f"{extra}"
        )
    same = median["PLSA em, plain"] / median["sklearn NMF kl/mu"]
    loop = median["PLSA EM loop only"] / median["sklearn NMF kl/mu"]
    default = median["PLSA default"] / median["sklearn NMF default"]
    print("\n== ratios latentlab / scikit-learn (warm medians; < 1 means latentlab is faster)")
    print(f"  {iterations} iterations each, PLSA.fit (EM + final fold-in): {same:6.2f}x")
    print(f"  {iterations} iterations each, EM loop alone:                  {loop:6.2f}x")
    print(f"  defaults (PLSA: SQUAREM to tol=1e-8; NMF: tol=1e-4):      {default:6.2f}x")
    gap = kl["PLSA default"] - kl["sklearn NMF default"]
    print(f"  KL divergence at the defaults, PLSA - NMF: {gap:+.4f} (negative: PLSA fits better)")
    return {
        "same_iterations_ratio": same,
        "em_loop_ratio": loop,
        "defaults_ratio": default,
        "median_seconds": median,
        "kl": kl,
    }


if __name__ == "__main__":
    main()
