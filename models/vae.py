"""Variational autoencoder (Kingma & Welling 2014) as the probabilistic step from PPCA.

Generative story (the decoder)::

    z_i ~ N(0, I_K)
    h_i = g(z_i)                                  g: an MLP, or the identity
    x_i | z_i ~ N(W h_i + mu, sigma2 I_d)

With ``g`` the identity this *is* PPCA, and the declaration below is
:func:`latentlab.models.ppca.ppca_model` itself with its latent drawn explicitly: one
generative story, declared once.  A non-linear decoder puts an MLP between z and the
same sites ``W``, ``mu``, ``sigma2`` (its weights are ``numpyro.param`` sites).

The guide (the encoder) is amortized: ``q(z_i | x_i) = N(m(x_i), diag s(x_i)^2)`` with
``m`` and ``s`` the two heads of one MLP, and point masses on ``W``, ``mu`` and
``sigma2`` (maximum likelihood for the decoder, as ``AutoDelta``).  The per-row ELBO
``E_q[log p(x_i | z) + log p(z) - log q(z | x_i)]`` is a lower bound on PPCA's exact
log-likelihood per row; for the linear decoder the exact posterior covariance is
diagonal at the ML solution's rotation with orthogonal columns of W, so the bound is
tight there (Lucas et al. 2019, "Don't blame the ELBO").

The networks are plain JAX: a list of ``(weights, bias)`` layers, ``x @ weights + bias``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.primitives import Messenger

from latentlab.models import ppca
from latentlab.models.gaussian_latent import sample_loadings_and_mean

__all__ = [
    "ACTIVATIONS",
    "glorot_layers",
    "apply_layers",
    "layers_to_dict",
    "layers_from_dict",
    "vae_model",
    "model",
    "encoder_guide",
    "mask_rows",
    "padded_model",
    "padded_guide",
    "encode",
    "decode",
    "elbo_rows",
]

# scikit-learn's MLP activation names, with "linear" for its "identity"
ACTIVATIONS = {
    "linear": lambda a: a,
    "identity": lambda a: a,
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "logistic": jax.nn.sigmoid,
}

# Below this an encoder's standard deviation is round-off, not uncertainty.
MIN_SCALE = 1e-6


# ----------------------------------------------------------------------------- networks


def glorot_bound(fan_in: int, fan_out: int, activation: str) -> float:
    """Glorot & Bengio (2010) uniform bound, x2 for the logistic (as scikit-learn)."""
    factor = 2.0 if activation == "logistic" else 6.0
    return math.sqrt(factor / (fan_in + fan_out))


def glorot_layers(key, sizes, activation: str, dtype, last_bias: bool = True) -> list:
    """Layers ``[(W, b), ...]`` mapping ``sizes[0] -> ... -> sizes[-1]``: Glorot-uniform
    weights, zero biases; the last layer is ``(W,)`` without a bias if ``last_bias`` is
    False (the linear autoencoder's code layer)."""
    layers = []
    keys = jax.random.split(key, max(len(sizes) - 1, 1))
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        bound = glorot_bound(fan_in, fan_out, activation)
        W = jax.random.uniform(keys[i], (fan_in, fan_out), dtype, -bound, bound)
        last = i == len(sizes) - 2
        layers.append((W,) if last and not last_bias else (W, jnp.zeros(fan_out, dtype)))
    return layers


def apply_layers(layers, x, activation: str, activate_last: bool = False):
    """``x`` through the layers, ``activation`` between them (and after the last one
    only if ``activate_last``)."""
    act = ACTIVATIONS[activation]
    for i, layer in enumerate(layers):
        x = x @ layer[0]
        if len(layer) > 1:
            x = x + layer[1]
        if activate_last or i < len(layers) - 1:
            x = act(x)
    return x


def layers_to_dict(prefix: str, layers) -> dict:
    """``{prefix_W0, prefix_b0, ...}``: named arrays (saved by ``latentlab.io``)."""
    out = {}
    for i, layer in enumerate(layers):
        out[f"{prefix}_W{i}"] = layer[0]
        if len(layer) > 1:
            out[f"{prefix}_b{i}"] = layer[1]
    return out


def layers_from_dict(prefix: str, params: dict) -> list:
    """The inverse of :func:`layers_to_dict`."""
    layers, i = [], 0
    while f"{prefix}_W{i}" in params:
        bias = params.get(f"{prefix}_b{i}")
        W = params[f"{prefix}_W{i}"]
        layers.append((W,) if bias is None else (W, bias))
        i += 1
    return layers


def _param_layers(prefix: str, sizes, activation: str):
    """``numpyro.param`` sites for an MLP's layers, Glorot-initialised from the seed."""
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        bound = glorot_bound(fan_in, fan_out, activation)

        def init_W(key, shape=(fan_in, fan_out), bound=bound):
            return jax.random.uniform(key, shape, jnp.result_type(float), -bound, bound)

        W = numpyro.param(f"{prefix}_W{i}", init_W)
        b = numpyro.param(f"{prefix}_b{i}", jnp.zeros(fan_out))
        layers.append((W, b))
    return layers


# ----------------------------------------------------------------------------- declaration


def vae_model(
    X=None,
    *,
    n_components: int,
    n_features: int | None = None,
    n_samples: int | None = None,
    decoder_layer_sizes: tuple = (),
    activation: str = "tanh",
    subsample_size: int | None = None,
):
    """The decoder: PPCA's declaration (``decoder_layer_sizes=()``), or PPCA's
    observation model over an MLP of z.  ``X`` (n, d) is complete data."""
    if not decoder_layer_sizes:
        # the linear decoder is PPCA, with z drawn explicitly (SVI needs it)
        ppca.ppca_model(
            X,
            n_components=n_components,
            n_features=n_features,
            n_samples=n_samples,
            has_missing=False,
            explicit_latent=True,
            subsample_size=subsample_size,
        )
        return
    if X is not None:
        n_samples, n_features = X.shape
    K, d = n_components, n_features
    width = decoder_layer_sizes[-1]
    with handlers.mask(mask=False):  # maximum likelihood, as PPCA's default
        W, mu = sample_loadings_and_mean(d, width)
        sigma2 = numpyro.sample("sigma2", dist.LogNormal(0.0, 2.0))
    hidden = _param_layers("decoder", (K, *decoder_layer_sizes), activation)
    with numpyro.plate("rows", n_samples, subsample_size=subsample_size):
        X_batch = None if X is None else numpyro.subsample(X, event_dim=1)
        z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([K]).to_event(1))
        loc = apply_layers(hidden, z, activation, activate_last=True) @ W.T + mu
        numpyro.sample("x", dist.Normal(loc, jnp.sqrt(sigma2)).to_event(1), obs=X_batch)


