"""Non-negative matrix factorisation X ~ W H, as pure jit-compiled functions.

Losses and solvers, with scikit-learn's objective (so that fits can be compared)::

    frobenius (beta = 2):  0.5 ||X - W H||_F^2
    kullback-leibler (1):  sum_ij X log(X / WH) - X + WH          (generalised KL)
    itakura-saito (0):     sum_ij X / WH - log(X / WH) - 1
    any other beta:        sum_ij (X^b + (b - 1) WH^b - b X WH^(b - 1)) / (b (b - 1))
    penalty:               l1_W |W|_1 + 0.5 l2_W ||W||_F^2 + (the same for H)

(the beta-divergences of Fevotte & Idier 2011, eq. 3-4; beta = 1 and 0 are its limits).

* ``"mu"``, Frobenius: Lee & Seung's (2001) multiplicative updates, W then H, with the
  penalties in the denominators (Fevotte & Idier 2011).
* ``"mu"``, KL: :func:`kl_multiplicative_terms` is *the* KL update, written once and
  shared with pLSA's EM (:mod:`latentlab.models.plsa`).  For ``R = X / WH`` it gives
  ``A = W * (R H^T)`` and ``B = H * (W^T R)``: the expected counts of the Poisson latent
  model ``X_ij = sum_k Z_ijk``, ``Z_ijk ~ Poisson(W_ik H_kj)``.  Without penalties the
  fit takes the exact EM step of that model, ``W <- A``, ``H <- B / rowsum(B)`` (the
  joint M-step: only the products ``colsum(W)_k rowsum(H)_k`` are pinned, to ``c_k``),
  which is monotone, costs one ratio matrix per iteration, and is pLSA's EM step with
  ``W = diag(N) theta``, ``H = Phi`` (Gaussier & Goutte 2005): the same iterates.  With
  penalties, and for ``transform`` (H fixed), Lee & Seung's alternating updates, with
  the penalties in the denominators.
* ``"mu"``, any other beta (``loss="beta"``, beta a traced input: one program for every
  beta): Fevotte & Idier's (2011) maximisation-minimisation updates,
  ``W <- W * ((X * WH^(beta-2)) H^T / (WH^(beta-1) H^T + penalties))^gamma`` and the
  same for H, with their exponent ``gamma = 1 / (2 - beta)`` for beta < 1,
  ``1 / (beta - 1)`` for beta > 2 and 1 between (their Table 2), which makes every
  update non-increasing.  As scikit-learn: the data terms skip entries with
  ``X <= eps``, ``WH`` is raised to at least ``eps`` before a negative power, and for
  beta < 1 entries of W (and of H) below float64's epsilon are set to 0 after each
  update.
* ``"cd"`` (Frobenius only): cyclic coordinate descent, one column of W (then of
  H^T) at a time (Cichocki & Phan 2009; Hsieh & Dhillon 2011), each a closed-form
  projected Newton step for all rows at once.
* ``accelerate`` (Frobenius, both solvers): Gillis & Glineur's (2012) repeated passes.
  A factor's update needs ``X H^T`` and ``H H^T`` (O(ndK)), a pass from them O(nK^2),
  so each update repeats its pass until it stalls; one pass is scikit-learn's.  With
  ``"cd"`` (W and H fitted) also Ang & Gillis's (2019) extrapolation between outer
  iterations, restarted when the objective rises (:func:`penalised_objective` costs no
  product with X): 2,000 x 1,000, K = 10 reaches scikit-learn's objective in 17 outer
  iterations instead of 29 (scikit-learn: 53).

Stopping rules are scikit-learn's: ``"mu"`` every 10 iterations when the drop of
``sqrt(2 loss)`` since the last check is below ``tol`` times its value at the start;
``"cd"`` when the summed projected-gradient violation falls to ``tol`` times the first
iteration's.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.closed_form.pca import randomized_range_finder
from latentlab.inference.programs import program

__all__ = [
    "NMFFit",
    "kl_multiplicative_terms",
    "divergence",
    "beta_divergence",
    "mm_exponent",
    "nndsvd",
    "penalised_objective",
    "fit_nmf",
]

# A zero denominator becomes float32's machine epsilon, as in scikit-learn.
_EPSILON = float(np.finfo(np.float32).eps)
# beta < 1: factor entries below this become 0 after each update (scikit-learn's guard)
_FLOAT64_EPSILON = float(np.finfo(np.float64).eps)
_CHECK_EVERY = 10  # "mu": the loss is read every 10 iterations (it costs an iteration)
_UNROLL_MAX = 16  # "cd": sweeps over at most this many components are unrolled
# accelerate: a factor's passes stop when one moves it by less than this times the first
_INNER_TOL = 0.1
_INNER_ALPHA = 0.5  # passes per update: 1 + alpha * (the Gram products' cost / a pass's)
# accelerate, "cd": Ang & Gillis's (2019) extrapolation parameters (their eta, gamma,
# gamma-bar and beta_0)
_EXTRAPOLATION_SHRINK = 1.5
_BETA_GROWTH = 1.01
_BETA_CAP_GROWTH = 1.005
_BETA_START = 0.5


class NMFFit(NamedTuple):
    W: jax.Array  # (n, K)
    H: jax.Array  # (K, d)
    n_iter: jax.Array  # () iterations taken
    loss: jax.Array  # () the loss at (W, H), penalties excluded
    converged: jax.Array  # () bool: the stopping rule fired before max_iter


def kl_multiplicative_terms(W, H, X):
    """The KL multiplicative update's numerators, shared by KL-NMF and pLSA's EM.

    With ``R = X / (W H)`` where ``X > 0`` (0 elsewhere) returns ``(W * (R H^T),
    H * (W^T R), safe)``, ``safe`` being ``W H`` with 1 where ``X`` is 0: ``X log safe``
    is the data term of the KL loss and of pLSA's log-likelihood (-inf where a count
    has probability 0, whose ratio is set to 0).  In pLSA's terms (``W = theta``,
    ``H = Phi``) the first two are the expected topic counts ``n_dk`` and ``n_kw`` of
    Hofmann's E-step; for the Poisson model of KL-NMF, ``sum_j E[Z_ijk]`` and
    ``sum_i E[Z_ijk]``.  The logarithms are left to the caller: they cost as much as a
    matrix product and are not read at every iteration.
    """
    safe = jnp.where(X > 0, W @ H, 1.0)
    # The barrier keeps XLA from fusing the ratio into both products' operands (it
    # would be computed twice): 0.37 -> 0.24 ms per pLSA step for digits at K = 20.
    ratio = jax.lax.optimization_barrier(jnp.where(safe > 0, X / safe, 0.0))
    return W * (ratio @ H.T), H * (W.T @ ratio), safe


def divergence(X, W, H, loss: str, beta=None, real=None):
    """The loss at (W, H): 0.5 ||X - WH||^2, the generalised KL divergence (0 log 0 =
    0), or (``loss="beta"``) the beta-divergence of :func:`beta_divergence`."""
    if loss == "frobenius":
        return 0.5 * jnp.sum((X - W @ H) ** 2)
    if loss == "beta":
        return beta_divergence(X, W @ H, beta, real)
    WH = W @ H
    observed = X > 0
    safe = jnp.where(observed, WH, 1.0)
    data = jnp.where(observed, X * jnp.log(jnp.where(observed, X, 1.0) / safe), 0.0)
    return jnp.sum(data) - jnp.sum(X) + jnp.sum(WH)


def _real_entries(X, real):
    """The (rows, columns) mask of X's entries that are data, not padding: ``real`` is
    the unpadded shape (traced), None for all of X."""
    if real is None:
        return jnp.ones(X.shape, bool)
    rows = jnp.arange(X.shape[0]) < real[0]
    columns = jnp.arange(X.shape[1]) < real[1]
    return rows[:, None] & columns[None, :]


def beta_divergence(X, WH, beta, real=None):
    """scikit-learn's beta-divergence ``D_beta(X || WH)`` for beta other than 1 and 2
    (traced; beta = 0 is Itakura-Saito).

    The terms in X are summed where ``X > eps`` only (``0^(beta - 1)`` counts as 0),
    with ``WH`` raised to ``eps`` there; ``sum WH^beta`` runs over every entry, and
    Itakura-Saito's ``-1`` per entry over all ``n d`` of them.  ``real`` (the unpadded
    shape) leaves padding out of every sum.
    """
    entries = _real_entries(X, real)
    observed = entries & (X > _EPSILON)
    x = jnp.where(observed, X, 1.0)
    wh = jnp.where(observed, jnp.maximum(WH, _EPSILON), 1.0)
    ratio = x / wh
    itakura_saito = jnp.sum(jnp.where(observed, ratio - jnp.log(ratio), 0.0)) - jnp.sum(entries)
    beta_safe = jnp.where(beta == 0, 0.5, beta)  # the general formula's 0/0 at beta = 0
    # 0^beta: 0 for beta > 0, and X has no zeros for beta < 0 (the estimator refuses
    # them), so only padding has X = WH = 0 there
    counted = entries & ((X > 0) | (WH > 0))
    powers = jnp.where(counted, jnp.where(counted, WH, 1.0) ** beta_safe, 0.0)
    general = (
        jnp.sum(jnp.where(observed, x**beta_safe - beta_safe * x * wh ** (beta_safe - 1), 0.0))
        + (beta_safe - 1) * jnp.sum(powers)
    ) / (beta_safe * (beta_safe - 1))
    return jnp.where(beta == 0, itakura_saito, general)


def mm_exponent(beta):
    """Fevotte & Idier's (2011, Table 2) exponent gamma(beta) of the multiplicative
    update that makes it a maximisation-minimisation step: ``1 / (2 - beta)`` for
    beta < 1, ``1 / (beta - 1)`` for beta > 2, else 1."""
    return jnp.where(beta < 1, 1.0 / (2.0 - beta), jnp.where(beta > 2, 1.0 / (beta - 1.0), 1.0))


def penalised_objective(squared_X, W, H, WtX, penalties):
    """``0.5 ||X - WH||^2`` plus the penalties ``(l1_W, l1_H, l2_W, l2_H)``, from
    ``squared_X = ||X||^2`` and ``WtX = W^T X``: O((n + d) K^2), no product with X."""
    l1_W, l1_H, l2_W, l2_H = penalties
    fit = squared_X - 2.0 * jnp.sum(WtX * H) + jnp.sum((W.T @ W) * (H @ H.T))
    return 0.5 * fit + sum(
        l1 * jnp.sum(F) + 0.5 * l2 * jnp.sum(F * F)
        for F, l1, l2 in ((W, l1_W, l2_W), (H, l1_H, l2_H))
    )


def _nonzero(denominator):
    return jnp.where(denominator == 0, _EPSILON, denominator)


def _mu_kl_w(X, W, H, l1, l2):
    """Lee & Seung's KL update of W (H fixed), penalties in the denominator."""
    numerator, _, _ = kl_multiplicative_terms(W, H, X)  # XLA drops the unused H term
    return numerator / _nonzero(jnp.sum(H, axis=1) + l1 + l2 * W)


