"""NUTS on a NumPyro model function, and the pointwise log-likelihood ArviZ needs.

Model-agnostic: the functions take any NumPyro model (in latentlab, a declaration
with its observed site collapsed over the local latent, so NUTS samples only the
global parameters) and return NumPy arrays grouped by chain, ready for
``arviz.from_dict``.  Call them inside ``jax.enable_x64(True)`` for float64:
NumPyro otherwise evaluates the log density in float32.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["NUTSResult", "run_nuts", "pointwise_log_likelihood", "map_in_chunks"]

# NumPyro's names for the per-draw sampler statistics -> ArviZ's (as az.from_numpyro)
_STAT_NAMES = {
    "diverging": "diverging",
    "num_steps": "n_steps",
    "accept_prob": "acceptance_rate",
    "energy": "energy",
    "potential_energy": "lp",
    "adapt_state.step_size": "step_size",
}


class NUTSResult(NamedTuple):
    draws: dict[str, np.ndarray]  # site -> (num_chains, num_samples, *site_shape), constrained
    sample_stats: dict[str, np.ndarray]  # ArviZ names -> (num_chains, num_samples)


def run_nuts(
    model,
    *args,
    init_values: dict[str, Any] | None = None,
    num_samples: int = 1000,
    num_warmup: int = 500,
    num_chains: int = 1,
    seed: int = 0,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool = False,
    **kwargs,
) -> NUTSResult:
    """Sample the latent sites of ``model(*args, **kwargs)`` with NUTS.

    Parameters
    ----------
    init_values : dict, optional
        Starting values (constrained space) of the latent sites, e.g. a fitted point
        estimate: warm-up then only has to adapt the step size and mass matrix.
    num_samples, num_warmup : int
        Draws kept and warm-up iterations, per chain.
    num_chains : int
        Chains run one after another (``chain_method="sequential"``), which works on a
        single CPU device.
    seed : int
        Seed of the JAX key.

    Returns
    -------
    NUTSResult
        ``draws[site]`` of shape (num_chains, num_samples, *site_shape) and
        ``sample_stats`` (``diverging``, ``n_steps``, ``tree_depth``,
        ``reached_max_treedepth``, ``acceptance_rate``, ``energy``, ``lp``,
        ``step_size``), each
        (num_chains, num_samples).  ``lp`` is the log density in NumPyro's
        unconstrained coordinates (Jacobians of the transforms included).
    """
    from numpyro.infer import MCMC, NUTS
    from numpyro.infer.initialization import init_to_median, init_to_value

    init = init_to_value(values=init_values) if init_values else init_to_median
    kernel = NUTS(
        model,
        init_strategy=init,
        target_accept_prob=target_accept_prob,
        max_tree_depth=max_tree_depth,
        dense_mass=dense_mass,
    )
    mcmc = MCMC(
        kernel,
        num_warmup=int(num_warmup),
        num_samples=int(num_samples),
        num_chains=int(num_chains),
        chain_method="sequential",
        progress_bar=False,
    )
    mcmc.run(jax.random.PRNGKey(seed), *args, extra_fields=tuple(_STAT_NAMES), **kwargs)
    draws = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    stats = {}
    for name, value in mcmc.get_extra_fields(group_by_chain=True).items():
        value = np.asarray(value)
        stats[_STAT_NAMES[name]] = -value if name == "potential_energy" else value
    stats["tree_depth"] = np.log2(stats["n_steps"]).astype(np.int64) + 1
    stats["reached_max_treedepth"] = stats["tree_depth"] >= max_tree_depth
    return NUTSResult(draws=draws, sample_stats=stats)


def map_in_chunks(fn, tree, chunk_size: int = 64):
    """``fn`` (jitted, batched over a leading axis) applied chunk by chunk.

    The leading axis is padded (with copies of its first entry) to a multiple of
    ``chunk_size``, so one compiled program serves every chunk and memory stays
    bounded by one chunk's evaluation.  Returns ``fn``'s outputs as NumPy arrays,
    concatenated and trimmed.
    """
    leaves = jax.tree.leaves(tree)
    n = leaves[0].shape[0]
    size = min(chunk_size, n)
    pad = -n % size

    def padded(a):
        a = np.asarray(a)
        return np.concatenate([a, np.repeat(a[:1], pad, axis=0)]) if pad else a

    tree = jax.tree.map(padded, tree)
    pieces = [
        fn(jax.tree.map(lambda a, i=i: a[i : i + size], tree)) for i in range(0, n + pad, size)
    ]
    return jax.tree.map(lambda *p: np.concatenate([np.asarray(x) for x in p])[:n], *pieces)


class _Bound:
    """A model function with keyword settings, hashed by value, so jitted evaluators
    keyed on it are reused across calls with the same model and settings."""

    def __init__(self, model):
        if isinstance(model, partial) and not model.args:
            self.func, self.key = model.func, tuple(sorted(model.keywords.items()))
            try:
                hash(self.key)
            except TypeError:
                self.func, self.key = model, ()
        else:
            self.func, self.key = model, ()

    def __call__(self, *args, **kwargs):
        return self.func(*args, **dict(self.key), **kwargs)

    def __hash__(self):
        return hash((self.func, self.key))

    def __eq__(self, other):
        return isinstance(other, _Bound) and (self.func, self.key) == (other.func, other.key)


@partial(jax.jit, static_argnums=0)
def _log_likelihood_chunk(model, draws, args):
    from numpyro.infer.util import log_likelihood

    return jax.vmap(lambda sample: log_likelihood(model, sample, *args, batch_ndims=0))(draws)


def pointwise_log_likelihood(
    model,
    draws: dict[str, Any],
    *args,
    chunk_size: int = 64,
) -> dict[str, np.ndarray]:
    """Log-likelihood of every observed site at every draw.

    Parameters
    ----------
    model : callable
        NumPyro model called as ``model(*args)``; static settings bound with
        ``functools.partial`` (then the compiled evaluator is reused by later calls
        with equal settings and shapes).
    draws : dict
        Site name -> (n_draws, *site_shape) values of the latent sites.
    chunk_size : int
        Draws evaluated together: memory grows as chunk_size x one evaluation.

    Returns
    -------
    dict
        Observed site name -> (n_draws, *batch_shape) log-densities, e.g.
        (n_draws, n_samples) for a site inside a plate over rows.
    """
    args = tuple(jnp.asarray(a) for a in args)  # data as arguments, not baked-in constants
    bound = _Bound(model)
    out = map_in_chunks(lambda d: _log_likelihood_chunk(bound, d, args), draws, chunk_size)
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
