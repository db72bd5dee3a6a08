"""``latentlab.Autoencoder``: an MLP encoder/decoder trained on squared reconstruction
error, by full-batch L-BFGS in one compiled program (small data) or by Adam on
mini-batches, one compiled program per epoch (optax for both)."""

from __future__ import annotations

import numbers
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from latentlab._settings import (
    Boolean,
    Dtype,
    Integer,
    LayerSizes,
    Options,
    RandomState,
    Real,
    Verbose,
)
from latentlab._shapes import pad_rows
from latentlab._validation import check_codes, check_data, check_n_components, check_positive_int
from latentlab.estimators._dispatch import map_rows, row_bucket
from latentlab.estimators.base import LatentEstimator, jax_key, to_numpy, warn_not_converged
from latentlab.inference.programs import program
from latentlab.models.vae import (
    ACTIVATIONS,
    apply_layers,
    glorot_layers,
    layers_from_dict,
    layers_to_dict,
)

__all__ = ["Autoencoder", "check_layer_sizes"]

LINEAR = ("linear", "identity")
SCHEDULES = ("constant", "adaptive")
SOLVERS = ("auto", "adam", "lbfgs")
# "adaptive" divides the step size by this when progress stalls, and stops below MIN_STEP
STEP_DIVISOR, MIN_STEP = 5.0, 1e-6
# solver="auto" trains full-batch L-BFGS on up to this many training rows.  A pass over
# the data costs about the same either way; below this an exact quasi-Newton step gets
# more out of it than an epoch of mini-batch Adam steps, above it Adam's many steps per
# pass win (digits, one tanh layer of 32, K=8, 200 iterations or epochs: L-BFGS's error
# is 16% lower on the 1,797 images, 2% lower on 4,000 noisy copies, 6% higher on 10,000)
LBFGS_MAX_ROWS = 5_000
LBFGS_MEMORY = 10  # (s, y) pairs kept by L-BFGS


def check_layer_sizes(name: str, sizes) -> tuple:
    """``sizes`` as a tuple of positive ints, or a ValueError naming the setting."""
    if isinstance(sizes, numbers.Integral) and not isinstance(sizes, bool):
        sizes = (sizes,)
    try:
        sizes = tuple(sizes)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of positive integers, got {sizes!r}") from None
    for s in sizes:
        check_positive_int(f"every entry of {name}", s)
    return tuple(int(s) for s in sizes)


def _reconstruct(params, X, activation):
    code = apply_layers(params["encoder"], X, activation)
    return apply_layers(params["decoder"], code, activation)


def _objective(params, X, weights, rows, penalty, activation):
    """Mean over the ``rows`` weighted rows of the squared reconstruction error, plus
    the L2 penalty on the weights (not the biases) over ``rows``, as scikit-learn's MLP."""
    err = jnp.sum((_reconstruct(params, X, activation) - X) ** 2, axis=1)
    l2 = sum(jnp.sum(layer[0] ** 2) for part in params.values() for layer in part)
    return (jnp.sum(weights * err) + 0.5 * penalty * l2) / rows


@partial(jax.jit, static_argnames=("sizes", "activation"))
def _init_network(key, *, sizes, activation):
    """Glorot-initialised encoder ``sizes`` (no bias in the code layer), the mirrored
    decoder, and Adam's state: one compiled program instead of many small ones."""
    dtype = jnp.result_type(float)
    encoder_key, decoder_key = jax.random.split(key)
    params = {
        "encoder": glorot_layers(encoder_key, sizes, activation, dtype, last_bias=False),
        "decoder": glorot_layers(decoder_key, sizes[::-1], activation, dtype),
    }
    return params, optax.scale_by_adam().init(params)