def _mu_kl_h(X, W, H, l1, l2):
    """Lee & Seung's KL update of H (W fixed); an all-zero column of W divides by 1."""
    _, numerator, _ = kl_multiplicative_terms(W, H, X)
    column_sums = jnp.sum(W, axis=0)
    column_sums = jnp.where(column_sums == 0, 1.0, column_sums)
    return numerator / _nonzero(column_sums[:, None] + l1 + l2 * H)


def _kl_em_step(X, W, H):
    """One EM step of the Poisson model (pLSA's EM step, up to W's row scale): the
    simultaneous update, H's rows normalised.  A component no count uses keeps H."""
    A, B, _ = kl_multiplicative_terms(W, H, X)
    total = jnp.sum(B, axis=1, keepdims=True)
    return A, jnp.where(total > 0, B / jnp.where(total > 0, total, 1.0), H)


def _beta_weights(X, WH, beta, entries):
    """The multiplicative update's two weight matrices for the beta-divergence:
    ``X * WH^(beta - 2)`` (numerator) and ``WH^(beta - 1)`` (denominator), the
    divergence's gradient in WH being their difference.  As scikit-learn, ``WH`` is
    raised to eps before a negative power; padding weighs 0."""
    below_two = jnp.where(beta < 2, jnp.maximum(WH, _EPSILON), WH)
    below_one = jnp.where(beta < 1, jnp.maximum(WH, _EPSILON), WH)
    numerator = jnp.where(entries, X * below_two ** (beta - 2), 0.0)
    denominator = jnp.where(entries, below_one ** (beta - 1), 0.0)
    return numerator, denominator


