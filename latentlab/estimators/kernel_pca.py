"""``latentlab.KernelPCA``: kernel PCA with out-of-sample projection and pre-images.

The kernel helpers it shares with KernelCCA are in ``_kernels``.  It is over ~400
lines because ~120 are the class's docstring and ``_fit`` routes dense, sparse,
precomputed and callable kernels to their solvers in one place.
"""

from __future__ import annotations

import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from latentlab._settings import (
    Boolean,
    Dtype,
    Integer,
    Options,
    RandomState,
    Real,
)
from latentlab._validation import check_codes, check_data, check_n_components, check_symmetric
from latentlab.closed_form import kernel_pca as cf
from latentlab.closed_form.eigensolvers import LANCZOS_MIN_SAMPLES, solver_threads
from latentlab.closed_form.sparse import host_kernel
from latentlab.estimators._dispatch import call, map_rows, to_device
from latentlab.estimators._kernels import (
    PairwiseKernel,
    check_gram,
    kernel_offset,
    kernel_settings,
    lanczos_settings,
    precomputed_kernel,
    resolve_kernel,
)
from latentlab.estimators._sparse import check_sparse_data, is_sparse
from latentlab.estimators.base import LATENTLAB_FILES, LatentEstimator, jax_key, to_numpy

__all__ = ["KernelPCA", "resolve_kernel", "kernel_offset"]

