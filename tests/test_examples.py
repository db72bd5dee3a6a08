"""Every notebook in examples/ runs top to bottom at small sizes and tells its story.

Each notebook's first code cell holds ``SMALL = False``; the test sets it to True,
executes the notebook with nbclient (matplotlib's Agg backend), fails on any cell
error, and checks the numbers the last cell prints as JSON against what the notebook
planted in its data (the number of components, the noise model, the topics...).

Speed (compiling XLA programs, not running them, dominates at these sizes):

- the notebooks run in two kernels at once, in ``GROUPS`` of about equal work,
  which roughly halves this file's wall time on two cores for the price of a second
  import; within a group one kernel serves every notebook, its namespace reset
  before each, so JAX and latentlab are imported once per group and a shape one
  notebook compiled is reused by the next (choosing_k and ppca_vs_fa fit PPCA on
  the same shapes);
- the kernels inherit the suite's XLA flags (``conftest.py``: backend optimisation
  off), about twice as fast to compile; the results agree with the optimised
  programs up to rounding (Monte Carlo summaries up to their Monte Carlo error).

The notebooks selected for this session (e.g. with ``-k``) are executed once, by a
module fixture; each parametrised test then checks its own notebook's result.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
# one kernel per group, the groups in parallel; about equal work each
GROUPS = (
    ("choosing_k", "ppca_vs_fa", "manifolds", "ica_sources", "factor_analysis_report"),
    (
        "plsa_topics",
        "embedding_uncertainty",
        "supervised_alpha",
        "autoencoder_vs_pca",
        "uncertainty_report",
    ),
)
CELL_TIMEOUT_S = 300
RESET = 'import matplotlib.pyplot as _plt\n_plt.close("all")\n%reset -f'


def _kernel_env() -> dict:
    return dict(os.environ, MPLBACKEND="Agg")  # XLA's flags: conftest's


def _small(nb) -> None:
    """Set ``SMALL = True`` in the notebook's first code cell (its parameters)."""
    first = next(cell for cell in nb.cells if cell.cell_type == "code")
    lines = first.source.splitlines()
    if "SMALL = False" not in lines:
        raise AssertionError("the first code cell must hold the line 'SMALL = False'")
    first.source = "\n".join("SMALL = True" if ln == "SMALL = False" else ln for ln in lines)


def _summary(nb) -> dict:
    """The JSON object the notebook's last code cell prints."""
    last = [cell for cell in nb.cells if cell.cell_type == "code"][-1]
    text = "".join(
        out.get("text", "")
        for out in last.outputs
        if out.output_type == "stream" and out.name == "stdout"
    )
    lines = text.strip().splitlines()
    if not lines:
        raise AssertionError("the last code cell printed nothing; it must print a JSON summary")
    return json.loads(lines[-1])


async def _run_notebook(stem: str, km) -> dict:
    if not await km.is_alive():  # an earlier notebook of the group killed it
        await km.restart_kernel(now=True)
    nb = nbformat.read(EXAMPLES / f"{stem}.ipynb", as_version=4)
    _small(nb)
    nb.cells.insert(0, new_code_cell(RESET))
    client = NotebookClient(
        nb,
        km=km,
        timeout=CELL_TIMEOUT_S,
        allow_errors=False,
        resources={"metadata": {"path": str(EXAMPLES)}},
    )
    try:
        await client.async_execute()
    finally:
        if client.kc is not None:
            client.kc.stop_channels()
    return _summary(nb)


async def _run_group(stems, results: dict) -> None:
    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel(env=_kernel_env(), cwd=str(EXAMPLES))
    try:
        for stem in stems:
            start = time.perf_counter()
            try:
                outcome = await _run_notebook(stem, km)
            except Exception as error:  # reported by that notebook's test
                outcome = error
            results[stem] = outcome, time.perf_counter() - start
    finally:
        await km.shutdown_kernel(now=True)


async def _run_all(stems) -> dict:
    results: dict = {}
    grouped = [[s for s in group if s in stems] for group in GROUPS]
    ungrouped = [s for s in stems if not any(s in group for group in GROUPS)]
    groups = [g for g in grouped if g] + ([ungrouped] if ungrouped else [])
    await asyncio.gather(*(_run_group(group, results) for group in groups))
    return results