def _mm_step(F, numerator, denominator, gamma, beta, l1, l2):
    """``F * (numerator / (denominator + l1 + l2 F))^gamma``, a zero denominator read as
    eps; for beta < 1 entries below float64's epsilon become 0 (scikit-learn's guard)."""
    ratio = numerator / _nonzero(denominator + l1 + l2 * F)
    F = F * jnp.where(gamma == 1, ratio, ratio**gamma)
    return jnp.where((beta < 1) & (F < _FLOAT64_EPSILON), 0.0, F)


def _mu_beta_w(X, W, H, beta, gamma, entries, l1, l2):
    """Fevotte & Idier's update of W (H fixed) for the beta-divergence, penalties in
    the denominator."""
    numerator, denominator = _beta_weights(X, W @ H, beta, entries)
    return _mm_step(W, numerator @ H.T, denominator @ H.T, gamma, beta, l1, l2)


def _mu_beta_h(X, W, H, beta, gamma, entries, l1, l2):
    """Fevotte & Idier's update of H (W fixed) for the beta-divergence."""
    numerator, denominator = _beta_weights(X, W @ H, beta, entries)
    return _mm_step(H, W.T @ numerator, W.T @ denominator, gamma, beta, l1, l2)


def _cd_sweep(Ht, WtW, WtX):
    """One cyclic sweep over H's rows for 0.5 ||X - WH||^2 + penalties, W fixed.

    The columns of H are independent given its other rows, so row t is one vector
    step: gradient ``(W^T W H - W^T X)_t`` (the penalties already shift the diagonal of
    ``WtW`` and the entries of ``WtX``), Newton step clipped at 0.  W's sweep is this
    one on the transposes (``W^T``, ``H H^T``, ``H X^T``): rows keep the vectors
    contiguous.  Returns H and the summed projected-gradient violation before each
    row's step.
    """
    K = Ht.shape[0]

    def row(t, carry):
        H, violation = carry
        h = jax.lax.dynamic_index_in_dim(H, t, axis=0, keepdims=False)
        wtw = jax.lax.dynamic_index_in_dim(WtW, t, axis=0, keepdims=False)
        gradient = wtw @ H - jax.lax.dynamic_index_in_dim(WtX, t, axis=0, keepdims=False)
        projected = jnp.where(h == 0, jnp.minimum(gradient, 0.0), gradient)
        hessian = wtw[t]
        step = jnp.where(hessian != 0, gradient / jnp.where(hessian != 0, hessian, 1.0), 0.0)
        h = jnp.where(hessian != 0, jnp.maximum(h - step, 0.0), h)
        H = jax.lax.dynamic_update_index_in_dim(H, h, t, axis=0)
        return H, violation + jnp.sum(jnp.abs(projected))

    # unrolled for few components: static slices, and XLA fuses across rows
    unroll = K <= _UNROLL_MAX
    return jax.lax.fori_loop(0, K, row, (Ht, jnp.zeros((), Ht.dtype)), unroll=unroll)


