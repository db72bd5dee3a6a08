"""Timing helpers shared by the benchmarks that race latentlab against scikit-learn.

Importing this starts nothing; :func:`print_environment` imports JAX, so call it after
:func:`_threads.apply_thread_option`.
"""

import os
import statistics
import time

# BENCH_CLOCK=cpu times the process's CPU (all its threads) instead of the wall: on a
# shared, loaded machine a one-thread comparison (--threads 1) then measures the work
# rather than the share of the cores each side happened to get.
CLOCK = time.process_time if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter


def timed(fn):
    """(seconds, result) of ``fn()``: wall seconds, or CPU seconds with BENCH_CLOCK=cpu."""
    start = CLOCK()
    out = fn()
    return CLOCK() - start, out


def bench(label, ours, ref, repeats, compare, width=40):
    """Run ``ours`` and ``ref`` interleaved (A, B, A, B, ...) after one warm-up call each
    and print the medians, their ratio (< 1: latentlab is faster), latentlab's first call
    (trace + compile + run) and ``compare(our_result, reference_result)``."""
    first, result = timed(ours)
    timed(ref)
    times_ours, times_ref = [], []
    for _ in range(repeats):
        t, result = timed(ours)
        times_ours.append(t)
        t, expected = timed(ref)
        times_ref.append(t)
    o, r = statistics.median(times_ours), statistics.median(times_ref)
    print(
        f"{label:<{width}} {o:7.3f} s vs {r:7.3f} s  ratio {o / r:5.2f}  | first call "
        f"{first:6.2f} s | {compare(result, expected)}",
        flush=True,
    )


def print_environment(threads) -> None:
    """JAX's version and devices, the BLAS thread pools and the load average, to print
    beside the numbers."""
    import jax
    from threadpoolctl import threadpool_info

    print(f"jax {jax.__version__}, devices {jax.devices()}, threads {threads}")
    for pool in threadpool_info():
        print(f"threadpoolctl: {pool['internal_api']} num_threads={pool['num_threads']}")
    print(f"load average: {os.getloadavg()}")
