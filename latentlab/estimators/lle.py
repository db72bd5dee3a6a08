"""``latentlab.LocallyLinearEmbedding``: standard LLE with an out-of-sample ``transform``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
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
from latentlab.estimators._embedding import FitsEmbedding
from latentlab.estimators.base import LatentEstimator, check_finite_fit, to_numpy
from latentlab.estimators.isomap import check_n_neighbors, neighbors_of

__all__ = ["LocallyLinearEmbedding"]

EIGEN_SOLVERS = ("auto", "dense", "arpack", "lanczos")


@fill_doc
class LocallyLinearEmbedding(
    FitsEmbedding, ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator
):
    """Locally linear embedding (Roweis & Saul 2000), the standard method.

    Each point is reconstructed from its ``n_neighbors`` nearest neighbours by weights
    that sum to one (regularised by ``reg``); the embedding is the bottom eigenvectors
    of ``(I - W)^T (I - W)``, the constant one skipped.  Matches scikit-learn's
    ``LocallyLinearEmbedding(method="standard")`` on the same neighbours (up to the
    signs of the axes).

    Parameters
    ----------
    n_neighbors : int, default=5
        ``1 <= n_neighbors < n_samples`` (the point itself not counted).
    n_components : int, default=2
        ``1 <= n_components < n_samples``.
    reg : float, default=1e-3
        Ridge on each local Gram matrix, relative to its trace.
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
        ``sum(eigenvalues_)``, the LLE cost of the embedding.
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
        eigen_solver="auto",
        random_state=None,
        dtype="float64",
    ):
        self.n_neighbors = n_neighbors
        self.n_components = n_components
        self.reg = reg
        self.eigen_solver = eigen_solver
        self.random_state = random_state
        self.dtype = dtype

    def _fit(self, X):
        X = check_data(self, X, reset=True, allow_nan=False, min_samples=2)
        n = X.shape[0]
        k = check_n_neighbors(self.n_neighbors, n)
        K = check_n_components(self.n_components, 1, n - 1, "n_samples - 1")
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
        check_finite_fit(
            self, {"embedding_": self.embedding_}, "the eigenproblem is degenerate; increase reg"
        )
        self.reconstruction_error_ = float(np.sum(self.eigenvalues_))
        self.X_fit_ = X.copy()
        self.solver_ = solver
        return X

    def transform(self, X):
        """Coordinates of new points: their reconstruction weights on their
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
