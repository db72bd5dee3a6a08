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
        """Say when the fit is not a regular maximum of the likelihood.  ``scale`` and
        ``floor`` are in standardised units (see :meth:`fit`)."""
        if breakdown:
            warnings.warn(
                f"GaussianMixture EM broke down numerically after {self.n_iter_} iterations "
                "(the next iterate's log-likelihood was not finite); returning the last "
                "iterate with a finite one, converged_=False.  Increase reg_covar.",
                ConvergenceWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        roundoff = floor * unit**2 > self.reg_covar
        if not roundoff.any():
            return
        # reg_covar is below round-off at some feature's scale: did a component collapse
        # there?  Covariances relative to the floor G: a direction of G^{-1/2} Sigma
        # G^{-1/2} at its floor 1 that lies mostly along those features.
        if self.covariance_type in ("full", "tied"):
            relative = scale / np.sqrt(floor)[:, None]
            values, vectors = np.linalg.eigh(relative @ np.swapaxes(relative, -1, -2))
            along = np.sum(vectors[..., roundoff, :] ** 2, axis=-2) > 0.5
            collapsed = np.any((values <= 1.01) & along)
        elif self.covariance_type == "diag":
            collapsed = np.any((scale**2 / floor)[:, roundoff] <= 1.01)
        else:
            collapsed = np.any(scale**2 / np.max(floor) <= 1.01)
        if collapsed:
            warnings.warn(
                "A GaussianMixture component collapsed onto (near-)identical points: "
                f"with reg_covar={self.reg_covar} its likelihood is unbounded, and its "
                "variance stopped at the round-off floor (10 eps times the feature's "
                "variance).  Increase reg_covar.",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )

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
