"""Factor rotations by gradient projection (GPA), the criterion's gradient by JAX.

A loadings matrix ``A`` (d x K, e.g. an unrotated factor-analysis solution) is
rotated to a pattern ``Λ`` that minimises a simplicity criterion ``Q(Λ)``; the model
``A Aᵀ`` (the common part of the covariance) never changes.

Conventions (Jennrich 2001, 2002; Bernaards & Jennrich 2005):

``orthogonal``  ``Λ = A T`` with ``T`` orthogonal, ``Φ = I``.
``oblique``     ``Λ = A (Tᵀ)⁻¹`` with ``T``'s columns of unit length and the factor
                correlations ``Φ = TᵀT``; the structure (factor-variable correlations
                for standardised data) is ``ΛΦ``.

Both give ``Λ Φ Λᵀ = A Aᵀ``.  Latents ``z`` with ``x = A z + noise`` and
``cov(z) = I`` map to the rotated factors ``f = Tᵀ z`` (``cov(f) = TᵀT = Φ``, and
``Λ f = A (Tᵀ)⁻¹ Tᵀ z = A z``; for orthogonal ``T``, ``(Tᵀ)⁻¹ = T``).  This is the
convention of GPArotation, statsmodels' ``rotate_factors`` and factor_analyzer's
``Rotator`` (its ``rotation_`` is this ``T``).

The iteration is Jennrich's gradient projection: the gradient ``Gq = ∂Q/∂Λ`` is
``jax.grad`` of the criterion, carried to ``T`` by the chain rule (``G = Aᵀ Gq``
orthogonal, ``G = -(Λᵀ Gq T⁻¹)ᵀ`` oblique), projected onto the tangent space of the
orthogonal group (``G - T sym(TᵀG)``) or of the unit-column matrices
(``G - T diag(1ᵀ(T∘G))``), and a step ``T - αG_p`` is mapped back (nearest orthogonal
matrix by SVD; columns rescaled to unit length) with Bernaards & Jennrich's step size:
doubled at each iteration, halved (up to 10 times) until the criterion falls by
``α s²/2`` (after 10 halvings the step is taken anyway).  One change: where the
criterion's change is within its round-off (64 ulps of its value; near the optimum,
``s`` ~ 1e-8, a sufficient decrease cannot be seen) a step is accepted when it
reduces ``s`` instead, so that ``s`` goes on falling well below 1e-8 (the plain rule
stalls there, as GPArotation's does).  It stops when the projected gradient's
Frobenius norm ``s`` is below ``tol``.  The loop is one ``jax.lax.while_loop``,
compiled once per criterion, kind and shape (the criterion's numbers -- gamma,
epsilon, target -- are inputs, not constants, so changing them does not recompile),
run in float64.

Criteria (all minimised; ``L = Λ``, ``L² = L∘L``, ``N = 11ᵀ - I`` (K x K),
``C = 11ᵀ/d`` (d x d)):

``orthomax(γ)``  ``-¼ Σ_j [Σ_i l_ij⁴ - (γ/d)(Σ_i l_ij²)²]``: Harman's orthomax, the
                 parameterisation of statsmodels' ``orthomax``: ``γ = 0`` quartimax,
                 ``γ = 1`` varimax (Kaiser 1958), ``γ = K/2`` equamax.  Under
                 orthogonal rotation it equals the Crawford-Ferguson criterion with
                 ``κ = γ/d`` up to a constant (GPArotation's ``cfT``; equamax is
                 ``κ = K/(2d)``; statsmodels' own ``"equamax"`` takes ``γ = 1/d``,
                 which is not equamax).  Orthogonal only: under oblique rotation
                 these criteria are unbounded below (loadings grow without bound as
                 ``T`` nears singularity), so ``oblique=True`` is refused.
``oblimin(γ)``   ``¼ ⟨L², (I - γC) L² N⟩`` (GPArotation's ``vgQ.oblimin``,
                 statsmodels' ``oblimin``); ``γ = 0`` quartimin.  Oblique by default.
``geomin(ε)``    ``Σ_i exp((1/K) Σ_j log(l_ij² + ε))`` (Yates 1987; GPArotation's
                 ``vgQ.geomin``, factor_analyzer's ``geomin_*`` with ``delta = ε``).
                 Oblique by default.
``target``       ``‖W∘(Λ - H)‖²`` (GPArotation's ``vgQ.target`` / ``vgQ.pst``;
                 statsmodels' criterion is half this); ``W = 1`` for ``target``, the
                 0/1 mask of the entries that count for ``partial_target`` (Browne
                 2001).  Orthogonal by default.
``custom``       any JAX-differentiable ``criterion(Λ) -> scalar``.

``promax`` is not a GPA rotation: varimax, then Hendrickson & White's (1964) target
``P = X∘|X|^(κ-1)`` of the varimax pattern ``X``, the least-squares ``U`` with
``XU ≈ P``, its columns rescaled so that ``Φ`` has a unit diagonal, ``Λ = XU``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from latentlab.inference.programs import program

__all__ = ["ROTATION_METHODS", "Rotation", "rotate", "rotation_criterion", "rotation_objective"]

ORTHOGONAL_METHODS = ("varimax", "quartimax", "equamax", "orthomax")
OBLIQUE_METHODS = ("oblimin", "quartimin", "geomin", "promax")
ROTATION_METHODS = ORTHOGONAL_METHODS + OBLIQUE_METHODS + ("target", "partial_target", "custom")

# the methods that can be run either way, and their default kind
_DEFAULT_OBLIQUE = {
    "oblimin": True,
    "quartimin": True,
    "geomin": True,
    "target": False,
    "partial_target": False,
    "custom": False,
}
# Bernaards & Jennrich (2005): up to 10 halvings of the step after the first try
_MAX_HALVINGS = 10
# criterion changes within this many ulps of its value count as round-off
_ROUNDOFF_ULPS = 64
# an oblique T closer to singular than this condition number is a degenerate solution
_MAX_CONDITION = 1e12


class Rotation(NamedTuple):
    """The result of :func:`rotate` (NumPy float64 arrays)."""

    loadings: np.ndarray  # (d, K) pattern Λ
    rotation_matrix: np.ndarray  # (K, K) T: Λ = A T (orthogonal) or A (Tᵀ)⁻¹ (oblique)
    factor_correlation: np.ndarray  # (K, K) Φ = TᵀT (identity when orthogonal)
    structure: np.ndarray  # (d, K) ΛΦ
    criterion: float  # the minimised criterion at the solution
    n_iter: int
    converged: bool
    method: str
    oblique: bool


# ----------------------------------------------------------------------------- criteria


def rotation_criterion(name, L, gamma=0.0, epsilon=0.01, target=None, weights=None):
    """The value of a built-in criterion (``"orthomax"``, ``"oblimin"``, ``"geomin"``
    or ``"target"``; see the module docstring) at the pattern ``L`` (d, K), in its
    minimised convention.  ``name`` may also be a callable ``f(L) -> scalar``.
    Traceable (JAX); ``target``/``weights`` (d, K) are used by ``"target"`` only."""
    if callable(name):
        value = jnp.asarray(name(L))
        if value.shape != ():
            raise ValueError(f"criterion must return a scalar, got an array of shape {value.shape}")
        return value.astype(L.dtype)
    L2 = L * L
    if name == "orthomax":
        column_ss = jnp.sum(L2, axis=0)
        return -0.25 * (jnp.sum(L2 * L2) - gamma / L.shape[0] * jnp.sum(column_ss * column_ss))
    if name == "oblimin":
        off = jnp.sum(L2, axis=1, keepdims=True) - L2  # L² N
        off = off - gamma * jnp.mean(off, axis=0, keepdims=True)  # (I - γC) L² N
        return 0.25 * jnp.sum(L2 * off)
    if name == "geomin":
        return jnp.sum(jnp.exp(jnp.mean(jnp.log(L2 + epsilon), axis=1)))
    if name == "target":
        residual = L - target if weights is None else weights * (L - target)
        return jnp.sum(residual * residual)
    raise ValueError(f"Unknown criterion {name!r}")


# ----------------------------------------------------------------------------- GPA


@program(static_argnames=("criterion", "oblique"))
def _gpa(A, T0, gamma, epsilon, target, weights, tol, max_iter, *, criterion, oblique):
    """Gradient projection from ``T0``: returns ``(T, Q, s, n_iter)``."""

    def value_and_gradient(L):
        return jax.value_and_grad(
            lambda L: rotation_criterion(criterion, L, gamma, epsilon, target, weights)
        )(L)

    def pattern(T):
        return jnp.linalg.solve(T, A.T).T if oblique else A @ T

    def gradient(T, L, Gq):  # ∂Q/∂T by the chain rule
        return -jnp.linalg.solve(T.T, Gq.T @ L) if oblique else A.T @ Gq

    def project(T, G):
        if oblique:
            return G - T * jnp.sum(T * G, axis=0)
        M = T.T @ G
        return G - T @ (0.5 * (M + M.T))

    def retract(X):
        if oblique:
            return X / jnp.sqrt(jnp.sum(X * X, axis=0))
        U, _, Vt = jnp.linalg.svd(X, full_matrices=False)
        return U @ Vt

    def evaluate(T):
        L = pattern(T)
        f, Gq = value_and_gradient(L)
        Gp = project(T, gradient(T, L, Gq))
        return f, Gp, jnp.sqrt(jnp.sum(Gp * Gp))

    def step(state):
        T, f, Gp, s, alpha, it = state
        slack = _ROUNDOFF_ULPS * jnp.finfo(A.dtype).eps * jnp.abs(f)

        def trial(alpha):
            Tn = retract(T - alpha * Gp)
            fn, Gpn, sn = evaluate(Tn)
            # the sufficient decrease of Bernaards & Jennrich; but where the criterion
            # changes by less than its round-off (near the optimum, |Gp| ~ sqrt(eps)),
            # its values cannot tell steps apart: a smaller projected gradient instead
            in_noise = jnp.abs(fn - f) <= slack
            ok = jnp.where(in_noise, sn < s, fn < f - 0.5 * s * s * alpha)
            return Tn, fn, Gpn, sn, ok

        def halve(inner):
            i, alpha, *_ = inner
            return (i + 1, 0.5 * alpha, *trial(0.5 * alpha))

        _, alpha, Tn, fn, Gpn, sn, _ = jax.lax.while_loop(
            lambda inner: (~inner[-1]) & (inner[0] < _MAX_HALVINGS),
            halve,
            (jnp.asarray(0), 2.0 * alpha, *trial(2.0 * alpha)),
        )
        # as Bernaards & Jennrich: the last (smallest) step is taken even if it failed
        return Tn, fn, Gpn, sn, alpha, it + 1

    def keep_going(state):
        *_, s, _, it = state
        return (s >= tol) & (it < max_iter)

    f, Gp, s = evaluate(T0)
    one = jnp.ones((), A.dtype)
    T, f, _, s, _, it = jax.lax.while_loop(keep_going, step, (T0, f, Gp, s, one, jnp.asarray(0)))
    return T, f, s, it


# ----------------------------------------------------------------------------- helpers


def _random_orthogonal(rng, K):
    """A Haar-distributed random orthogonal K x K matrix (QR of a Gaussian matrix)."""
    Q, R = np.linalg.qr(rng.standard_normal((K, K)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def _canonical(L, T, Phi):
    """Columns by decreasing sum of squared loadings, each with a positive sum; the same
    signed permutation applied to T's columns and to Φ keeps every convention exact."""
    order = np.argsort(-np.sum(L * L, axis=0), kind="stable")
    signs = np.where(np.sum(L[:, order], axis=0) < 0, -1.0, 1.0)
    L = L[:, order] * signs
    T = T[:, order] * signs
    Phi = Phi[np.ix_(order, order)] * np.outer(signs, signs)
    return L, T, Phi