EIGEN_SOLVERS = ("auto", "dense", "lanczos", "arpack", "randomized")


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """Kernel principal component analysis (Schölkopf, Smola & Müller 1998).

    PCA of the doubly centred Gram matrix, computed by jit-compiled JAX in float64, with
    scikit-learn's ``KernelPCA`` conventions (``eigenvalues_`` are those of the centred
    Gram matrix, training projections are ``eigenvectors_ * sqrt(eigenvalues_)``).

    Parameters
    ----------
    n_components : int or None, default=None
        Number of components, ``1 <= n_components <= n_samples``; None keeps every
        component with a non-zero eigenvalue (as ``remove_zero_eig=True``).
    kernel : {"linear", "rbf", "poly", "sigmoid", "cosine", "precomputed"} or callable, \
default="linear"
        A callable ``k(A, B)`` mapping arrays (n, d), (m, d) to the (n, m) Gram matrix
        and traceable by ``jax.jit`` runs in the compiled programs; a callable
        ``k(x, y)`` of two rows returning a number (scikit-learn's form, NumPy code
        allowed) is evaluated pair by pair on the host, as scikit-learn's
        ``pairwise_kernels`` does, and pre-images are then unavailable.
        ``"precomputed"``: ``fit`` takes the (n, n) training kernel matrix and
        ``transform`` the (m, n) kernel between new and training points (as
        scikit-learn); pre-images are then unavailable
        (``fit_inverse_transform=True`` is refused).
    gamma : float or None, default=None
        For rbf, poly and sigmoid; None means ``1 / n_features``.
    degree : int, default=3
        For poly.
    coef0 : float, default=1
        For poly and sigmoid.
    fit_inverse_transform : bool, default=False
        Learn the pre-image map by kernel ridge regression (needed by
        :meth:`inverse_transform`).
    alpha : float, default=1.0
        Ridge penalty of the pre-image regression, ``>= 0``.
    eigen_solver : {"auto", "dense", "lanczos", "arpack", "randomized"}, default="auto"
        ``"dense"``: full eigh.  ``"lanczos"`` (``"arpack"`` is scikit-learn's name for
        its Lanczos solver and means the same here): block Lanczos with full
        reorthogonalisation, run until every residual ``||K v - lambda v||`` is at most
        1e-11 of the largest eigenvalue (eigenvalues then agree with dense eigh to
        ~1e-14 relative), falling back to dense eigh if it does not get there (and
        when the Krylov basis would not fit: n_samples below about 2 n_components +
        32, or n_components > ~190).  ``"randomized"``: a fixed number of power iterations
        (fast, but inexact on flat spectra).  ``"auto"``: lanczos when ``n_samples >
        500`` and ``n_components`` is given and small enough, else dense.
    n_oversamples : int, default=10
    iterated_power : int or "auto", default="auto"
        Power iterations of the randomized solver ("auto": 7 if ``n_components <
        0.1 n_samples`` else 4).
    remove_zero_eig : bool, default=False
        Eigenvalues at or below the numerical rank tolerance of the centred kernel
        (``n_samples * eps`` times the largest entry of the uncentred kernel or
        eigenvalue, and at least 1e-12 of the largest eigenvalue; 2e-7 in float32)
        are set to exactly 0.  False (scikit-learn's default) keeps their components,
        which then project every point to 0, so ``n_components_ == n_components``;
        True drops them, so ``n_components_`` may be smaller, even 0.  With
        ``n_components=None`` they are always dropped.
    random_state : int, RandomState or None, default=None
    copy_X : bool, default=True
        Keep a copy of the training data in ``X_fit_`` (as scikit-learn).  False keeps
        a reference to the validated array instead, which is the caller's own array
        when it is already a float64 NumPy array (or SciPy sparse matrix): changing it
        afterwards then changes :meth:`transform`.
    dtype : {"float64", "float32"}, default="float64"

    Attributes
    ----------
    eigenvalues_ : ndarray (n_components_,)
        Eigenvalues of the centred Gram matrix, decreasing; those below the rank
        tolerance are exactly 0 (see ``remove_zero_eig``).
    eigenvectors_ : ndarray (n_samples, n_components_)
        Unit eigenvectors; the largest-magnitude entry of each is positive.
    X_fit_ : ndarray (n_samples, n_features)
        A copy of the training data (the training kernel matrix for
        ``kernel="precomputed"``; a reference with ``copy_X=False``).
    X_offset_ : ndarray (n_features,)
        Subtracted from every sample (in float64, before any cast to float32) before the
        kernel is evaluated: the training mean for the shift-invariant kernels
        ("linear", "rbf"), which makes results independent of where the data sit;
        zeros for the others.
    kernel_column_means_ : ndarray (n_samples,)
        Column means of the training Gram matrix (of the offset data), for centring the
        kernel of new points consistently.
    kernel_grand_mean_ : float
        Mean of the training Gram matrix.
    gamma_ : float
    solver_ : str
        The eigensolver actually used ("dense" after a fallback).
    dual_coef_, X_transformed_fit_ : ndarray
        Pre-image regression (only with ``fit_inverse_transform=True``).
    n_components_, n_features_in_ : int

    Notes
    -----
    Sparse X (SciPy CSR/CSC; other formats are converted): the built-in kernels are
    formed by SciPy from the sparse rows (``A B^T`` and row norms), so X is never
    densified, and are then decomposed as a precomputed kernel; ``X_fit_`` stays
    sparse (such a model cannot be written by :func:`latentlab.save`), ``X_offset_``
    is zero, and ``fit_inverse_transform=True`` is refused.  A callable kernel
    traces JAX arrays, so sparse X is densified for it.

    Examples
    --------
    >>> import numpy as np, latentlab
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> latentlab.KernelPCA(n_components=2, kernel="rbf").fit(X).transform(X).shape
    (50, 2)
    """

    _settings = {
        "n_components": Integer() | None,
        **kernel_settings(),
        "fit_inverse_transform": Boolean(),
        "alpha": Real(0, None),
        "eigen_solver": Options(*EIGEN_SOLVERS),
        "n_oversamples": Integer(0, None),
        "iterated_power": Integer(0, None) | "auto",
        "remove_zero_eig": Boolean(),
        "random_state": RandomState(),
        "copy_X": Boolean(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_components=None,
        *,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=1,
        fit_inverse_transform=False,
        alpha=1.0,
        eigen_solver="auto",
        n_oversamples=10,
        iterated_power="auto",
        remove_zero_eig=False,
        random_state=None,
        copy_X=True,
        dtype="float64",
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.fit_inverse_transform = fit_inverse_transform
        self.alpha = alpha
        self.eigen_solver = eigen_solver
        self.n_oversamples = n_oversamples
        self.iterated_power = iterated_power
        self.remove_zero_eig = remove_zero_eig
        self.random_state = random_state
        self.copy_X = copy_X
        self.dtype = dtype

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # X is then an (n, n) Gram matrix: cross-validation must slice its columns as
        # well as its rows (scikit-learn's KernelPCA declares the same).
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.input_tags.sparse = True
        return tags

    def _kernel(self):
        """(kernel, KernelParams, degree) of the fitted model, from its settings.

        Recomputed rather than kept in private state, so that a model restored by
        :func:`latentlab.load` (which stores settings and public fitted attributes
        only) transforms exactly as the fitted one.
        """
        kernel, params, degree = resolve_kernel(
            self.kernel,
            self.gamma_,
            self.degree,
            self.coef0,
            self.n_features_in_,
            allow_precomputed=True,
            allow_pairwise=True,
        )
        return params, {"kernel": kernel, "degree": degree}

    def _validate_loaded(self):
        """Checks on a model restored by :func:`latentlab.load` (settings and shapes)."""
        self._kernel()
        n, d = self.X_fit_.shape
        k = self.n_components_
        if d != self.n_features_in_:
            raise ValueError(f"X_fit_ has {d} columns, not n_features_in_={self.n_features_in_}")
        expected = {
            "X_offset_": (d,),
            "kernel_column_means_": (n,),
            "eigenvalues_": (k,),
            "eigenvectors_": (n, k),
        }
        if self.fit_inverse_transform:
            expected.update(X_transformed_fit_=(n, k), dual_coef_=(n, d))
        for name, shape in expected.items():
            if np.shape(getattr(self, name)) != shape:
                raise ValueError(f"{name} has shape {np.shape(getattr(self, name))}, not {shape}")
        if not np.all(self.eigenvalues_ >= 0):
            raise ValueError("eigenvalues_ must be positive or zero")

    def fit(self, X, y=None):
        """Fit the model to X (n_samples, n_features)."""
        self._fit(X)
        return self

    def fit_transform(self, X, y=None):
        """Fit to X and return its training projections ``eigenvectors_ * sqrt(eigenvalues_)``."""
        self._fit(X)
        return self.eigenvectors_ * np.sqrt(self.eigenvalues_)

    def _fit(self, X):
        if is_sparse(X):
            X = check_sparse_data(self, X, reset=True, min_samples=2)
        else:
            X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n, d = X.shape
        kernel, params, degree = resolve_kernel(
            self.kernel,
            self.gamma,
            self.degree,
            self.coef0,
            d,
            allow_precomputed=True,
            allow_pairwise=True,
        )
        # Built-in kernels of sparse X are formed by SciPy from the sparse rows (X is
        # never densified), and a callable of two rows (scikit-learn's form) pair by
        # pair on the host; both are then treated as a precomputed kernel.  A callable
        # k(A, B) must trace JAX arrays, and a precomputed kernel is dense by nature:
        # those densify.
        pairwise = isinstance(kernel, PairwiseKernel)
        host = (is_sparse(X) and isinstance(kernel, str)) or pairwise
        if is_sparse(X) and not host:
            X = X.toarray()
        if pairwise and self.fit_inverse_transform:
            raise ValueError(
                "fit_inverse_transform=True needs a kernel JAX can differentiate and trace: "
                "write the callable as k(A, B) of two row arrays in jax.numpy"
            )
        if host and self.fit_inverse_transform:
            raise ValueError(
                "fit_inverse_transform=True is not available for sparse X: the pre-image "
                "regression predicts dense rows; pass X.toarray()"
            )
        if kernel is precomputed_kernel:
            # a settings error, refused before anything about X (as scikit-learn)
            if self.fit_inverse_transform:
                raise ValueError(
                    "Cannot fit_inverse_transform with a precomputed kernel: the pre-image "
                    "regression needs the data, not only their kernel; fit on X with its "
                    "kernel named instead"
                )
            if n != d:
                raise ValueError(
                    "kernel='precomputed' needs the square (n_samples, n_samples) training "
                    f"kernel matrix, got shape {X.shape}"
                )
            # A kernel matrix is symmetric, but the solvers read it as given and centre it
            # with its column means only: take its symmetric part, which has the same
            # centred form as the matrix whenever that form is symmetric (scikit-learn
            # centres rows and columns separately and accepts such matrices); refuse
            # any other asymmetry, as MDS and the spectral methods do.
            check_symmetric(X, "kernel='precomputed': the kernel matrix X", centred=True)
            X = (X + X.T) / 2
        K = n if self.n_components is None else self.n_components
        K = check_n_components(K, 1, n, "n_samples")
        solver = "lanczos" if self.eigen_solver == "arpack" else self.eigen_solver
        lanczos = lanczos_settings(n, K, np.float32 if self.dtype == "float32" else np.float64)
        if solver == "auto":
            solver = "lanczos" if n > LANCZOS_MIN_SAMPLES and lanczos is not None else "dense"
        if solver == "lanczos" and lanczos is None:
            solver = "dense"
        power = self.iterated_power
        if power == "auto":
            power = 7 if K < 0.1 * n else 4
        if host:  # (no offset: shifting sparse rows would densify them)
            offset = np.zeros(d)
            gram = host_kernel(kernel, X, X, params.gamma, degree, params.coef0)
            fit_input, fit_kernel = (gram + gram.T) / 2, precomputed_kernel
        else:
            offset = kernel_offset(kernel, X)
            fit_input, fit_kernel = X - offset, kernel
        with self._precision():
            Xj = to_device(fit_input)
            if callable(fit_kernel):
                check_gram(jax.eval_shape(fit_kernel, Xj, Xj), n, n)
            fit = partial(
                call,
                cf.fit_kernel_pca,
                n * n,
                Xj,
                params,
                jax_key(self.random_state),
                n_oversamples=int(self.n_oversamples),
                n_iter=int(power),
                kernel=fit_kernel,
                degree=degree,
            )
            if solver == "lanczos":
                block, blocks, products, tol = lanczos
                with solver_threads(solver):  # its small host LAPACK calls on one thread
                    result = jax.block_until_ready(
                        fit(
                            n_components=K,
                            solver=solver,
                            block_size=block,
                            max_blocks=blocks,
                            max_products=products,
                            tol=tol,
                        )
                    )
                if not bool(result.converged):  # rare: an exact answer the slow way
                    solver = "dense"
            if solver != "lanczos":
                result = fit(n_components=K if solver == "randomized" else None, solver=solver)
            eigenvalues = to_numpy(result.eigenvalues)[:K]
            eigenvectors = to_numpy(result.eigenvectors)[:, :K]
            tolerance = float(result.rank_tolerance)
        if not np.isfinite(eigenvalues).all():
            raise ValueError("The kernel matrix is not finite; check the kernel and its gamma")
        # A kernel is positive semi-definite, so a requested eigenvalue far below zero (not
        # round-off) means this one is not -- a precomputed or custom kernel -- and its
        # "components" would be meaningless: reject it, as scikit-learn does, rather than
        # silently dropping those directions with the (near-)zero ones.
        negative_floor = max(tolerance, 1e-5 * float(np.abs(eigenvalues).max()))
        if (eigenvalues < -negative_floor).any():
            raise ValueError(
                "There are significant negative eigenvalues in the centred kernel matrix "
                f"(smallest {eigenvalues.min():.4g}, largest {eigenvalues.max():.4g}): the "
                "kernel is not positive semi-definite. Check a precomputed or custom kernel, "
                "or ask for fewer components."
            )
        # scikit-learn's floor for "zero" too (_check_psd_eigenvalues: 1e-12 of the
        # largest in float64), so its zeroed eigenvalues are ours
        small_ratio = 2e-7 if self.dtype == "float32" else 1e-12
        tolerance = max(tolerance, small_ratio * float(eigenvalues.max(initial=0.0)))
        zero = eigenvalues <= tolerance
        eigenvalues = np.where(zero, 0.0, eigenvalues)
        kept = ~zero if self.remove_zero_eig or self.n_components is None else zero | ~zero
        if not kept.any():
            warnings.warn(
                "The centred kernel matrix is numerically zero: every sample looks the same "
                "in the kernel's feature space, so there are no components "
                "(n_components_=0)",
                UserWarning,
                skip_file_prefixes=LATENTLAB_FILES,
            )
        rank = int(kept.sum())
        self.solver_ = solver
        self.gamma_ = params.gamma
        self.eigenvalues_ = eigenvalues[kept]
        self.eigenvectors_ = eigenvectors[:, kept].copy()  # owns its data
        self.n_components_ = rank
        # the caller may change their array after fit (a reference only when asked)
        self.X_fit_ = X.copy() if self.copy_X else X
        self.X_offset_ = offset
        self.kernel_column_means_ = to_numpy(result.column_means)
        self.kernel_grand_mean_ = float(result.grand_mean)
        if self.fit_inverse_transform:
            self.X_transformed_fit_ = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
            with self._precision():
                self.dual_coef_ = to_numpy(
                    call(
                        cf.fit_preimage,
                        n * n,
                        jnp.asarray(self.X_transformed_fit_),
                        jnp.asarray(X),
                        params,
                        float(self.alpha),
                        kernel=kernel,
                        degree=degree,
                    )
                )
            if not np.isfinite(self.dual_coef_).all():
                raise ValueError(
                    "The pre-image regression is singular; use alpha > 0 "
                    f"(got alpha={self.alpha!r})"
                )
        return X

    @property
    def _n_features_out(self):
        return self.n_components_

    def transform(self, X):
        """Project new points (n_samples, n_features) with the consistently centred kernel.

        With ``kernel="precomputed"``, X is the kernel between the new and the training
        points, shape (n_samples, n_training_samples).
        """
        check_is_fitted(self)
        if is_sparse(X):
            X = check_sparse_data(self, X, reset=False)
        else:
            X = check_data(self, X, reset=False, allow_nan=False)
        params, kernel_args = self._kernel()
        if is_sparse(self.X_fit_) or isinstance(kernel_args["kernel"], PairwiseKernel):
            # the test kernel on the host, as at fit time (no offset there)
            kernel_new = host_kernel(
                kernel_args["kernel"],
                X,
                self.X_fit_,
                params.gamma,
                kernel_args["degree"],
                params.coef0,
            )
            with self._precision():
                return to_numpy(
                    map_rows(
                        cf.kernel_pca_transform,
                        kernel_new,
                        jnp.zeros((1, 1)),  # unused by a precomputed kernel
                        params,
                        jnp.asarray(self.eigenvalues_),
                        jnp.asarray(self.eigenvectors_),
                        jnp.asarray(self.kernel_column_means_),
                        jnp.asarray(self.kernel_grand_mean_),
                        work_per_row=len(self.eigenvectors_),
                        kernel=precomputed_kernel,
                        degree=kernel_args["degree"],
                    )
                )
        if is_sparse(X):  # new rows for a model fitted on dense data
            X = X.toarray()
        with self._precision():
            # the offset is removed in float64 here, before any cast to float32
            return to_numpy(
                map_rows(
                    cf.kernel_pca_transform,
                    X - self.X_offset_,
                    to_device(self.X_fit_ - self.X_offset_),
                    params,
                    jnp.asarray(self.eigenvalues_),
                    jnp.asarray(self.eigenvectors_),
                    jnp.asarray(self.kernel_column_means_),
                    jnp.asarray(self.kernel_grand_mean_),
                    work_per_row=len(self.X_fit_),
                    **kernel_args,
                )
            )

    def inverse_transform(self, X):
        """Approximate pre-images of projections (n_samples, n_components_), by the
        kernel ridge map learnt at fit time (``fit_inverse_transform=True``)."""
        check_is_fitted(self)
        if self.kernel == "precomputed":
            raise NotFittedError(
                "inverse_transform is not available with kernel='precomputed': pre-images "
                "need the training data, which a precomputed kernel does not give"
            )
        if not self.fit_inverse_transform:
            raise NotFittedError(
                "inverse_transform needs fit_inverse_transform=True when the model is fitted"
            )
        Z = check_codes(X, self.n_components_)
        params, kernel_args = self._kernel()
        with self._precision():
            return to_numpy(
                map_rows(
                    cf.preimage,
                    Z,
                    jnp.asarray(self.X_transformed_fit_),
                    jnp.asarray(self.dual_coef_),
                    params,
                    work_per_row=len(self.X_transformed_fit_),
                    **kernel_args,
                )
            )
