"""numpydoc text that several estimators share, written once.

A docstring names a fragment on a line of its own, ``{name}``, indented as the text
around it; :func:`fill_doc` replaces that line by ``FRAGMENTS[name]`` indented to
match (the numpy/scipy ``Substitution`` pattern).  A fragment may itself hold inline
``{key}`` placeholders, filled from :func:`fill_doc`'s keyword arguments, for a clause
that differs between estimators.  A placeholder without a fragment or a value raises
when the module defining the docstring is imported, so none can reach ``help()``.
"""

from __future__ import annotations

import re
import textwrap

__all__ = ["FRAGMENTS", "PLACEHOLDER", "fill_doc", "substitute"]

# A placeholder: a lower-case identifier in braces.  Option sets in numpydoc types
# ({"em", "map"}) and exponents (D^{-1/2}) never match it.
PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")
_FRAGMENT_LINE = re.compile(r"^(?P<indent>[ \t]*)\{(?P<name>[a-z][a-z0-9_]*)\}[ \t]*$", re.M)

FRAGMENTS = {
    # -- the EM estimators that stream (PPCA, FactorAnalysis, GaussianMixture) --------
    # -- the loadings' rotation (PPCA, FactorAnalysis) ----------------------------------
    "rotation_parameters": """\
rotation : str, callable or None, default=None
    The rotation the loadings are reported in, by :func:`latentlab.rotate`:
    orthogonal ``"varimax"``, ``"quartimax"``, ``"equamax"``, ``"orthomax"``;
    oblique ``"oblimin"``, ``"quartimin"``, ``"geomin"``, ``"promax"``; ``"target"``
    and ``"partial_target"`` (the target in ``rotation_kwargs``); or a function of the
    loadings (d, K) to minimise, written in ``jax.numpy`` (orthogonal unless
    ``rotation_kwargs={{"oblique": True}}``).  The likelihood, the imputations and
    every score are invariant under it; it changes how the factors are reported:
    ``components_`` holds the pattern loadings, ``transform`` the rotated factors and
    ``factor_correlation_`` their correlations (the identity for an orthogonal one).
rotation_kwargs : dict or None, default=None
    Further arguments of :func:`latentlab.rotate` (``gamma``, ``kappa``,
    ``epsilon``, ``target``, ``target_weights``, ``oblique``, ``normalize``, ``tol``,
    ``max_iter``).
n_rotation_starts : int, default=1
    Starts of the rotation's gradient projection (the first from the unrotated
    loadings, the others random, drawn from ``random_state``), keeping the best
    criterion value: rotation criteria such as geomin have local optima.""",
    "rotation_attributes": """\
rotation_matrix_ : ndarray (n_components, n_components)
    ``T`` of the rotation: pattern loadings ``Lambda = A T`` (orthogonal) or
    ``A (T^T)^-1`` (oblique) from the canonical unrotated loadings ``A``; the
    identity without a rotation.
factor_correlation_ : ndarray (n_components, n_components)
    ``Phi = T^T T``, the correlations of the rotated factors (the identity unless the
    rotation is oblique).  ``params_["W"]`` then holds ``Lambda C`` with
    ``Phi = C C^T``, the same model in uncorrelated factors.
structure_ : ndarray (n_components, n_features)
    Structure loadings ``(Lambda Phi)^T``: covariances of the factors with the
    features.""",
    "streaming_em_parameters": """\
verbose : int, default=0
    If > 0, print the EM objective every ``verbose`` iterations.
learning_decay : float in (0.5, 1], default=0.7
    Cappe & Moulines' kappa for :meth:`partial_fit`: chunk t mixes into the running
    statistics with weight ``(t + 2) ** -learning_decay`` (scikit-learn's
    ``LatentDirichletAllocation`` name and default for the same exponent).
chunk_size : int or None, default=None
    Rows per chunk on the chunked routes (a Dask array, an h5py/zarr array, a large
    ``np.memmap``, :class:`~latentlab.inference.chunked.RowChunks`): rows read and
    passed through the compiled chunk functions at a time (at most
    {rows_per_call} per call).  None: about 16 MB of float64 rows, or a Dask
    array's largest row block.  In-memory fits ignore it.  The fit does not depend on
    it beyond round-off.
devices : None, "all" or list of jax devices (or their ids), default=None
    Devices that EM's per-row E-step is split over (rows sharded with
    ``jax.sharding``, parameters replicated, row sums all-reduced); None: JAX's
    default device.  ``"all"`` is ``jax.devices()``, which after
    ``jax.distributed.initialize()`` spans every host.  Used by ``method="em"`` on
    in-memory and out-of-core data and by ``partial_fit`` (a Dask array is
    distributed by Dask instead).""",
    "streaming_em_attributes": """\
model_ : callable
    The NumPyro model with its static settings bound; ``model_(X)``.
n_samples_seen_, online_state_ : int, dict
    Set by :meth:`partial_fit` (stepwise EM): rows seen in the stream, and its
    running statistics and unrotated parameters.  After ``partial_fit``,
    ``log_likelihoods_`` holds each chunk's mean log-likelihood under the
    parameters before its update, ``n_iter_`` counts chunks and ``converged_`` is
    False.""",
    # the end of every partial_fit docstring
    "partial_fit_chunks": """\
Online EM assumes exchangeable chunks (rows in random order).  A stream
sorted by cluster or time is fitted toward its recent chunks and can settle
in a poor optimum: shuffle such a source, or use ``fit`` on it (exact EM over
row chunks, :class:`~latentlab.inference.chunked.RowChunks`).

Parameters
----------
X : array-like of shape (n_samples, n_features)
    One chunk of the stream; later chunks must have the same features.
y : ignored

Returns
-------
self""",
    # -- the neighbour-graph embeddings (Isomap, LLE, spectral embedding) ----------
    "eigensolver_seed": """\
random_state : int, RandomState or None, default=None
    Seeds the ARPACK start vector or the Lanczos start block.
dtype : {"float64", "float32"}, default="float64"
    Precision of the computation; float64 does not change JAX's global config.""",
    "solver_attribute": """\
solver_ : str
    The eigensolver that ran: ``eigen_solver`` with ``"auto"`` resolved
    (``"shift_invert"``: Lanczos on the inverse), or ``"dense"`` where an iterative
    solver did not converge.""",
}


def substitute(doc: str | None, /, **values: str) -> str | None:
    """``doc`` with each ``{name}`` line replaced by its fragment and every inline
    ``{key}`` by ``values[key]``.

    Raises
    ------
    ValueError
        If a placeholder has neither a fragment nor a value.
    """
    if doc is None:  # docstrings stripped (python -OO)
        return None

    def fragment(match: re.Match) -> str:
        text = FRAGMENTS.get(match["name"])
        if text is None:  # an inline value on a line of its own
            return match.group(0)
        return textwrap.indent(text, match["indent"], lambda line: bool(line.strip()))

    def value(match: re.Match) -> str:
        if match[1] not in values:
            raise ValueError(
                f"docstring placeholder {match.group(0)} has no fragment in "
                f"latentlab._docstrings.FRAGMENTS and no value given to fill_doc"
            )
        return values[match[1]]

    return PLACEHOLDER.sub(value, _FRAGMENT_LINE.sub(fragment, doc))


def fill_doc(obj=None, /, **values: str):
    """Decorator filling the ``{name}`` placeholders of a class's or function's
    docstring (:func:`substitute`); ``@fill_doc`` or ``@fill_doc(key=text)``."""

    def apply(target):
        target.__doc__ = substitute(target.__doc__, **values)
        return target

    return apply if obj is None else apply(obj)
