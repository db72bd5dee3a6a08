"""Estimator-side pieces the embedding estimators share (Isomap, LLE, MDS, spectral)."""

from __future__ import annotations

__all__ = ["FitsEmbedding", "PairwiseWhenPrecomputed"]


class FitsEmbedding:
    """``fit``/``fit_transform`` of an estimator whose ``_fit(X)`` sets ``embedding_``
    (n_samples, n_components); list it before scikit-learn's ``TransformerMixin``."""

    def fit(self, X, y=None):
        """Fit the embedding to X (n_samples, n_features), or to the (n, n) matrix the
        estimator's settings say X holds."""
        self._fit(X)
        return self

    def fit_transform(self, X, y=None):
        """Fit to X and return its embedding (n_samples, n_components)."""
        self._fit(X)
        return self.embedding_.copy()

    @property
    def _n_features_out(self):
        return self.embedding_.shape[1]


class PairwiseWhenPrecomputed:
    """scikit-learn's ``pairwise`` input tag, on when the setting named
    ``_pairwise_setting`` is ``"precomputed"`` or ``"precomputed_nearest_neighbors"``
    (X is then an (n, n) matrix); ``_accepts_sparse`` sets the ``sparse`` input tag."""

    _pairwise_setting = "affinity"
    _accepts_sparse = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        value = getattr(self, self._pairwise_setting)
        tags.input_tags.pairwise = isinstance(value, str) and value in (
            "precomputed",
            "precomputed_nearest_neighbors",
        )
        tags.input_tags.sparse = tags.input_tags.sparse or self._accepts_sparse
        return tags