def _check_matrix(name, value, shape, *, allow_nan=False):
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be a numeric array: {error}") from None
    if array.shape != shape:
        raise ValueError(f"{name} must have the loadings' shape {shape}, got {array.shape}")
    bad = np.isinf(array) if allow_nan else ~np.isfinite(array)
    if bad.any():
        raise ValueError(f"{name} holds non-finite values")
    return array


def _check_loadings(loadings):
    try:
        A = np.array(loadings, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"loadings must be a numeric array: {error}") from None
    if A.ndim != 2:
        raise ValueError(f"loadings must be a 2-D (d, K) array, got {A.ndim} dimension(s)")
    d, K = A.shape
    if d == 0 or K == 0:
        raise ValueError(f"loadings must have at least one row and one column, got {A.shape}")
    if K > d:
        raise ValueError(f"loadings have more columns (factors K={K}) than rows (d={d})")
    if not np.isfinite(A).all():
        raise ValueError("loadings hold non-finite values (NaN or inf)")
    return A


def _real(name, value, *, low=-np.inf, high=np.inf, low_open=False):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    below = value <= low if low_open else value < low
    if not np.isfinite(value) or below or value > high:
        bracket = "(" if low_open else "["
        raise ValueError(f"{name}={value} is out of range {bracket}{low}, {high}]")
    return value


