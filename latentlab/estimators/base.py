"""What every latentlab estimator shares: precision handling, likelihood scores, saving."""

from __future__ import annotations

from contextlib import contextmanager

import jax
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._cache import ensure_compilation_cache

__all__ = ["LatentEstimator", "PosteriorMixin", "GenerativeMixin", "to_numpy", "jax_key"]


def to_numpy(a) -> np.ndarray:
    """Every public return is a float64 NumPy array, never a JAX array: a writable
    array that owns its data (``np.asarray`` of a JAX array is a read-only view of
    the device buffer, and a slice of a padded result is a view of the padding)."""
    return np.array(a, dtype=np.float64, copy=True)


def jax_key(random_state) -> jax.Array:
    """A JAX key drawn from a scikit-learn style ``random_state``."""
    seed = check_random_state(random_state).randint(0, 2**31 - 1)
    return jax.random.PRNGKey(seed)


class LatentEstimator(BaseEstimator):
    """Base class: runs JAX in the estimator's precision without touching global config."""

    @contextmanager
    def _precision(self):
        """Context in which JAX computes in ``self.dtype`` (float64 unless asked otherwise).

        Matrix products run at full precision: on GPUs JAX's default for float32 is
        TF32/bf16 passes, which costs ~3 digits (seen on an H200: the float32 PPCA
        log-likelihood off by 3e-3 relative).
        """
        dtype = getattr(self, "dtype", "float64")
        if dtype not in ("float64", "float32"):
            raise ValueError(f"Unknown dtype={dtype!r}; expected 'float64' or 'float32'")
        # Every estimator computes in here, so this is before latentlab's first compile.
        ensure_compilation_cache()
        with jax.enable_x64(dtype == "float64"), jax.default_matmul_precision("highest"):
            yield

    def _draw_from_declaration(self, n_samples, random_state, params=None):
        """Run ``model_`` forward at ``params`` (default ``params_``) with its explicit
        latent sampled.

        Returns the trace (site name -> site); call inside ``self._precision()``.
        """
        import jax.numpy as jnp
        from numpyro import handlers

        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
        if n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
        params = self.params_ if params is None else params
        params = {k: jnp.asarray(v) for k, v in params.items()}
        model = handlers.seed(handlers.condition(self.model_, params), jax_key(random_state))
        return handlers.trace(model).get_trace(
            n_samples=int(n_samples), n_features=self.n_features_in_, explicit_latent=True
        )

    def save(self, path) -> None:
        """Save the fitted model as arrays + JSON (no pickle); see :func:`latentlab.load`."""
        from latentlab.io import save

        save(self, path)


