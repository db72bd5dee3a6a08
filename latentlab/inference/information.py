"""Standard errors of fitted parameters from the information of the exact likelihood.

A fitted generative model's declaration gives its exact observed-data log-likelihood
(missing entries marginalised), so the observed information is a JAX Hessian.  It is
taken in the identified, unconstrained coordinates of
:class:`~latentlab.inference.posterior.laplace.UnconstrainedCoordinates` (log
variances, stick-breaking weights, log-diagonal Cholesky factors; loadings of models
whose likelihood is flat along rotations in the lower-trapezoidal gauge ``W = L R0``),
where the maximum is interior and the Hessian non-singular, and carried to the
reported quantities by the delta method: with ``theta`` those coordinates,
``V = I(theta)^-1`` and ``q(theta)`` the reported quantities (loadings in the fit's
own frame, variances, weights, in data units), ``cov(q) = J V J^T``, ``J = dq/dtheta``.
The frame matters: a fit reports its loadings in a frame its data choose (principal
axes, a rotation criterion's optimum), and ``q`` recomputes that choice from
``theta``, so the frame's own sampling variation is in ``J``.

``vcov``:

- ``"observed"``: ``V = H^-1``, ``H = -d^2 l / dtheta^2`` at the fit (for MAP fits, of
  the log joint density: the Laplace approximation's covariance);
- ``"expected"``: ``V = I^-1`` with ``I`` the expected (Fisher) information, for
  models whose rows are Gaussian with moments ``mu(theta)``, ``Sigma(theta)``:
  ``I = -d^2/dtheta^2 sum_i E[log N(x_io | mu_o, Sigma_oo)]`` at the fit, the
  expectation under the fitted model of each row's observed block (so with missing
  entries it takes the rows' patterns as fixed: right under MCAR, as lavaan's
  ``information = "expected"``);
- ``"sandwich"``: ``V = H^-1 B H^-1``, ``B = sum_i s_i s_i^T`` over the rows' scores
  ``s_i = d l_i / dtheta`` (Huber 1967; White 1982): consistent where the model is
  misspecified, for maximum-likelihood fits.

Coordinates held at a bound (a Heywood uniqueness at its floor) are held fixed: the
information is that of the other coordinates, and the quantities that depend on the
fixed ones alone get no standard error (reported at the boundary).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["VCOV_TYPES", "EstimateCovariance", "estimate_covariance"]

VCOV_TYPES = ("observed", "expected", "sandwich")


class EstimateCovariance(NamedTuple):
    """Reported quantities, flattened: ``names[i]`` the quantity, ``index[i]`` the
    entry's coordinate labels, ``estimate`` its value at the fit, ``covariance`` the
    delta-method covariance of every pair, ``at_boundary`` whether the entry depends
    on coordinates held at a bound only (its variance is then 0 and not reported)."""

    names: list[str]
    index: list[tuple]
    estimate: np.ndarray
    covariance: np.ndarray
    at_boundary: np.ndarray
    # half g' H^-1 g over the free coordinates: the gain a Newton step from the fit
    # predicts (0 at an exact maximum)
    newton_decrement: float


def _inverse(H, what: str):
    """The inverse of a symmetric positive definite ``H``, scaled to unit diagonal
    first (coordinates in data units can differ by many orders of magnitude)."""
    H = 0.5 * (H + H.T)
    if not bool(jnp.all(jnp.isfinite(H))):
        raise ValueError(f"the {what} at the fitted point is not finite")
    scale = 1.0 / jnp.sqrt(jnp.abs(jnp.diag(H)))
    Hs = H * scale[:, None] * scale[None, :]
    values, vectors = jnp.linalg.eigh(Hs)
    if not float(values[0]) > 1e-10 * float(values[-1]):
        raise ValueError(
            f"the {what} at the fitted point is not positive definite (smallest scaled "
            f"eigenvalue {float(values[0]):.3g}): the fit is not at a strict maximum, or the "
            "model is not identified there (e.g. a component with no rows, more factors than "
            "the data identify); standard errors do not exist"
        )
    inverse = (vectors / values) @ vectors.T
    return inverse * scale[:, None] * scale[None, :]


def estimate_covariance(
    coords,
    report: Callable,
    labels: dict,
    *,
    vcov: str = "observed",
    row_loglik: Callable | None = None,
    expected_loglik: Callable | None = None,
    log_density: Callable | None = None,
    fixed=None,
) -> EstimateCovariance:
    """The delta-method covariance of ``report(coords.constrain(theta))`` at the fit.

    ``coords``: :class:`~latentlab.inference.posterior.laplace.UnconstrainedCoordinates`
    of the target (its ``log_density`` the log-likelihood, or log joint for MAP fits).
    ``report(values) -> dict name -> array``: the reported quantities from the
    constrained site values, traceable; ``labels[name]``: one list of coordinate
    labels per axis of that array.  ``row_loglik(values) -> (n,)``: each row's
    log-likelihood (``vcov="sandwich"``).  ``expected_loglik(values)``: the expected
    log-likelihood under the fitted model, whose negative Hessian at the fit is the
    expected information (``vcov="expected"``).  ``log_density(values)``: the same
    log density as ``coords.log_density`` up to a constant, computed another way
    (Gaussian rows from their sufficient statistics); default ``coords``'.
    ``fixed`` (p,) bool: coordinates held at a bound.
    """
    if vcov not in VCOV_TYPES:
        raise ValueError(f"vcov must be one of {VCOV_TYPES}, got {vcov!r}")
    theta0 = coords.point
    p = theta0.shape[0]
    fixed = np.zeros(p, bool) if fixed is None else np.asarray(fixed, bool)
    free = np.flatnonzero(~fixed)

    def objective(theta):
        if log_density is None:
            return coords.log_density(theta)
        return log_density(coords.constrain(theta))

    def flat_report(theta):
        out = report(coords.constrain(theta))  # in the order of its names, as JAX's trees
        return jnp.concatenate([jnp.ravel(out[name]) for name in sorted(out)])

    @jax.jit
    def derivatives(theta):
        # one program: the log density's gradient and Hessian, the report and its
        # Jacobian (each a compile of its own otherwise)
        gradient = jax.grad(objective)
        hessian, g = jax.jacfwd(lambda t: (gradient(t), gradient(t)), has_aux=True)(theta)
        return g, hessian, flat_report(theta), jax.jacfwd(flat_report)(theta)

    g, H, estimate, J = derivatives(theta0)
    V_free = _inverse(-H[np.ix_(free, free)], "information (negative Hessian of the log density)")
    g = g[free]
    decrement = 0.5 * float(g @ V_free @ g)
    if vcov == "expected":
        if expected_loglik is None:
            raise ValueError("vcov='expected' is available for Gaussian latent models only")
        information = -jax.jit(jax.hessian(lambda t: expected_loglik(coords.constrain(t))))(theta0)
        V_free = _inverse(information[np.ix_(free, free)], "expected information")
    if vcov == "sandwich":
        if row_loglik is None:
            raise ValueError("vcov='sandwich' needs each row's log-likelihood")
        scores = jax.jit(jax.jacrev(lambda t: row_loglik(coords.constrain(t))))(theta0)
        scores = scores[:, free]
        V_free = V_free @ (scores.T @ scores) @ V_free
    V = jnp.zeros((p, p), theta0.dtype).at[np.ix_(free, free)].set(V_free)
    shapes = jax.eval_shape(lambda t: report(coords.constrain(t)), theta0)
    covariance = J @ V @ J.T
    # entries that move with fixed coordinates only
    at_boundary = np.zeros(J.shape[0], bool)
    if fixed.any():
        J = np.asarray(J)
        at_boundary = np.all(J[:, free] == 0, axis=1) & np.any(J[:, fixed] != 0, axis=1)
    names, index = [], []
    for name, struct in sorted(shapes.items()):
        axes = labels[name]
        if len(axes) != len(struct.shape):
            raise ValueError(f"labels of {name!r}: {len(axes)} axes for shape {struct.shape}")
        for position in np.ndindex(*struct.shape):
            names.append(name)
            index.append(tuple(axes[a][i] for a, i in enumerate(position)))
    return EstimateCovariance(
        names=names,
        index=index,
        estimate=np.asarray(estimate, np.float64),
        covariance=np.asarray(covariance, np.float64),
        at_boundary=at_boundary,
        newton_decrement=decrement,
    )