def _best_start(A, starts, criterion, oblique, gamma, epsilon, H, W, tol, max_iter):
    """Run the GPA from each start and keep the first of the least criterion among the
    usable solutions: ``(T, Q, s, n_iter)``, ``T`` None when none is usable.

    A warm call costs the compiled loop and little else: the NumPy arrays and scalars
    go to the jitted program as they are (``jnp.asarray`` on the host would run a
    small conversion program per argument), every start is dispatched before any
    result is read, and the results are read with ``np.asarray`` (``jax.device_get``
    costs more).  Each start is a call of the same program (one compile per
    criterion, kind and shape, whatever ``n_starts``).  ``jax.vmap`` over the starts
    gives the same numbers but would compile once more per number of starts, and on
    a CPU it is no faster (measured on 30 x 5 loadings, 5-10 starts: oblimin ~10%
    faster, geomin ~35% slower): the batch's loop runs until its slowest start
    stops, the others' steps computed and discarded.
    """
    d, K = A.shape
    run = _gpa.for_work(d * K)
    f64 = np.float64
    with jax.enable_x64(True):
        numbers = (f64(gamma), f64(epsilon), H, W, f64(tol), np.int64(max_iter))
        runs = [run(A, T0, *numbers, criterion=criterion, oblique=oblique) for T0 in starts]
    best = (None, np.inf, np.inf, 0)
    for T, f, s, it in runs:
        T, f = np.asarray(T), float(f)
        # an oblique criterion unbounded below drives T to singularity (a finite
        # orthogonal T, the SVD's, has condition number 1)
        regular = np.linalg.cond(T) < _MAX_CONDITION if oblique else np.isfinite(T).all()
        usable = np.isfinite(f) and regular
        if usable and (best[0] is None or f < best[1]):
            best = (np.asarray(T, dtype=np.float64), f, float(s), int(it))
    return best


