"""pLSA EM against scikit-learn's KL-NMF (multiplicative updates), at the same objective.

pLSA's EM and NMF with the generalised KL divergence share their fixed points
(Gaussier & Goutte 2005): ``N_d theta_d Phi`` is NMF's ``W H``, and for EM (whose
row sums of ``W H`` equal the documents' lengths) ``D(X || W H) = const - log L``.
Both sides are therefore compared by the one number they both minimise, the KL
divergence, from one random start given to both, for each K:

* **same objective, PLSA's defaults**: ``PLSA()`` (SQUAREM, relative tol=1e-8, plus the
  final fold-in) against ``NMF(beta_loss="kullback-leibler", solver="mu", tol=0)`` run
  for the fewest iterations (in steps of ``--chunk``) that reach PLSA's divergence, or
  ``--nmf-cap`` iterations if it never does (then it is marked "not reached");
* **same objective, NMF's defaults**: ``NMF()`` (tol=1e-4, max_iter=200) against
  ``PLSA(tol=0, max_iter=c)`` with c the first SQUAREM cycle whose objective reaches
  NMF's divergence;
* **same iteration count** (plain EM, no SQUAREM) for reference: ``--iterations`` each.

The iteration counts are found in an untimed pass (NMF is resumed from its own
factors chunk by chunk, which is exactly a longer run: ``tol=0`` keeps no state).
Then the sides are interleaved, warm medians reported, first calls (with XLA
compilation) apart, and the thread settings printed beside the ratios.

Usage::

    python benchmarks/bench_plsa.py                     # digits (1,797 x 64), K = 5 10 20
    python benchmarks/bench_plsa.py --k 10 --repeats 5
    python benchmarks/bench_plsa.py --data synthetic    # 2,000 x 1,000 sparse, K = 10
    python benchmarks/bench_plsa.py --threads 1         # one thread on each side
    python benchmarks/bench_plsa.py --starts 5 --k 10 20  # several starts (see below)

``--starts S``: instead, S random starts shared by every method, each run to its own
stopping rule -- PLSA's default (and tol=1e-6), scikit-learn's and latentlab's KL-NMF
with their defaults and "converged" (``--converged-tol``, ``--nmf-cap`` iterations) --
and the median time, the median and the spread of the final KL above the best found.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings

import numpy as np
from _threads import apply_thread_option
from _timing import timed
from threadpoolctl import threadpool_limits

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


def nmf_fit(K, theta0, phi0, lengths, **settings):
    """A timed fit: ``NMF(kl, mu)`` from ``W = N_d theta0``, ``H = phi0``."""
    from sklearn.decomposition import NMF

    def fit(X):
        model = NMF(K, beta_loss="kullback-leibler", solver="mu", init="custom", **settings)
        model.W_ = model.fit_transform(X, W=lengths[:, None] * theta0, H=phi0.copy())
        return model

    return fit


def plsa_fit(K, theta0, phi0, **settings):
    import latentlab

    def fit(X):
        start = dict(doc_topic_init=theta0, topic_word_init=phi0)
        return latentlab.PLSA(K, **start, **settings).fit(X)

    return fit


def latentlab_nmf_fit(K, theta0, phi0, lengths, **settings):
    """A timed fit: latentlab's ``NMF(kl, mu)`` from ``W = N_d theta0``, ``H = phi0``
    (without penalties its iteration is pLSA's plain EM step, through the same function)."""
    import latentlab

    def fit(X):
        model = latentlab.NMF(
            K, beta_loss="kullback-leibler", solver="mu", init="custom", **settings
        )
        model.W_ = model.fit_transform(X, W=lengths[:, None] * theta0, H=phi0.copy())
        return model

    return fit


def divergence(X, model, lengths) -> float:
    """D(X || W H) of a fit; pLSA as ``W = N_d theta_d``, ``H = Phi``."""
    if hasattr(model, "params_"):
        W, H = lengths[:, None] * model.params_["theta"], model.params_["phi"]
    else:
        W, H = model.W_, model.components_
    return kl_divergence(X, product_at_nonzeros(X, W, H), float(W.sum(0) @ H.sum(1)))


def nmf_iterations_to(X, X_fit, K, theta0, phi0, lengths, target, chunk, cap):
    """Fewest NMF iterations (a multiple of ``chunk``) reaching divergence <= target, or
    None within ``cap``; NMF is resumed from its own factors (tol=0: no other state)."""
    from sklearn.decomposition import NMF

    W, H = lengths[:, None] * theta0, phi0.copy()
    done = 0
    while done < cap:
        model = NMF(K, beta_loss="kullback-leibler", solver="mu", init="custom", tol=0.0)
        model.set_params(max_iter=chunk)
        W = model.fit_transform(X_fit, W=W, H=H)
        H = model.components_
        done += chunk
        if kl_divergence(X, product_at_nonzeros(X, W, H), float(W.sum(0) @ H.sum(1))) <= target:
            return done
    return None


def em_loop_timer(X, K: int, iterations: int, theta0, phi0):
    """The EM engine alone: ``iterations`` plain EM steps, no fold-in, with the topics
    padded as ``PLSA`` pads them."""
    import jax
    import jax.numpy as jnp

    from latentlab.inference.em import run_em as run
    from latentlab.models import plsa
    from latentlab.models.plsa_programs import build_corpus, pad_topics, padded_topics

    with jax.enable_x64(True):
        corpus = build_corpus(X, jnp.float64)
        n_pad, n_topics = corpus.doc_mask.shape[0], padded_topics(corpus, K)
        theta = np.vstack([theta0, np.full((n_pad - X.shape[0], K), 1.0 / K)])
        theta, phi = pad_topics(theta, phi0, n_topics)
        starts = plsa.Params(jnp.asarray(theta)[None], jnp.asarray(phi)[None])
        mask = (np.arange(n_topics) < K).astype(np.float64)
        values = (jnp.asarray(v, jnp.float64) for v in (1.0, 1.0, 0.0, 1.0))
        hyper = plsa.Hyper(*values, topic_mask=jnp.asarray(mask))

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


def bench_one(X, K, args, counter):
    """Both sides from one start; ``X`` is CSR, the fits get it dense when it is dense
    enough (digits: what a user passes, and scikit-learn's faster path)."""
    from bench_ppca import run_timings

    X_fit = X.toarray() if X.nnz >= 0.3 * np.prod(X.shape) else X

    rng = np.random.default_rng(1)
    theta0 = rng.dirichlet(np.ones(K), X.shape[0])
    phi0 = rng.dirichlet(np.ones(X.shape[1]), K)
    lengths = np.asarray(X.sum(axis=1)).ravel()
    # untimed pass: the objectives of both defaults, and what each side needs to reach
    # the other's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plsa_default = plsa_fit(K, theta0, phi0)(X_fit)
        nmf_default = nmf_fit(K, theta0, phi0, lengths)(X_fit)
        plsa_long = plsa_fit(K, theta0, phi0, tol=0.0, max_iter=args.nmf_cap // 4)(X_fit)
    kl_plsa, kl_nmf = divergence(X, plsa_default, lengths), divergence(X, nmf_default, lengths)
    nmf_needed = nmf_iterations_to(
        X, X_fit, K, theta0, phi0, lengths, kl_plsa, args.chunk, args.nmf_cap
    )
    # KL = const - log L for EM's iterates: the first cycle whose objective reaches NMF's
    const = kl_plsa + plsa_default.log_likelihoods_[-1]
    reached = np.flatnonzero(const - plsa_long.log_likelihoods_ <= kl_nmf)
    plsa_needed = int(reached[0]) + 1 if reached.size else None

    fits = {
        "PLSA default": plsa_fit(K, theta0, phi0),
        "NMF to PLSA default's KL": nmf_fit(
            K, theta0, phi0, lengths, tol=0.0, max_iter=nmf_needed or args.nmf_cap
        ),
        "NMF default": nmf_fit(K, theta0, phi0, lengths),
        "PLSA to NMF default's KL": plsa_fit(
            K, theta0, phi0, tol=0.0, max_iter=plsa_needed or args.nmf_cap // 4
        ),
        "NMF plain iterations": nmf_fit(
            K, theta0, phi0, lengths, tol=0.0, max_iter=args.iterations
        ),
        "PLSA EM loop, plain iterations": em_loop_timer(X, K, args.iterations, theta0, phi0),
    }
    with warnings.catch_warnings(), threadpool_limits(args.threads):
        warnings.simplefilter("ignore")  # ConvergenceWarning at a fixed iteration count
        cold, warm, compiles, models = run_timings(fits, X_fit, args.repeats, counter)
    median = {name: statistics.median(times) for name, times in warm.items()}
    print(f"\n== K = {K}: first call, warm median, warm min (s); KL divergence D(X || W H)")
    for name in fits:
        model = models[name]
        kl = (
            ""
            if name.startswith("PLSA EM loop")
            else f"   KL {divergence(X, model, lengths):14.3f}"
        )
        n_iter = getattr(model, "n_iter_", None)
        print(
            f"  {name:32s}{cold[name]:9.3f}{median[name]:9.3f}{min(warm[name]):9.3f}"
            f"   compiles {compiles[name]['cold_count']:3d} / {compiles[name]['warm_count']}"
            f"{kl}" + (f"   n_iter {n_iter}" if n_iter is not None else "")
        )
    note = "" if nmf_needed else f"  (NMF did not reach it in {args.nmf_cap} iterations)"
    ratios = {
        "plsa_default_vs_nmf_same_kl": median["PLSA default"] / median["NMF to PLSA default's KL"],
        "plsa_vs_nmf_default_same_kl": median["PLSA to NMF default's KL"] / median["NMF default"],
        "plain_iterations_em_loop": median["PLSA EM loop, plain iterations"]
        / median["NMF plain iterations"],
        "first_call_plsa_default_vs_nmf_same_kl": cold["PLSA default"]
        / cold["NMF to PLSA default's KL"],
    }
    print("  ratios latentlab / scikit-learn (warm medians; < 1: latentlab is faster)")
    print(
        f"    PLSA default (KL {kl_plsa:.1f}) vs NMF to the same KL ({nmf_needed} iterations): "
        f"{ratios['plsa_default_vs_nmf_same_kl']:6.2f}x{note}"
    )
    print(
        f"    PLSA to NMF default's KL ({kl_nmf:.1f}; {plsa_needed} cycles) vs NMF default: "
        f"{ratios['plsa_vs_nmf_default_same_kl']:6.2f}x"
    )
    print(
        f"    {args.iterations} plain iterations, EM loop vs NMF: "
        f"{ratios['plain_iterations_em_loop']:6.2f}x"
    )
    print(
        "    first calls (with compilation), PLSA default vs NMF to the same KL: "
        f"{ratios['first_call_plsa_default_vs_nmf_same_kl']:6.2f}x"
    )
    return {
        "ratios": ratios,
        "median_seconds": median,
        "first_call_seconds": cold,
        "kl": {"plsa_default": kl_plsa, "nmf_default": kl_nmf},
        "nmf_iterations_to_plsa_default": nmf_needed,
        "plsa_cycles_to_nmf_default": plsa_needed,
    }


def bench_starts(X, K, args):
    """Each method with its own stopping rule from ``args.starts`` random starts (the
    same starts for all): median time to its own final KL, and the spread of those KLs.

    One start decides little (which optimum a path finds dominates equal-KL ratios on
    one start): the medians and spreads over several starts say which method is faster
    to *its* answer and how good that answer typically is.
    """

    X_fit = X.toarray() if X.nnz >= 0.3 * np.prod(X.shape) else X
    lengths = np.asarray(X.sum(axis=1)).ravel()
    tight = dict(tol=args.converged_tol, max_iter=args.nmf_cap)
    methods = {
        "PLSA default": lambda t, p: plsa_fit(K, t, p),
        "PLSA tol=1e-6": lambda t, p: plsa_fit(K, t, p, tol=1e-6),
        "sklearn NMF-KL default": lambda t, p: nmf_fit(K, t, p, lengths),
        "latentlab NMF-KL default": lambda t, p: latentlab_nmf_fit(K, t, p, lengths),
        "sklearn NMF-KL converged": lambda t, p: nmf_fit(K, t, p, lengths, **tight),
        "latentlab NMF-KL converged": lambda t, p: latentlab_nmf_fit(K, t, p, lengths, **tight),
    }
    times = {name: [] for name in methods}
    kls = {name: [] for name in methods}
    with warnings.catch_warnings(), threadpool_limits(args.threads):
        warnings.simplefilter("ignore")
        for seed in range(args.starts + 1):  # start 0 warms up (compilation), untimed
            rng = np.random.default_rng(1000 + seed)
            theta0 = rng.dirichlet(np.ones(K), X.shape[0])
            phi0 = rng.dirichlet(np.ones(X.shape[1]), K)
            for name, make in methods.items():
                fit = make(theta0, phi0)
                elapsed, model = timed(lambda fit=fit: fit(X_fit))
                if seed:
                    times[name].append(elapsed)
                    kls[name].append(divergence(X, model, lengths))
    best = min(min(v) for v in kls.values())
    print(
        f"\n== K = {K}: {args.starts} starts, each method to its own stopping rule "
        f"(converged: tol={args.converged_tol:g}, max_iter={args.nmf_cap}); KL above the "
        f"best of all ({best:.1f})"
    )
    print(f"  {'method':28s}{'median s':>10s}{'median KL+':>12s}{'min KL+':>10s}{'max KL+':>10s}")
    summary = {}
    for name in methods:
        excess = np.asarray(kls[name]) - best
        median_time = statistics.median(times[name])
        print(
            f"  {name:28s}{median_time:10.3f}{np.median(excess):12.1f}"
            f"{excess.min():10.1f}{excess.max():10.1f}"
        )
        summary[name] = {"median_seconds": median_time, "kl": kls[name]}
    reference = statistics.median(times["sklearn NMF-KL default"])
    print(
        "  median time / sklearn NMF-KL default's: "
        + ", ".join(f"{n} {summary[n]['median_seconds'] / reference:.2f}x" for n in methods)
    )
    return summary


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=("digits", "synthetic"), default="digits")
    parser.add_argument("--k", type=int, nargs="+", default=None, help="numbers of topics")
    parser.add_argument("--iterations", type=int, default=100, help="plain iterations")
    parser.add_argument("--chunk", type=int, default=50, help="NMF iteration search step")
    parser.add_argument("--nmf-cap", type=int, default=2000, help="most NMF iterations")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="1: one thread each side")
    parser.add_argument(
        "--starts", type=int, default=0, help="> 0: the several-starts table instead"
    )
    parser.add_argument("--converged-tol", type=float, default=1e-7, help="NMF's, --starts")
    args = parser.parse_args(argv)
    apply_thread_option(args.threads)  # before JAX starts

    import jax
    import sklearn
    from bench_ppca import CompileCounter, print_settings, thread_settings

    import latentlab

    if args.data == "digits":
        import scipy.sparse as sp
        from sklearn.datasets import load_digits

        X = sp.csr_matrix(load_digits().data)  # for the divergences; fits get it dense
        ks = args.k or [5, 10, 20]
    else:
        X = make_corpus(2000, 1000, 10)
        ks = args.k or [10]
    versions = {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scikit-learn": sklearn.__version__,
        "jax": jax.__version__,
        "latentlab": latentlab.__version__,
    }
    print(
        f"pLSA benchmark ({args.data}): {X.shape[0]:,} documents x {X.shape[1]:,} words, "
        f"nnz = {X.nnz:,} ({X.nnz / np.prod(X.shape):.1%}), {int(X.sum()):,} tokens, "
        f"K = {ks}, {args.repeats} repeats"
    )
    print_settings(thread_settings(), versions)
    if args.starts:
        return {K: bench_starts(X, K, args) for K in ks}
    counter = CompileCounter()
    return {K: bench_one(X, K, args, counter) for K in ks}


if __name__ == "__main__":
    main()
