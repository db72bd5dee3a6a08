"""Estimator-side pieces the embedding estimators share (Isomap, LLE, MDS, spectral)."""

from __future__ import annotations

from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin

from latentlab.estimators.base import LatentEstimator

__all__ = ["EmbeddingEstimator", "pairwise_tags"]

# the settings under which X is an (n, n) matrix rather than n_samples rows of features
PRECOMPUTED = ("precomputed", "precomputed_nearest_neighbors")


def pairwise_tags(tags, value, *, accepts_sparse=False):
    """scikit-learn's input tags, set in place and returned: ``pairwise`` when the
    estimator's setting ``value`` (its ``metric`` or ``affinity``) is
    ``"precomputed"`` or ``"precomputed_nearest_neighbors"`` (X is then an (n, n)
    matrix); ``sparse`` too when ``accepts_sparse``."""
    tags.input_tags.pairwise = isinstance(value, str) and value in PRECOMPUTED
    tags.input_tags.sparse = tags.input_tags.sparse or accepts_sparse
    return tags


class EmbeddingEstimator(ClassNamePrefixFeaturesOutMixin, TransformerMixin, LatentEstimator):
    """Base of the embedding transformers (Isomap, LLE, MDS): ``fit``/``fit_transform``
    of an estimator whose ``_fit(X)`` sets ``embedding_`` (n_samples, n_components),
    and scikit-learn's transformer conventions (``<classname><i>`` feature names,
    ``set_output``).

    scikit-learn's mixins are bases of this class rather than of each subclass: left of
    :class:`LatentEstimator`, so their tags are applied on top of its, and after this
    class in the MRO, so a subclass gets this ``fit_transform``, not
    ``TransformerMixin``'s."""

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
