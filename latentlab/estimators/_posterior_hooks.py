"""Each generative estimator's posterior problem, from public state only.

The posterior engine (:mod:`latentlab.inference.posterior`) reads a model's
:class:`~latentlab.inference.posterior.spec.PosteriorSpec` -- exported by its module
in :mod:`latentlab.models` -- and, of a fitted estimator, only this protocol:

- ``model_``: the declaration with the fit's static settings bound, scoring rows in
  data units; the sampled target is the same function with ``use_prior`` and the
  spec's settings bound.
- ``params_``: the fitted value of every latent site, in data units (the point the
  samplers start from and the draws are aligned to).
- ``fit_shift_`` and ``fit_scale_``, for models sampled on standardised data: the
  fit's own standardisation ``(x - fit_shift_) / fit_scale_``, where its MAP/SVI fit
  and the declared priors live.
- the settings ``method`` and ``prior``: whether the fit used the declaration's
  priors (with the spec's ``em_prior`` for EM fits);
- ``n_features_in_`` and ``feature_names_in_`` (coordinates), and the public
  attributes each builder below names (``n_targets_``, ``covariance_type``,
  ``doc_lengths_``, ...).

Every estimator points its ``_posterior_problem(X, y, prior)`` hook at one of the
builders here; a new model joins by exporting a spec and writing a builder of a few
lines.  :mod:`latentlab.estimators._posterior_sampling` validates the settings and
runs the engine.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_array, check_consistent_length

from latentlab._validation import (
    check_data,
    check_no_empty_columns,
    check_no_empty_rows,
)
from latentlab.inference.posterior.problem import (
    PosteriorProblem,
    Standardisation,
    build_problem,
)
from latentlab.models import bpca, factor_analysis, gmm, plsa, ppca, supervised_pca

__all__ = [
    "fitted_with_prior",
    "ppca_problem",
    "fa_problem",
    "bpca_problem",
    "supervised_problem",
    "mixture_problem",
    "topic_problem",
    "default_problem",
]


def fitted_with_prior(est, spec) -> bool:
    """Whether the estimator's own fit used the declaration's priors."""
    if est.method == "svi":
        return True
    if est.method == "map":  # models without a ``prior`` setting always have one in MAP
        return bool(getattr(est, "prior", True))
    return spec.em_prior


def _resolve_prior(est, spec, prior) -> bool:
    if prior is None:
        return fitted_with_prior(est, spec)
    if not isinstance(prior, (bool, np.bool_)):
        raise ValueError(f"prior must be True, False or None, got {prior!r}")
    if not prior and spec.prior_required:
        raise ValueError(
            f"{type(est).__name__}'s prior is part of the model (without it some "
            "parameters are not identified); prior=False is not available"
        )
    return bool(prior)


def _standardisation(est, blocks: dict) -> Standardisation:
    """The fit's standardisation, its shift split into the column blocks ``blocks``
    (dimension name -> slice of ``fit_shift_``)."""
    if hasattr(est, "fit_shift_"):
        shift, scale = est.fit_shift_, est.fit_scale_
    else:  # a stream (partial_fit) keeps none: the fitted model's mean and variance
        shift, scale = est.mean_, np.sqrt(np.mean(np.diag(est.get_covariance())))
    return Standardisation({dim: shift[cut] for dim, cut in blocks.items()}, float(scale))


def _feature_coords(est, d):
    names = getattr(est, "feature_names_in_", None)
    return {"feature": list(names) if names is not None else list(range(d))}


def _observed_data(est, X):
    X = check_data(est, X, reset=False, allow_nan=True)
    mask = ~np.isnan(X)
    check_no_empty_rows(mask)
    check_no_empty_columns(mask)
    return X, mask


# ----------------------------------------------------------------------------- builders


def _problem(est, spec, data, prior, mask=None, **options) -> PosteriorProblem:
    """The problem of ``est``'s fit (its ``model_`` and ``params_``) on ``data``, whose
    observed entries are ``mask`` (None: a declaration without missing entries)."""
    use_prior = _resolve_prior(est, spec, prior)
    if mask is not None:
        options["has_missing"] = not mask.all()
    return build_problem(spec, est.model_, data, est.params_, use_prior=use_prior, **options)


def _gaussian_latent_problem(est, spec, X, prior, settings=None) -> PosteriorProblem:
    """PPCA, Bayesian PCA, factor analysis: sampled on the fit's standardised data."""
    X, mask = _observed_data(est, X)
    return _problem(
        est,
        spec,
        (X,),
        prior,
        mask,
        standardisation=_standardisation(est, {"feature": slice(None)}),
        settings=settings,
        coords=_feature_coords(est, X.shape[1]),
    )


