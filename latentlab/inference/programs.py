"""One way to compile latentlab's programs: compile little, reuse much.

JAX compiles once per input shape, and on CPU XLA spends ~0.3-1 s compiling each of
latentlab's programs -- often far longer than running them on a small data set.
:func:`program` jit-compiles a plain Python function and keeps, beside the fully
optimised program, a variant compiled with LLVM optimisation off (~40% faster to
compile; the heavy lifting -- LAPACK eigh/SVD, BLAS-like dots -- is the same library
code either way).  ``prog.for_work(n)`` picks the variant for a problem of about ``n``
elements: small problems take the quick one.

Built on public JAX API only (``jax.jit`` with ``compiler_options``), from the
function itself: no ``__wrapped__``.
"""

from __future__ import annotations

import functools

import jax

from latentlab import _shapes

__all__ = ["Program", "program"]

_QUICK_OPTIONS = {"xla_backend_optimization_level": 0}


class Program:
    """A jit-compiled function with a quick-compile variant; call it like the jitted
    function (the fully optimised program)."""

    def __init__(self, fn, static_argnames=()):
        self.fn = fn
        self.static_argnames = tuple(static_argnames)
        self.full = jax.jit(fn, static_argnames=self.static_argnames)
        self.__name__, self.__doc__ = fn.__name__, fn.__doc__

    @functools.cached_property
    def quick(self):
        """The same program compiled with LLVM optimisation off."""
        return jax.jit(
            self.fn, static_argnames=self.static_argnames, compiler_options=_QUICK_OPTIONS
        )

    def for_work(self, work: int):
        """The variant for a problem of about ``work`` elements."""
        return self.quick if work <= _shapes.QUICK_COMPILE_MAX_WORK else self.full

    def __call__(self, *args, **kwargs):
        return self.full(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return self.full.lower(*args, **kwargs)


def program(fn=None, *, static_argnames=()):
    """Decorator: ``@program`` or ``@program(static_argnames=(...))`` makes a
    :class:`Program` of a plain function."""
    if fn is None:
        return functools.partial(program, static_argnames=static_argnames)
    return Program(fn, static_argnames)