model = vae_model  # the name every model module exports for its declaration


def encode(layers, X, n_components: int, activation: str):
    """The encoder's posterior mean and standard deviation of z, each (n, K)."""
    out = apply_layers(layers, X, activation)
    return out[..., :n_components], jax.nn.softplus(out[..., n_components:]) + MIN_SCALE


def decode(params: dict, Z, activation: str):
    """The decoder's mean ``W g(z) + mu`` of x given z (n, K)."""
    hidden = layers_from_dict("decoder", params)
    if hidden:
        Z = apply_layers(hidden, Z, activation, activate_last=True)
    return Z @ params["W"].T + params["mu"]


def encoder_guide(
    X=None,
    *,
    n_components: int,
    n_features: int | None = None,
    n_samples: int | None = None,
    encoder_layer_sizes: tuple = (),
    decoder_layer_sizes: tuple = (),
    activation: str = "tanh",
    subsample_size: int | None = None,
):
    """The amortized guide: point masses on ``W``, ``mu``, ``sigma2`` and
    ``q(z_i | x_i) = N(m(x_i), diag s(x_i)^2)`` from one MLP with 2K outputs.

    Initial values suit data centred and scaled to unit mean variance.
    """
    if X is not None:
        n_samples, n_features = X.shape
    K, d = n_components, n_features
    width = decoder_layer_sizes[-1] if decoder_layer_sizes else K

    def init_W(key):
        return jax.random.normal(key, (d, width), jnp.result_type(float)) / math.sqrt(width)

    W = numpyro.param("W_loc", init_W)
    mu = numpyro.param("mu_loc", jnp.zeros(d))
    sigma2 = numpyro.param("sigma2_loc", jnp.array(0.5), constraint=dist.constraints.positive)
    numpyro.sample("W", dist.Delta(W, event_dim=2))
    numpyro.sample("mu", dist.Delta(mu, event_dim=1))
    numpyro.sample("sigma2", dist.Delta(sigma2))
    layers = _param_layers("encoder", (d, *encoder_layer_sizes, 2 * K), activation)
    with numpyro.plate("rows", n_samples, subsample_size=subsample_size):
        X_batch = numpyro.subsample(X, event_dim=1)
        loc, scale = encode(layers, X_batch, K, activation)
        numpyro.sample("z", dist.Normal(loc, scale).to_event(1))


