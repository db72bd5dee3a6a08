"""Out of core: fit probabilistic PCA and a Gaussian mixture to an array on disk.

Writes 10^6 rows from a planted model (three clusters in a three-dimensional
subspace of 12 features, plus isotropic noise) to a temporary directory, as a zarr
array if zarr is installed and a NumPy memmap otherwise, block by block, so the data
never sit in memory at once.  Both estimators then fit the Dask array over that
store by exact EM: PPCA summarises the rows in one pass; the mixture's E-step reads
every block each iteration.  Dask's progress bar shows each pass that takes more
than a second.  The parameters are the ones an in-memory fit of the same rows gives.

Run:  python examples/out_of_core.py [--rows 10000 | --small]
      (or LATENTLAB_EXAMPLE_ROWS=10000 python examples/out_of_core.py)
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import numpy as np

import latentlab

N_FEATURES, N_CLUSTERS, NOISE_VARIANCE = 12, 3, 0.25
WEIGHTS = np.array([0.5, 0.3, 0.2])
BLOCK_ROWS = 100_000


def planted(seed=0):
    """The planted model: cluster centres in a 3-d subspace and their spread there."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(N_FEATURES, 3)))[0]  # (12, 3) orthonormal
    centres = rng.normal(size=(N_CLUSTERS, 3)) * 4.0
    return rng, basis, centres


def write(directory, rows):
    """The rows on disk (zarr, else a memmap), written block by block; returns a Dask
    array over them and the storage's name."""
    import dask.array as da

    rng, basis, centres = planted()
    try:
        import zarr

        store = zarr.open_array(
            os.path.join(directory, "X.zarr"),
            mode="w",
            shape=(rows, N_FEATURES),
            chunks=(BLOCK_ROWS, N_FEATURES),
            dtype="f8",
        )
        kind = "zarr"
    except ImportError:
        store = np.memmap(
            os.path.join(directory, "X.dat"), np.float64, "w+", shape=(rows, N_FEATURES)
        )
        kind = "memmap"
    for start in range(0, rows, BLOCK_ROWS):
        m = min(BLOCK_ROWS, rows - start)
        labels = rng.choice(N_CLUSTERS, size=m, p=WEIGHTS)
        latent = centres[labels] + rng.normal(size=(m, 3))
        noise = rng.normal(size=(m, N_FEATURES)) * np.sqrt(NOISE_VARIANCE)
        store[start : start + m] = latent @ basis.T + noise
    if kind == "memmap":
        store.flush()
    return da.from_array(store, chunks=(BLOCK_ROWS, N_FEATURES)), kind


def main(rows: int = 1_000_000) -> dict:
    from dask.diagnostics import ProgressBar

    directory = tempfile.mkdtemp(prefix="latentlab_out_of_core_")
    try:
        X, kind = write(directory, rows)
        size = f"{kind}, {X.nbytes / 1e6:.0f} MB, Dask blocks of {X.chunksize[0]} rows"
        print(f"{rows} x {N_FEATURES} rows on disk ({size})")
        with ProgressBar(minimum=1.0):
            ppca = latentlab.PPCA(3, random_state=0).fit(X)
            gmm = latentlab.GaussianMixture(N_CLUSTERS, random_state=0).fit(X)
        print(
            f"PPCA: noise variance {ppca.noise_variance_:.4f} (planted {NOISE_VARIANCE}), "
            f"log-likelihood per row {ppca.log_likelihoods_[-1] / rows:.4f}, "
            f"{ppca.n_iter_} iterations"
        )
        weights = np.sort(gmm.weights_)[::-1]
        print(
            f"GaussianMixture: weights {np.round(weights, 4)} (planted {WEIGHTS}), "
            f"converged {gmm.converged_} after {gmm.n_iter_} iterations"
        )
        return {
            "storage": kind,
            "noise_variance": float(ppca.noise_variance_),
            "weights": weights.tolist(),
            "gmm_converged": bool(gmm.converged_),
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    default = int(float(os.environ.get("LATENTLAB_EXAMPLE_ROWS", 1_000_000)))
    parser.add_argument("--rows", type=lambda s: int(float(s)), default=default)
    parser.add_argument("--small", action="store_true", help="10^4 rows (a quick check)")
    args = parser.parse_args()
    main(10_000 if args.small else args.rows)
