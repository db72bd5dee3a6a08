"""``latentlab.NMF``: non-negative matrix factorisation, one compiled loop per fit
(:mod:`latentlab.closed_form.nmf`; its KL update is the one pLSA's EM uses)."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import (
    check_is_fitted,
    check_non_negative,
    check_random_state,
)

from latentlab._settings import Boolean, Dtype, Integer, Options, RandomState, Real
from latentlab._shapes import PAD_MAX_ENTRIES, bucket
from latentlab._validation import check_codes, check_data, kept_float_dtype
from latentlab.closed_form import nmf as nmf_algebra
from latentlab.estimators._dispatch import call, to_device
from latentlab.estimators.base import (
    LATENTLAB_FILES,
    LatentEstimator,
    jax_key,
    to_numpy,
    warn_not_converged,
)

__all__ = ["NMF"]

INITS = ("random", "nndsvd", "nndsvda", "nndsvdar", "custom")
SOLVERS = ("cd", "mu")
# beta_loss names, as scikit-learn's: the beta of each
LOSS_NAMES = {"frobenius": 2.0, "kullback-leibler": 1.0, "itakura-saito": 0.0}


class NMF(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """Non-negative matrix factorisation ``X ~ W H`` with W, H >= 0.

    Minimises scikit-learn's objective, so that the two can be compared fit for fit::

        loss(X, W H) + alpha_W * l1_ratio * d * |W|_1 + 0.5 * alpha_W * (1 - l1_ratio) * d * ||W||^2
                     + alpha_H * l1_ratio * n * |H|_1 + 0.5 * alpha_H * (1 - l1_ratio) * n * ||H||^2

    for ``n`` samples and ``d`` features, where ``loss`` is the beta-divergence
    ``D_beta(X || WH)`` of Fevotte & Idier (2011): ``0.5 ||X - WH||_F^2`` for beta = 2
    (``"frobenius"``), the generalised Kullback-Leibler divergence
    ``sum X log(X / WH) - X + WH`` for beta = 1, Itakura-Saito's
    ``sum X / WH - log(X / WH) - 1`` for beta = 0, and otherwise
    ``sum (X^beta + (beta - 1) WH^beta - beta X WH^(beta - 1)) / (beta (beta - 1))``.
    The iterations run in one jit-compiled loop.

    KL-NMF is pLSA's likelihood in other coordinates (Gaussier & Goutte 2005): the KL
    update is written once (:func:`latentlab.closed_form.nmf.kl_multiplicative_terms`)
    and used by both.  Without penalties ``solver="mu"`` takes the exact EM step of the
    Poisson model ``X_ij = sum_k Z_ijk``, one simultaneous update of W and H (pLSA's EM
    step, the same iterates with ``W = diag(N) theta``), with each row of H rescaled to
    sum 1 (``components_``' rows then sum to 1); with penalties, and in ``transform``,
    Lee & Seung's alternating updates.  Other betas take Fevotte & Idier's
    maximisation-minimisation updates (the multiplicative update raised to their
    exponent gamma(beta), 1 for beta in [1, 2]), scikit-learn's algorithm; beta is an
    input of the compiled loop, so fits with different betas share one program.

    Parameters
    ----------
    n_components : int, "auto" or None, default="auto"
        Number of components; "auto"/None: from H's shape when ``init="custom"``,
        otherwise the number of features.
    init : {"random", "nndsvd", "nndsvda", "nndsvdar", "custom"} or None, default=None
        None: "nndsvda" when ``n_components <= min(n_samples, n_features)``, else
        "random".  "random": ``sqrt(mean(X) / K) |N(0, 1)|`` (drawn on the host as
        scikit-learn draws it, so the same ``random_state`` gives the same start).
        "nndsvd*": Boutsidis & Gallopoulos's (2008) start from a randomized SVD, zeros
        kept, filled with the mean of X ("a"), or with small random values ("ar").
        "custom": ``fit_transform(X, W=..., H=...)``.
    solver : {"cd", "mu"}, default="cd"
        Coordinate descent (Frobenius only) or multiplicative updates.
    beta_loss : float or {"frobenius", "kullback-leibler", "itakura-saito"}, \
default="frobenius"
        The beta of the beta-divergence; the names stand for 2, 1 and 0.  For
        beta <= 0 the divergence is infinite where X is 0: such X are refused.
    tol : float, default=1e-4
        scikit-learn's stopping rules: "mu" every 10 iterations, when ``sqrt(2 loss)``
        dropped by less than ``tol`` times its starting value since the last check;
        "cd" when the projected-gradient violation is at most ``tol`` times the first
        iteration's.
    max_iter : int, default=200
    random_state : int, RandomState or None, default=None
    alpha_W : float, default=0.0
    alpha_H : float or "same", default="same"
    l1_ratio : float in [0, 1], default=0.0
    accelerate : bool, default=True
        Frobenius: each iteration repeats the cheap pass of W's (then H's) update on
        the same ``X H^T`` and ``H H^T`` until it stalls (Gillis & Glineur 2012), so
        fewer products with X reach a given objective; with ``solver="cd"`` each
        update also starts from an extrapolation of the last two iterates, restarted
        when the objective rises (Ang & Gillis 2019).  False: scikit-learn's
        algorithm, iterate for iterate.  (KL always takes the updates described
        above: each needs a new ratio matrix, so repeating them gains nothing.)
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    components_ : ndarray (n_components, n_features)
        H.
    n_components_ : int
    reconstruction_err_ : float
        ``sqrt(2 loss)`` at the fit (the Frobenius norm of ``X - WH``, or
        ``sqrt(2 D_beta(X || WH))``), penalties excluded, as scikit-learn reports it.
    n_iter_ : int
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.array([[1, 1], [2, 1], [3, 1.2], [4, 1], [5, 0.8], [6, 1]])
    >>> nmf = latentlab.NMF(n_components=2, init="random", random_state=0)
    >>> W = nmf.fit_transform(X)
    >>> bool(np.allclose(W @ nmf.components_, X, atol=0.1))
    True
    """

    _settings = {
        "n_components": Integer(1, None) | None | "auto",
        "init": Options(*INITS) | None,
        "solver": Options(*SOLVERS),
        "beta_loss": Options(*LOSS_NAMES) | Real(None, None, finite=True),
        "tol": Real(0, None),
        "max_iter": Integer(1, None),
        "random_state": RandomState(),
        "alpha_W": Real(0, None),
        "alpha_H": Real(0, None) | "same",
        "l1_ratio": Real(0, 1),
        "accelerate": Boolean(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_components="auto",
        *,
        init=None,
        solver="cd",
        beta_loss="frobenius",
        tol=1e-4,
        max_iter=200,
        random_state=None,
        alpha_W=0.0,
        alpha_H="same",
        l1_ratio=0.0,
        accelerate=True,
        dtype="float64",
    ):
        self.n_components = n_components
        self.init = init
        self.solver = solver
        self.beta_loss = beta_loss
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.alpha_W = alpha_W
        self.alpha_H = alpha_H
        self.l1_ratio = l1_ratio
        self.accelerate = accelerate
        self.dtype = dtype

    # -- validation ---------------------------------------------------------------------

    def _data(self, X, *, reset: bool) -> np.ndarray:
        X = check_data(self, X, reset=reset, allow_nan=False, accept_sparse=("csr", "csc", "coo"))
        check_non_negative(X, f"{type(self).__name__} (input X)")
        return X.toarray() if sp.issparse(X) else np.asarray(X)

    def _loss(self) -> tuple[str, float]:
        """The loss for ``fit_nmf`` ("frobenius", "kullback-leibler" or "beta") and beta."""
        beta = self.beta_loss
        if isinstance(beta, str):
            if beta not in LOSS_NAMES:
                raise ValueError(
                    f"Unknown beta_loss={beta!r}; expected a number or one of {list(LOSS_NAMES)}"
                )
            beta = LOSS_NAMES[beta]
        beta = float(beta)
        if not np.isfinite(beta):
            raise ValueError(f"beta_loss must be a finite number, got {self.beta_loss!r}")
        loss = {2.0: "frobenius", 1.0: "kullback-leibler"}.get(beta, "beta")
        return loss, beta

    def _check_settings(self, X, H=None):
        loss, beta = self._loss()
        if self.solver == "cd" and loss != "frobenius":
            raise ValueError(
                f"Invalid beta_loss parameter: solver 'cd' does not handle beta_loss = "
                f"{self.beta_loss!r}: solver='cd' handles beta_loss='frobenius' only; use "
                "solver='mu'"
            )
        if beta <= 0 and X.size and X.min() == 0:
            raise ValueError(
                f"beta_loss={self.beta_loss!r} (<= 0) cannot fit X with zeros: the "
                f"beta-divergence is infinite where X is 0 and the updates may diverge; "
                f"add a small positive value to X, or use beta_loss > 0"
            )
        max_iter, tol = int(self.max_iter), float(self.tol)
        alpha_W = float(self.alpha_W)
        alpha_H = alpha_W if self.alpha_H == "same" else float(self.alpha_H)
        l1_ratio = float(self.l1_ratio)
        n, d = X.shape
        if self.n_components in ("auto", None):
            K = H.shape[0] if self.init == "custom" and H is not None else d
        else:
            K = int(self.n_components)
        # scikit-learn's scaling: W's penalty by the number of features, H's by samples
        penalties = (
            d * alpha_W * l1_ratio,
            n * alpha_H * l1_ratio,
            d * alpha_W * (1.0 - l1_ratio),
            n * alpha_H * (1.0 - l1_ratio),
        )
        return (loss, beta), K, max_iter, tol, penalties

    def _factor(self, value, name, shape):
        if value is None:
            raise ValueError(f"init='custom' needs {name} of shape {shape}; got None")
        value = np.asarray(value, dtype=np.float64)
        if value.shape != shape:
            # scikit-learn's wording first, for the first dimension that differs
            lead = ""
            for axis, which in enumerate(("first", "second")):
                if value.ndim == 2 and value.shape[axis] != shape[axis]:
                    lead = (
                        f"Array with wrong {which} dimension passed to "
                        f"{type(self).__name__} (input {name}). Expected {shape[axis]}, "
                        f"but got {value.shape[axis]}: "
                    )
                    break
            raise ValueError(
                f"{lead}init='custom': {name} must have shape {shape}, got {value.shape}"
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"init='custom': {name} contains NaN or infinite values")
        if np.any(value < 0):
            raise ValueError(f"init='custom': {name} contains negative values")
        return value

    def _start(self, X, K, W, H):
        """(W, H) to start from, NumPy arrays."""
        n, d = X.shape
        init = self.init
        if init is None:
            init = "nndsvda" if K <= min(n, d) else "random"
        if init == "custom":
            return self._factor(W, "W", (n, K)), self._factor(H, "H", (K, d))
        if W is not None or H is not None:
            warnings.warn(
                "W and H are used only with init='custom'; ignored",
                RuntimeWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        if init == "random":  # on the host, as scikit-learn draws it (H first)
            rng = check_random_state(self.random_state)
            scale = np.sqrt(X.mean() / K)
            H = np.abs(scale * rng.standard_normal(size=(K, d)))
            return np.abs(scale * rng.standard_normal(size=(n, K))), H
        if K > min(n, d):
            raise ValueError(
                f"init = {init!r} can only be used when n_components <= min(n_samples, "
                f"n_features): that is {min(n, d)} here, got n_components={K}; use "
                "init='random'"
            )
        if self.solver == "mu" and init == "nndsvd":
            warnings.warn(
                "multiplicative updates cannot move the zeros of init='nndsvd'; "
                "init='nndsvda' or 'nndsvdar' usually fits better",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        # scikit-learn's randomized_svd: 7 power iterations for few components, else 4
        n_iter = 7 if K < 0.1 * min(n, d) else 4
        rows, columns = self._padded_shape(n, d)
        W, H = call(
            nmf_algebra.nndsvd,
            rows * columns * K,
            to_device(np.pad(X, ((0, rows - n), (0, columns - d)))),
            jax_key(self.random_state),
            n_components=K,
            n_iter=n_iter,
        )
        W, H = to_numpy(W)[:n], to_numpy(H)[:, :d]
        mean = X.mean()
        if init == "nndsvda":
            W[W == 0], H[H == 0] = mean, mean
        elif init == "nndsvdar":  # scikit-learn's small random values
            rng = check_random_state(self.random_state)
            W[W == 0] = np.abs(mean * rng.standard_normal(size=np.sum(W == 0)) / 100)
            H[H == 0] = np.abs(mean * rng.standard_normal(size=np.sum(H == 0)) / 100)
        return W, H

    @staticmethod
    def _padded_shape(n, d):
        """Row and column buckets for small inputs (see :meth:`_run`), else (n, d)."""
        if n * d <= PAD_MAX_ENTRIES:
            return bucket(n, 8), bucket(d, 8)
        return n, d

    # -- fitting ------------------------------------------------------------------------

    def _run(self, X, W, H, loss, max_iter, tol, penalties, *, update_H):
        """``fit_nmf`` on X, W, H padded with zeros (small problems only).

        Zero rows of X with zero rows of W, and zero columns of X with zero columns of
        H, are fixed points of every update here and add nothing to the loss, the
        violation or the penalties: the fit is the same, and small problems of nearby
        shapes (cross-validation folds, scikit-learn's checks) share one program.
        (For the other beta-divergences the compiled loop is told X's unpadded shape
        and masks the padding out.)  ``loss`` is ``(name, beta)`` from :meth:`_loss`.
        """
        loss, beta = loss
        n, d = X.shape
        rows, columns = self._padded_shape(n, d)
        if (rows, columns) != (n, d):
            X = np.pad(X, ((0, rows - n), (0, columns - d)))
            W = np.pad(W, ((0, rows - n), (0, 0)))
            H = np.pad(H, ((0, 0), (0, columns - d)))
        em_step = loss == "kullback-leibler" and not any(penalties)
        fit = call(
            nmf_algebra.fit_nmf,
            X.size * H.shape[0],
            to_device(X),
            to_device(W),
            to_device(H),
            tuple(np.asarray(p, X.dtype) for p in penalties),
            np.asarray(tol, X.dtype),
            np.asarray(max_iter, np.int32),
            np.asarray(beta, X.dtype),
            np.asarray((n, d), np.int32),  # the beta path leaves the padding out
            loss=loss,
            solver=self.solver,
            update_H=update_H,
            em_step=em_step,
            accelerate=bool(self.accelerate),
        )
        # copies that own their data (a slice of the padded result would be a view)
        return fit._replace(W=to_numpy(fit.W)[:n].copy(), H=to_numpy(fit.H)[:, :d].copy())

    def fit_transform(self, X, y=None, W=None, H=None) -> np.ndarray:
        """Fit to X (n_samples, n_features) and return W (n_samples, n_components).

        ``W`` and ``H`` are the starting point with ``init="custom"``.
        """
        # float32 data give float32 factors (as scikit-learn), computed at this
        # estimator's dtype and rounded once at the end
        float32 = kept_float_dtype(X) == np.float32
        X = self._data(X, reset=True)
        loss, K, max_iter, tol, penalties = self._check_settings(X, H)
        with self._precision():
            W0, H0 = self._start(X, K, W, H)
            dtype = np.float64 if self.dtype == "float64" else np.float32
            X, W0, H0 = (np.asarray(a, dtype) for a in (X, W0, H0))
            fit = self._run(X, W0, H0, loss, max_iter, tol, penalties, update_H=True)
            W = fit.W
            self.components_ = fit.H
            self.reconstruction_err_ = float(np.sqrt(2.0 * max(float(fit.loss), 0.0)))
            self.n_iter_ = int(fit.n_iter)
            converged = bool(fit.converged)
        self.n_components_ = K
        if float32:
            self.components_ = self.components_.astype(np.float32)
        if not converged and tol > 0:
            solver = {"cd": "coordinate descent", "mu": "multiplicative update"}[self.solver]
            lead = (
                f"Maximum number of iterations {max_iter} reached. Increase it to improve "
                "convergence"
            )
            warn_not_converged(self, solver, lead=lead)
        return self._as_output(W)

    def _as_output(self, W):
        """W in float32 where the fit's components are (float32 training data)."""
        return W.astype(np.float32) if self.components_.dtype == np.float32 else W

    def fit(self, X, y=None, W=None, H=None):
        """Fit to X; returns self.  ``W``, ``H``: the start with ``init="custom"``."""
        self.fit_transform(X, W=W, H=H)
        return self

    def transform(self, X) -> np.ndarray:
        """W for X with ``components_`` held fixed (n_samples, n_components): the same
        solver and stopping rule as the fit, from scikit-learn's start (a constant
        ``sqrt(mean(X) / K)`` for "mu", zeros for "cd")."""
        check_is_fitted(self)
        X = self._data(X, reset=False)
        loss, _, max_iter, tol, penalties = self._check_settings(X, self.components_)
        K = self.n_components_
        value = np.sqrt(X.mean() / K) if self.solver == "mu" else 0.0
        with self._precision():
            dtype = np.float64 if self.dtype == "float64" else np.float32
            X = np.asarray(X, dtype)
            W0 = np.full((X.shape[0], K), value, dtype)  # padding rows: 0 (in _run)
            H = np.asarray(self.components_, dtype)
            fit = self._run(X, W0, H, loss, max_iter, tol, penalties, update_H=False)
        return self._as_output(fit.W)

    def inverse_transform(self, X) -> np.ndarray:
        """``W @ components_`` for W of shape (n_samples, n_components)."""
        check_is_fitted(self)
        W = check_codes(X.toarray() if sp.issparse(X) else X, self.n_components_)
        return W @ self.components_

    @property
    def _n_features_out(self):
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        return tags