def _mu_frobenius_pass(H, WtW, WtX, l1, l2):
    """Lee & Seung's H update for 0.5 ||X - WH||^2 plus the penalties on H, from
    ``WtW = W^T W`` and ``WtX = W^T X`` (W's: the same on the transposes)."""
    return H * WtX / _nonzero(WtW @ H + l1 + l2 * H), jnp.zeros((), H.dtype)


def _repeat_passes(update, W, n_passes, inner_tol):
    """Up to ``n_passes`` passes ``W <- update(W)`` on the same Gram matrices.

    Gillis & Glineur (2012): one pass costs ``2 n K^2``, forming ``X H^T`` and
    ``H H^T`` for it ``2 n d K``, so repeating the cheap pass until it moves W by at
    most ``inner_tol`` times the first pass's move buys much more progress per
    product with X.  Returns W and the first pass's second output (the violation).
    """
    W1, first = update(W)
    if n_passes == 1:
        return W1, first
    limit = inner_tol**2 * jnp.sum((W1 - W) ** 2)

    def cond(state):
        k, _, moved = state
        return (k < n_passes) & (moved > limit)

    def body(state):
        k, W, _ = state
        W_next, _ = update(W)
        return k + 1, W_next, jnp.sum((W_next - W) ** 2)

    _, W, _ = jax.lax.while_loop(cond, body, (jnp.asarray(1), W1, limit + 1.0))
    return W, first