class mask_rows(Messenger):
    """Mask the sites of the ``"rows"`` plate by ``row_mask`` (n,): rows where it is
    False are padding and contribute nothing (the global sites are left alone).
    ``row_mask=None`` masks nothing.  Padding rows up to a bucket lets data sets of
    similar size share one compiled program."""

    def __init__(self, fn=None, row_mask=None):
        self.row_mask = row_mask
        super().__init__(fn)

    def process_message(self, msg):
        if self.row_mask is None or msg["type"] != "sample":
            return
        if any(frame.name == "rows" for frame in msg["cond_indep_stack"]):
            msg["fn"] = msg["fn"].mask(self.row_mask)


def padded_model(X, row_mask, **settings):
    """:func:`vae_model` on ``X`` whose rows where ``row_mask`` is False are padding."""
    with mask_rows(row_mask=row_mask):
        vae_model(X, **settings)


def padded_guide(X, row_mask, **settings):
    """:func:`encoder_guide` on ``X`` whose rows where ``row_mask`` is False are padding."""
    with mask_rows(row_mask=row_mask):
        encoder_guide(X, **settings)


def elbo_rows(model_fn, guide_fn, params: dict, X, key, num_particles: int):
    """Monte Carlo draws of every row's ELBO, (n, num_particles): their mean over
    particles estimates the row's ELBO.

    ``params`` are the guide's and model's ``numpyro.param`` values.  Particle s draws
    ``z_i = m(x_i) + s(x_i) * eps_s`` with the same ``eps_s`` for every row (common
    random numbers): a row's estimate depends on that row alone, not on its position
    or the other rows.  Each particle is scored by the declaration's own sites.
    """
    guide = handlers.substitute(handlers.seed(guide_fn, key), data=params)
    guide_trace = handlers.trace(guide).get_trace(X)
    q = guide_trace["z"]["fn"]
    loc, scale = q.mean, jnp.sqrt(q.variance)
    point = {
        name: site["value"]
        for name, site in guide_trace.items()
        if site["type"] == "sample" and name != "z"
    }
    model = handlers.seed(handlers.substitute(model_fn, data=params), key)

    def one(eps):
        z = loc + scale * eps
        model_trace = handlers.trace(handlers.condition(model, {**point, "z": z})).get_trace(X)
        site_x, site_z = model_trace["x"], model_trace["z"]
        return site_x["fn"].log_prob(site_x["value"]) + site_z["fn"].log_prob(z) - q.log_prob(z)

    eps = jax.random.normal(key, (num_particles, loc.shape[-1]), loc.dtype)
    return jax.vmap(one, out_axes=1)(eps)