# ----------------------------------------------------------------------------- rotate


def rotate(
    loadings,
    method="varimax",
    *,
    oblique=None,
    gamma=None,
    kappa=4.0,
    epsilon=0.01,
    target=None,
    target_weights=None,
    criterion=None,
    normalize=False,
    n_starts=1,
    random_state=None,
    tol=1e-9,
    max_iter=1000,
) -> Rotation:
    """Rotate a loadings matrix to simple structure.

    Parameters
    ----------
    loadings : array-like of shape (d, K)
        The unrotated loadings ``A`` (finite, ``K <= d``).
    method : str, default="varimax"
        Orthogonal: ``"varimax"``, ``"quartimax"``, ``"equamax"``, ``"orthomax"``
        (``gamma`` required).  Oblique by default: ``"oblimin"``, ``"quartimin"``,
        ``"geomin"``, ``"promax"``.  Orthogonal by default: ``"target"``,
        ``"partial_target"``, ``"custom"`` (with ``criterion``).  The criteria are
        defined in the module docstring.
    oblique : bool, optional
        The kind of rotation, overriding the method's default where the criterion can
        be used both ways (oblimin, quartimin, geomin, target, partial_target,
        custom).  The orthomax family is orthogonal only (its criteria are unbounded
        below under oblique rotation) and promax oblique only: the other choice is
        refused.
    gamma : float, optional
        ``"orthomax"``: required, ``>= 0`` (0 quartimax, 1 varimax, K/2 equamax:
        Harman's and statsmodels' parameterisation, ``κ_CF = γ/d``).  ``"oblimin"``:
        default 0 (quartimin), at most 1 (0.5 biquartimin).  Not accepted by other
        methods.
    kappa : float, default=4.0
        Promax's power (Hendrickson & White's ``m``), ``>= 1``.
    epsilon : float, default=0.01
        Geomin's ``ε > 0``.
    target : array-like of shape (d, K), optional
        The target ``H`` of ``"target"`` and ``"partial_target"`` (required there).
        For ``"partial_target"``, entries whose weight is 0 may be NaN.
    target_weights : array-like of shape (d, K), optional
        ``"partial_target"`` only (required): 0/1 or boolean, the entries that count.
    criterion : callable, optional
        ``"custom"`` only (required): ``criterion(L) -> scalar``, a JAX-differentiable
        function of the (d, K) pattern to be minimised.  The program is compiled once
        per callable object (pass the same function again to reuse it).
    normalize : bool, default=False
        Kaiser (1958) normalization: rows of ``A`` divided by their norms before the
        rotation and multiplied back after (zero rows left as they are); ``T`` and
        ``Φ`` are those of the normalised rotation, which are the same for ``A``.
    n_starts : int, default=1
        Starts of the GPA: the identity, then random orthogonal matrices from
        ``random_state``; the solution with the least criterion is kept.
    random_state : int, numpy.random.Generator or None
        Seed of the random starts (``numpy.random.default_rng``).
    tol : float, default=1e-9
        Convergence: the Frobenius norm of the projected gradient is below ``tol``
        (Bernaards & Jennrich 2005).  An absolute bound, made for loadings of order
        one (correlation-scale); loadings of a much larger scale need a larger one.
    max_iter : int, default=1000
        The most GPA iterations per start.

    Returns
    -------
    Rotation
        ``loadings`` Λ (d, K), ``rotation_matrix`` T, ``factor_correlation``
        Φ = TᵀT, ``structure`` ΛΦ, ``criterion`` (minimised, of the normalised rows
        when ``normalize``), ``n_iter``, ``converged``, ``method``, ``oblique``.
        Columns are ordered by decreasing sum of squared loadings and signed so that
        each sums to a positive number (the same signed permutation applied to T and
        Φ), so ``Λ = A T`` (orthogonal) or ``Λ = A (Tᵀ)⁻¹`` (oblique) and
        ``ΛΦΛᵀ = AAᵀ`` hold exactly.  Not for the target methods, whose columns are
        the target's, nor for a custom criterion whose value would change.  For
        ``"promax"``, ``criterion``, ``n_iter`` and ``converged`` are those of its
        varimax stage.  ``K = 1`` returns the sign-canonical loadings with
        ``T = [[±1]]``.

    Notes
    -----
    ``promax`` follows factor_analyzer's ``Rotator(method="promax")``, which is
    ``psych::kaiser(f, rotate="Promax")`` when ``normalize=True``: the whole of promax
    (varimax and the power target) is computed on the Kaiser-normalised rows.  R's
    ``stats::promax`` (and ``psych::Promax``) build the target from de-normalised
    Kaiser-varimax loadings, a mixture of the two.

    References
    ----------
    Bernaards, C. A. & Jennrich, R. I. (2005). Gradient projection algorithms and
    software for arbitrary rotation criteria in factor analysis. Educational and
    Psychological Measurement 65, 676-696.
    Browne, M. W. (2001). An overview of analytic rotation in exploratory factor
    analysis. Multivariate Behavioral Research 36, 111-150.
    Hendrickson, A. E. & White, P. O. (1964). Promax: a quick method for rotation to
    oblique simple structure. British Journal of Statistical Psychology 17, 65-70.
    Jennrich, R. I. (2001). A simple general procedure for orthogonal rotation.
    Psychometrika 66, 289-306.
    Jennrich, R. I. (2002). A simple general method for oblique rotation.
    Psychometrika 67, 7-19.
    Kaiser, H. F. (1958). The varimax criterion for analytic rotation in factor
    analysis. Psychometrika 23, 187-200.
    Yates, A. (1987). Multivariate Exploratory Data Analysis: A Perspective on
    Exploratory Factor Analysis. State University of New York Press.

    Examples
    --------
    >>> import numpy as np
    >>> from latentlab.closed_form.rotation import rotate
    >>> A = np.array([[0.7, 0.4], [0.6, 0.5], [0.7, 0.3],
    ...               [0.5, -0.5], [0.4, -0.6], [0.6, -0.4]])
    >>> r = rotate(A, "varimax")
    >>> r.converged
    True
    >>> print(np.round(r.loadings, 2))
    [[ 0.8   0.1 ]
     [ 0.78 -0.04]
     [ 0.74  0.18]
     [ 0.1   0.7 ]
     [-0.04  0.72]
     [ 0.24  0.68]]
    >>> r = rotate(A, "oblimin")  # quartimin: oblique, Φ = TᵀT
    >>> print(np.round(r.factor_correlation, 2))
    [[1.  0.2]
     [0.2 1. ]]
    >>> bool(np.allclose(r.loadings @ r.factor_correlation @ r.loadings.T, A @ A.T))
    True
    """
    A = _check_loadings(loadings)
    d, K = A.shape
    name, g, eps, H, W, is_oblique, kappa = _criterion_settings(
        method, A.shape, oblique, gamma, kappa, epsilon, target, target_weights, criterion
    )
    if isinstance(n_starts, bool) or not isinstance(n_starts, int | np.integer) or n_starts < 1:
        raise ValueError(f"n_starts must be an integer >= 1, got {n_starts!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 0:
        raise ValueError(f"max_iter must be an integer >= 0, got {max_iter!r}")
    tol = _real("tol", tol, low=0.0, low_open=True)

    norms = np.ones(d)
    if normalize:
        norms = np.sqrt(np.sum(A * A, axis=1))
        norms[norms == 0] = 1.0
    An = A / norms[:, None]
    gpa_oblique = is_oblique and method != "promax"

    if K == 1:
        T = np.ones((1, 1))
        with jax.enable_x64(True):
            value = float(rotation_criterion(name, jnp.asarray(An), g, eps, H, W))
        n_iter, converged = 0, True
    else:
        starts = [np.eye(K)]
        if n_starts > 1 or random_state is not None:  # (the seed checked all the same)
            rng = np.random.default_rng(random_state)
            starts += [_random_orthogonal(rng, K) for _ in range(n_starts - 1)]
        T, value, s, n_iter = _best_start(
            An, starts, name, gpa_oblique, g, eps, H, W, tol, max_iter
        )
        if T is None:
            raise ValueError(
                f"the {'oblique' if gpa_oblique else 'orthogonal'} rotation by "
                f"method={method!r} degenerated from every start (T singular or the "
                "criterion not finite): is the criterion bounded below?"
            )
        converged = bool(s < tol)

    if gpa_oblique:
        L = np.linalg.solve(T, An.T).T
    else:
        L = An @ T
    Phi = T.T @ T if gpa_oblique else np.eye(K)
    if method == "promax" and K > 1:
        L, T, Phi = _promax(L, T, kappa)
    if not is_oblique:
        Phi = np.eye(K)
    L = L * norms[:, None]
    if method not in ("target", "partial_target"):  # a target fixes the columns
        Lc, Tc, Phic = _canonical(L, T, Phi)
        if method != "custom" or _same_value(name, Lc / norms[:, None], value, g, eps, H, W):
            L, T, Phi = Lc, Tc, Phic
    L, T, Phi = L + 0.0, T + 0.0, Phi + 0.0  # no negative zeros
    return Rotation(
        loadings=L,
        rotation_matrix=T,
        factor_correlation=Phi,
        structure=L @ Phi,
        criterion=value,
        n_iter=n_iter,
        converged=converged,
        method=method,
        oblique=is_oblique,
    )


def _criterion_settings(
    method, shape, oblique, gamma, kappa, epsilon, target, target_weights, criterion
):
    """:func:`rotate`'s settings checked and resolved into the criterion's name (or
    callable) and numbers ``(name, gamma, epsilon, H, W, oblique, kappa)``, for loadings
    of ``shape`` (d, K)."""
    d, K = shape
    if not isinstance(method, str) or method not in ROTATION_METHODS:
        raise ValueError(f"Unknown rotation method={method!r}; expected one of {ROTATION_METHODS}")
    if criterion is not None and method != "custom":
        raise ValueError(
            f"criterion= is for method='custom', not the named method={method!r}; "
            "pass method='custom' with the callable"
        )
    if method == "custom":
        if criterion is None:
            raise ValueError("method='custom' needs criterion=, a callable f(L) -> scalar")
        if not callable(criterion):
            raise ValueError(f"criterion must be callable f(L) -> scalar, got {criterion!r}")
    if oblique is not None and not isinstance(oblique, bool | np.bool_):
        raise ValueError(f"oblique must be True, False or None, got {oblique!r}")
    if method in ORTHOGONAL_METHODS and oblique:
        raise ValueError(
            f"method={method!r} is orthogonal only: its criterion is unbounded below under "
            "oblique rotation; use oblimin, quartimin or geomin for an oblique rotation"
        )
    if method == "promax" and oblique is False:
        raise ValueError("method='promax' is oblique by construction; oblique=False is refused")
    is_oblique = method == "promax" or bool(_DEFAULT_OBLIQUE.get(method, False))
    if oblique is not None:
        is_oblique = bool(oblique)

    # the criterion and its numbers
    if gamma is not None and method not in ("orthomax", "oblimin"):
        raise ValueError(f"gamma applies to method='orthomax' or 'oblimin', not {method!r}")
    name, g, eps = "orthomax", 0.0, 0.01
    if method in ORTHOGONAL_METHODS:
        if method == "orthomax":
            if gamma is None:
                raise ValueError("method='orthomax' needs gamma (0 quartimax, 1 varimax)")
            g = _real("gamma", gamma, low=0.0)
        else:
            g = {"varimax": 1.0, "quartimax": 0.0, "equamax": K / 2.0}[method]
    elif method in ("oblimin", "quartimin"):
        name = "oblimin"
        g = 0.0 if gamma is None else _real("gamma", gamma, high=1.0)
    elif method == "geomin":
        name = "geomin"
        eps = _real("epsilon", epsilon, low=0.0, low_open=True)
    elif method == "promax":
        g = 1.0  # its varimax stage
        kappa = _real("kappa", kappa, low=1.0)
    elif method == "custom":
        name = criterion
    H = W = np.zeros((d, K))
    if method in ("target", "partial_target"):
        name = "target"
        if target is None:
            raise ValueError(f"method={method!r} needs target=, a (d, K) = {(d, K)} matrix")
        if method == "target":
            if target_weights is not None:
                raise ValueError("target_weights are for method='partial_target', not 'target'")
            H, W = _check_matrix("target", target, (d, K)), np.ones((d, K))
        else:
            if target_weights is None:
                raise ValueError(
                    "method='partial_target' needs target_weights=, the 0/1 mask of the "
                    "target entries that count"
                )
            W = _check_matrix("target_weights", target_weights, (d, K))
            if not np.isin(W, (0.0, 1.0)).all():
                raise ValueError("target_weights must be 0/1 or boolean")
            H = _check_matrix("target", target, (d, K), allow_nan=True)
            if np.isnan(H[W == 1]).any():
                raise ValueError("target is NaN at entries whose target_weights are 1")
            H = np.where(W == 1, H, 0.0)
    elif target is not None or target_weights is not None:
        raise ValueError(f"target/target_weights apply to the target methods, not {method!r}")
    return name, g, eps, H, W, is_oblique, kappa


def rotation_objective(method, shape, *, oblique=None, normalize=False, **settings):
    """The criterion a rotation by ``method`` (with :func:`rotate`'s settings) minimises,
    as ``(criterion, oblique, normalize)``: ``criterion(L)`` of a (d, K) pattern of
    (normalised, where ``normalize``) loadings, traceable.  Not for promax, which
    minimises no criterion of its own."""
    if method == "promax":
        raise ValueError("promax is a procedure (varimax, then a power target), not a criterion")
    allowed = {"gamma", "kappa", "epsilon", "target", "target_weights", "criterion"}
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise ValueError(f"unknown rotation settings {unknown}")
    args = {k: settings.get(k) for k in allowed}
    args["kappa"] = 4.0 if args["kappa"] is None else args["kappa"]
    args["epsilon"] = 0.01 if args["epsilon"] is None else args["epsilon"]
    name, g, eps, H, W, is_oblique, _ = _criterion_settings(method, tuple(shape), oblique, **args)
    H, W = jnp.asarray(H), jnp.asarray(W)

    def criterion(L):
        return rotation_criterion(name, L, g, eps, H, W)

    return criterion, is_oblique, bool(normalize)


def _same_value(criterion, L, value, gamma, epsilon, H, W):
    """Whether a user criterion keeps its value at ``L`` (its columns signed and
    permuted): if not, the canonical order would change the solution."""
    with jax.enable_x64(True):
        moved = float(rotation_criterion(criterion, jnp.asarray(L), gamma, epsilon, H, W))
    return abs(moved - value) <= 1e-10 * max(abs(value), 1.0)


def _promax(X, R, kappa):
    """Hendrickson & White's promax from the varimax pattern ``X = A R``: returns
    ``(Λ, T, Φ)`` with ``Λ = X U = A (Tᵀ)⁻¹`` and ``Φ = TᵀT`` of unit diagonal."""
    P = X * np.abs(X) ** (kappa - 1.0)
    U, *_ = np.linalg.lstsq(X, P, rcond=None)  # least squares X U ≈ P
    U = U * np.sqrt(np.diag(np.linalg.inv(U.T @ U)))
    T = R @ np.linalg.inv(U).T  # (Tᵀ)⁻¹ = R U, R orthogonal
    return X @ U, T, T.T @ T