def _inner_passes(n_columns: int, n_components: int, accelerate: bool) -> int:
    """Passes per update of a factor ``(rows, K)`` whose products with X have
    ``n_columns``: ``1 + alpha rho`` with Gillis & Glineur's ``alpha = 0.5`` and
    ``rho = 1 + n_columns / K``, the cost of the Gram products over one pass; 1
    (scikit-learn's algorithm) without acceleration."""
    if not accelerate:
        return 1
    return 1 + int(_INNER_ALPHA * (1 + n_columns / max(n_components, 1)))


@program(static_argnames=("loss", "solver", "update_H", "em_step", "accelerate"))
def fit_nmf(
    X,
    W,
    H,
    penalties,
    tol,
    max_iter,
    beta=None,
    real=None,
    *,
    loss: str,
    solver: str,
    update_H: bool = True,
    em_step: bool = False,
    accelerate: bool = False,
) -> NMFFit:
    """Fit W (and H, unless ``update_H`` is False) from (W, H): one compiled loop.

    ``penalties`` is ``(l1_W, l1_H, l2_W, l2_H)``, already scaled as scikit-learn
    scales ``alpha_W``/``alpha_H`` (by the number of features and samples).
    ``max_iter`` is traced (changing it does not recompile).
    ``loss`` is "frobenius", "kullback-leibler" or "beta": the beta-divergence for the
    traced ``beta`` (any value but 1 and 2, which have the two losses above; one
    program serves every beta), multiplicative updates only.  ``real``: the shape of X
    without its zero padding (``loss="beta"`` leaves the padding out; the other losses
    need not: zeros there are fixed points and add nothing); None: all of X.
    ``em_step`` (KL, ``"mu"``, H updated, no penalties): the simultaneous EM step of
    :func:`_kl_em_step` instead of the alternating updates.
    ``accelerate`` (Frobenius): each factor's update repeats its cheap pass on the
    same Gram matrices (:func:`_repeat_passes`); False is scikit-learn's algorithm.
    """
    l1_W, l1_H, l2_W, l2_H = (jnp.asarray(p, X.dtype) for p in penalties)
    n, d = X.shape
    K = W.shape[1]
    passes_W = _inner_passes(d, K, accelerate)
    passes_H = _inner_passes(n, K, accelerate)
    eye = jnp.eye(K, dtype=X.dtype)
    if loss == "beta":
        beta = jnp.asarray(beta, X.dtype)
        gamma = mm_exponent(beta)
        entries = _real_entries(X, real)

    def frobenius_update(H, W, l1, l2, passes, WtX):
        """H's update for W fixed (W's: the same on the transposes); ``WtX`` = W^T X."""
        WtW = W.T @ W
        if solver == "cd":  # the penalties shift the Gram matrices
            update = lambda H: _cd_sweep(H, WtW + l2 * eye, WtX - l1)  # noqa: E731
        else:
            update = lambda H: _mu_frobenius_pass(H, WtW, WtX, l1, l2)  # noqa: E731
        return _repeat_passes(update, H, passes, _INNER_TOL)

    def frobenius_iteration(W, H):
        Wt, violation = frobenius_update(W.T, H.T, l1_W, l2_W, passes_W, H @ X.T)
        W = Wt.T
        if update_H:
            H, more = frobenius_update(H, W, l1_H, l2_H, passes_H, W.T @ X)
            violation = violation + more
        return W, H, violation

    def mu_iteration(W, H):
        if loss == "beta":
            W = _mu_beta_w(X, W, H, beta, gamma, entries, l1_W, l2_W)
            if update_H:
                H = _mu_beta_h(X, W, H, beta, gamma, entries, l1_H, l2_H)
            return W, H
        if loss == "kullback-leibler":
            if em_step and update_H:
                return _kl_em_step(X, W, H)
            W = _mu_kl_w(X, W, H, l1_W, l2_W)
            return W, (_mu_kl_h(X, W, H, l1_H, l2_H) if update_H else H)
        W, H, _ = frobenius_iteration(W, H)
        return W, H

    def error(W, H):  # scikit-learn's reconstruction error, sqrt(2 loss)
        return jnp.sqrt(2.0 * jnp.maximum(divergence(X, W, H, loss, beta, real), 0.0))

    extrapolate = solver == "cd" and accelerate and update_H
    squared_X = jnp.sum(X * X) if extrapolate else None

    def extrapolated_iteration(W, H, points):
        """Ang & Gillis (2019): each factor's update starts from the extrapolated point
        ``F + beta (F - F_previous)`` (W's against the extrapolated H, H's against the
        new W, so the objective costs no product with X); a rise of the objective
        restarts from the plain iterates with a smaller beta, a fall lets beta grow."""
        W_hat, H_hat, last, beta, beta_cap = points
        Wt, violation = frobenius_update(W_hat.T, H_hat.T, l1_W, l2_W, passes_W, H_hat @ X.T)
        W1 = Wt.T
        WtX = W1.T @ X
        H1, more = frobenius_update(H_hat, W1, l1_H, l2_H, passes_H, WtX)
        current = penalised_objective(squared_X, W1, H1, WtX, (l1_W, l1_H, l2_W, l2_H))
        rose = current > last
        beta, beta_cap = (
            jnp.where(
                rose, beta / _EXTRAPOLATION_SHRINK, jnp.minimum(beta_cap, _BETA_GROWTH * beta)
            ),
            jnp.where(rose, beta, jnp.minimum(1.0, _BETA_CAP_GROWTH * beta_cap)),
        )
        step = jnp.where(rose, 0.0, beta)
        points = (W1 + step * (W1 - W), H1 + step * (H1 - H), current, beta, beta_cap)
        return W1, H1, violation + more, points

    # state: iteration, W, H, reference (the error at the start for "mu", the first
    # sweep's violation for "cd"), the error at the last check, done, and with
    # extrapolation the points the next updates start from, the objective and beta
    reference = error(W, H) if solver == "mu" else jnp.zeros((), X.dtype)
    points = ()
    if extrapolate:
        points = (
            W,
            H,
            jnp.asarray(jnp.inf, X.dtype),
            *(jnp.asarray(b, X.dtype) for b in (_BETA_START, 1.0)),
        )
    state = (jnp.asarray(0), W, H, reference, reference, jnp.asarray(False), points)

    def cond(state):
        i, _, _, _, _, done, _ = state
        return (i < max_iter) & ~done

    def body(state):
        i, W, H, reference, previous, _, points = state
        i = i + 1
        if solver == "cd":
            if extrapolate:
                W, H, violation, points = extrapolated_iteration(W, H, points)
            else:
                W, H, violation = frobenius_iteration(W, H)
            reference = jnp.where(i == 1, violation, reference)
            done = (reference == 0) | (violation <= tol * reference)
            return i, W, H, reference, previous, done, points
        W, H = mu_iteration(W, H)

        def check():
            current = error(W, H)
            return current, (tol > 0) & ((previous - current) / reference < tol)

        current, done = jax.lax.cond(
            i % _CHECK_EVERY == 0, check, lambda: (previous, jnp.asarray(False))
        )
        return i, W, H, reference, current, done, points

    n_iter, W, H, _, _, done, _ = jax.lax.while_loop(cond, body, state)
    return NMFFit(W, H, n_iter, divergence(X, W, H, loss, beta, real), done)


