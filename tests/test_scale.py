"""Exact EM over row chunks: memmaps, row-sliceable stores and Dask arrays
give the in-memory fit -- parameters and trace -- to round-off."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import latentlab
from latentlab.inference.chunked import RowChunks, block_moments, merge_moments, row_source

N, D = 1000, 6  # N is not a multiple of any chunk size used here
RTOL = 1e-10


def _planted(seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(N, 2))
    W = rng.normal(size=(2, D))
    X = Z @ W + 0.5 * rng.normal(size=(N, D)) + np.arange(D)
    X[rng.random((N, D)) < 0.1] = np.nan
    return X


def _mixture(seed=1):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=1.5, size=(3, D))
    X = centres[rng.integers(0, 3, N)] + rng.normal(size=(N, D))
    X[rng.random((N, D)) < 0.1] = np.nan
    start = {
        "weights_init": np.full(3, 1 / 3),
        "means_init": centres + rng.normal(scale=1.0, size=(3, D)),
        "precisions_init": np.stack([np.eye(D)] * 3),
    }
    return X, start


def _assert_same_fit(a, b, shift=0.0):
    """Same parameters (each array to RTOL of its scale) and the same trace."""
    assert a.n_iter_ == b.n_iter_
    for name, value in a.params_.items():
        other = b.params_[name] - (shift if name in ("mu", "means") else 0.0)
        scale = max(1.0, np.max(np.abs(value)))
        assert np.max(np.abs(value - other)) <= RTOL * scale, name
    trace = a.log_likelihoods_
    np.testing.assert_allclose(b.log_likelihoods_, trace, rtol=RTOL, atol=0)


@pytest.fixture(scope="module")
def mixture():
    """Data with NaN, the user's start, and the in-memory fit from it."""
    X, start = _mixture()
    return X, start, latentlab.GaussianMixture(3, random_state=0, **start).fit(X)


@pytest.fixture(scope="module")
def planted():
    return _planted()


@pytest.fixture(scope="module")
def memmap(planted, tmp_path_factory):
    path = tmp_path_factory.mktemp("scale") / "X.dat"
    X = np.memmap(path, dtype=np.float64, mode="w+", shape=planted.shape)
    X[:] = planted
    X.flush()
    return np.memmap(path, dtype=np.float64, mode="r", shape=planted.shape)


@pytest.fixture(scope="module")
def in_memory(planted):
    return {
        cls: cls(2, random_state=0).fit(planted)
        for cls in (latentlab.PPCA, latentlab.FactorAnalysis)
    }


def test_merge_moments_is_chan_update():
    X = np.random.default_rng(3).normal(size=(101, 3)) + 1e6
    merged = merge_moments(block_moments(X[:37]), block_moments(X[37:]))
    centred = X - X.mean(axis=0)
    np.testing.assert_allclose(merged.mean, X.mean(axis=0), rtol=1e-15)
    np.testing.assert_allclose(merged.second, centred.T @ centred, rtol=1e-9)


def test_memmap_route_is_chosen_by_type_and_size(memmap):
    assert row_source(np.asarray(memmap)) is None  # an in-memory array
    assert row_source(memmap) is None  # a small memmap is read into memory
    assert isinstance(row_source(memmap, min_bytes=0), RowChunks)
    assert row_source(RowChunks(memmap, chunk_size=7)).chunk_size == 7


@pytest.mark.parametrize("cls", ["PPCA", "FactorAnalysis"])
def test_memmap_fit_equals_in_memory_fit(cls, memmap, in_memory):
    cls = getattr(latentlab, cls)
    chunked = cls(2, random_state=0).fit(RowChunks(memmap, chunk_size=300))
    _assert_same_fit(in_memory[cls], chunked)
    assert chunked.n_features_in_ == D
    # fitted from a memmap, the model scores in-memory data as usual
    X = np.asarray(memmap[:50])
    np.testing.assert_allclose(chunked.score_samples(X), in_memory[cls].score_samples(X), rtol=1e-9)


def test_result_does_not_depend_on_chunk_size(planted, in_memory):
    # through the estimator's setting, which overrides the wrapper's automatic size
    for size in (97, 300, 1024):
        fit = latentlab.PPCA(2, random_state=0, chunk_size=size).fit(RowChunks(planted))
        _assert_same_fit(in_memory[latentlab.PPCA], fit)


