"""scikit-learn's own unit tests for KMeans, AgglomerativeClustering and
SpectralClustering, run against latentlab's classes by the harness in
``tests/_sklearn_suites.py`` (its docstring explains the tables)."""

from _sklearn_suites import MESSAGE, PRIVATE, Suite, suite_tests

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

CONNECTIVITY = (
    "AgglomerativeClustering(connectivity=...): latentlab has no connectivity-constrained "
    "clustering yet (missing feature)"
)

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
    ("agglo", "test_agglomerative_clustering_distances"): CONNECTIVITY,
    ("agglo", "test_agglomerative_clustering"): CONNECTIVITY,
    ("agglo", "test_identical_points"): CONNECTIVITY,
    ("agglo", "test_connectivity_propagation"): CONNECTIVITY,
    ("agglo", "test_connectivity_fixing_non_lil"): CONNECTIVITY,
    ("agglo", "test_connectivity_callable"): CONNECTIVITY,
    ("agglo", "test_connectivity_ignores_diagonal"): CONNECTIVITY,
    ("agglo", "test_compute_full_tree"): CONNECTIVITY + " (and compute_full_tree)",
    ("agglo", "test_agglomerative_clustering_with_distance_threshold"): CONNECTIVITY,
    ("agglo", "test_precomputed_connectivity_metric_with_2_connected_components"): CONNECTIVITY,
    ("agglo", "test_agglomeration_ward_constrained_metric"): CONNECTIVITY,
    ("agglo", "test_agglomeration_ward_euclidean"): CONNECTIVITY,
    ("agglo", "test_dist_threshold_invalid_parameters"): MESSAGE,
    ("agglo", "test_invalid_shape_precomputed_dist_matrix"): MESSAGE,
    # -- SpectralClustering
    ("spectral", "test_verbose"): (
        "SpectralClustering(verbose=...): latentlab's has no verbose setting yet (missing feature)"
    ),
}

KEPT_PARAMS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {}

REPEATS: dict[tuple[str, str], str] = {}

test_sklearn_suite, test_tables_name_existing_cases = suite_tests(
    SUITES, EXCLUDED, KEPT_PARAMS, REPEATS
)
