"""The chunk check of the estimators' ``partial_fit`` (GaussianLatentEstimator's
stepwise EM and GaussianMixture's stream).  Stepwise EM's statistics, the stream's
coordinates (``pilot_moments``) and its saved state are the models':
:mod:`latentlab.models._gaussian_latent_online` (re-exported by
:mod:`latentlab.models.gaussian_latent`).
"""

from __future__ import annotations

import numpy as np

from latentlab._validation import check_data, check_no_empty_columns, check_no_empty_rows

__all__ = ["check_chunk"]


def check_chunk(est, X, *, first: bool, min_samples: int):
    """Validated chunk (float64, NaN kept) and its observed mask."""
    name = type(est).__name__
    if getattr(X, "shape", None) is not None and len(X.shape) == 2 and X.shape[0] == 0:
        raise ValueError(f"{name}.partial_fit got an empty chunk (0 rows)")
    # later chunks: check_data refuses another column count with scikit-learn's
    # message ("X has 3 features, but PPCA is expecting 4 features as input.")
    X = check_data(est, X, reset=first, allow_nan=True, min_samples=min_samples)
    observed = ~np.isnan(X)
    check_no_empty_rows(observed)
    if first:  # the first chunk sets the coordinates: every feature must be seen
        check_no_empty_columns(observed)
    return X, observed
