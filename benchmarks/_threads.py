"""Thread settings shared by the benchmarks; imports nothing that starts JAX."""

import os
import sys


def apply_thread_option(threads) -> None:
    """``--threads 1``: one XLA thread (BLAS is limited later, with threadpoolctl).

    XLA reads its flags when JAX starts, so call this before the first ``import jax``.
    """
    if threads == 1:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "")
            + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
    elif threads is not None:
        sys.exit("--threads takes 1 (or leave it out for the default thread settings)")