def ppca_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    return _gaussian_latent_problem(est, ppca.posterior_spec(), X, prior)


def fa_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    return _gaussian_latent_problem(est, factor_analysis.posterior_spec(), X, prior)


def bpca_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    # the hyperprior rate in the data's units, as model_ binds it
    rate = {"alpha_b": float(est.alpha_b * est.reference_variance_)}
    return _gaussian_latent_problem(est, bpca.posterior_spec(), X, prior, settings=rate)


def supervised_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    """Supervised PCA: the tempered collapsed declaration (EM's objective at any alpha)."""
    if y is None:
        raise ValueError("SupervisedPCA.sample_posterior requires y (the targets of X's rows)")
    X = check_data(est, X, reset=False, allow_nan=True)
    Y = check_array(y, ensure_2d=False, dtype=np.float64, ensure_all_finite="allow-nan")
    check_consistent_length(X, Y)
    Y = Y.reshape(X.shape[0], -1)
    if Y.shape[1] != est.n_targets_:
        raise ValueError(
            f"y has {Y.shape[1]} target(s), but SupervisedPCA was fitted with {est.n_targets_}"
        )
    mask = ~np.isnan(np.concatenate([X, Y], axis=1))
    check_no_empty_rows(mask)
    check_no_empty_columns(mask)
    d_x = X.shape[1]
    spec = supervised_pca.posterior_spec()
    coords = _feature_coords(est, d_x)
    coords["target"] = list(range(Y.shape[1]))
    return _problem(
        est,
        spec,
        (X, Y),
        prior,
        mask,
        standardisation=_standardisation(
            est, {"feature": slice(None, d_x), "target": slice(d_x, None)}
        ),
        coords=coords,
    )


def mixture_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    """Gaussian mixtures, sampled in data units (the declared priors are in those units)."""
    X = check_data(est, X, reset=False, allow_nan=True)
    mask = ~np.isnan(X)
    check_no_empty_rows(mask)
    spec = gmm.posterior_spec(est.covariance_type)
    d = X.shape[1]
    coords = _feature_coords(est, d)
    coords["feature_bis"] = coords["feature"]
    pooled = gmm.pooled_covariance(est.params_["scale"], est.covariance_type, d)
    metric = np.linalg.inv(pooled)  # components matched in the pooled Mahalanobis metric
    return _problem(est, spec, (X,), prior, mask, coords=coords, component_metric=metric)


def topic_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    """pLSA: theta (one mixture per training document) and phi, on the simplex."""
    X = check_data(est, X, reset=False, allow_nan=False, accept_sparse=("csr", "csc", "coo"))
    counts = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    if np.any(counts < 0) or np.any(counts != np.round(counts)):
        raise ValueError("PLSA models non-negative integer word counts")
    D = len(est.doc_lengths_)
    if counts.shape[0] != D:
        raise ValueError(
            f"PLSA's theta holds one topic mixture per training document: sample_posterior "
            f"needs the training counts ({D} rows), got {counts.shape[0]} rows"
        )
    smoothed = est.doc_topic_prior is not None or est.topic_word_prior is not None
    spec = plsa.posterior_spec(est.n_components_, smoothed=smoothed)
    vocabulary = est.vocabulary_
    words = list(vocabulary) if vocabulary is not None else list(range(counts.shape[1]))
    return _problem(est, spec, (counts,), prior, coords={"word": words})


def default_problem(est, X, y=None, prior=None) -> PosteriorProblem:
    """For estimators without a posterior hook of their own (e.g. classical PCA)."""
    raise ValueError(
        f"posterior sampling is not available for {type(est).__name__}: it has no "
        "generative declaration with parameters to sample"
    )