def test_chunk_size_setting_reaches_the_chunked_routes(planted, memmap):
    assert row_source(planted, chunk_size=97) is None  # in memory: the setting is unused
    assert row_source(RowChunks(planted, chunk_size=5), chunk_size=97).chunk_size == 97
    assert row_source(RowChunks(planted, chunk_size=5)).chunk_size == 5
    assert row_source(memmap, min_bytes=0, chunk_size=97).chunk_size == 97
    for bad in (0, -3, 2.5, True, "auto"):
        with pytest.raises(ValueError, match="chunk_size"):
            latentlab.PPCA(1, chunk_size=bad).fit(planted)


def test_bayesian_pca_chunked_equals_in_memory(planted):
    X = planted[~np.isnan(planted).any(axis=1)]  # complete rows: summarised once
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "kept all components"
        a = latentlab.BayesianPCA(2, random_state=0).fit(X)
        b = latentlab.BayesianPCA(2, random_state=0).fit(RowChunks(X, chunk_size=100))
    _assert_same_fit(a, b)


def test_column_mean_of_1e8_survives(planted):
    shifted = planted + 1e8
    back = shifted - 1e8  # exact: the data the shifted array actually holds
    a = latentlab.FactorAnalysis(2, random_state=0).fit(back)
    b = latentlab.FactorAnalysis(2, random_state=0).fit(RowChunks(shifted, chunk_size=300))
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_allclose(b.log_likelihoods_, a.log_likelihoods_, rtol=RTOL, atol=0)
    for name in ("W", "psi"):
        np.testing.assert_allclose(b.params_[name], a.params_[name], rtol=0, atol=1e-9)
    # mu near 1e8 is held to its float64 spacing (1.5e-8)
    np.testing.assert_allclose(b.params_["mu"] - 1e8, a.params_["mu"], rtol=0, atol=1e-7)


def test_gaussian_mixture_chunked_equals_in_memory(mixture):
    X, start, a = mixture
    assert a.n_iter_ >= 3  # EM has work to do: the comparison is not of the start
    # chunk_size through the setting (the mixture has its own chunk functions)
    b = latentlab.GaussianMixture(3, random_state=0, chunk_size=300, **start).fit(RowChunks(X))
    _assert_same_fit(a, b)
    np.testing.assert_allclose(b.lower_bound_, a.lower_bound_, rtol=RTOL)


def test_dask_threaded_fits_equal_in_memory(planted, in_memory, mixture):
    da = pytest.importorskip("dask.array")
    import dask

    X, start, a = mixture
    with dask.config.set(scheduler="threads"):
        # column chunks are rechunked to whole rows
        dX = da.from_array(planted, chunks=(300, 4))
        # FA: the rows with missing entries stream through the blocks each E-step
        # (the chunk size is set); PPCA: the block size is Dask's, and those rows are
        # few enough to be held in the program
        for cls, size in ((latentlab.FactorAnalysis, 300), (latentlab.PPCA, None)):
            fit = cls(2, random_state=0, chunk_size=size).fit(dX)
            _assert_same_fit(in_memory[cls], fit)
        scores = fit.score_samples(dX)
        latent = fit.transform(dX)
        assert isinstance(scores, da.Array) and isinstance(latent, da.Array)
        np.testing.assert_allclose(scores.compute(), fit.score_samples(planted), rtol=1e-12)
        np.testing.assert_allclose(latent.compute(), fit.transform(planted), rtol=1e-12)
        filled = fit.impute(dX)
        assert isinstance(filled, da.Array)
        np.testing.assert_allclose(filled.compute(), fit.impute(planted), rtol=1e-12)

        b = latentlab.GaussianMixture(3, random_state=0, chunk_size=300, **start).fit(
            da.from_array(X, chunks=(300, D))
        )
        _assert_same_fit(a, b)
        scores = b.score_samples(da.from_array(X, chunks=(300, D)))
        np.testing.assert_allclose(scores.compute(), b.score_samples(X), rtol=1e-12)


def test_dask_score_and_predict_equal_in_memory(planted, in_memory, mixture):
    da = pytest.importorskip("dask.array")
    import dask

    X, _, gmm = mixture
    ppca = in_memory[latentlab.PPCA]
    with dask.config.set(scheduler="threads"):
        # 1000 rows in 11 blocks: the mean is a two-level tree (split_every=8)
        dX = da.from_array(X, chunks=(97, D))
        score = gmm.score(dX)
        assert isinstance(score, float)
        np.testing.assert_allclose(score, gmm.score(X), rtol=1e-13)
        np.testing.assert_allclose(gmm.bic(dX), gmm.bic(X), rtol=1e-13)
        dP = da.from_array(planted, chunks=(97, D))
        np.testing.assert_allclose(ppca.score(dP), ppca.score(planted), rtol=1e-13)
        labels, proba = gmm.predict(dX), gmm.predict_proba(dX)
        assert isinstance(labels, da.Array) and isinstance(proba, da.Array)
        assert labels.dtype == np.int64 and proba.shape == (N, 3)
        np.testing.assert_array_equal(labels.compute(), gmm.predict(X))
        np.testing.assert_allclose(proba.compute(), gmm.predict_proba(X), rtol=1e-12, atol=1e-300)


