"""``latentlab.VariationalAutoencoder``: PPCA's declaration with an amortized encoder as
its SVI guide (:mod:`latentlab.models.vae`), trained as one compiled SVI program."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from latentlab._settings import Dtype, Integer, LayerSizes, Options, RandomState, Real
from latentlab._shapes import pad_rows
from latentlab._validation import check_codes, check_data, check_n_components, check_positive_int
from latentlab.estimators._dispatch import map_rows, row_bucket
from latentlab.estimators.autoencoder import check_layer_sizes
from latentlab.estimators.base import LatentEstimator, jax_key, to_numpy
from latentlab.inference.programs import program
from latentlab.inference.svi import fit_svi, start_seeds
from latentlab.models import vae

__all__ = ["VariationalAutoencoder"]

DECODERS = ("linear", "mlp")


def _bind(settings, subsample_size=None, padded=False):
    """The declaration and the guide with the static settings bound (``padded``: the
    training forms, called as ``fn(X, row_mask)``)."""
    K, encoder_sizes, decoder_sizes, activation = settings
    shared = dict(
        n_components=K,
        decoder_layer_sizes=decoder_sizes,
        activation=activation,
        subsample_size=subsample_size,
    )
    model = partial(vae.padded_model if padded else vae.vae_model, **shared)
    guide = partial(
        vae.padded_guide if padded else vae.encoder_guide,
        encoder_layer_sizes=encoder_sizes,
        **shared,
    )
    return model, guide


@program(static_argnames=("settings", "num_particles"))
def _elbo_rows(X, params, key, *, settings, num_particles):
    model, guide = _bind(settings)
    return vae.elbo_rows(model, guide, params, X, key, num_particles)


@program(static_argnames=("n_components", "activation"))
def _encoder_mean(X, layers, *, n_components, activation):
    return vae.encode(layers, X, n_components, activation)[0]


@program(static_argnames=("activation",))
def _decoder_mean(Z, params, *, activation):
    return vae.decode(params, Z, activation)


class VariationalAutoencoder(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """Variational autoencoder over PPCA's declaration (Kingma & Welling 2014).

    The decoder is PPCA's generative story ``x ~ N(W g(z) + mu, sigma2 I)``,
    ``z ~ N(0, I)``: with ``decoder="linear"`` (``g`` the identity) the NumPyro model is
    :func:`latentlab.models.ppca.ppca_model` itself, and with ``decoder="mlp"`` ``g``
    is an MLP mirroring the encoder.  The guide is an amortized encoder
    ``q(z | x) = N(m(x), diag s(x)^2)`` (an MLP with ``hidden_layer_sizes``) with point
    masses on ``W``, ``mu``, ``sigma2``, fitted by SVI (Adam, reparameterised ELBO) as
    one compiled program (:func:`latentlab.inference.svi.fit_svi`).

    The ELBO is a lower bound on the log-likelihood, so for the linear decoder it is
    directly comparable with :class:`latentlab.PPCA`'s exact ``score``; there the
    bound is tight at the ML solution, and a linear encoder (the default) is the right
    family for it.

    Parameters
    ----------
    n_components : int, default=2
        Latent dimension K, ``1 <= K <= n_features``.
    hidden_layer_sizes : tuple of int, default=()
        Hidden widths of the encoder; ``decoder="mlp"`` mirrors them.
    decoder : {"linear", "mlp"}, default="linear"
    activation : {"tanh", "relu", "logistic", "linear"}, default="tanh"
        Activation of the hidden layers (smooth by default: SVI follows gradients
        through them).
    svi_steps : int, default=3000
        Adam steps.
    learning_rate : float, default=0.01
        Initial step size; it decays exponentially to 1/50 of it over the run.
    batch_size : int or None, default=None
        Rows per SVI step (subsampled, with the likelihood scaled up); None: all.
    num_particles : int, default=1
        Draws of z per row in each step's ELBO estimate.
    elbo_particles : int, default=200
        Draws of z per row when reporting the ELBO (:meth:`score_samples`, ``elbo_``).
    random_state : int, RandomState or None, default=None
        Initial weights and SVI's draws; reporting the ELBO uses a fixed key, so
        ``score`` is a deterministic function of the fitted model.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    params_ : dict of ndarray
        The decoder in data units: ``W`` (d, width), ``mu``, ``sigma2`` and, for the
        MLP decoder, ``decoder_W0``, ``decoder_b0``, ...
    encoder_params_ : dict of ndarray
        The encoder in data units (``encoder_W0``, ``encoder_b0``, ...); its last layer
        gives the K means and, through a softplus, the K standard deviations.
    elbo_ : float
        The ELBO per row of the training data (``score(X_train)``), in nats.
    elbo_std_error_ : float
        Its Monte Carlo standard error.
    elbo_curve_ : ndarray (svi_steps,)
        The per-row ELBO estimate of every step, in data units.
    n_iter_ : int
    model_ : callable
        The NumPyro declaration with its static settings bound; ``model_(X)``.
    guide_ : callable
        The encoder guide with its static settings bound.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(200, 5)) @ np.diag([3.0, 2.0, 1, 1, 1])
    >>> vae = latentlab.VariationalAutoencoder(2, svi_steps=500, random_state=0).fit(X)
    >>> vae.transform(X).shape
    (200, 2)
    """

    _settings = {
        "n_components": Integer(1, None),
        "hidden_layer_sizes": LayerSizes(),
        "decoder": Options(*DECODERS),
        "activation": Options(*vae.ACTIVATIONS),
        "svi_steps": Integer(1, None),
        "learning_rate": Real(0, None, closed="neither"),
        "batch_size": Integer(1, None) | None,
        "num_particles": Integer(1, None),
        "elbo_particles": Integer(1, None),
        "random_state": RandomState(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_components=2,
        *,
        hidden_layer_sizes=(),
        decoder="linear",
        activation="tanh",
        svi_steps=3000,
        learning_rate=0.01,
        batch_size=None,
        num_particles=1,
        elbo_particles=200,
        random_state=None,
        dtype="float64",
    ):
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.decoder = decoder
        self.activation = activation
        self.svi_steps = svi_steps
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.num_particles = num_particles
        self.elbo_particles = elbo_particles
        self.random_state = random_state
        self.dtype = dtype

    def _network(self, n_features):
        """The network's static settings, checked against the data."""
        K = check_n_components(self.n_components, 1, n_features, "n_features")
        hidden = check_layer_sizes("hidden_layer_sizes", self.hidden_layer_sizes)
        decoder = hidden[::-1] if self.decoder == "mlp" else ()
        if self.decoder == "mlp" and not hidden:
            raise ValueError("decoder='mlp' needs hidden layers: set hidden_layer_sizes")
        return (K, hidden, decoder, self.activation)

    def fit(self, X, y=None):
        """Fit decoder and encoder to X (n_samples, n_features) by SVI; returns self."""
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n, d = X.shape
        settings = self._network(d)
        lr = self.learning_rate
        batch = None
        if self.batch_size is not None:
            batch = None if self.batch_size >= n else int(self.batch_size)
        # Adam's step size suits unit scale: fit on (X - mean) / scale, report in data
        # units (every site and layer below is mapped back exactly)
        mean = X.mean(axis=0)
        variance = float(np.mean(X.var(axis=0)))
        scale = float(np.sqrt(variance)) if variance > 0 else 1.0
        model, guide = _bind(settings, batch, padded=True)
        seed = int(start_seeds(self.random_state, 1)[0])
        Xs, row_mask = (X - mean) / scale, None
        if batch is None:  # full batches: pad the rows to a bucket (one program per bucket)
            rows = row_bucket(n)
            Xs, row_mask = pad_rows(Xs, rows), np.arange(rows) < n
        with self._precision():
            fit = fit_svi(
                model,
                jnp.asarray(Xs),
                None if row_mask is None else jnp.asarray(row_mask),
                guide=guide,
                num_steps=int(self.svi_steps),
                learning_rate=float(lr),
                final_learning_rate=float(lr) / 50,
                seed=seed,
                num_particles=int(self.num_particles),
                work=Xs.size,
            )
            fitted = {k: to_numpy(v) for k, v in fit.params.items()}
        encoder = vae.layers_from_dict("encoder", fitted)
        W0, b0 = encoder[0]
        # x_s = (x - mean) / scale folded into the first layer
        encoder[0] = (W0 / scale, b0 - (mean / scale) @ W0)
        self.encoder_params_ = vae.layers_to_dict("encoder", encoder)
        self.params_ = {
            "W": fitted["W_loc"] * scale,
            "mu": fitted["mu_loc"] * scale + mean,
            "sigma2": np.asarray(fitted["sigma2_loc"] * scale**2),
            **vae.layers_to_dict("decoder", vae.layers_from_dict("decoder", fitted)),
        }
        self.n_components_ = settings[0]
        self.n_iter_ = int(self.svi_steps)
        # numpyro's ELBO is of the whole (scaled) data set; per row in data units
        self.elbo_curve_ = fit.objective_trace / n - d * np.log(scale)
        # the particles are shared by all rows, so the error of the mean over rows is
        # the spread of the per-particle means, not a sum of independent row errors
        per_particle = self._elbo_draws(X).mean(axis=0)
        self.elbo_ = float(per_particle.mean())
        self.elbo_std_error_ = float(per_particle.std(ddof=1) / np.sqrt(per_particle.size))
        return self

    # -- the fitted model ---------------------------------------------------------------

    def _key_settings(self):
        hidden = tuple(int(s) for s in self.hidden_layer_sizes)
        return (
            self.n_components_,
            hidden,
            hidden[::-1] if self.decoder == "mlp" else (),
            self.activation,
        )

    @property
    def model_(self):
        """The NumPyro declaration with this fit's static settings bound."""
        check_is_fitted(self)
        return _bind(self._key_settings())[0]

    @property
    def guide_(self):
        """The amortized guide with this fit's static settings bound (its parameters:
        ``W_loc``, ``mu_loc``, ``sigma2_loc`` and the encoder's layers)."""
        check_is_fitted(self)
        return _bind(self._key_settings())[1]

    def _substitutions(self):
        """Values of every ``numpyro.param`` site of declaration and guide."""
        p = self.params_
        out = {"W_loc": p["W"], "mu_loc": p["mu"], "sigma2_loc": p["sigma2"]}
        out.update({k: v for k, v in p.items() if k.startswith("decoder_")})
        out.update(self.encoder_params_)
        return {k: jnp.asarray(v) for k, v in out.items()}

    def _elbo_draws(self, X):
        """The ELBO draws of each row of X, (n_samples, elbo_particles)."""
        with self._precision():
            rows = map_rows(
                _elbo_rows,
                X,
                self._substitutions(),
                jax.random.PRNGKey(0),
                settings=self._key_settings(),
                num_particles=int(self.elbo_particles),
            )
            return to_numpy(rows)

    @property
    def _n_features_out(self):
        return self.n_components_

    def score_samples(self, X):
        """The ELBO of each row of X (a lower bound on its log-likelihood), estimated
        with ``elbo_particles`` draws of z from the encoder."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        return self._elbo_draws(X).mean(axis=1)

    def score(self, X, y=None):
        """The mean ELBO per row of X (compare with ``latentlab.PPCA().score``)."""
        return float(np.mean(self.score_samples(X)))

    def transform(self, X):
        """The encoder's mean of z for each row of X, (n_samples, n_components)."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        with self._precision():
            layers = [
                tuple(jnp.asarray(a) for a in layer)
                for layer in vae.layers_from_dict("encoder", self.encoder_params_)
            ]
            return to_numpy(
                map_rows(
                    _encoder_mean,
                    X,
                    layers,
                    n_components=self.n_components_,
                    activation=self.activation,
                )
            )

    def inverse_transform(self, X):
        """The decoder's mean ``W g(z) + mu`` for codes (n_samples, n_components)."""
        check_is_fitted(self)
        Z = check_codes(X, self.n_components_)
        with self._precision():
            params = {k: jnp.asarray(v) for k, v in self.params_.items()}
            return to_numpy(map_rows(_decoder_mean, Z, params, activation=self.activation))

    def sample(self, n_samples=1, random_state=None):
        """Draw rows from the fitted declaration: ``z ~ N(0, I)``, then x | z.

        Returns
        -------
        X : ndarray (n_samples, n_features)
        Z : ndarray (n_samples, n_components)
        """
        check_is_fitted(self)
        check_positive_int("n_samples", n_samples)
        with self._precision():
            params = {k: jnp.asarray(v) for k, v in self.params_.items()}
            model = handlers.substitute(
                handlers.seed(self.model_, jax_key(random_state)), data=params
            )
            trace = handlers.trace(model).get_trace(
                n_samples=int(n_samples), n_features=self.n_features_in_
            )
            return to_numpy(trace["x"]["value"]), to_numpy(trace["z"]["value"])
