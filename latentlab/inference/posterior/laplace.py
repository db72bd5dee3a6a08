"""Laplace approximations and Gaussian draws in an identified, unconstrained
parametrisation of a model's latent sites."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "UnconstrainedCoordinates",
    "GaussianDraws",
    "gaussian_draws",
    "laplace_approximation",
]


class UnconstrainedCoordinates:
    """A flat, unconstrained and identified parametrisation of a model's latent sites.

    Each site is mapped to the real line by NumPyro's ``biject_to`` of its support
    (log for positive parameters, stick-breaking for simplex weights, log-diagonal
    Cholesky factors).  Loadings are rotated once to lower-trapezoidal form,
    ``W = L R0`` with ``W0^T = Q R`` (QR), ``L0 = R^T``, ``R0 = Q^T``, and only the
    ``dK - K(K-1)/2`` entries of L on or below the diagonal are free: the likelihood
    is flat along the K(K-1)/2 rotation directions, and fixing R0 removes them.

    Parameters
    ----------
    model : callable
        NumPyro model; ``model(*args)`` must run.
    args : tuple
        Its arguments (the data).
    point : dict
        Constrained values of every latent site (e.g. the fitted parameters).
    loadings : tuple of str
        Loadings sites (each (d_i, K)) sharing one latent space, stacked by rows.
    """

    def __init__(self, model, args, point: dict, loadings=()):
        from numpyro import handlers
        from numpyro.distributions import biject_to

        self.model, self.args = model, tuple(args)
        point = {k: jnp.asarray(v) for k, v in point.items()}
        supports = {}

        def record_supports(point, args):
            trace = handlers.trace(handlers.substitute(model, data=point)).get_trace(*args)
            for name, site in trace.items():
                if site["type"] == "sample" and not site["is_observed"]:
                    supports[name] = site["fn"].support

        # abstract evaluation: the site structure without compiling every operation
        jax.eval_shape(record_supports, point, self.args)
        self.sites = list(supports)
        missing = [s for s in self.sites if s not in point]
        if missing:
            raise ValueError(f"no starting value for the latent site(s) {missing}")
        self.loadings = tuple(loadings)
        self.transforms = {s: biject_to(supports[s]) for s in self.sites}
        self.shapes = {s: tuple(point[s].shape) for s in self.sites}
        pieces, self.layout = [], []
        if self.loadings:
            W0 = jnp.concatenate([point[s] for s in self.loadings], axis=0)
            D, K = W0.shape
            Q, R = jnp.linalg.qr(W0.T)  # W0 = R^T Q^T: R^T lower trapezoidal
            self.rotation = Q.T
            self.tril = np.tril_indices(D, 0, K)
            pieces.append(R.T[self.tril])
            self.layout.append(("loadings", len(self.tril[0]), None))
        for s in self.sites:
            if s in self.loadings:
                continue
            u = self.transforms[s].inv(point[s])
            pieces.append(jnp.ravel(u))
            self.layout.append((s, u.size, u.shape))
        self.point = jnp.concatenate(pieces)

    @property
    def size(self) -> int:
        return int(self.point.size)

    def _split(self, theta):
        out, start = {}, 0
        for name, size, shape in self.layout:
            out[name] = (theta[start : start + size], shape)
            start += size
        return out

    def constrain(self, theta) -> dict:
        """Site name -> constrained value for one flat vector ``theta``."""
        values = {}
        for name, (piece, shape) in self._split(theta).items():
            if name == "loadings":
                K = self.rotation.shape[0]
                D = sum(self.shapes[s][0] for s in self.loadings)
                L = jnp.zeros((D, K), theta.dtype).at[self.tril].set(piece)
                W, row = L @ self.rotation, 0
                for s in self.loadings:
                    values[s] = W[row : row + self.shapes[s][0]]
                    row += self.shapes[s][0]
            else:
                values[name] = self.transforms[name](jnp.reshape(piece, shape))
        return values

    def log_jacobian(self, theta):
        """log |d constrained / d theta| (the loadings map is linear: constant, omitted)."""
        total = 0.0
        for name, (piece, shape) in self._split(theta).items():
            if name != "loadings":
                u = jnp.reshape(piece, shape)
                t = self.transforms[name]
                total = total + jnp.sum(t.log_abs_det_jacobian(u, t(u)))
        return total

    def log_density(self, theta):
        """The model's log joint density at ``constrain(theta)``, without the Jacobian."""
        from numpyro.infer.util import log_density

        return log_density(self.model, self.args, {}, self.constrain(theta))[0]


class GaussianDraws(NamedTuple):
    draws: dict[str, np.ndarray]  # site -> (num_samples, *site_shape), constrained
    log_p: np.ndarray  # (num_samples,) target log density in theta coordinates
    log_q: np.ndarray  # (num_samples,) approximation's log density in theta coordinates


def gaussian_draws(coords: UnconstrainedCoordinates, mean, factor, key, num_samples: int):
    """Draws ``theta = mean + factor @ eps`` mapped to constrained site values.

    ``factor`` (p, p) is a square root of the covariance.  Also returns, per draw, the
    target's log density in theta coordinates (log joint + log Jacobian) and the
    Gaussian's: their difference is the importance ratio that
    ``arviz.loo_approximate_posterior`` corrects with.
    """
    mean, factor = jnp.asarray(mean), jnp.asarray(factor)
    p = mean.size
    eps = jax.random.normal(key, (int(num_samples), p), mean.dtype)
    theta = mean + eps @ factor.T
    log_det = jnp.linalg.slogdet(factor)[1]
    log_q = -0.5 * jnp.sum(eps**2, axis=1) - 0.5 * p * jnp.log(2 * jnp.pi) - log_det

    from latentlab.inference.mcmc import map_in_chunks

    @jax.jit
    @jax.vmap
    def evaluate(t):
        return coords.constrain(t), coords.log_density(t) + coords.log_jacobian(t)

    draws, log_p = map_in_chunks(evaluate, theta)
    return GaussianDraws(
        draws={k: np.asarray(v) for k, v in draws.items()},
        log_p=np.asarray(log_p, np.float64),
        log_q=np.asarray(log_q, np.float64),
    )


def laplace_approximation(coords: UnconstrainedCoordinates):
    """Gaussian at ``coords.point`` with the inverse Hessian of the negative log density.

    The Hessian is that of the log joint density as a function of the unconstrained,
    identified coordinates *without* the transforms' Jacobian, so the Gaussian's mean
    is exactly the fitted point (a mode of that function: the ML or MAP estimate).

    Returns ``(mean, factor)`` with ``factor @ factor.T`` the covariance.  Raises
    ValueError if the Hessian is not positive definite (the point is not a mode, or
    the model is not identified in these coordinates).
    """
    theta0 = coords.point
    H = jax.jit(jax.hessian(lambda t: -coords.log_density(t)))(theta0)
    H = 0.5 * (H + H.T)
    if not bool(jnp.all(jnp.isfinite(H))):
        raise ValueError("the Hessian of the log density at the fitted point is not finite")
    eigvals, eigvecs = jnp.linalg.eigh(H)
    smallest = float(eigvals[0])
    if smallest <= 1e-10 * max(float(eigvals[-1]), 1e-300):
        raise ValueError(
            "the log density is not strictly concave at the fitted point (smallest Hessian "
            f"eigenvalue {smallest:.3g}): the point is not a mode or the model is not "
            "identified there; use method='nuts'"
        )
    return theta0, eigvecs / jnp.sqrt(eigvals)