@partial(jax.jit, static_argnames=("activation", "batch_size", "n_batches"))
def _epoch(
    params, opt_state, X, n, key, learning_rate, penalty, *, activation, batch_size, n_batches
):
    """One epoch: Adam over shuffled mini-batches of the first ``n`` rows of X.

    X's rows beyond ``n`` are padding (rows are bucketed, so data sets of similar size
    share one compiled program): the shuffle puts them last, they weigh nothing, and a
    batch of padding alone is skipped.  Returns the mean training objective."""
    rows_total = X.shape[0]
    padded = n_batches * batch_size
    real = jnp.arange(rows_total) < n
    # a random order of the real rows, then the padding
    order = jnp.argsort(jnp.where(real, jax.random.uniform(key, (rows_total,)), 2.0))
    order = jnp.pad(order, (0, padded - rows_total))
    weights = (jnp.arange(padded) < n).astype(X.dtype)
    batches = (order.reshape(n_batches, batch_size), weights.reshape(n_batches, batch_size))
    adam = optax.scale_by_adam()

    def step(carry, batch):
        params, opt_state = carry
        rows, w = batch
        count = jnp.sum(w)
        loss, grads = jax.value_and_grad(_objective)(
            params, X[rows], w, jnp.maximum(count, 1.0), penalty, activation
        )
        updates, new_state = adam.update(grads, opt_state, params)
        new_params = jax.tree.map(lambda p, u: p - learning_rate * u, params, updates)
        keep = count > 0
        carry = jax.tree.map(
            lambda new, old: jnp.where(keep, new, old), (new_params, new_state), carry
        )
        return carry, loss * count

    (params, opt_state), losses = jax.lax.scan(step, (params, opt_state), batches)
    return params, opt_state, jnp.sum(losses) / n


class _LbfgsState(NamedTuple):
    params: dict
    opt_state: tuple
    n_iter: jax.Array  # accepted iterations
    stale: jax.Array  # iterations running that lowered the loss by at most tol
    trace: jax.Array  # (max_iter,) loss after each accepted iteration; NaN past n_iter
    converged: jax.Array
    done: jax.Array


def _report(show, i, loss):
    if show:
        print(f"  Autoencoder L-BFGS iteration {int(i):5d}  loss {float(loss):.6g}", flush=True)


@partial(jax.jit, static_argnames=("activation", "max_iter", "verbose"))
def _lbfgs(
    params, X, n, penalty, tol, n_iter_no_change, loss_unit, *, activation, max_iter, verbose
):
    """Full-batch L-BFGS (optax: zoom line search for the strong Wolfe conditions) on
    the first ``n`` rows of X, one ``lax.while_loop``.

    Converged when the largest entry of the gradient is at most ``tol`` (scipy's
    ``gtol``, as scikit-learn's MLP passes it), or when ``n_iter_no_change`` iterations
    running have each lowered the loss by at most ``tol`` (Adam's test, per iteration
    instead of per epoch: on a flat stretch the gradient can stay above ``tol`` while
    the loss has little left to give); else it stops after ``max_iter`` iterations.
    A line search that fails to lower the loss ends the run at the point before it.
    ``verbose`` prints the loss, times ``loss_unit``, every ``verbose`` iterations.
    Returns the parameters, the loss trace, the iteration count and whether a
    convergence test (not ``max_iter`` or a failed search) stopped it."""
    dtype = X.dtype
    weights = (jnp.arange(X.shape[0]) < n).astype(dtype)

    def loss(p):
        return _objective(p, X, weights, n, penalty, activation)

    solver = optax.lbfgs(memory_size=LBFGS_MEMORY)
    # reuses the value and gradient the line search computed at the accepted point
    value_and_grad = optax.value_and_grad_from_state(loss)

    def largest(tree):
        return jnp.max(jnp.stack([jnp.max(jnp.abs(leaf)) for leaf in jax.tree.leaves(tree)]))

    def step(state):
        value, grad = value_and_grad(state.params, state=state.opt_state)
        updates, opt_state = solver.update(
            grad, state.opt_state, state.params, value=value, grad=grad, value_fn=loss
        )
        params = optax.apply_updates(state.params, updates)
        new_value = optax.tree.get(opt_state, "value")
        new_grad = optax.tree.get(opt_state, "grad")
        accepted = new_value <= value  # False for NaN too
        stale = jnp.where(accepted & (value - new_value <= tol), state.stale + 1, 0)
        small_grad = jnp.where(accepted, largest(new_grad), largest(grad)) <= tol
        converged = small_grad | (stale >= n_iter_no_change)
        n_iter = state.n_iter + accepted
        trace = jnp.where(accepted, state.trace.at[state.n_iter].set(new_value), state.trace)
        if verbose:
            show = accepted & (n_iter % verbose == 0)
            jax.debug.callback(_report, show, n_iter, new_value * loss_unit)
        keep = jax.tree.map(lambda a, b: jnp.where(accepted, a, b), params, state.params)
        return _LbfgsState(
            params=keep,
            opt_state=opt_state,
            n_iter=n_iter,
            stale=stale,
            trace=trace,
            converged=converged,
            done=converged | ~accepted | (n_iter >= max_iter),
        )

    start = _LbfgsState(
        params=params,
        opt_state=solver.init(params),
        n_iter=jnp.asarray(0),
        stale=jnp.asarray(0),
        trace=jnp.full((max_iter,), jnp.nan, dtype),
        converged=jnp.asarray(False),
        done=jnp.asarray(False),
    )
    final = jax.lax.while_loop(lambda state: ~state.done, step, start)
    return final.params, final.trace, final.n_iter, final.converged


