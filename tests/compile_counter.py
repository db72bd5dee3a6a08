"""Count the programs JAX hands to XLA (a miss of jit's in-memory cache), through
the public ``jax.monitoring`` API: a deterministic measure of recompilation."""

from __future__ import annotations

import contextlib

from jax import monitoring

_EVENT = "/jax/core/compile/backend_compile_duration"
_count = [0]


def _listener(name, duration, **kwargs):
    if name == _EVENT:
        _count[0] += 1


monitoring.register_event_duration_secs_listener(_listener)


@contextlib.contextmanager
def count_compiles():
    """``with count_compiles() as compiles: ...``; ``compiles()`` is the number of
    programs compiled (or loaded from the persistent cache) inside the block so far."""
    start = _count[0]
    yield lambda: _count[0] - start
