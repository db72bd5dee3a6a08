"""scikit-learn's own unit tests for KMeans, AgglomerativeClustering and
SpectralClustering, run against latentlab's classes by the harness in
``tests/_sklearn_suites.py`` (its docstring explains the tables)."""

import numpy as np
from _sklearn_suites import PRIVATE, Adapt, Suite, suite_tests

import latentlab

SUITES = {
    "kmeans": Suite("sklearn.cluster.tests.test_k_means", {"KMeans": latentlab.KMeans}),
    "agglo": Suite(
        "sklearn.cluster.tests.test_hierarchical",
        {"AgglomerativeClustering": latentlab.AgglomerativeClustering},
    ),
    "spectral": Suite(
        "sklearn.cluster.tests.test_spectral",
        {"SpectralClustering": latentlab.SpectralClustering},
    ),
}

# (suite key, "test_name", "test_name[param-id]" or a "prefix*") -> why it is not run.
EXCLUDED: dict[tuple[str, str], str] = {
    # -- KMeans
    ("kmeans", "test_kmeans_verbose"): (
        "matches scikit-learn's per-iteration verbose lines ('Iteration 3, inertia ...', "
        "'strict convergence'): latentlab's Lloyd loop runs inside one compiled program "
        "and verbose prints one summary after the fit"
    ),
    ("kmeans", "test_kmeans_init_auto_with_initial_centroids"): PRIVATE + " (_n_init)",
    ("kmeans", "test_n_init_auto"): PRIVATE + " (_n_init)",
    ("kmeans", "test_sample_weight_init"): PRIVATE + " (_init_centroids)",
    ("kmeans", "test_sample_weight_zero"): PRIVATE + " (_init_centroids)",
    # -- AgglomerativeClustering
    # -- SpectralClustering
}

KEPT_PARAMS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {}

REPEATS: dict[tuple[str, str], str] = {}


def _numbered_by_first_sample(hc_cut):
    """scikit-learn's private ``_hc_cut`` with its clusters renumbered in order of
    their first sample, latentlab's documented numbering of ``labels_``: the partition
    is untouched, so ``np.array_equiv`` still asks for the same clusters."""

    def cut(*args, **kwargs):
        labels = np.asarray(hc_cut(*args, **kwargs))
        values, first = np.unique(labels, return_index=True)
        rank = np.empty(len(values), dtype=np.intp)
        rank[np.argsort(first)] = np.arange(len(values))
        return rank[np.searchsorted(values, labels)]

    return cut


ADAPTED = {
    ("agglo", "test_agglomerative_clustering_with_distance_threshold"): Adapt(
        "_hc_cut",
        _numbered_by_first_sample,
        "compares labels_ with exact values (np.array_equiv) to _hc_cut's cut of the same "
        "tree; _hc_cut numbers clusters by its heap order, latentlab by first sample",
    ),
}

test_sklearn_suite, test_tables_name_existing_cases = suite_tests(
    SUITES, EXCLUDED, KEPT_PARAMS, REPEATS, ADAPTED
)