def test_small_sources_are_held_in_the_program(memmap, in_memory, mixture, monkeypatch):
    """With the automatic chunk size, the rows an E-step revisits are read once and
    held in the program when they fit in RESIDENT_BYTES: no host round trip per
    E-step, and the in-memory fit.  A chunk size the user sets bounds what is held."""
    from latentlab.models.gaussian_latent import GaussianRowsPass
    from latentlab.models.gmm_programs import MixtureRowsPass

    calls = []
    for cls in (GaussianRowsPass, MixtureRowsPass):
        monkeypatch.setattr(
            cls, "reduce", lambda self, *a, _f=cls.reduce: calls.append(a[0]) or _f(self, *a)
        )
    source = RowChunks(memmap)
    assert source.resident_rows >= N > 0 and source.chunk_size < source.resident_rows
    _assert_same_fit(in_memory[latentlab.PPCA], latentlab.PPCA(2, random_state=0).fit(source))
    X, start, a = mixture
    b = latentlab.GaussianMixture(3, random_state=0, **start).fit(RowChunks(X))
    _assert_same_fit(a, b)
    np.testing.assert_allclose(b.lower_bound_, a.lower_bound_, rtol=RTOL)
    assert calls == []
    assert RowChunks(memmap, chunk_size=300).resident_rows == 300
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # one iteration is enough here
        latentlab.PPCA(2, random_state=0, max_iter=1).fit(RowChunks(memmap, chunk_size=300))
    assert calls and set(calls) == {"gaussian_rows"}


def test_bad_input_is_refused(planted, in_memory):
    with pytest.raises(ValueError, match="2-D"):
        RowChunks(np.zeros((4, 3, 2)))
    with pytest.raises(ValueError, match="2-D"):
        latentlab.PPCA(1).fit(RowChunks(np.zeros(5)))
    with pytest.raises(ValueError, match="chunk_size"):
        RowChunks(planted, chunk_size=0)
    with pytest.raises(ValueError, match="method='em'"):
        latentlab.PPCA(1, method="svi").fit(RowChunks(planted))
    bad = planted.copy()
    bad[5] = np.nan
    with pytest.raises(ValueError, match="every entry missing"):
        latentlab.PPCA(1).fit(RowChunks(bad, chunk_size=100))
    bad[5] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        latentlab.PPCA(1).fit(RowChunks(bad, chunk_size=100))
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match="2-D"):
        latentlab.PPCA(1).fit(da.zeros((10, 3, 2)))
    with pytest.raises(ValueError, match="features"):
        in_memory[latentlab.PPCA].score_samples(da.zeros((10, D + 1)))