@pytest.fixture(scope="module")
def executed(request) -> dict:
    """{notebook stem: (its JSON summary or the exception it raised, seconds)} for
    every notebook whose test this session runs."""
    selected = {
        item.callspec.params["path"].stem
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_notebook_runs_and_recovers_what_it_planted"
    }
    return asyncio.run(_run_all(sorted(selected)))


# -- what each notebook must show, against what it planted ------------------------------


def check_choosing_k(s):
    planted = s["planted_k"]
    assert s["k_heldout"] == planted
    assert s["k_one_se"] == planted
    assert s["k_bic"] == planted
    assert s["loo_winner_k"] == planted
    # one component fewer loses by many standard errors of the difference
    assert -s["loo_elpd_diff"] > 4 * s["loo_dse"]


def check_ppca_vs_fa(s):
    assert s["fa_k_one_se"] == s["planted_k"]
    assert s["ppca_best_k"] > s["planted_k"]  # PPCA spends components on noisy features
    se = max(s["fa_best_se"], s["ppca_best_se"])
    assert s["fa_best_heldout"] - s["ppca_best_heldout"] > 2 * se
    # FA's psi tracks the planted noise variances, except that the ML fit may put a
    # feature on its floor (a Heywood case: feature 9 here, planted at 0.38, where EM
    # alone used to stop, unconverged, at 0.018); 0.98 measured without it
    assert s["n_heywood"] <= 1
    assert s["psi_log_corr"] > 0.9


def check_factor_analysis_report(s):
    # real data with published numbers: R's factanal(..., factors = 3) prints chi2
    # 22.38 on 12 df, p 0.0335; KMO as psych::KMO (0.75)
    assert s["kmo"] == pytest.approx(0.752, abs=0.001)
    assert s["n_factors_parallel"] == 3 and s["n_factors_bic"] == 3
    assert s["chi2_bartlett"] == pytest.approx(22.38, abs=0.005) and s["df"] == 12
    assert s["p_bartlett"] == pytest.approx(0.0335, abs=0.0001)
    assert 0 < s["max_factor_correlation"] < 0.6  # correlated abilities, not one factor
    # 20% holes, full-information ML on every child: the loadings stay put
    assert s["complete_rows_missing"] < 60
    assert s["max_loading_change_missing"] < 0.2
    assert s["df_missing"] == 12 and 0 < s["chi2_missing"] < 60
    # the confirmatory three-factor model: lavaan's published fit
    assert s["cfa_chi2"] == pytest.approx(85.306, abs=0.0005) and s["cfa_df"] == 24
    assert s["cfa_cfi"] == pytest.approx(0.931, abs=0.0005)
    assert s["cfa_rmsea"] == pytest.approx(0.092, abs=0.0005)
    assert s["top_modification"] == "visual =~ x9"  # lavaan's modindices: 36.411
    assert s["top_modification_mi"] == pytest.approx(36.411, abs=0.0005)
    assert 0 < s["cfa_chi2_missing"] < 200 and s["cfa_loading_change_missing"] < 0.3


def check_embedding_uncertainty(s):
    # fewer observed entries, less posterior precision: exact, not statistical
    assert s["sd_incomplete"] > s["sd_complete"]
    # 90% plug-in intervals: binomial sd ~0.02 for ~250 entries; plug-in under-covers
    assert 0.8 <= s["ppca_coverage"] <= 0.97
    assert 0.8 <= s["gmm_coverage"] <= 0.97
    assert s["ppca_rmse"] < 0.3 * s["mean_rmse"]
    assert s["gmm_rmse"] < 0.3 * s["mean_rmse"]
    assert s["gmm_agreement"] >= 0.95


def check_supervised_alpha(s):
    # y drives a quiet direction: PCA's component misses it, so R^2 peaks inside the grid
    assert s["pcr_r2"] < 0.1
    assert s["best_alpha"] < 1.0
    assert s["best_r2"] > 0.5
    assert s["best_r2"] > s["r2_largest_alpha"] + 0.3  # x alone shapes z: PCA-like
    assert s["best_r2"] > s["r2_smallest_alpha"] + 0.3  # x barely informs z


def check_plsa_topics(s):
    assert s["k_completion"] == s["planted_k"]
    assert s["matched_topics"] == list(range(s["planted_k"]))  # each planted topic once
    assert s["max_topic_distance"] < 0.1
    # held-out documents: scoring the very words folded in is optimistic
    assert s["completion_perplexity"] > s["heldout_perplexity"]


