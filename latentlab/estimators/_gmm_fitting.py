"""GaussianMixture's fitting routes: the compiled EM program over row blocks (split
over the ``devices`` setting), MAP/SVI through the shared multi-start driver, and the
warnings that say when a fit is not a regular maximum of the likelihood."""

from __future__ import annotations

import warnings
from functools import partial

import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from latentlab._shapes import chunked, em_rows
from latentlab.estimators._gmm_programs import CHUNK, MISSING_CHUNK
from latentlab.estimators.base import LATENTLAB_FILES
from latentlab.inference.sharding import shard_fields
from latentlab.models import gmm

__all__ = ["MixtureFittingMixin"]


class MixtureFittingMixin:
    """How :class:`latentlab.GaussianMixture` fits; its ``fit`` chooses the route."""

    def _fit_em(self, start_data, Xc, observed, reg):
        """Jit-compiled EM from every start on the standardised data ``Xc`` (missing
        entries 0); returns (params, trace, converged, objective, breakdown)."""
        dtype = reg.dtype
        d = Xc.shape[1]
        complete = observed.all(axis=1)
        missing_chunk = MISSING_CHUNK[self.covariance_type]
        no_rows = np.zeros((0, 1, d))
        data = gmm.GMMData(
            *(
                a.astype(dtype)
                for a in (
                    chunked(Xc[complete], CHUNK, em_rows),
                    chunked(np.ones(int(complete.sum())), CHUNK, em_rows),
                    chunked(Xc[~complete], missing_chunk, em_rows)
                    if not complete.all()
                    else no_rows,
                    chunked(observed[~complete].astype(float), missing_chunk, em_rows)
                    if not complete.all()
                    else no_rows,
                )
            )
        )
        # rows split over the devices setting: axis 1 of every row block
        data = shard_fields(data, ("X", "row_mask", "X_missing", "observed"), self.devices)
        return self._run_em_program(start_data, data, reg, Xc.shape[0])

    def _warn_on_degeneracy(self, scale, floor, unit, breakdown):
        """Say when the fit is not a regular maximum of the likelihood: EM broke down,
        or a covariance reached its floor (``reg_covar``, or round-off).  ``scale``
        and ``floor`` are in standardised units (see :meth:`fit`).

        A covariance at the floor is one of two things, told apart by the floor's
        size against each feature's own variance: ``reg_covar`` is an absolute
        variance, and on data of small scale it dominates the features' variances
        (every component sits on it and the fit is not the data's: data * 1e-4 gave
        another clustering and -30 nats per row); or a component collapsed onto
        (near-)identical points, e.g. one value of a discrete column, where the
        likelihood is unbounded and the floor decides how much it inflates (diabetes'
        ``sex`` column: 5 nats per row)."""
        if breakdown:
            warnings.warn(
                f"GaussianMixture EM broke down numerically after {self.n_iter_} iterations "
                "(the next iterate's log-likelihood was not finite); returning the last "
                "iterate with a finite one, converged_=False.  Increase reg_covar.",
                ConvergenceWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        at_floor = self._features_at_floor(scale, floor)  # (K, d) bool
        if not at_floor.any():
            return
        features = getattr(self, "feature_names_in_", None)

        def named(columns):
            names = [str(features[j]) if features is not None else str(j) for j in columns]
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            return f"feature{'s' if len(names) > 1 else ''} {shown}"

        # the floor is reg_covar's (not round-off's) and at least 1% of the variance
        dominated = (floor * unit**2 <= self.reg_covar) & (floor >= 1e-2)
        if (at_floor & dominated).any():
            columns = np.flatnonzero((at_floor & dominated).any(axis=0))
            smallest = float(np.min(unit[columns] ** 2))
            warnings.warn(
                f"GaussianMixture: reg_covar={self.reg_covar} is a variance in the data's "
                f"units, and it is not small against the variance of {named(columns)} "
                f"(smallest {smallest:.3g}): covariances stopped at it, so the fit "
                "describes the floor, not the data.  Rescale the data (e.g. standardise "
                "it) or lower reg_covar.",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        collapsed = at_floor & ~dominated
        if collapsed.any():
            components = np.flatnonzero(collapsed.any(axis=1))
            columns = np.flatnonzero(collapsed.any(axis=0))
            which = (
                "the pooled covariance"
                if self.covariance_type == "tied"
                else f"component{'s' if len(components) > 1 else ''} "
                + ", ".join(map(str, components))
            )
            warnings.warn(
                f"GaussianMixture: {which} collapsed onto a (near-)degenerate set of "
                f"points along {named(columns)} (e.g. one value of a discrete column, or "
                "columns that are an exact combination of others): there the likelihood "
                "is unbounded, the variance stopped at its floor "
                f"(reg_covar={self.reg_covar}, never below 10 eps times the feature's "
                "variance) and the floor sets how far the likelihood is inflated, so "
                "likelihood comparisons (BIC, compare) are not meaningful.  Increase "
                "reg_covar, drop or jitter such columns, or use fewer components.",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )

    def _features_at_floor(self, scale, floor):
        """(K, d) bool (tied: (1, d)): where a component's covariance reached the floor
        G = diag(``floor``) -- for full/tied, an eigenvector of G^{-1/2} Sigma G^{-1/2}
        with eigenvalue at 1 (the floor), attributed to the features that carry at
        least half as much of it as the largest; for diag, the variances; for
        spherical, every feature."""
        if self.covariance_type in ("full", "tied"):
            relative = scale / np.sqrt(floor)[:, None]
            values, vectors = np.linalg.eigh(relative @ np.swapaxes(relative, -1, -2))
            floored = values <= 1.01  # (..., d) directions
            weight = vectors**2  # (..., feature, direction)
            heavy = weight >= 0.5 * weight.max(axis=-2, keepdims=True)
            at_floor = np.any(heavy & floored[..., None, :], axis=-1)
            return at_floor.reshape(-1, len(floor))
        if self.covariance_type == "diag":
            return scale**2 / floor <= 1.01
        spherical = scale**2 / np.max(floor) <= 1.01  # (K,)
        return np.repeat(spherical[:, None], len(floor), axis=1)

    def _fit_svi(self, starts, Z, observed, rng):
        """MAP (AutoDelta) or SVI (AutoNormal) on the declaration from every start, by
        the shared multi-start driver (its keys drawn from ``rng``, the fit's random
        state), on the standardised data ``Z`` (missing entries 0) where Adam's step
        size makes sense; returns parameters and the objective trace in those units
        (``fit`` maps them to the data's)."""
        from latentlab.inference.svi import fit_best_of

        # sliced on the host: slicing device arrays would compile a program each
        host = {k: np.asarray(v) for k, v in starts._asdict().items()}
        Xs = jnp.asarray(np.where(observed, Z, np.nan))
        model = partial(
            gmm.gmm_model,
            n_components=int(starts.means.shape[1]),
            covariance_type=self.covariance_type,
            has_missing=not observed.all(),
            use_prior=self.method == "svi" or bool(self.prior),
        )
        best = fit_best_of(
            model,
            (Xs,),
            [{k: v[i] for k, v in host.items()} for i in range(len(starts.weights))],
            method=self.method,
            num_steps=self.svi_steps,
            learning_rate=self.learning_rate,
            random_state=rng,
        )
        params = gmm.Params(*(best.params[k] for k in gmm.Params._fields))
        return params, np.asarray(best.trace, np.float64), True