def test_latentlab_works_without_dask():
    code = (
        "import sys; sys.modules['dask'] = None\n"
        "import numpy as np, latentlab\n"
        "from latentlab.inference.chunked import RowChunks, row_source\n"
        "assert row_source(np.zeros((3, 2))) is None\n"
        "import latentlab.estimators._chunked\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# A 2-process LocalCluster, started once per module: ~20 s of wall time at load 6-7
# on 2 cores: ~7 s to start the workers (forked by a forkserver that has imported
# distributed and the task modules), ~8 s for their first fits (the workers' compiles
# of the chunk functions), ~1 s for each fit after that (one Dask graph per E-step:
# the fits stop after 3 iterations), ~1.5 s for the row output.  No dashboard, no logs.
@pytest.fixture(scope="module")
def local_cluster():
    """A client of 2 single-threaded worker processes, started once per module."""
    pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    import logging
    import multiprocessing

    import dask
    from distributed.utils import get_mp_context

    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        # distributed's preload list, then ours (before the server starts).  The list
        # outlives the fixture in this test process (multiprocessing has no public way
        # to restore it); it only makes later forkserver children import these modules,
        # and no other test in the suite starts a forkserver.
        get_mp_context()
        multiprocessing.get_context("forkserver").set_forkserver_preload(
            ["distributed", "latentlab._chunk_tasks", "latentlab.models.gmm"]
        )
        with (
            distributed.LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            yield client


def test_local_cluster_fits_equal_in_memory(planted, mixture, local_cluster):
    """PPCA and a GMM with missing entries, their E-steps on 2 worker processes (the
    chunk size is set, so rows stream through the blocks each E-step): the
    in-memory fit, to 1e-10; and a row output as a Dask array computed there."""
    import dask.array as da

    X, start, _ = mixture
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 3 iterations
        cases = [
            (lambda **k: latentlab.PPCA(2, random_state=0, max_iter=3, **k), planted),
            (lambda **k: latentlab.GaussianMixture(3, max_iter=3, **start, **k), X),
        ]
        for make, data in cases:
            # 1000 rows in blocks of 300, 300, 300, 100
            fit = make(chunk_size=300).fit(da.from_array(data, chunks=(300, D)))
            _assert_same_fit(make().fit(data), fit)
    # the blocks really went to the worker processes
    assert sum(local_cluster.run(lambda: "latentlab._chunk_tasks" in sys.modules).values()) >= 1
    scores = fit.score_samples(da.from_array(X, chunks=(300, D)))
    assert isinstance(scores, da.Array)
    np.testing.assert_allclose(scores.compute(), fit.score_samples(X), rtol=1e-12)


# Opt-in: the row outputs of every kind send the fitted estimator to the workers,
# which then import every estimator (seconds per worker).
distributed_tests = pytest.mark.skipif(
    not os.environ.get("LATENTLAB_DISTRIBUTED_TESTS"),
    reason="imports every estimator on 2 worker processes; set LATENTLAB_DISTRIBUTED_TESTS=1",
)


@distributed_tests
def test_dask_distributed_row_outputs_equal_in_memory(planted, in_memory, local_cluster):
    # row outputs send the fitted estimator to the workers, which import every estimator
    import dask.array as da

    fit = in_memory[latentlab.PPCA]
    dX = da.from_array(planted, chunks=(300, D))
    np.testing.assert_allclose(
        fit.score_samples(dX).compute(), fit.score_samples(planted), rtol=1e-12
    )
    np.testing.assert_allclose(fit.score(dX), fit.score(planted), rtol=1e-13)


def _offset_mixture(n=2011, d=8, seed=2):
    """Three overlapping planted components (k-means' start decides the optimum EM
    reaches), 5% NaN at random, every feature offset by 1e6."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=0.7, size=(3, d))
    X = centres[rng.integers(0, 3, n)] + rng.normal(size=(n, d)) + 1e6
    X[rng.random((n, d)) < 0.05] = np.nan
    return X


def test_gaussian_mixture_kmeans_start_sees_every_row_when_chunked():
    """The chunked routes start k-means from every row, as in memory, so they give the
    in-memory EM iterates (a start from the first chunk alone reached
    another optimum, 6e-3 nats per row away here, with means 0.7 apart)."""
    da = pytest.importorskip("dask.array")
    import dask

    X = _offset_mixture()
    a = latentlab.GaussianMixture(3, tol=1e-10, random_state=0).fit(X)
    assert a.converged_ and a.n_iter_ >= 10  # EM has work to do from its start
    with dask.config.set(scheduler="threads"):
        fits = {
            # the E-step reads every chunk on the host
            "RowChunks": latentlab.GaussianMixture(3, tol=1e-10, random_state=0).fit(
                RowChunks(X, chunk_size=300)
            ),
            # the E-step maps over the Dask blocks
            "Dask": latentlab.GaussianMixture(3, tol=1e-10, random_state=0, chunk_size=300).fit(
                da.from_array(X, chunks=(300, 8))
            ),
            # small enough to be held in the program: the in-memory program
            "Dask held": latentlab.GaussianMixture(3, tol=1e-10, random_state=0).fit(
                da.from_array(X, chunks=(300, 8))
            ),
        }
    score = a.score(X)
    for route, b in fits.items():
        assert b.n_iter_ == a.n_iter_, route
        assert abs(b.score(X) - score) <= 1e-12, route
        assert abs(b.lower_bound_ - a.lower_bound_) <= 1e-12, route
        np.testing.assert_allclose(b.log_likelihoods_, a.log_likelihoods_, rtol=1e-12, atol=0)
        # means near 1e6, where float64's spacing is 1.2e-10
        np.testing.assert_allclose(b.means_, a.means_, rtol=0, atol=1e-7, err_msg=route)
        np.testing.assert_allclose(b.covariances_, a.covariances_, rtol=0, atol=1e-9)
        np.testing.assert_allclose(b.weights_, a.weights_, rtol=0, atol=1e-10, err_msg=route)
