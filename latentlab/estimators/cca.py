"""``latentlab.CCA`` and ``latentlab.KernelCCA``: regularized canonical correlation analysis."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from latentlab._settings import ArrayLike, Boolean, Dtype, Integer, Real
from latentlab._validation import check_n_components
from latentlab.closed_form import cca as cf
from latentlab.estimators._dispatch import call, map_rows, to_device
from latentlab.estimators._kernels import (
    check_gram,
    kernel_offset,
    kernel_settings,
    resolve_kernel,
)
from latentlab.estimators._two_view import (
    _check_linear_loaded,
    _check_n_components,
    _check_reg,
    _check_shapes,
    _TwoViewTransformer,
)
from latentlab.estimators.base import check_finite_fit, to_numpy

__all__ = ["CCA", "KernelCCA"]

# One ridge for both views, or a pair (reg_x, reg_y), checked by _check_reg.
REG = Real(0, None, finite=True) | ArrayLike()


class CCA(_TwoViewTransformer):
    """Canonical correlation analysis in closed form, with optional ridge regularization.

    Finds weight pairs (u_k, v_k) maximising the correlation of ``X u`` and ``Y v``:
    whiten each view, then take the SVD of the whitened cross-covariance.  With ``reg``
    the objective becomes ``u^T C_xy v / sqrt(u^T (C_xx + r_x I) u  v^T (C_yy + r_y I) v)``,
    which moves continuously from CCA (``reg=0``) to maximum covariance (``reg -> inf``).

    Parameters
    ----------
    n_components : int or None, default=2
        Number of canonical pairs, ``1 <= n_components <= min(n_features_x,
        n_features_y)``; None takes that maximum.  The default is scikit-learn's.
    reg : float or (float, float), default=0.0
        Ridge added to the (scaled) covariance of each view, ``>= 0``.  Unregularized
        CCA is degenerate when ``n_features_x + n_features_y >= n_samples - 1`` (some
        pair of directions always correlates perfectly) or when a view's covariance is
        singular; then ``reg > 0`` is required.
    scale : bool, default=True
        Divide each column by its standard deviation first (as scikit-learn's CCA).
        Canonical correlations do not depend on it when ``reg=0``; the meaning of
        ``reg`` does.
    copy : bool, default=True
        Accepted for compatibility with scikit-learn's ``CCA`` (also by :meth:`transform`
        and :meth:`predict`): latentlab never writes into the caller's arrays, so
        ``copy=False`` leaves them unchanged too.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    correlations_ : ndarray (n_components_,)
        Canonical correlations: the correlations of the paired training scores.
    regularized_correlations_ : ndarray (n_components_,)
        The maximised objective (equals ``correlations_`` when ``reg=0``).
    x_weights_, y_weights_ : ndarray (n_features_x, n_components_), (n_features_y, ...)
        Weights on the centred (and scaled) views: ``x_scores = Xs @ x_weights_``.
        The largest-magnitude x weight of each pair is positive.
    x_loadings_, y_loadings_ : ndarray
        Least-squares coefficients of each (scaled) variable on the view's scores; with
        ``reg=0`` and ``scale=True``, the correlations of variables with canonical
        variates (structure coefficients).
    x_mean_, y_mean_, x_std_, y_std_ : ndarray
    coef_ : ndarray (n_features_y, n_features_x)
        :meth:`predict` is ``(X - x_mean_) @ coef_.T + intercept_``: scikit-learn's CCA
        regression of Y through the canonical variates (see :meth:`predict`).
    intercept_ : ndarray (n_features_y,)
        ``y_mean_``.
    y_ndim_ : int
        1 when Y was one-dimensional at fit (then :meth:`predict` returns 1-D).
    n_components_, n_features_in_, n_features_y_ : int

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(100, 3)), rng.normal(size=(100, 2))
    >>> x_scores, y_scores = latentlab.CCA(n_components=2).fit(X, Y).transform(X, Y)
    """

    # transform: the family base's linear scores, through x_weights_ and y_weights_
    _predicts_through_coef = True  # scikit-learn's CCA regression (see predict)
    _settings = {
        "n_components": Integer(),
        "reg": REG,
        "scale": Boolean(),
        "copy": Boolean(),
        "dtype": Dtype(),
    }

    def __init__(self, n_components=2, *, reg=0.0, scale=True, copy=True, dtype="float64"):
        self.n_components = n_components
        self.reg = reg
        self.scale = scale
        self.copy = copy
        self.dtype = dtype

    def fit(self, X, y=None):
        """Fit on views X (n_samples, n_features_x) and y = Y (n_samples, n_features_y)."""
        X, Y = self._views(X, y, reset=True)
        (n, p), q = X.shape, Y.shape[1]
        reg_x, reg_y = _check_reg(self.reg, positive=False, who="CCA")
        high = min(p, q)
        K = high if self.n_components is None else self.n_components
        K = _check_n_components(self, K, high, "min(n_features_x, n_features_y)")
        if reg_x == 0 and reg_y == 0 and p + q >= n - 1:
            raise ValueError(
                f"Unregularized CCA is degenerate here: n_features_x + n_features_y = "
                f"{p + q} >= n_samples - 1 = {n - 1}, so some directions correlate "
                "perfectly whatever the data. Set reg > 0 (ridge on each view's covariance)."
            )
        # Centre in float64 on the host, before any cast to float32: a mean of 1e8
        # would otherwise leave nothing of the spread in float32.
        x_mean, y_mean = X.mean(axis=0), Y.mean(axis=0)
        with self._precision():
            fit = call(
                cf.fit_cca,
                n * (p + q),
                to_device(X - x_mean),
                to_device(Y - y_mean),
                reg_x,
                reg_y,
                scale=bool(self.scale),
            )
            fit = jax.tree.map(to_numpy, fit)
        for view, eigenvalues, reg, dim in (
            ("X", fit.x_eigenvalues, reg_x, p),
            ("Y", fit.y_eigenvalues, reg_y, q),
        ):
            top = max(float(eigenvalues.max()), 0.0)
            if reg == 0 and float(eigenvalues.min()) <= top * max(n, dim) * np.finfo(float).eps:
                raise ValueError(
                    f"The covariance of {view} is singular (constant or collinear columns), "
                    "so unregularized CCA cannot whiten it; set reg > 0 or drop those columns."
                )
        self.n_components_ = K
        # fit.*_mean is the round-off left after centring
        self.x_mean_, self.y_mean_ = x_mean + fit.x_mean, y_mean + fit.y_mean
        self.x_std_, self.y_std_ = fit.x_scale, fit.y_scale
        # copies, not views of the full solution: fitted arrays own their data
        self.x_weights_, self.y_weights_ = fit.x_weights[:, :K].copy(), fit.y_weights[:, :K].copy()
        self.x_loadings_ = fit.x_loadings[:, :K].copy()
        self.y_loadings_ = fit.y_loadings[:, :K].copy()
        self.correlations_ = fit.correlations[:K].copy()
        self.regularized_correlations_ = fit.singular_values[:K].copy()
        self.coef_ = self._regression_coef()
        self.intercept_ = self.y_mean_.copy()
        return self

    def _regression_coef(self):
        """scikit-learn's ``coef_`` (n_features_y, n_features_x) from the exact solution.

        scikit-learn's CCA finds pair k on views deflated by the earlier scores, with
        unit weight vectors w_k, c_k there, and predicts ``sum_k t_k q_k^T``: x scores
        ``t_k = Xs w_k`` times the regression ``q_k`` of Ys on its y scores ``s_k =
        Ys c_k``.  For exact canonical weights u_k (any scale), the minimum-norm w_k
        of the deflated view is u_k minus its projection on u_1..u_{k-1}, so
        ``t_k = Xs u_k / alpha_k`` with ``alpha_k = |R_kk|`` of ``QR(U)``; likewise
        ``s_k = Ys v_k / beta_k``.  With our loadings ``l_k`` (regression of Ys on Ys
        v_k), ``q_k = beta_k l_k``, so on the scaled views ``coef = U diag(beta /
        alpha) L^T``, then unscaled as scikit-learn does.
        """
        alpha = np.abs(np.diag(np.linalg.qr(self.x_weights_)[1]))
        beta = np.abs(np.diag(np.linalg.qr(self.y_weights_)[1]))
        coef = (self.x_weights_ * (beta / alpha)) @ self.y_loadings_.T  # (p, q), scaled
        return np.ascontiguousarray((coef * self.y_std_).T / self.x_std_)

    def _validate_loaded(self):
        """Checks on a model restored by :func:`latentlab.load` (shapes, scales)."""
        p, q, k = self.n_features_in_, self.n_features_y_, self.n_components_
        _check_linear_loaded(
            self,
            {
                "x_loadings_": (p, k),
                "y_loadings_": (q, k),
                "correlations_": (k,),
                "regularized_correlations_": (k,),
                "coef_": (q, p),
                "intercept_": (q,),
            },
        )


class KernelCCA(_TwoViewTransformer):
    """Regularized kernel canonical correlation analysis.

    Linear CCA between the kernel feature spaces of the two views (Bach & Jordan 2002;
    Hardoon, Szedmak & Shawe-Taylor 2004), computed from the eigendecompositions of the
    two doubly centred Gram matrices.  Regularization is required: without it every
    full-rank Gram matrix gives correlation 1.

    Parameters
    ----------
    n_components : int, default=2
        Number of canonical pairs, ``1 <= n_components <= n_samples``.
    reg : float or (float, float), default=0.1
        Ridge on each view's feature-space covariance (per sample), ``> 0``.
    kernel, kernel_y : str or callable, default="rbf", None
        Kernels of the X and Y views (``kernel_y=None``: the same as ``kernel``); see
        :class:`latentlab.KernelPCA`.
    gamma, degree, coef0 : float or None, int, float
        Kernel settings, shared by both views; ``gamma=None`` is ``1 / n_features`` of
        each view.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    correlations_ : ndarray (n_components_,)
        Correlations of the paired training scores.
    regularized_correlations_ : ndarray (n_components_,)
        The maximised regularized objective.
    x_dual_coef_, y_dual_coef_ : ndarray (n_samples, n_components_)
        Scores are the centred kernel between new and training points times these.
    X_fit_, Y_fit_ : ndarray
    X_offset_, Y_offset_ : ndarray (n_features_x,), (n_features_y,)
        Subtracted from each view (in float64, before any cast to float32) before its
        kernel is evaluated: the training mean for shift-invariant kernels ("linear",
        "rbf"), zeros otherwise (see :class:`latentlab.KernelPCA`).
    x_kernel_column_means_, y_kernel_column_means_ : ndarray (n_samples,)
    x_kernel_grand_mean_, y_kernel_grand_mean_ : float
        Statistics of the training Gram matrices, for centring new points' kernels.
    n_components_, n_features_in_, n_features_y_ : int

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 2)); Y = np.c_[X[:, 0] ** 2, rng.normal(size=80)]
    >>> latentlab.KernelCCA(n_components=1, reg=0.1).fit(X, Y).correlations_.shape
    (1,)
    """

    _settings = {
        "n_components": Integer(),
        "reg": REG,  # > 0 (_check_reg says why)
        **kernel_settings(precomputed=False),
        "kernel_y": kernel_settings(precomputed=False)["kernel"] | None,
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_components=2,
        *,
        reg=0.1,
        kernel="rbf",
        kernel_y=None,
        gamma=None,
        degree=3,
        coef0=1,
        dtype="float64",
    ):
        self.n_components = n_components
        self.reg = reg
        self.kernel = kernel
        self.kernel_y = kernel_y
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.dtype = dtype

    def fit(self, X, y=None):
        """Fit on views X (n_samples, n_features_x) and y = Y (n_samples, n_features_y)."""
        X, Y = self._views(X, y, reset=True)
        n = X.shape[0]
        reg_x, reg_y = _check_reg(self.reg, positive=True, who="KernelCCA")
        K = check_n_components(self.n_components, 1, n, "n_samples")
        x_kernel, y_kernel = self._kernels(X.shape[1], Y.shape[1])
        x_offset, y_offset = kernel_offset(x_kernel[0], X), kernel_offset(y_kernel[0], Y)
        with self._precision():
            Xj, Yj = to_device(X - x_offset), to_device(Y - y_offset)
            for (kernel, _, _), V, name in (
                (x_kernel, Xj, "kernel"),
                (y_kernel, Yj, "kernel_y"),
            ):
                if callable(kernel):
                    check_gram(jax.eval_shape(kernel, V, V), n, n, name)
            fit = call(
                cf.fit_kernel_cca,
                n * n,
                Xj,
                Yj,
                x_kernel[1],
                y_kernel[1],
                reg_x,
                reg_y,
                x_kernel=x_kernel[0],
                y_kernel=y_kernel[0],
                x_degree=x_kernel[2],
                y_degree=y_kernel[2],
            )
            fit = jax.tree.map(to_numpy, fit)
        check_finite_fit(
            self,
            {"x_dual_coef_": fit.x_dual_coef[:, :K], "y_dual_coef_": fit.y_dual_coef[:, :K]},
            "check the kernels and reg",
        )
        self.n_components_ = K
        # copies: the caller may change their arrays after fit
        self.X_fit_, self.Y_fit_ = X.copy(), Y.copy()
        self.X_offset_, self.Y_offset_ = x_offset, y_offset
        self.x_dual_coef_ = fit.x_dual_coef[:, :K].copy()
        self.y_dual_coef_ = fit.y_dual_coef[:, :K].copy()
        self.x_kernel_column_means_ = fit.x_column_means
        self.x_kernel_grand_mean_ = float(fit.x_grand_mean)
        self.y_kernel_column_means_ = fit.y_column_means
        self.y_kernel_grand_mean_ = float(fit.y_grand_mean)
        self.correlations_ = fit.correlations[:K].copy()
        self.regularized_correlations_ = fit.singular_values[:K].copy()
        return self

    def _kernels(self, n_features_x, n_features_y):
        """(kernel, KernelParams, degree) of each view, from the settings (so a model
        restored by :func:`latentlab.load` needs no private state)."""
        kernel_y = self.kernel if self.kernel_y is None else self.kernel_y
        return (
            resolve_kernel(self.kernel, self.gamma, self.degree, self.coef0, n_features_x),
            resolve_kernel(kernel_y, self.gamma, self.degree, self.coef0, n_features_y, "kernel_y"),
        )

    def _scores(self, V, V_fit, offset, kernel, dual, column_means, grand_mean):
        kernel, params, degree = kernel
        # the offset is removed in float64 here, before any cast to float32
        return to_numpy(
            map_rows(
                cf.kernel_cca_transform,
                V - offset,
                to_device(V_fit - offset),
                params,
                jnp.asarray(dual),
                jnp.asarray(column_means),
                jnp.asarray(grand_mean),
                kernel=kernel,
                degree=degree,
                work_per_row=len(V_fit),
            )
        )

    def _scores_x(self, X):
        kernel = self._kernels(self.n_features_in_, self.n_features_y_)[0]
        return self._scores(
            X,
            self.X_fit_,
            self.X_offset_,
            kernel,
            self.x_dual_coef_,
            self.x_kernel_column_means_,
            self.x_kernel_grand_mean_,
        )

    def _scores_y(self, Y):
        kernel = self._kernels(self.n_features_in_, self.n_features_y_)[1]
        return self._scores(
            Y,
            self.Y_fit_,
            self.Y_offset_,
            kernel,
            self.y_dual_coef_,
            self.y_kernel_column_means_,
            self.y_kernel_grand_mean_,
        )

    def _validate_loaded(self):
        """Checks on a model restored by :func:`latentlab.load` (settings and shapes)."""
        _check_reg(self.reg, positive=True, who="KernelCCA")
        self._kernels(self.n_features_in_, self.n_features_y_)
        n, p = np.shape(self.X_fit_)
        q, k = self.n_features_y_, self.n_components_
        if p != self.n_features_in_:
            raise ValueError(f"X_fit_ has {p} columns, not n_features_in_={self.n_features_in_}")
        expected = {
            "Y_fit_": (n, q),
            "X_offset_": (p,),
            "Y_offset_": (q,),
            "x_dual_coef_": (n, k),
            "y_dual_coef_": (n, k),
            "x_kernel_column_means_": (n,),
            "y_kernel_column_means_": (n,),
            "correlations_": (k,),
            "regularized_correlations_": (k,),
        }
        _check_shapes(self, expected)
