"""pLSA at scale: exact EM over row chunks (memmap, Dask, scipy.sparse
chunks) against the in-memory fit, and ``partial_fit`` (stepwise EM on the topic-word
statistics) on a stream from a planted corpus.

Chunked route.  The compiled EM program is the in-memory one with the E-step's sums
formed on the host chunk by chunk, so from the same start the topics and the EM trace
equal the in-memory fit's to round-off (1e-10; the trace's entries are ~1e4 nats).
The last fold-in runs the in-memory schedule (the same shrinking batches, each batch's
rows gathered into one matrix), so with the same topics it gives the same theta to
the last bit: ``transform`` of out-of-core counts equals the in-memory one.  (A Dask
array's row outputs are folded in per block instead, lazily: each block's equal that
block's in-memory ones, and the whole corpus's to the fold-in tolerance.)  The
fit's topics differ from the in-memory ones by round-off (the chunks' sums are added
in another order), which can flip a SQUAREM step accepted at a near tie for a
document late in its fold-in; theta then moves within fold-in's convergence error
(measured 4e-9 and 8e-9), so the fit's theta is compared to 1e-7.

Stream.  The oracle is the batch fit on the same documents and the planted topics.
Online EM passes if its held-out log-likelihood per token (documents folded in,
``score_samples``) is below the batch fit's by at most p / T (p = K (W - 1) topic
parameters, T training tokens: twice the batch fit's own expected deficit, as in
tests/test_online_em.py) plus three standard errors of the paired difference.  The
model after the first chunk alone misses by more, so the bound has power.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import xlogy

import latentlab
from latentlab.inference.chunked import RowChunks

K, W, L = 4, 60, 50
N_TRAIN, N_TEST, N_CHUNKS = 1600, 1000, 8


def _planted(seed=0):
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(W, 0.3), K)

    def draw(n):
        theta = rng.dirichlet(np.full(K, 0.3), n)
        return np.vstack([rng.multinomial(L, t @ phi) for t in theta]).astype(np.float64)

    return phi, draw(N_TRAIN), draw(N_TEST)


# ----------------------------------------------------------------------------- chunked fit

N_DOCS = 203  # not a multiple of any chunk size below


@pytest.fixture(scope="module")
def planted_data():
    return _planted(0)


@pytest.fixture(scope="module")
def corpus(planted_data):
    # the shape of the stream's first chunk (padded to the same 224 rows): its
    # in-memory fit shares compiled programs with partial_fit's first call below
    return planted_data[1][:N_DOCS]


def _fit(X, **settings):
    return latentlab.PLSA(K, random_state=0, **settings).fit(X)


@pytest.fixture(scope="module")
def in_memory(corpus):
    return _fit(corpus)


def _assert_same_fit(a, b, X):
    """EM from the same start, then the same last fold-in: the same iterations, topics
    and whole trace (its last entry is the objective after the last fold-in) to
    round-off, theta within the fold-in's convergence error (module docstring), and
    each document's log-likelihood to 5e-7 nats (measured 3e-8 with a prior)."""
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_allclose(b.log_likelihoods_, a.log_likelihoods_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(b.params_["phi"], a.params_["phi"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(b.params_["theta"], a.params_["theta"], rtol=0, atol=1e-7)
    phi = a.params_["phi"]

    def doc_logliks(theta):
        return xlogy(X, theta @ phi).sum(axis=1)

    gap = doc_logliks(b.params_["theta"]) - doc_logliks(a.params_["theta"])
    assert np.max(np.abs(gap)) <= 5e-7, np.max(np.abs(gap))
    np.testing.assert_array_equal(b.doc_lengths_, a.doc_lengths_)


def _memmap(corpus, path, dtype):
    X = np.memmap(path, dtype=dtype, mode="w+", shape=corpus.shape)
    X[:] = corpus
    X.flush()
    return np.memmap(path, dtype, "r", shape=corpus.shape)


@pytest.fixture(scope="module")
def memmap_fit(corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("plsa") / "counts.dat"
    return _fit(RowChunks(_memmap(corpus, path, np.float64), 64))


def test_memmap_chunks_equal_the_in_memory_fit(corpus, in_memory, memmap_fit):
    chunked = memmap_fit
    _assert_same_fit(in_memory, chunked, corpus)
    assert chunked.n_features_in_ == corpus.shape[1]
    # the fitted model is an ordinary one: its score is the trace's last entry
    assert np.isclose(chunked.score(corpus) * len(corpus), chunked.log_likelihoods_[-1])


def test_sparse_row_chunks_with_a_prior_equal_the_in_memory_fit(corpus):
    settings = dict(doc_topic_prior=1.1, topic_word_prior=1.05)
    a = _fit(corpus, **settings)
    # 50 rows per chunk, padded to 64 in the chunk function: padding rows in every chunk
    b = _fit(RowChunks(sp.csr_matrix(corpus), 50), **settings)
    _assert_same_fit(a, b, corpus)


def test_text_like_sparse_tempered_corpus_equals_the_in_memory_fit():
    """A corpus as sparse as text (about 8% nonzero, under the dense layout's density):
    the chunked route's nonzeros layout, its host fold-in and tempered EM, from a COO
    matrix (converted to CSR once, since COO cannot be sliced by rows)."""
    from latentlab._shapes import DENSE_MIN_DENSITY

    rng = np.random.default_rng(3)
    phi = rng.dirichlet(np.full(400, 0.05), K)
    theta = rng.dirichlet(np.full(K, 0.3), 150)
    X = np.vstack([rng.multinomial(40, t @ phi) for t in theta]).astype(np.float64)
    X = X[:, X.sum(axis=0) > 0]  # no unseen words (they only add a warning)
    assert np.mean(X > 0) < DENSE_MIN_DENSITY / 2
    a = _fit(X, tempering=0.9)
    b = _fit(RowChunks(sp.coo_matrix(X), 64), tempering=0.9)
    _assert_same_fit(a, b, X)
    np.testing.assert_array_equal(b.transform(RowChunks(sp.csr_matrix(X), 64)), b.transform(X))


def test_chunked_fit_refuses_devices(corpus):
    with pytest.raises(ValueError, match="splits in-memory fits only"):
        _fit(RowChunks(corpus, 64), devices="all")


def test_dask_threaded_equals_the_in_memory_fit(corpus, in_memory):
    da = pytest.importorskip("dask.array")
    import dask

    with dask.config.set(scheduler="threads"):
        chunked = _fit(da.from_array(corpus, chunks=(64, -1)))
    _assert_same_fit(in_memory, chunked, corpus)


def test_float32_memmap_fits_as_the_float64_one(corpus, memmap_fit, tmp_path):
    """Counts stored as float32 (exact integers) are read as float64 and every
    statistic is summed in float64: the fit is the float64 memmap's, bit for bit."""
    chunked = _fit(RowChunks(_memmap(corpus, tmp_path / "counts32.dat", np.float32), 64))
    for name in ("theta", "phi"):
        np.testing.assert_array_equal(chunked.params_[name], memmap_fit.params_[name])
    np.testing.assert_array_equal(chunked.log_likelihoods_, memmap_fit.log_likelihoods_)


def test_dask_row_outputs_fold_in_each_block(corpus, in_memory):
    """A Dask array's documents are folded in block by block, lazily (203 rows in chunks
    of 64, NumPy and SciPy sparse blocks): nothing is read before ``compute``; each
    block's theta and scores are the in-memory ones of that block (the wiring: row order,
    chunks, sparse blocks), and the whole corpus's to the fold-in tolerance (each
    document's log-likelihood within 5e-7 nats of the whole-corpus fold-in's, measured
    1.3e-8; theta, flat at the maximum, within 1e-5, measured 3.4e-6)."""
    da = pytest.importorskip("dask.array")
    import dask

    blocks = [corpus[i : i + 64] for i in range(0, len(corpus), 64)]
    theta = np.vstack([in_memory.transform(b) for b in blocks])
    scores = np.concatenate([in_memory.score_samples(b) for b in blocks])
    X = da.from_array(corpus, chunks=(64, -1))
    reads = []

    def read(block):
        reads.append(len(block))
        return block

    lazy = in_memory.transform(X.map_blocks(read, dtype=X.dtype, meta=np.empty((0, 0))))
    assert reads == []  # a graph, nothing folded in yet
    with dask.config.set(scheduler="threads"):
        np.testing.assert_array_equal(lazy.compute(), theta)
        assert sorted(reads) == [11, 64, 64, 64]
        for dask_counts in (X, X.map_blocks(sp.csr_matrix)):
            out = in_memory.transform(dask_counts)
            assert isinstance(out, da.Array) and out.chunks == ((64, 64, 64, 11), (K,))
            np.testing.assert_array_equal(out.compute(), theta)
        out = in_memory.score_samples(X)
        assert out.chunks == ((64, 64, 64, 11),)
        np.testing.assert_array_equal(out.compute(), scores)
        perplexity, score = in_memory.perplexity(X), in_memory.score(X)
    np.testing.assert_allclose(theta, in_memory.transform(corpus), rtol=0, atol=1e-5)
    whole = in_memory.score_samples(corpus)
    np.testing.assert_allclose(scores, whole, rtol=0, atol=5e-7)
    assert np.isclose(score, whole.mean(), rtol=0, atol=5e-7)
    total_gap = 5e-7 * len(corpus) / corpus.sum()  # per token, from 5e-7 nats per document
    assert np.isclose(np.log(perplexity), np.log(in_memory.perplexity(corpus)), atol=total_gap)
    # the scalar scores on RowChunks: the in-memory schedule, equal to round-off
    chunks = RowChunks(corpus, 64)
    assert np.isclose(in_memory.score(chunks), in_memory.score(corpus), rtol=1e-14)
    assert np.isclose(in_memory.perplexity(chunks), in_memory.perplexity(corpus), rtol=1e-14)
    # a word the topics give probability 0: -inf, as in memory
    unseen = latentlab.PLSA(K, random_state=0)
    unseen.__dict__.update(in_memory.__dict__)
    unseen.params_ = {"theta": in_memory.params_["theta"], "phi": in_memory.params_["phi"].copy()}
    unseen.params_["phi"][:, 0] = 0.0
    unseen.params_["phi"] /= unseen.params_["phi"].sum(axis=1, keepdims=True)
    with pytest.warns(UserWarning, match="probability 0"):
        expected = unseen.score_samples(corpus)
    with pytest.warns(UserWarning, match="probability 0"):
        got = unseen.score_samples(chunks)
    np.testing.assert_array_equal(np.isneginf(got), corpus[:, 0] > 0)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=0, atol=1e-9)


def test_chunked_route_rejects_bad_counts(corpus):
    bad = corpus.copy()
    bad[70, 3] = -1.0
    with pytest.raises(ValueError, match="negative count"):
        _fit(RowChunks(bad, 64))
    bad = corpus.copy()
    bad[130] = 0.0
    with pytest.raises(ValueError, match="rows 130"):
        _fit(RowChunks(bad, 64))
    with pytest.raises(ValueError, match="method='em'"):
        _fit(RowChunks(corpus, 64), method="map")


# ----------------------------------------------------------------------------- stream


def _stream(est, chunks, passes=1):
    for _ in range(passes):
        for chunk in chunks:
            est.partial_fit(chunk)
    return est


@pytest.fixture(scope="module")
def planted(planted_data):
    phi, X, X_test = planted_data
    chunks = np.array_split(X, N_CHUNKS)
    batch = latentlab.PLSA(K, random_state=0).fit(X)
    online = _stream(latentlab.PLSA(K, random_state=0), chunks, passes=2)
    first_only = latentlab.PLSA(K, random_state=0).partial_fit(chunks[0])
    return phi, X, chunks, X_test, batch, online, first_only


def _deficit(batch, other, X_test):
    """Held-out log-likelihood per token of ``batch`` minus ``other``, and its SE."""
    diff = batch.score_samples(X_test) - other.score_samples(X_test)
    tokens = X_test.sum()
    return diff.sum() / tokens, diff.std(ddof=1) * np.sqrt(len(diff)) / tokens


def test_online_em_reaches_batch_heldout_loglik_per_token(planted):
    phi, X, _, X_test, batch, online, first_only = planted
    p, tokens = K * (W - 1), X.sum()
    deficit, se = _deficit(batch, online, X_test)
    assert deficit <= p / tokens + 3.0 * se, (deficit, p / tokens, se)
    early, early_se = _deficit(batch, first_only, X_test)
    assert early > p / tokens + 3.0 * early_se, early
    # the planted topics are recovered (up to the topics' order)
    order = np.argmax(online.components_ @ phi.T, axis=1)
    assert sorted(order) == list(range(K))
    np.testing.assert_allclose(online.components_, phi[order], atol=0.03)
    assert online.n_samples_seen_ == 2 * N_TRAIN
    assert online.n_iter_ == 2 * N_CHUNKS
    assert online.log_likelihoods_.shape == (2 * N_CHUNKS,)
    # the prequential trace: the last chunk's documents, scored before their update
    last = online.log_likelihoods_[-1]
    assert abs(last - online.score(X_test)) < 0.03 * abs(last)


def test_partial_fit_continues_after_save_and_load(planted, tmp_path):
    from latentlab.io import load, save

    _, _, chunks, X_test, *_ = planted
    est = _stream(latentlab.PLSA(K, random_state=0, learning_decay=0.8), chunks[:3])
    save(est, tmp_path / "online.npz")
    loaded = load(tmp_path / "online.npz")
    for model in (est, loaded):
        _stream(model, chunks[3:5])
    np.testing.assert_array_equal(loaded.components_, est.components_)
    np.testing.assert_array_equal(
        loaded.online_state_["word_stats"], est.online_state_["word_stats"]
    )
    assert loaded.n_samples_seen_ == est.n_samples_seen_ == sum(len(c) for c in chunks[:5])
    # fit ends the stream
    assert not hasattr(loaded.fit(chunks[0]), "online_state_")


def test_a_word_new_to_the_stream_enters_the_topics(planted):
    _, _, chunks, *_ = planted
    first = chunks[0].copy()
    first[:, 0] = 0.0  # word 0 unseen in the first chunk
    first = first[first.sum(axis=1) > 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "never occur in X"
        est = latentlab.PLSA(K, random_state=0).partial_fit(first)
    assert np.all(est.components_[:, 0] == 0)
    est.partial_fit(chunks[1])
    assert np.isneginf(est.log_likelihoods_[-1])  # probability 0 before the update
    share = chunks[1][:, 0].sum() / chunks[1].sum()
    assert est.components_[:, 0].sum() > share  # now every topic can emit it
    assert np.isfinite(est.score(chunks[2]))


def test_partial_fit_rejects_bad_settings_and_chunks(planted):
    _, _, chunks, *_ = planted
    with pytest.raises(ValueError, match="learning_decay"):
        latentlab.PLSA(K, learning_decay=0.4).partial_fit(chunks[0])
    with pytest.raises(ValueError, match="online EM"):
        latentlab.PLSA(K, method="map").partial_fit(chunks[0])
    est = latentlab.PLSA(K, random_state=0).partial_fit(chunks[0])
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(chunks[1][:, :10])


# ----------------------------------------------------------------------------- example


def test_out_of_core_example_recovers_its_planted_model():
    """examples/out_of_core.py at 10^4 rows (its data are planted: noise variance
    0.25, weights 0.5/0.3/0.2); run in this process to share its compiles."""
    pytest.importorskip("dask.diagnostics")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "out_of_core.py"
    spec = importlib.util.spec_from_file_location("out_of_core_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    result = example.main(rows=10_000)
    # 12 features, 10^4 rows: the noise variance's ML estimate is within a few percent
    assert abs(result["noise_variance"] - 0.25) < 0.02
    np.testing.assert_allclose(result["weights"], [0.5, 0.3, 0.2], atol=0.02)
    assert result["gmm_converged"]
