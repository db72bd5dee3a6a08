"""What a model restored by :func:`latentlab.load` must satisfy before it is returned.

The file's checksum catches accidents, not edits (anyone can recompute it), so a
restored model is checked against its class's own description of its fitted state,
:data:`FITTED_STATE`: which fitted attributes the class has (a file relabelled as
another class carries the wrong names), the dtype kind and the shape of each, how the
shapes relate to each other and to the fitted counts (``n_features_in_``,
``n_components_``, ...), and what values a fit can produce (finite; variances and
scales positive and invertible; probabilities on the simplex; Cholesky factors
lower-triangular; unit weight vectors unit; values small enough that their squares,
which every model forms, stay finite).  :func:`validate_restored` is the one place
that applies it.  A class may add checks of its settings (a kernel's parameters) in a
``_validate_loaded`` method, run last.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["FITTED_STATE", "Field", "validate_restored", "_Corrupt"]


class _Corrupt(ValueError):
    """A problem found while parsing; ``load`` adds the file name."""


# -- the description --------------------------------------------------------------------

OPTIONAL = "optional"  # may be absent
STREAM = "stream"  # the running state of partial_fit: all of it or none


class Field(NamedTuple):
    """One fitted attribute (a dict attribute's entries are named ``attr/key``).

    ``shape``: one item per axis (``()`` for a scalar), each a letter naming a size
    that must agree wherever it appears (letters in :data:`_COUNTS` are also the
    value of that fitted count) or a fixed int.  ``check``: what its values must
    satisfy (:data:`_CHECKS`).  ``when``: None (always present), :data:`OPTIONAL`,
    :data:`STREAM`, or a predicate of the estimator's settings: present when it
    holds (and allowed otherwise: a refit with other settings may leave it).
    ``nullable``: None is a valid value.
    """

    shape: tuple
    check: str
    when: str | Callable[[Any], bool] | None = None
    nullable: bool = False


def _field(shape: str | tuple = "", check: str = "real", when=None, nullable=False) -> Field:
    """The table's shorthand for a :class:`Field`: a string shape is one letter per
    axis ("" for a scalar)."""
    return Field(tuple(shape), check, when, nullable)


# Letters that name a fitted count: the arrays' axes must agree with its value.
_COUNTS = {
    "d": "n_features_in_",
    "K": "n_components_",
    "q": "n_features_y_",
    "t": "n_targets_",
    "c": "n_clusters_",
    "n": "n_leaves_",
}
# Other letters agree only within one model: m = the fit's rows (X_fit_, embedding_,
# scores), i = the iterations an objective trace records (not always n_iter_: a
# closed-form PPCA records its one objective with n_iter_ = 0), k = K + 1, l =
# landmarks, f = fitted PLS components, and so on.

# What the values of each kind of field must satisfy (and the dtype kind it has).
# "real": a first-order quantity (loadings, means, data rows), finite with finite
# squares; "nonneg_real": one that is >= 0 (distances, singular values, NMF's
# components); "moment": a second-order one (eigenvalues, kernel values, losses),
# finite and never subnormal (its reciprocal would overflow); "nonneg": >= 0 (counts,
# masses, errors); "positive": a variance or scale, a normal float > 0; "trace": an
# objective trace, never NaN or +inf (-inf: a chunk the model gave probability 0).
_CHECKS = {
    "real": "f",
    "nonneg_real": "f",
    "moment": "f",
    "trace": "f",
    "nonneg": "f",
    "positive": "f",
    "zero_or_positive": "f",
    "fraction": "f",
    "simplex": "f",
    "cholesky": "f",
    "unit_rows": "f",
    "unit_columns": "f",
    "count": "i",
    "index": "i",
    "label": "any",
    "bool": "b",
    "str": "str",
}
# relative round-off allowed where a fit makes two numbers equal (a unit vector's
# norm and 1; float32 fits agree to ~1e-6)
_TOLERANCE = 1e-4


def _if(setting: str, *values) -> Callable[[Any], bool]:
    """Present when ``setting`` is one of ``values`` (no values: when it is truthy)."""
    if values:
        return lambda est: getattr(est, setting) in values
    return lambda est: bool(getattr(est, setting))


def _unless(setting: str, *values) -> Callable[[Any], bool]:
    """Present unless ``setting`` is one of ``values``."""
    return lambda est: getattr(est, setting) not in values


_COMMON = {
    "n_features_in_": _field("", "count"),
    "feature_names_in_": _field("d", "str", OPTIONAL),
}
_EM_TRACE = {
    "n_iter_": _field("", "count"),
    "converged_": _field("", "bool"),
    "log_likelihoods_": _field("i", "trace"),
}


def _fitted_by_fit(est) -> bool:
    # fit's standardisation; a partial_fit stream keeps its own (online_state_)
    return not hasattr(est, "online_state_")


_GAUSSIAN_LATENT = {
    "n_components_": _field("", "count"),
    "fit_scale_": _field("", "positive", _fitted_by_fit),
    "fit_shift_": _field("d", "real", _fitted_by_fit),
    **_EM_TRACE,
    "params_/W": _field("dK"),
    "params_/mu": _field("d"),
}
# partial_fit's running state of PPCA and FA (statistics of [z, 1]: k = K + 1)
_LATENT_STREAM = {
    "n_samples_seen_": _field("", "count", STREAM),
    "online_state_/shift": _field("d", "real", STREAM),
    "online_state_/unit": _field("d", "positive", STREAM),
    "online_state_/stats_count": _field("d", "nonneg", STREAM),
    "online_state_/stats_sum_x2": _field("d", "nonneg", STREAM),
    "online_state_/stats_sum_xz": _field("dk", "real", STREAM),
    "online_state_/stats_sum_zz": _field("dkk", "moment", STREAM),
    "online_state_/param_W": _field("dK", "real", STREAM),
    "online_state_/param_mu": _field("d", "real", STREAM),
}
# the rotation PPCA and FactorAnalysis report (identity matrices without one)
_ROTATION = {
    "rotation_matrix_": _field("KK", "real", OPTIONAL),
    "factor_correlation_": _field("KK", "real", OPTIONAL),
}
_TWO_VIEW = {
    "n_features_y_": _field("", "count"),
    "y_ndim_": _field("", "count"),
    "n_components_": _field("", "count"),
}
_PLS_MEANS = {
    "x_mean_": _field("d"),
    "y_mean_": _field("q"),
    "x_std_": _field("d", "positive"),
    "y_std_": _field("q", "positive"),
}
_NIPALS = {
    **_TWO_VIEW,
    **_PLS_MEANS,
    "n_iter_": _field("f", "count"),  # power iterations of each fitted component
    "x_weights_": _field("dK", "unit_columns"),
    "y_weights_": _field("qK"),  # PLSRegression leaves the y weights unnormalised
    "x_loadings_": _field("dK"),
    "y_loadings_": _field("qK"),
    "x_rotations_": _field("dK"),
    "y_rotations_": _field("qK"),
    "x_scores_": _field("mK"),
    "y_scores_": _field("mK"),
    "coef_": _field("qd"),
    "intercept_": _field("q"),
}
_EMBEDDING = {
    "solver_": _field("", "str"),
    "eigenvalues_": _field("K", "moment"),
    "embedding_": _field("mK"),
}

_MIXTURE_SCALE = {  # covariance_type -> (shape of its scale, check)
    "full": ("Kdd", "cholesky"),
    "tied": ("dd", "cholesky"),
    "diag": ("Kd", "positive"),
    "spherical": ("K", "positive"),
}


def _mixture_state(est) -> dict[str, Field]:
    covariance_type = est.covariance_type
    if covariance_type not in _MIXTURE_SCALE:
        raise _Corrupt(f"unknown covariance_type {covariance_type!r}")
    shape, check = _MIXTURE_SCALE[covariance_type]
    # partial_fit's scatter about the component means: (K, d, d) or (K, d)
    scatter = ("Kdd", "moment") if covariance_type in ("full", "tied") else ("Kd", "nonneg")
    return {
        "n_components_": _field("", "count"),
        **_EM_TRACE,
        "lower_bound_": _field("", "moment"),
        "lower_bounds_": _field("i", "trace"),
        "params_/weights": _field("K", "simplex"),
        "params_/means": _field("Kd"),
        "params_/scale": _field(shape, check),
        # the covariance penalty's pseudo-rows and target variances (when tau > 0)
        "covariance_prior_": _field("", "nonneg", OPTIONAL),
        "covariance_prior_variance_": _field("d", "positive", OPTIONAL),
        "n_samples_seen_": _field("", "count", STREAM),
        "online_state_/shift": _field("d", "real", STREAM),
        "online_state_/unit": _field("d", "positive", STREAM),
        "online_state_/reg_covar": _field("d", "nonneg", STREAM),
        "online_state_/rows_per_call": _field("", "count", STREAM),
        "online_state_/mass": _field("K", "nonneg", STREAM),
        "online_state_/mean": _field("Kd", "real", STREAM),
        "online_state_/scatter": _field(*scatter, STREAM),
        "online_state_/param_weights": _field("K", "nonneg", STREAM),
        "online_state_/param_means": _field("Kd", "real", STREAM),
        "online_state_/param_scale": _field(shape, check, STREAM),
    }


def _layers(prefix: str, sizes: tuple, last_bias: bool = True) -> dict[str, Field]:
    """The fields ``prefix_W{i}`` (sizes[i], sizes[i+1]) and ``prefix_b{i}`` of an
    MLP (``latentlab.models.vae.layers_to_dict``)."""
    fields = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        fields[f"{prefix}_W{i}"] = _field((fan_in, fan_out))
        if last_bias or i < len(sizes) - 2:
            fields[f"{prefix}_b{i}"] = _field((fan_out,))
    return fields


def _hidden(est) -> tuple:
    # the settings table has checked hidden_layer_sizes already
    return tuple(int(s) for s in est.hidden_layer_sizes)


def _autoencoder_state(est) -> dict[str, Field]:
    hidden = _hidden(est)
    sizes = ("d", *hidden, "K")
    linear = not hidden or est.activation in ("linear", "identity")
    return {
        "n_components_": _field("", "count"),
        "n_iter_": _field("", "count"),
        "converged_": _field("", "bool"),
        "solver_": _field("", "str"),
        "mean_": _field("d"),
        "scale_": _field("", "positive"),
        "loss_": _field("", "moment"),
        "loss_curve_": _field("i", "moment"),
        "validation_scores_": _field("i", "trace", nullable=True),
        "best_validation_score_": _field("", "moment", nullable=True),
        # the code layer has no bias; the decoder mirrors the encoder
        **{f"params_/{k}": v for k, v in _layers("encoder", sizes, last_bias=False).items()},
        **{f"params_/{k}": v for k, v in _layers("decoder", sizes[::-1]).items()},
        "components_": _field("Kd", "real", lambda _: linear),
        "intercept_": _field("d", "real", lambda _: linear),
    }


def _vae_state(est) -> dict[str, Field]:
    hidden = _hidden(est)
    mlp = est.decoder == "mlp"
    # the encoder gives each code's mean and log-variance: 2K outputs
    K = getattr(est, "n_components_", None)
    codes = 2 * K if _is_count(K) else "z"  # a bad count is reported as such
    decoder = _layers("decoder", ("K", *hidden[::-1])) if mlp else {}
    return {
        "n_components_": _field("", "count"),
        "n_iter_": _field("", "count"),
        "elbo_": _field("", "moment"),
        "elbo_std_error_": _field("", "nonneg"),
        "elbo_curve_": _field("i", "trace"),
        **{f"encoder_params_/{k}": v for k, v in _layers("encoder", ("d", *hidden, codes)).items()},
        # W maps the decoder's last hidden layer (MLP) or the codes (linear) to x
        "params_/W": _field(("d", hidden[0] if mlp else "K")),
        "params_/mu": _field("d"),
        "params_/sigma2": _field("", "positive"),
        **{f"params_/{k}": v for k, v in decoder.items()},
    }


# class name -> its fitted state: a dict of fields, or a function of the estimator
# (its settings) returning one, merged with _COMMON.
FITTED_STATE: dict[str, dict[str, Field] | Callable[[Any], dict[str, Field]]] = {
    "PCA": {
        "n_components_": _field("", "count"),
        "n_samples_": _field("", "count"),
        "svd_solver_": _field("", "str"),
        "mean_": _field("d"),
        "components_": _field("Kd", "unit_rows"),
        "singular_values_": _field("K", "nonneg_real"),
        "explained_variance_": _field("K", "zero_or_positive"),
        "explained_variance_ratio_": _field("K", "nonneg"),
        "noise_variance_": _field("", "zero_or_positive"),
    },
    "KernelPCA": {
        "n_components_": _field("", "count"),
        "solver_": _field("", "str"),
        "gamma_": _field("", "positive"),
        "X_fit_": _field("md"),
        "X_offset_": _field("d"),
        "eigenvalues_": _field("K", "zero_or_positive"),
        "eigenvectors_": _field("mK"),
        "kernel_column_means_": _field("m", "moment"),
        "kernel_grand_mean_": _field("", "moment"),
        "X_transformed_fit_": _field("mK", "real", _if("fit_inverse_transform")),
        "dual_coef_": _field("md", "real", _if("fit_inverse_transform")),
    },
    "CCA": {
        **_TWO_VIEW,
        **_PLS_MEANS,
        "x_weights_": _field("dK"),
        "y_weights_": _field("qK"),
        "x_loadings_": _field("dK"),
        "y_loadings_": _field("qK"),
        "correlations_": _field("K"),
        "regularized_correlations_": _field("K"),
        "coef_": _field("qd"),
        "intercept_": _field("q"),
    },
    "KernelCCA": {
        **_TWO_VIEW,
        "X_fit_": _field("md"),
        "Y_fit_": _field("mq"),
        "X_offset_": _field("d"),
        "Y_offset_": _field("q"),
        "x_dual_coef_": _field("mK"),
        "y_dual_coef_": _field("mK"),
        "x_kernel_column_means_": _field("m", "moment"),
        "y_kernel_column_means_": _field("m", "moment"),
        "x_kernel_grand_mean_": _field("", "moment"),
        "y_kernel_grand_mean_": _field("", "moment"),
        "correlations_": _field("K"),
        "regularized_correlations_": _field("K"),
    },
    "PPCA": {
        **_GAUSSIAN_LATENT,
        **_ROTATION,
        "params_/sigma2": _field("", "positive"),
        **_LATENT_STREAM,
        "online_state_/param_sigma2": _field("", "positive", STREAM),
        "online_state_/variance_floor": _field("", "positive", STREAM),
    },
    "FactorAnalysis": {
        **_GAUSSIAN_LATENT,
        **_ROTATION,
        "params_/psi": _field("d", "positive"),
        **_LATENT_STREAM,
        "online_state_/param_psi": _field("d", "positive", STREAM),
        "online_state_/variance_floor": _field("d", "positive", STREAM),
    },
    "ConfirmatoryFactorAnalysis": {
        "n_components_": _field("", "count"),
        **_EM_TRACE,
        "params_/loadings": _field("dK"),
        "params_/phi_chol": _field("KK", "cholesky"),
        "params_/mu": _field("d"),
        "params_/psi": _field("d", "positive"),
        "pattern_": _field("dK", "bool"),
        "markers_": _field("K", "index"),
        "factor_names_": _field("K", "str"),
    },
    "BayesianPCA": {
        **_GAUSSIAN_LATENT,
        "params_/sigma2": _field("", "positive"),
        "params_/alpha": _field("K", "positive"),
        "n_components_max_": _field("", "count"),  # kept (K) and pruned components
        "reference_variance_": _field("", "positive"),
        "effective_rank_": _field("", "count"),
        "log_likelihoods_before_pruning_": _field("j", "trace"),
    },
    "SupervisedPCA": {
        "n_components_": _field("", "count"),
        "n_targets_": _field("", "count"),
        "target_ndim_": _field("", "count"),
        "fit_scale_": _field("", "positive"),
        "fit_shift_": _field("e"),  # features and targets side by side
        **_EM_TRACE,
        "params_/W_x": _field("dK"),
        "params_/W_y": _field("tK"),
        "params_/mu_x": _field("d"),
        "params_/mu_y": _field("t"),
        "params_/sigma2_x": _field("", "positive"),
        "params_/sigma2_y": _field("", "positive"),
    },
    "GaussianMixture": _mixture_state,
    "PLSA": {
        "n_components_": _field("", "count"),
        **_EM_TRACE,
        "params_/theta": _field("mK", "simplex"),
        "params_/phi": _field("Kd", "simplex"),
        "doc_lengths_": _field("m", "nonneg"),
        "vocabulary_": _field("d", "str", nullable=True),
        "n_samples_seen_": _field("", "count", STREAM),
        "online_state_/phi": _field("Kd", "simplex", STREAM),
        "online_state_/word_stats": _field("Kd", "nonneg", STREAM),
    },
    "PLSRegression": _NIPALS,
    # canonical mode normalises the y weights (a PLSRegression file relabelled
    # PLSCanonical is refused here)
    "PLSCanonical": {**_NIPALS, "y_weights_": _field("qK", "unit_columns")},
    "PLSSVD": {
        **_TWO_VIEW,
        **_PLS_MEANS,
        "x_weights_": _field("dK", "unit_columns"),
        "y_weights_": _field("qK", "unit_columns"),
        "singular_values_": _field("K", "nonneg_real"),
    },
    "LinearDiscriminantAnalysis": {
        "n_components_": _field("", "count"),
        "classes_": _field("c", "label"),
        "priors_": _field("c", "simplex"),
        "means_": _field("cd"),
        "xbar_": _field("d"),
        "coef_": _field("bd"),  # one row per class, or one for two classes
        "intercept_": _field("b"),
        "scalings_": _field("dr", "real", _if("solver", "svd", "eigen")),
        "explained_variance_ratio_": _field("K", "nonneg", _if("solver", "svd", "eigen")),
        "covariance_": _field(
            "dd", "moment", lambda est: est.solver != "svd" or bool(est.store_covariance)
        ),
    },
    "MDS": {
        "n_components_": _field("", "count"),
        "n_iter_": _field("", "count"),
        "stress_": _field("", "nonneg"),
        "eigen_solver_": _field("", "str"),
        "X_fit_": _field("md", "real", _unless("dissimilarity", "precomputed")),
        "X_offset_": _field("d"),
        "eigenvalues_": _field("K", "moment"),
        "embedding_": _field("mK"),
        "landmarks_": _field("l", "index"),
        "landmark_mean_squared_distances_": _field("l", "nonneg"),
    },
    "GaussianRandomProjection": {
        "n_components_": _field("", "count"),
        "components_": _field("Kd"),
        "inverse_components_": _field("dK", "real", _if("compute_inverse_components")),
    },
    "SparseRandomProjection": {
        "n_components_": _field("", "count"),
        "density_": _field("", "fraction"),
        "components_": _field("Kd"),
        "inverse_components_": _field("dK", "real", _if("compute_inverse_components")),
    },
    "Isomap": {
        **_EMBEDDING,
        "X_fit_": _field("md"),
        "dist_matrix_": _field("mm", "nonneg_real"),
        "kernel_column_means_": _field("m", "moment"),
        "kernel_grand_mean_": _field("", "moment"),
    },
    "LocallyLinearEmbedding": {
        **_EMBEDDING,
        "X_fit_": _field("md"),
        "reconstruction_error_": _field("", "moment"),
    },
    "SpectralEmbedding": {
        **_EMBEDDING,
        "affinity_matrix_": _field("mm", "moment", OPTIONAL),
        "n_neighbors_": _field("", "count", _if("affinity", "nearest_neighbors")),
        "gamma_": _field("", "positive", _if("affinity", "rbf")),
    },
    "SpectralClustering": {
        "solver_": _field("", "str"),
        "embedding_": _field("mK"),
        "affinity_matrix_": _field("mm", "moment", OPTIONAL),
        "labels_": _field("m", "index"),
        "cluster_centers_": _field("cK"),
        "inertia_": _field("", "moment"),
    },
    "KMeans": {
        "n_iter_": _field("", "count"),
        "labels_": _field("m", "index"),
        "cluster_centers_": _field("cd"),
        "inertia_": _field("", "moment"),
    },
    "AgglomerativeClustering": {
        "n_clusters_": _field("", "count"),
        "n_leaves_": _field("", "count"),
        "n_connected_components_": _field("", "count"),
        "labels_": _field("n", "index"),
        "children_": _field(("m", 2), "index"),
        "distances_": _field(
            "m",
            "nonneg_real",
            when=lambda est: est.compute_distances or est.distance_threshold is not None,
        ),
    },
    "Autoencoder": _autoencoder_state,
    "VariationalAutoencoder": _vae_state,
    "FastICA": {
        "n_iter_": _field("", "count"),
        "components_": _field("Kd"),
        "mixing_": _field("dK"),
        "mean_": _field("d", "real", _if("whiten")),
        "whitening_": _field("Kd", "real", _if("whiten")),
    },
    "NMF": {
        "n_components_": _field("", "count"),
        "n_iter_": _field("", "count"),
        "reconstruction_err_": _field("", "nonneg"),
        "components_": _field("Kd", "nonneg_real"),
    },
}

# Integer attributes that index an axis (labels the clusters, MDS's landmarks the
# rows); checked once the sizes are known.
_INDEX_BOUNDS = {
    "KMeans": {"labels_": "c"},
    "SpectralClustering": {"labels_": "c"},
    "AgglomerativeClustering": {"labels_": "c"},
    "MDS": {"landmarks_": "m"},
}

# (loadings, noise variance) of the models with the marginal N(mu, W W^T + noise): the
# noise may not vanish against the variance the loadings explain, or the covariance
# is singular in the model's precision (a fit floors it at 1e-6 of the data's).
_NOISE = {
    "PPCA": [("params_/W", "params_/sigma2")],
    "BayesianPCA": [("params_/W", "params_/sigma2")],
    "FactorAnalysis": [("params_/W", "params_/psi")],
    "SupervisedPCA": [("params_/W_x", "params_/sigma2_x"), ("params_/W_y", "params_/sigma2_y")],
    "VariationalAutoencoder": [("params_/W", "params_/sigma2")],
}

# Attributes a fit makes equal: PLSRegression's y weights are the regression of the
# deflated Y on the x scores, and so are its y loadings (canonical mode's differ).
_EQUAL = {"PLSRegression": [("y_weights_", "y_loadings_")]}

# -- the check --------------------------------------------------------------------------


class _Restored(NamedTuple):
    shape: tuple  # a sparse matrix's own shape
    values: np.ndarray  # a sparse matrix's stored entries


def _is_count(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _lookup(estimator, name):
    attr, _, site = name.partition("/")
    value = getattr(estimator, attr, None)
    if site:
        value = value.get(site) if isinstance(value, dict) else None
    return value


def _restored_names(estimator, names) -> set[str]:
    """The file's fitted attributes, a dict attribute's entries as ``attr/key``."""
    out = set()
    for name in names:
        value = getattr(estimator, name)
        if isinstance(value, dict):
            out.update(f"{name}/{key}" for key in value)
        else:
            out.add(name)
    return out


def fitted_fields(estimator, class_name: str) -> dict[str, Field]:
    """The description of ``class_name``'s fitted state, for these settings."""
    if class_name not in FITTED_STATE:
        raise _Corrupt(f"{class_name} has no description of its fitted state")
    state = FITTED_STATE[class_name]
    return {**_COMMON, **(state(estimator) if callable(state) else state)}


def validate_restored(estimator, class_name: str, names) -> None:
    """Refuse (``_Corrupt``, naming the attribute) a restored model whose fitted
    attributes ``names`` disagree with its class's :data:`FITTED_STATE`: unknown or
    missing attributes, a wrong dtype kind or number of dimensions, values a fit
    cannot produce, shapes that disagree with each other or with the fitted counts,
    a noise variance negligible against its loadings, or attributes a fit makes equal
    that differ."""
    fields = fitted_fields(estimator, class_name)
    present = _restored_names(estimator, names)
    _check_names(estimator, class_name, fields, present)
    restored = {}
    for name in sorted(present):
        value = _lookup(estimator, name)
        if not (value is None and fields[name].nullable):
            restored[name] = _check_field(name, value, fields[name])
    sizes = _check_sizes(restored, fields, estimator)
    for name, letter in _INDEX_BOUNDS.get(class_name, {}).items():
        if name in restored and np.any(restored[name].values >= sizes.get(letter, np.inf)):
            raise _Corrupt(f"{name} has entries >= {sizes[letter]} ({letter}); they index it")
    eps = np.finfo(np.dtype(getattr(estimator, "dtype", "float64"))).eps
    for loadings, noise in _NOISE.get(class_name, []):
        _check_noise(restored[loadings].values, restored[noise].values, loadings, noise, eps)
    for name, other in _EQUAL.get(class_name, []):
        a, b = restored[name].values, restored[other].values
        if np.max(np.abs(a - b), initial=0) > _TOLERANCE * np.max(np.abs(b), initial=0):
            raise _Corrupt(f"{name} must equal {other} (a {class_name} fit makes them equal)")
    hook = getattr(estimator, "_validate_loaded", None)
    if hook is not None:
        hook()


def _check_names(estimator, class_name: str, fields: dict, present: set) -> None:
    """Every attribute the class has with these settings, and no other."""
    streaming = any(n == "n_samples_seen_" or n.startswith("online_state_/") for n in present)
    for name, field in fields.items():
        if name in present:
            continue
        if callable(field.when):
            required = field.when(estimator)
        else:
            required = field.when is None or (field.when == STREAM and streaming)
        if required:
            raise _Corrupt(f"fitted attribute {name} is missing (part of a fitted {class_name})")
    unknown = sorted(present - set(fields))
    if unknown:
        raise _Corrupt(
            f"fitted attribute {unknown[0]} is not part of a fitted {class_name}; the file "
            "was written for another class or edited"
        )


def _check_field(name: str, value, field: Field) -> _Restored:
    """The value's dtype kind, dimensions and values checked against ``field``."""
    if value is None:
        raise _Corrupt(f"fitted attribute {name} is missing (None)")
    kind = _CHECKS[field.check]
    if kind == "i" and _is_count(value) and not 0 <= value <= np.iinfo(np.int64).max:
        raise _Corrupt(f"{name} must be a non-negative integer (int64), got {value!r}")
    if hasattr(value, "tocsr"):  # a restored scipy.sparse matrix (io checked its parts)
        restored = _Restored(tuple(value.shape), np.asarray(value.data))
    else:
        restored = _Restored(np.shape(value), np.asarray(value))
    array = restored.values
    if kind == "str":
        ok = array.dtype.kind in "UO" and all(isinstance(v, str) for v in array.flat)
    elif kind == "any":  # labels: numbers, booleans or strings
        ok = array.dtype.kind in "biufU" or (
            array.dtype.kind == "O" and all(isinstance(v, str) for v in array.flat)
        )
    elif kind == "f" and array.ndim == 0:
        ok = array.dtype.kind in "iuf"  # a number from the metadata may be an int
    else:
        ok = array.dtype.kind in {"f": "f", "i": "iu", "b": "b"}[kind]
    if not ok:
        raise _Corrupt(f"fitted attribute {name} has dtype {array.dtype}, not {field.check}")
    if len(restored.shape) != len(field.shape):
        raise _Corrupt(f"{name} has shape {restored.shape}; expected {len(field.shape)} dimensions")
    with np.errstate(all="ignore"):
        _check_values(name, array, field.check)
    return restored


def _check_values(name: str, value: np.ndarray, check: str) -> None:
    if check in ("count", "index"):
        if not np.all(value >= 0):
            raise _Corrupt(f"{name} must be a non-negative integer, got {value!r}")
        return
    if check == "label":
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise _Corrupt(f"fitted attribute {name} is not finite")
        if np.unique(value).size != value.size:
            raise _Corrupt(f"{name} must hold distinct labels")
        return
    if _CHECKS[check] != "f":
        return
    value = value.astype(np.float64)
    if check == "trace":
        if np.any(np.isnan(value) | (value == np.inf)):
            raise _Corrupt(f"fitted attribute {name} holds NaN or +inf")
        return
    if not np.all(np.isfinite(value)):
        raise _Corrupt(f"fitted attribute {name} is not finite")
    # first-order quantities (loadings, means, rows) enter squares and products
    # (W W^T, distances): entries whose squares overflow give inf/NaN only later
    first_order = ("real", "nonneg_real", "cholesky", "unit_rows", "unit_columns")
    if check in first_order and not np.isfinite(np.sum(np.square(value))):
        raise _Corrupt(
            f"{name} has entries too large (max |value| {np.max(np.abs(value)):.3g}): "
            "their squares overflow"
        )
    tiny = np.finfo(np.float64).tiny
    if check in ("nonneg", "nonneg_real") and not np.all(value >= 0):
        raise _Corrupt(f"{name} must be positive or zero (>= 0)")
    if check == "moment" and not np.all((value == 0) | (np.abs(value) >= tiny)):
        raise _Corrupt(f"{name} holds a subnormal number (below {tiny:.3g} but not 0)")
    if check == "positive" and not np.all(value >= tiny):
        raise _Corrupt(
            f"{name} must be > 0 and at least the smallest normal float ({tiny:.3g}): a "
            "variance or scale must be positive and invertible"
        )
    if check == "zero_or_positive" and not np.all((value == 0) | (value >= tiny)):
        raise _Corrupt(
            f"{name} must be positive or zero: 0 or at least the smallest normal float ({tiny:.3g})"
        )
    if check == "fraction" and not np.all((value > 0) & (value <= 1)):
        raise _Corrupt(f"{name} must be in (0, 1]")
    if check == "simplex":
        sums = value.sum(axis=-1)
        if not (np.all(value >= 0) and np.allclose(sums, 1.0, rtol=0, atol=1e-5)):
            raise _Corrupt(f"{name} must hold probabilities summing to 1")
    if check == "cholesky":
        diagonal = np.diagonal(value, axis1=-2, axis2=-1)
        # the diagonal squared is a variance: positive and invertible
        if not (np.all(diagonal >= np.sqrt(tiny)) and np.array_equal(value, np.tril(value))):
            raise _Corrupt(f"{name} must be lower-triangular with a positive diagonal")
    if check in ("unit_rows", "unit_columns"):
        norms = np.linalg.norm(value, axis=1 if check == "unit_rows" else 0)
        # a component the fit did not find is zero (PLS once Y is fully explained)
        if not np.all((np.abs(norms - 1) <= _TOLERANCE) | (norms == 0)):
            which = "rows" if check == "unit_rows" else "columns"
            raise _Corrupt(f"{name} must have unit {which}; their norms are {norms}")


def _check_sizes(restored: dict, fields: dict, estimator) -> dict[str, int]:
    """Every axis against its fixed size or its letter's: the fitted count's value
    (:data:`_COUNTS`), else the first axis seen with that letter.  Returns the sizes."""
    sizes: dict[str, int] = {}
    origin: dict[str, str] = {}
    for letter, attr in _COUNTS.items():
        count = getattr(estimator, attr, None)
        if _is_count(count):
            sizes[letter], origin[letter] = int(count), attr
    for name, value in restored.items():
        for axis, size in zip(fields[name].shape, value.shape, strict=True):
            if isinstance(axis, int):
                expected, why = axis, "fixed"
            else:
                expected = sizes.setdefault(axis, size)
                why = origin.setdefault(axis, name)
            if size != expected:
                raise _Corrupt(
                    f"{name} has shape {value.shape}, inconsistent with the other fitted "
                    f"attributes ({axis} = {expected}, from {why})"
                )
    return sizes


def _check_noise(W: np.ndarray, noise: np.ndarray, loadings: str, name: str, eps) -> None:
    """The noise variance against the variance its loadings explain (per feature, or
    their mean for one pooled variance) must exceed the working precision."""
    explained = np.sum(np.square(W.astype(np.float64)), axis=1)
    if noise.ndim == 0:
        explained = np.mean(explained) if explained.size else 0.0
    if np.any(noise < eps * (explained + noise)):
        raise _Corrupt(
            f"{name} is negligible against the variance {loadings} explains (below "
            f"{eps:.2g} of it): the model's covariance would be singular"
        )