class PosteriorMixin:
    """Posterior draws of a fitted generative model's parameters, as an ArviZ DataTree.

    An estimator describes its posterior problem in ``_posterior_problem(X, y, prior)``
    (see :mod:`latentlab.estimators._posterior_hooks`); the sampling, alignment and
    DataTree layout are shared (:mod:`latentlab.estimators._posterior_sampling`).
    """

    def _posterior_problem(self, X, y, prior):
        from latentlab.estimators._posterior_hooks import default_problem

        return default_problem(self, X, y, prior)

    def sample_posterior(
        self,
        X,
        y=None,
        *,
        method: str = "nuts",
        num_samples: int = 1000,
        num_warmup: int = 500,
        num_chains: int | None = None,
        random_state=None,
        align: bool = True,
        prior: bool | None = None,
        svi_steps: int | None = None,
        nuts_options: dict | None = None,
    ):
        """Draw from the posterior of the parameters, on the model's own declaration.

        The target is ``model_``'s log density (the observed site is the exact marginal
        over the local latent, so only the global parameters are sampled) with the
        priors as the estimator was fitted: for maximum-likelihood fits (``method="em"``,
        ``"closed_form"``, or ``"map"`` without ``prior``) the declaration's priors are
        masked off, so the posterior is under **flat (improper) priors**, proportional
        to the likelihood; ``prior=True`` switches the declared priors on.  Priors act,
        as in the estimators' own MAP/SVI fits, on the data centred at its column means
        and divided by one global scale (sqrt of the mean feature variance); mixtures
        are sampled in data units.  Draws are returned in data units.

        Parameters
        ----------
        X : array of shape (n_samples, n_features)
            The data the posterior is conditioned on (normally the training data).
            NaN marks missing entries for models that accept them.
        y : array of shape (n_samples,) or (n_samples, n_targets), optional
            Targets, for supervised PCA.
        method : {"nuts", "svi", "laplace"}, default="nuts"
            ``"nuts"``: NumPyro's NUTS started at the fitted point.  ``"svi"``: a
            mean-field Gaussian (AutoNormal) in unconstrained coordinates, fitted from
            the fitted point.  ``"laplace"``: a Gaussian at the fitted point with the
            inverse Hessian of the log density as covariance, in unconstrained
            coordinates (log for positive parameters, stick-breaking for mixture
            weights, log-diagonal Cholesky factors) and, for loadings, the identified
            lower-trapezoidal form ``W = L R0`` (R0 the fitted point's rotation).
        num_samples : int, default=1000
            Draws per chain.
        num_warmup : int, default=500
            NUTS warm-up iterations per chain.
        num_chains : int or None, default=None
            Chains.  None: 4 for NUTS (each started at the fitted point; R-hat needs
            several), 1 for SVI and Laplace, whose draws are independent anyway.
            NUTS chains run one per device where there are enough devices,
            vectorized on one accelerator, one after another on a CPU
            (``nuts_options["chain_method"]`` overrides).
        random_state : int, RandomState or None
        align : bool, default=True
            Rotate loadings draws onto the point estimate (orthogonal Procrustes) or
            relabel mixture components / topics to match it (Hungarian matching): the
            likelihood cannot tell rotations or relabellings apart, so raw draws wander
            between them and do not summarise.  False keeps the raw draws.
        prior : bool or None, default=None
            None: as fitted.  True/False: the declared priors on/off.
        svi_steps : int, optional
            Optimisation steps for ``method="svi"`` (default: the estimator's
            ``svi_steps``, else 2000).
        nuts_options : dict, optional
            For ``method="nuts"``: any of ``target_accept_prob`` (default 0.8),
            ``max_tree_depth`` (10), ``dense_mass`` and ``chain_method`` ("auto";
            or NumPyro's "parallel", "vectorized", "sequential").  ``dense_mass``
            (default None) adapts a dense mass matrix when the sampled space has at
            most :data:`latentlab.inference.mcmc.DENSE_MASS_MAX_DIM` (100)
            unconstrained dimensions, a diagonal one above: loadings and noise are
            strongly correlated under flat priors, and a dense matrix then samples
            several times faster (iris PPCA(2), 13 dimensions: 18 s diagonal,
            6.8 s dense), while for large models it is costly to adapt and apply.

        Returns
        -------
        datatree : xarray.DataTree
            ``posterior``: one variable per parameter site, shape (chain, draw, ...),
            in data units, plus (for loadings models) the rotation-invariant
            ``explained_variance`` (eigenvalues of W W^T) and
            ``explained_variance_ratio`` per component.  ``log_likelihood``: one value
            per row and draw, dims (chain, draw, obs), named after the observed site
            (``"xy"``, the joint of x and y, for supervised PCA).  ``sample_stats``:
            NUTS's ``diverging``, ``acceptance_rate``, ``energy``, ``lp``... or, for
            SVI/Laplace, ``lp`` and ``log_q`` (see :func:`latentlab.posterior.loo`).
            The root ``attrs`` record the method, the prior, the alignment
            (``aligned="procrustes"``, ``"relabelled"`` or ``"none"``) and, for NUTS,
            ``max_rhat``, ``min_ess_bulk``, ``min_ess_tail``, ``num_divergences`` and
            ``num_max_treedepth`` (a warning is issued when either count is non-zero).
            With ``align=True`` an ``alignment`` group holds what undoes it per draw:
            ``rotation`` R (raw W = aligned W R^T) or ``permutation`` (raw component
            ``permutation[k]`` is aligned component k).  ``arviz.loo``, ``arviz.compare`` and
            ``arviz.summary`` accept the tree directly; :func:`latentlab.posterior.loo`
            adds the correction for SVI/Laplace draws and a Pareto-k warning.

        Notes
        -----
        Supervised PCA samples the tempered declaration (its log density is EM's
        alpha-weighted objective, so for alpha != 1 this is a generalised posterior);
        its pointwise log-likelihood is the unweighted joint log p(x_i, y_i).  pLSA's
        theta has one row per training document, so X must be the training counts;
        its maximum-likelihood point often lies on the simplex boundary, where the
        Laplace approximation is poor.
        """
        from latentlab.estimators._posterior_sampling import sample_posterior

        return sample_posterior(
            self,
            X,
            y,
            method=method,
            num_samples=num_samples,
            num_warmup=num_warmup,
            num_chains=num_chains,
            random_state=random_state,
            align=align,
            prior=prior,
            svi_steps=svi_steps,
            nuts_options=nuts_options,
        )


class GenerativeMixin(PosteriorMixin):
    """Likelihood-based model selection for estimators with ``score_samples``."""

    def score(self, X, y=None) -> float:
        """Mean per-sample log-likelihood of X (higher is better)."""
        return float(np.mean(self.score_samples(X)))

    def _n_parameters(self) -> int:
        raise NotImplementedError

    def bic(self, X) -> float:
        """Bayesian information criterion, ``-2 log L + p log n`` (lower is better)."""
        check_is_fitted(self)
        n = np.asarray(X).shape[0]
        return float(-2.0 * self.score(X) * n + self._n_parameters() * np.log(n))

    def aic(self, X) -> float:
        """Akaike information criterion, ``-2 log L + 2 p`` (lower is better)."""
        check_is_fitted(self)
        n = np.asarray(X).shape[0]
        return float(-2.0 * self.score(X) * n + 2 * self._n_parameters())