def check_manifolds(s):
    # the graph methods unroll the S-curve: their coordinates rank the points by the
    # planted position t almost perfectly, on training and held-out points alike;
    # PCA (and classical MDS of Euclidean distances, which equals it) cannot
    graph_methods = ("Isomap", "LLE", "Laplacian eigenmaps")
    assert all(s["training"][m] > 0.99 for m in graph_methods), s["training"]
    assert all(s["held_out"][m] > 0.99 for m in ("Isomap", "LLE")), s["held_out"]
    assert s["training"]["PCA"] < 0.95, s["training"]
    assert s["pca_vs_mds_max_abs_difference"] < 1e-8


def check_ica_sources(s):
    # FastICA finds each planted signal once (sign and order aside); PCA's uncorrelated
    # components remain mixtures of them
    assert s["ica_matched_sources"] == [0, 1, 2]
    assert min(s["ica_abs_corr"]) > 0.99, s["ica_abs_corr"]
    assert min(s["pca_abs_corr"]) < 0.9, s["pca_abs_corr"]
    assert s["mixing_max_rel_error"] < 0.1  # mixing_ estimates the planted mixing matrix
    assert s["reconstruction_max_abs_error"] < 1e-9
    assert s["sklearn_max_abs_difference"] < 1e-8  # scikit-learn's, from the same start


def check_autoencoder_vs_pca(s):
    # PCA is the optimal linear reconstruction: the linear autoencoder reaches its
    # training error and cannot beat it
    for pca, linear in zip(s["pca_train_error"], s["linear_ae_train_error"], strict=True):
        assert pca * (1 - 1e-9) <= linear <= 1.01 * pca
    # a non-linear code of the smallest size reconstructs held-out digits better
    assert s["nonlinear_ae_test_error"][0] < 0.97 * s["pca_test_error"][0]
    # the linear-decoder VAE's ELBO is a lower bound on PPCA's exact log-likelihood
    # and approaches it (0.2% below with the full run, 2.6% with the small one)
    assert s["vae_elbo"] <= s["ppca_loglik"] + 3 * s["vae_elbo_se"]
    assert s["ppca_loglik"] - s["vae_elbo"] < 0.05 * abs(s["ppca_loglik"])


def check_uncertainty_report(s):
    # 95% intervals of the factor model (10% missing) hold the planted values: 12
    # loadings and 6 uniquenesses, so one or two misses are sampling, more are not
    assert s["loading_coverage"] >= 10 / 12
    assert s["psi_coverage"] >= 5 / 6
    assert not s["heywood"]
    # overlapping clusters: the points assigned to the wrong one are the uncertain ones
    assert s["gmm_ari"] > 0.7
    assert s["uncertainty_misassigned"] > 3 * s["uncertainty_correct"]
    # one component for two factors: the second eigenvalue lies beyond every replicate
    assert s["ppc_worst_eigenvalue_k1"] == 2 and s["ppc_p_k1"] == 0.0
    assert 0.02 < s["ppc_p_k2"] < 0.98  # two components: no eigenvalue out of reach
    assert s["pit_ks"] < 0.05  # calibrated entry by entry


CHECKS = {
    "choosing_k": check_choosing_k,
    "ppca_vs_fa": check_ppca_vs_fa,
    "embedding_uncertainty": check_embedding_uncertainty,
    "supervised_alpha": check_supervised_alpha,
    "plsa_topics": check_plsa_topics,
    "manifolds": check_manifolds,
    "ica_sources": check_ica_sources,
    "autoencoder_vs_pca": check_autoencoder_vs_pca,
    "factor_analysis_report": check_factor_analysis_report,
    "uncertainty_report": check_uncertainty_report,
}


def test_every_notebook_has_its_checks():
    assert sorted(CHECKS) == sorted(path.stem for path in NOTEBOOKS)


def test_groups_name_existing_notebooks():
    stems = {path.stem for path in NOTEBOOKS}
    assert {stem for group in GROUPS for stem in group} <= stems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_recovers_what_it_planted(path, executed, request):
    result, seconds = executed[path.stem]
    # the fixture ran the notebooks; keep each one's own time with its test's report
    request.node.user_properties.append(("execution_s", round(seconds, 1)))
    if isinstance(result, BaseException):
        raise result
    CHECKS[path.stem](result)