# ----------------------------------------------------------------------------- starts


@program(static_argnames=("n_components", "n_oversamples", "n_iter"))
def nndsvd(X, key, *, n_components: int, n_oversamples: int = 10, n_iter: int = 4):
    """NNDSVD start (Boutsidis & Gallopoulos 2008) from a randomized truncated SVD.

    Each singular pair after the first is split into its positive and negative parts
    and the pair with the larger product of norms is kept (so the result does not
    depend on the SVD's signs); entries below 1e-6 become 0 (``nndsvda``/``nndsvdar``
    fill them afterwards).  The SVD is Halko, Martinsson & Tropp's (Alg. 4.4,
    ``n_oversamples`` extra columns, ``n_iter`` power iterations), as scikit-learn's.
    Zero rows and columns of X (padding) give zero rows of W and columns of H.
    """
    n, d = X.shape
    size = min(n_components + n_oversamples, n, d)
    Q = randomized_range_finder(
        lambda M: X @ M, lambda M: X.T @ M, key, n, d, size, n_iter, X.dtype
    )
    Ub, S, Vt = jnp.linalg.svd(Q.T @ X, full_matrices=False)
    U, S, V = (Q @ Ub)[:, :n_components], S[:n_components], Vt[:n_components]

    up, un = jnp.maximum(U, 0.0), jnp.maximum(-U, 0.0)
    vp, vn = jnp.maximum(V, 0.0), jnp.maximum(-V, 0.0)
    up_norm, un_norm = jnp.linalg.norm(up, axis=0), jnp.linalg.norm(un, axis=0)
    vp_norm, vn_norm = jnp.linalg.norm(vp, axis=1), jnp.linalg.norm(vn, axis=1)
    positive = up_norm * vp_norm > un_norm * vn_norm
    sigma = jnp.where(positive, up_norm * vp_norm, un_norm * vn_norm)
    u = jnp.where(positive, up / _safe(up_norm), un / _safe(un_norm))
    v = jnp.where(positive[:, None], vp / _safe(vp_norm)[:, None], vn / _safe(vn_norm)[:, None])
    scale = jnp.sqrt(S * sigma)
    W, H = u * scale, v * scale[:, None]
    # the leading pair is non-negative up to sign (Perron-Frobenius): used as it is
    W = W.at[:, 0].set(jnp.sqrt(S[0]) * jnp.abs(U[:, 0]))
    H = H.at[0].set(jnp.sqrt(S[0]) * jnp.abs(V[0]))
    return jnp.where(W < 1e-6, 0.0, W), jnp.where(H < 1e-6, 0.0, H)


def _safe(norms):
    return jnp.where(norms > 0, norms, 1.0)