@program(static_argnames=("activation",))
def _row_errors(X, params, *, activation):
    return jnp.sum((_reconstruct(params, X, activation) - X) ** 2, axis=1)


@program(static_argnames=("activation",))
def _encode(X, params, *, activation):
    return apply_layers(params["encoder"], X, activation)


@program(static_argnames=("activation",))
def _decode(Z, params, *, activation):
    return apply_layers(params["decoder"], Z, activation)


class Autoencoder(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """An autoencoder: MLP encoder to ``n_components`` codes, mirrored MLP decoder back.

    The encoder maps ``d -> hidden_layer_sizes -> n_components`` and the decoder
    ``n_components -> reversed(hidden_layer_sizes) -> d``, with ``activation`` after
    every hidden layer and none on the code or the output.  The code layer has no bias;
    the data are centred at their column means and divided by one global scale (the
    root mean feature variance) before training, and every result is back in data
    units.  With ``hidden_layer_sizes=()`` the network is linear and the optimum is
    PCA's subspace (Baldi & Hornik 1989: the optimal linear autoencoder):
    the decoder spans the leading ``n_components`` principal directions, though not
    with orthonormal, ordered axes.

    Training minimises the mean over rows of the squared reconstruction error
    ``||x - x_hat||^2`` plus ``alpha/2`` times the squared weights divided by the batch
    size (scikit-learn's MLP penalty), with one of scikit-learn's MLP solvers:

    * "lbfgs": L-BFGS on the whole training set, the fit one compiled program (a
      ``lax.while_loop``) that stops on a small gradient or a stalled loss.  On small
      data it reaches the optimum that Adam only circles: the linear autoencoder on
      standardised wine (178 x 13, K = 2) gets PCA's error in ~40 iterations, where
      200 epochs of Adam leave twice that error.
    * "adam": Adam on shuffled mini-batches; each epoch is one compiled program and the
      host stops as scikit-learn's MLP does (``tol``, ``n_iter_no_change``,
      ``early_stopping`` on a validation split).  For large data, where an epoch of
      many mini-batch steps gets further than one full-batch step.

    Parameters
    ----------
    n_components : int, default=2
        Size of the code, ``1 <= n_components <= n_features``.
    hidden_layer_sizes : tuple of int, default=()
        Widths of the encoder's hidden layers (the decoder mirrors them).
    activation : {"relu", "tanh", "logistic", "linear"}, default="relu"
        Activation of the hidden layers (scikit-learn's names; "identity" is accepted
        for "linear").  Irrelevant when there are no hidden layers.
    solver : {"auto", "lbfgs", "adam"}, default="auto"
        "auto" is "lbfgs" when there are at most 5,000 training rows and neither
        ``batch_size`` nor ``early_stopping`` asks for mini-batch epochs (both are
        left at their defaults), "adam" otherwise.  ``early_stopping`` needs "adam".
    learning_rate : {"constant", "adaptive"}, default="constant"
        Adam only.  "constant": Adam's step size stays ``learning_rate_init`` and
        training stops once the loss (or validation score) has not improved by ``tol``
        for ``n_iter_no_change`` epochs.  "adaptive" (scikit-learn's name for SGD's
        schedule): at that point the step size is divided by 5 instead, and training
        stops when it falls below 1e-6.  Adam at a constant step keeps hopping around
        the optimum; the adaptive schedule settles into it.
    learning_rate_init : float, default=1e-3
        Adam's (initial) step size; L-BFGS's comes from its line search.
    batch_size : int or "auto", default="auto"
        Rows per Adam mini-batch; "auto" is ``min(200, n_samples)`` as in scikit-learn.
        L-BFGS always takes the whole training set.
    max_iter : int, default=200
        Maximum number of epochs (Adam) or of iterations (L-BFGS: one accepted step,
        each a full pass for the gradient plus whatever the line search evaluates,
        usually nothing more).
    tol : float, default=1e-4
        Adam: an epoch improves when the training loss falls (or, with
        ``early_stopping``, the validation score rises) by more than ``tol``.  L-BFGS:
        converged when no entry of the gradient exceeds ``tol`` in absolute value
        (scipy's ``gtol``), or when ``n_iter_no_change`` iterations running have each
        lowered the loss by at most ``tol``.  Both in units of the mean feature
        variance (the scale the network trains on).
    early_stopping : bool, default=False
        Adam only.  Hold out ``validation_fraction`` of the rows, stop when their score
        has not improved for ``n_iter_no_change`` epochs, and keep the best parameters.
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=10
    alpha : float, default=1e-4
        L2 penalty on the weights.
    random_state : int, RandomState or None, default=None
        Initial weights, shuffling and the validation split.
    verbose : bool or int, default=False
        Adam: show a progress bar (tqdm) over the epochs.  L-BFGS: print the loss
        every ``verbose`` iterations (every one for True).
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    params_ : dict of ndarray
        The network in training units: ``encoder_W0``, ``encoder_b0``, ...,
        ``decoder_W0``, ...; a layer computes ``h @ W + b``.
    mean_ : ndarray (n_features,)
    scale_ : float
        Training units are ``(X - mean_) / scale_``.
    components_ : ndarray (n_components, n_features)
        Only for a linear network: ``inverse_transform(Z) = Z @ components_ +
        intercept_``, rows spanning the decoder's subspace (not orthonormal).
    intercept_ : ndarray (n_features,)
        Only for a linear network.
    solver_ : {"lbfgs", "adam"}
        The solver that trained the network (what "auto" chose).
    loss_ : float
        Training loss of the last epoch or iteration, in data units (mean squared
        reconstruction error per row, plus the penalty).
    loss_curve_ : ndarray (n_iter_,)
        ``loss_`` after each epoch (Adam: the mean over its mini-batches) or iteration.
    validation_scores_ : ndarray (n_iter_,) or None
        :meth:`score` on the validation rows after each epoch (``early_stopping``).
    best_validation_score_ : float or None
    n_iter_ : int
        Epochs (Adam) or iterations (L-BFGS) run.
    converged_ : bool
        True when a ``tol`` test ended training; False, with a ``ConvergenceWarning``,
        when ``max_iter`` did (or, for L-BFGS, a line search that found no lower loss).

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(100, 4)) @ np.diag([3.0, 2.0, 0.1, 0.1])
    >>> ae = latentlab.Autoencoder(2, random_state=0).fit(X)
    >>> ae.solver_, ae.converged_, ae.transform(X).shape
    ('lbfgs', True, (100, 2))
    """

    _settings = {
        "n_components": Integer(1, None),
        "hidden_layer_sizes": LayerSizes(),
        "activation": Options(*ACTIVATIONS),
        "solver": Options(*SOLVERS, hints={"sgd": "use 'adam' (SGD is not offered)"}),
        "learning_rate": Options(*SCHEDULES),
        "learning_rate_init": Real(0, None, closed="neither"),
        "batch_size": Integer(1, None) | "auto",
        "max_iter": Integer(1, None),
        "tol": Real(0, None),
        "early_stopping": Boolean(),
        "validation_fraction": Real(0, 1, closed="neither"),
        "n_iter_no_change": Integer(1, None),
        "alpha": Real(0, None),
        "random_state": RandomState(),
        "verbose": Verbose(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_components=2,
        *,
        hidden_layer_sizes=(),
        activation="relu",
        solver="auto",
        learning_rate="constant",
        learning_rate_init=1e-3,
        batch_size="auto",
        max_iter=200,
        tol=1e-4,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
        alpha=1e-4,
        random_state=None,
        verbose=False,
        dtype="float64",
    ):
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.solver = solver
        self.learning_rate = learning_rate
        self.learning_rate_init = learning_rate_init
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.alpha = alpha
        self.random_state = random_state
        self.verbose = verbose
        self.dtype = dtype

    # -- fitting ------------------------------------------------------------------------

    def _check_settings(self, n_samples, n_features):
        """The settings against the data (the table is checked on entry to fit)."""
        K = check_n_components(self.n_components, 1, n_features, "n_features")
        hidden = check_layer_sizes("hidden_layer_sizes", self.hidden_layer_sizes)
        if self.solver == "lbfgs" and self.early_stopping:
            raise ValueError(
                "early_stopping needs solver='adam' (or 'auto'): L-BFGS trains on every "
                "row and has no epochs to validate"
            )
        n_val = 0
        if self.early_stopping:
            fraction = float(self.validation_fraction)
            n_val = int(np.ceil(fraction * n_samples))
            if n_val < 1 or n_samples - n_val < 1:
                raise ValueError(
                    f"early_stopping needs at least one training and one validation row; "
                    f"got n_samples={n_samples} with validation_fraction={fraction}"
                )
        n_train = n_samples - n_val
        auto_batch = isinstance(self.batch_size, str) and self.batch_size == "auto"
        batch = min(200, n_train) if auto_batch else min(int(self.batch_size), n_train)
        solver = self.solver
        if solver == "auto":
            small = n_train <= LBFGS_MAX_ROWS and auto_batch and not self.early_stopping
            solver = "lbfgs" if small else "adam"
        return K, hidden, n_val, batch, solver

    def fit(self, X, y=None):
        """Train the network on X (n_samples, n_features); returns self."""
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n, d = X.shape
        K, hidden, n_val, batch, solver = self._check_settings(n, d)
        rng = check_random_state(self.random_state)
        key = jax_key(rng)
        if n_val:
            order = rng.permutation(n)
            X_val, X_train = X[order[:n_val]], X[order[n_val:]]
        else:
            X_val, X_train = None, X
        # one global scale keeps PCA's subspace (and any isotropic geometry) intact
        self.mean_ = X_train.mean(axis=0)
        variance = float(np.mean(X_train.var(axis=0)))
        self.scale_ = float(np.sqrt(variance)) if variance > 0 else 1.0
        n_train = X_train.shape[0]
        rows = row_bucket(n_train)
        with self._precision():
            dtype = jnp.result_type(float)
            train = jnp.asarray(pad_rows((X_train - self.mean_) / self.scale_, rows), dtype)
            val = None if X_val is None else (X_val - self.mean_) / self.scale_
            key, init_key = jax.random.split(key)
            params, opt_state = _init_network(
                init_key, sizes=(d, *hidden, K), activation=self.activation
            )
            penalty = jnp.asarray(self.alpha, dtype)
            if solver == "lbfgs":
                params, curve, converged = self._train_lbfgs(params, train, n_train, penalty)
                scores, best = [], None
            else:
                # a batch holding every real row holds the padding too: one shape per bucket
                batch = rows if batch >= n_train else batch
                params, curve, scores, best, converged = self._train_adam(
                    params, opt_state, train, n_train, val, key, penalty, batch
                )
        if not converged:
            if solver == "lbfgs":
                # short of max_iter, its last line search found no lower loss
                stalled = len(curve) < self.max_iter
                what = "L-BFGS (its line search stalled)" if stalled else "L-BFGS"
                warn_not_converged(self, what, steps="iterations")
            else:
                what = "training (validation score)" if val is not None else "training"
                warn_not_converged(self, what, steps="epochs")
        self.params_ = {
            k: to_numpy(v)
            for part in ("encoder", "decoder")
            for k, v in layers_to_dict(part, params[part]).items()
        }
        self.n_components_ = K
        self.solver_ = solver
        self.loss_curve_ = np.asarray(curve, dtype=float) * self.scale_**2
        self.loss_ = float(self.loss_curve_[-1]) if len(curve) else np.nan
        self.validation_scores_ = np.asarray(scores) if val is not None else None
        self.best_validation_score_ = -best * self.scale_**2 if val is not None else None
        self.n_iter_ = len(curve)
        self.converged_ = converged
        if not hidden or self.activation in LINEAR:
            self._set_linear_map()
        return self

    def _train_lbfgs(self, params, train, n_train, penalty):
        """Full-batch L-BFGS, one compiled program: (params, loss curve, converged)."""
        dtype = train.dtype
        params, trace, n_iter, converged = _lbfgs(
            params,
            train,
            n_train,
            penalty,
            jnp.asarray(self.tol, dtype),
            int(self.n_iter_no_change),
            jnp.asarray(self.scale_**2, dtype),
            activation=self.activation,
            max_iter=int(self.max_iter),
            verbose=int(self.verbose),
        )
        return params, np.asarray(trace)[: int(n_iter)], bool(converged)

    def _train_adam(self, params, opt_state, train, n_train, val, key, penalty, batch):
        """Adam epochs, stopped on the host as scikit-learn's MLP does: (params, loss
        curve, validation scores, best loss or minus score, converged)."""
        dtype = train.dtype
        activation = self.activation
        n_batches = -(-train.shape[0] // batch)
        lr = jnp.asarray(self.learning_rate_init, dtype)
        curve, scores = [], []
        best, best_params, stale, converged = np.inf, params, 0, False
        epochs = range(int(self.max_iter))
        if self.verbose:
            from tqdm.auto import tqdm

            epochs = tqdm(epochs, desc="Autoencoder", unit="epoch")
        for _ in epochs:
            key, epoch_key = jax.random.split(key)
            params, opt_state, loss = _epoch(
                params,
                opt_state,
                train,
                n_train,
                epoch_key,
                lr,
                penalty,
                activation=activation,
                batch_size=batch,
                n_batches=n_batches,
            )
            curve.append(float(loss))
            # what is compared against tol: the training loss, or minus the score of
            # the validation rows (both in training units)
            if val is not None:
                errors = map_rows(_row_errors, val, params, activation=activation)
                current = float(np.mean(np.asarray(errors)))
                scores.append(-current * self.scale_**2)
            else:
                current = curve[-1]
            if self.verbose:
                epochs.set_postfix(loss=curve[-1] * self.scale_**2)
            if current < best - self.tol:
                stale = 0
            else:
                stale += 1
            if current < best:
                best, best_params = current, params
            if stale >= self.n_iter_no_change:
                step = float(lr)
                if self.learning_rate == "constant" or step / STEP_DIVISOR < MIN_STEP:
                    converged = True
                    break
                lr, stale = jnp.asarray(step / STEP_DIVISOR, dtype), 0
        if self.verbose:
            epochs.close()
        if val is not None:
            params = best_params  # scikit-learn keeps the best validation epoch's
        return params, curve, scores, best, converged

    def _set_linear_map(self):
        """``components_``, ``intercept_`` of a linear decoder, in data units."""
        weights, bias = None, None
        for layer in layers_from_dict("decoder", self.params_):
            W, b = layer
            weights = W if weights is None else weights @ W
            bias = b if bias is None else bias @ W + b
        self.components_ = weights * self.scale_
        self.intercept_ = self.mean_ + bias * self.scale_

    # -- fitted map ---------------------------------------------------------------------

    @property
    def _n_features_out(self):
        return self.n_components_

    def _network(self):
        with self._precision():
            dtype = jnp.result_type(float)
            return {
                part: [
                    tuple(jnp.asarray(a, dtype) for a in layer)
                    for layer in layers_from_dict(part, self.params_)
                ]
                for part in ("encoder", "decoder")
            }

    def transform(self, X):
        """The codes of X, (n_samples, n_components)."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        with self._precision():
            Xs = (X - self.mean_) / self.scale_
            codes = map_rows(_encode, Xs, self._network(), activation=self.activation)
            return to_numpy(codes)

    def inverse_transform(self, X):
        """Decode codes (n_samples, n_components) back to data units."""
        check_is_fitted(self)
        Z = check_codes(X, self.n_components_)
        with self._precision():
            out = map_rows(_decode, Z, self._network(), activation=self.activation)
            return self.mean_ + to_numpy(out) * self.scale_

    def score_samples(self, X):
        """Minus each row's squared reconstruction error ``||x - x_hat||^2``."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        with self._precision():
            Xs = (X - self.mean_) / self.scale_
            errors = map_rows(_row_errors, Xs, self._network(), activation=self.activation)
            return -to_numpy(errors) * self.scale_**2

    def score(self, X, y=None):
        """Minus the mean squared reconstruction error per row, in data units (higher
        is better; PCA's counterpart is minus the sum of the discarded eigenvalues)."""
        return float(np.mean(self.score_samples(X)))
