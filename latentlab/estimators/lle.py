"""``latentlab.LocallyLinearEmbedding``: standard, Hessian and modified LLE and LTSA, with an
out-of-sample ``transform``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from latentlab._docstrings import fill_doc
from latentlab._settings import Dtype, Integer, Options, RandomState, Real
from latentlab._shapes import pad_rows
from latentlab._validation import check_data, check_n_components
from latentlab.closed_form import lle as cf
from latentlab.closed_form import neighbors as nb
from latentlab.closed_form.eigensolvers import solve_with_fallback
from latentlab.estimators._dispatch import call, row_bucket, to_device
from latentlab.estimators._embedding import EmbeddingEstimator
from latentlab.estimators.base import check_finite_fit, to_numpy
from latentlab.estimators.isomap import check_n_neighbors, neighbors_of

__all__ = ["LocallyLinearEmbedding"]

EIGEN_SOLVERS = ("auto", "dense", "arpack", "lanczos")
METHODS = ("standard", "hessian", "modified", "ltsa")


@fill_doc
class LocallyLinearEmbedding(EmbeddingEstimator):
    """Locally linear embedding (Roweis & Saul 2000) and its variants.

    Standard LLE: each point is reconstructed from its ``n_neighbors`` nearest
    neighbours by weights that sum to one (regularised by ``reg``); the embedding is
    the bottom eigenvectors of ``(I - W)^T (I - W)``, the constant one skipped.  The
    other methods change the matrix whose bottom eigenvectors are taken (see
    ``method``).  Matches scikit-learn's ``LocallyLinearEmbedding`` on the same
    neighbours (up to the signs of the axes, or for the variants up to a rotation
    within a degenerate null space).

    Parameters
    ----------
    n_neighbors : int, default=5
        ``1 <= n_neighbors < n_samples`` (the point itself not counted).
    n_components : int, default=2
        ``1 <= n_components < n_samples``.
    reg : float, default=1e-3
        Ridge on each local Gram matrix, relative to its trace (standard and modified).
    method : {"standard", "hessian", "modified", "ltsa"}, default="standard"
        ``"hessian"``: Hessian eigenmaps (Donoho & Grimes 2003), the null space of the
        local Hessian estimators (needs ``n_neighbors > n_components (n_components +
        3) / 2``).  ``"modified"``: modified LLE (Zhang & Wang 2007), several
        independent weight vectors per point from its local Gram matrix's smallest
        eigenvectors (needs ``n_neighbors > n_components``).  ``"ltsa"``: local tangent
        space alignment (Zhang & Zha 2004).  The variants assemble their sparse matrix
        on the host (NumPy) and solve it by ``"arpack"`` or ``"dense"``
        (``"lanczos"`` means ``"arpack"`` there).
    hessian_tol : float, default=1e-4
        ``method="hessian"``: in each neighbourhood, directions of the quadratic
        tangent monomials (after removing the affine part) with singular values below
        ``hessian_tol`` times the largest are dropped from the Hessian estimator.
    modified_tol : float, default=1e-12
        ``method="modified"``: the local Gram eigenvalues are floored at
        ``modified_tol`` times the largest before their ratios are formed.
    eigen_solver : {"auto", "dense", "arpack", "lanczos"}, default="auto"
        ``"dense"``: full eigh of the dense matrix.  ``"arpack"``: ``(I - W)^T (I - W)``
        stays sparse; SciPy's sparse LU of it (shifted by a tiny ``epsilon``) and
        ARPACK on its inverse, the constant vector deflated (the wanted eigenvalues
        are tiny and clustered, which only shift-invert separates).  ``"lanczos"``:
        the same shift-invert with a dense Cholesky and block Lanczos on the device.
        The iterative solvers fall back to dense if they do not converge.
        ``"auto"``: arpack above 200 samples, dense below.
    {eigensolver_seed}

    Attributes
    ----------
    embedding_ : ndarray (n_samples, n_components)
        Unit-norm bottom eigenvectors (scikit-learn's scale).
    eigenvalues_ : ndarray (n_components,)
        Their eigenvalues, increasing.
    reconstruction_error_ : float
        ``sum(eigenvalues_)``, the cost of the embedding (of the chosen method).
    X_fit_ : ndarray (n_samples, n_features)
        A copy of the training data (new points' neighbours are found among them).
    {solver_attribute}
    n_features_in_ : int

    Examples
    --------
    >>> import latentlab
    >>> from sklearn.datasets import make_s_curve
    >>> X, _ = make_s_curve(100, random_state=0)
    >>> latentlab.LocallyLinearEmbedding(n_neighbors=10).fit(X).embedding_.shape
    (100, 2)
    """

    _settings = {
        "n_neighbors": Integer(1, None),  # < n_samples: checked with the data
        "n_components": Integer(),  # its range depends on the data
        "reg": Real(0, None, closed="neither", finite=True),
        "method": Options(*METHODS),
        "hessian_tol": Real(0, None, finite=True),
        "modified_tol": Real(0, None, finite=True),
        "eigen_solver": Options(*EIGEN_SOLVERS),
        "random_state": RandomState(),
        "dtype": Dtype(),
    }

    def __init__(
        self,
        n_neighbors=5,
        *,
        n_components=2,
        reg=1e-3,
        method="standard",
        hessian_tol=1e-4,
        modified_tol=1e-12,
        eigen_solver="auto",
        random_state=None,
        dtype="float64",
    ):
        self.n_neighbors = n_neighbors
        self.n_components = n_components
        self.reg = reg
        self.method = method
        self.hessian_tol = hessian_tol
        self.modified_tol = modified_tol
        self.eigen_solver = eigen_solver
        self.random_state = random_state
        self.dtype = dtype

    def _fit(self, X):
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n = X.shape[0]
        k = check_n_neighbors(self.n_neighbors, n)
        K = check_n_components(self.n_components, 1, n - 1, "n_samples - 1")
        self._check_method(k, K)
        reg = float(self.reg)
        dtype = np.float32 if self.dtype == "float32" else np.float64
        with self._precision():
            distances, indices = neighbors_of(X, X, k, exclude_self=True)
            nb.check_connected(
                nb.knn_graph(distances, indices),
                "neighbour graph",
                "Each component then has its own zero eigenvalue of (I - W)^T (I - W), so "
                "the embedding separates the components instead of unrolling them; "
                "increase n_neighbors.",
                error=False,
            )
            seed = check_random_state(self.random_state).randint(0, 2**31 - 1)
            if self.method != "standard":
                result, solver = self._fit_variant(X, indices, K, reg, seed, dtype)
                self.embedding_ = np.asarray(result.embedding)
                self.eigenvalues_ = np.asarray(result.eigenvalues)
                return self._finish(X, solver)
            Xj, idx, key = to_device(X), jnp.asarray(indices), jax.random.PRNGKey(seed)

            def solve(solver, **settings):
                if solver == "arpack":  # M is sparse: assembled and solved on the host
                    weights = call(cf.reconstruction_weights, n * k * k, Xj, idx, reg)
                    return cf.fit_lle_sparse(weights, indices, n_components=K, seed=seed)
                return call(
                    cf.fit_lle, n * n, Xj, idx, reg, key, n_components=K, solver=solver, **settings
                )

            result, solver = solve_with_fallback(
                solve, n, K, self.eigen_solver, dtype, shift_invert=True, sparse=True
            )
            self.embedding_ = to_numpy(result.embedding)
            self.eigenvalues_ = to_numpy(result.eigenvalues)
        return self._finish(X, solver)

    def _check_method(self, k, K):
        if self.method == "hessian" and k <= K * (K + 3) // 2:
            raise ValueError(
                f"method='hessian' needs n_neighbors > n_components * (n_components + 3) / 2 "
                f"= {K * (K + 3) // 2} (a constant, {K} linear and {K * (K + 1) // 2} "
                f"quadratic functions per neighbourhood); got n_neighbors={k}"
            )
        if self.method == "modified" and k <= K:
            raise ValueError(
                f"method='modified' needs n_neighbors > n_components={K}; got n_neighbors={k}"
            )

    def _fit_variant(self, X, indices, K, reg, seed, dtype):
        """Hessian LLE, modified LLE or LTSA: the sparse matrix on the host, its bottom
        eigenvectors by ARPACK (dense eigh for small n, or if ARPACK fails)."""
        if self.method == "hessian":
            M = cf.hessian_matrix(X, indices, K, float(self.hessian_tol))
        elif self.method == "modified":
            M = cf.modified_matrix(X, indices, K, reg, float(self.modified_tol))
        else:
            M = cf.ltsa_matrix(X, indices, K)
        n = X.shape[0]
        solver = self.eigen_solver
        if solver == "auto":
            solver = "arpack" if n > 200 else "dense"
        if solver == "lanczos":
            solver = "arpack"
        if solver == "arpack" and not n > 2 * K + 2:
            solver = "dense"
        result = None
        if solver == "arpack":
            result = cf.bottom_embedding(M, K, "arpack", seed)
            if not bool(result.converged):
                result, solver = None, "dense"
        if result is None:
            result = cf.bottom_embedding(M, K, "dense")
        return result, solver

    def _finish(self, X, solver):
        check_finite_fit(
            self, {"embedding_": self.embedding_}, "the eigenproblem is degenerate; increase reg"
        )
        self.reconstruction_error_ = float(np.sum(self.eigenvalues_))
        self.X_fit_ = X.copy()
        self.solver_ = solver
        return X

    def transform(self, X):
        """Coordinates of new points (for every method): their reconstruction weights on their
        ``n_neighbors`` nearest training points (the same regularised weights as in
        ``fit``) applied to those points' ``embedding_`` rows."""
        check_is_fitted(self)
        X = check_data(self, X, reset=False, allow_nan=False)
        reg = float(self.reg)
        m = X.shape[0]
        with self._precision():
            _, indices = neighbors_of(X, self.X_fit_, self.n_neighbors)
            rows = row_bucket(m)
            Z = call(
                cf.lle_transform,
                rows * self.n_neighbors * X.shape[1],
                to_device(pad_rows(X, rows)),
                to_device(self.X_fit_),
                jnp.asarray(pad_rows(indices, rows)),
                reg,
                jnp.asarray(self.embedding_),
            )
            return to_numpy(Z[:m])
