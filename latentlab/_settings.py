"""Declarative settings validation: each estimator states what its settings may be.

An estimator lists its constructor settings in a class attribute ``_settings``,
mapping each name to a constraint::

    _settings = {
        "n_components": Integer(1, None) | None,
        "tol": Real(0, None),
        "covariance_type": Options("full", "tied", "diag", "spherical"),
    }

:func:`validate_settings` checks every entry and raises a ``ValueError`` that names
the setting, its value and what is allowed.  :class:`latentlab.estimators.base.
LatentEstimator` calls it on entry to every fitting method (``fit``, ``partial_fit``,
``fit_transform``, ``fit_predict``), before any data are read or any JAX program is
compiled.  Checks that need the data (``n_components <= n_features``) stay in the
estimators, on the helpers of :mod:`latentlab._validation`.

Constraints combine with ``|`` (any of them may hold); ``None`` and plain strings
stand for "exactly this value" there, so ``Integer(1, None) | "auto"`` reads as the
setting does.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "Constraint",
    "Integer",
    "Real",
    "Options",
    "Boolean",
    "IsNone",
    "Callable",
    "ArrayLike",
    "InstanceOf",
    "LayerSizes",
    "RandomState",
    "Dtype",
    "Verbose",
    "scale_settings",
    "validate_settings",
]


class Constraint:
    """What a setting may be: ``is_satisfied_by(value)`` and a phrase for messages."""

    def is_satisfied_by(self, value) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def near_misses(self) -> list:
        """Values that just fail this constraint (the tests try each)."""
        return []

    def __or__(self, other) -> AnyOf:
        return AnyOf(self, other)

    def __ror__(self, other) -> AnyOf:
        return AnyOf(other, self)

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


def _as_constraint(item) -> Constraint:
    if isinstance(item, Constraint):
        return item
    if item is None:
        return IsNone()
    if isinstance(item, str):
        return Options(item)
    raise TypeError(f"not a settings constraint: {item!r}")


def _is_integer(value) -> bool:
    # bools are refused: True is not a count
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(
        value, (bool, np.bool_)
    )


def _is_real(value) -> bool:
    return (
        isinstance(value, (numbers.Real, np.floating, np.integer))
        and not isinstance(value, (bool, np.bool_))
        and not np.isnan(value)
    )


def _same_kind(a, b) -> bool:
    """Whether ``a == b`` means "the same option": strings with strings, bools with
    bools (``True == 1`` is not a match), numbers with numbers (``2.0`` is ``2``)."""
    kinds = (str, (bool, np.bool_), (numbers.Number, np.number))
    for kind in kinds:
        if isinstance(a, kind) or isinstance(b, kind):
            return isinstance(a, kind) and isinstance(b, kind)
    return type(a) is type(b)


def _bounds(low, high, closed: str) -> str:
    left = closed in ("left", "both")
    right = closed in ("right", "both")
    if high is None:
        return f"{'>=' if left else '>'} {low}"
    if low is None:
        return f"{'<=' if right else '<'} {high}"
    return f"in {'[' if left else '('}{low}, {high}{']' if right else ')'}"


class Integer(Constraint):
    """An integer (not a bool) with ``low <= value <= high``; None: unbounded."""

    def __init__(self, low=None, high=None):
        self.low, self.high = low, high

    def is_satisfied_by(self, value) -> bool:
        return (
            _is_integer(value)
            and (self.low is None or value >= self.low)
            and (self.high is None or value <= self.high)
        )

    def describe(self) -> str:
        if self.high is None and self.low == 1:
            return "a positive integer"
        if self.high is None and self.low == 0:
            return "a non-negative integer"
        if self.low is None and self.high is None:
            return "an integer"
        return f"an integer {_bounds(self.low, self.high, 'both')}"

    def near_misses(self) -> list:
        misses = [1.5, True]
        if self.low is not None:
            misses.append(self.low - 1)
        if self.high is not None:
            misses.append(self.high + 1)
        return misses


class Real(Constraint):
    """A real number (int or float, not a bool, not NaN) within bounds.

    ``closed`` says which bounds are included: "both" (default), "left", "right" or
    "neither"; ``finite=True`` also refuses infinities.  ``verb`` words the message
    for a number out of range ("<name> must <verb> in [0, 1]"; default "be").
    """

    def __init__(
        self, low=None, high=None, *, closed: str = "both", finite: bool = False, verb="be"
    ):
        if closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"closed={closed!r}")
        self.low, self.high, self.closed, self.finite = low, high, closed, finite
        self.verb = verb

    def is_satisfied_by(self, value) -> bool:
        if not _is_real(value) or (self.finite and not np.isfinite(value)):
            return False
        left = self.closed in ("left", "both")
        right = self.closed in ("right", "both")
        if self.low is not None and not (value >= self.low if left else value > self.low):
            return False
        if self.high is not None and not (value <= self.high if right else value < self.high):
            return False
        return True

    def describe(self, finite: bool | None = None) -> str:
        """The bounds, "in [0, 1]", when both are set, else "a number >= 0" ("a finite
        number" where infinities are refused, unless ``finite=False`` leaves that out)."""
        if self.low is not None and self.high is not None:
            return _bounds(self.low, self.high, self.closed)
        what = "a finite number" if (self.finite if finite is None else finite) else "a number"
        if self.low is None and self.high is None:
            return what
        return f"{what} {_bounds(self.low, self.high, self.closed)}"

    def near_misses(self) -> list:
        misses = ["1", float("nan")]
        if self.low is not None:
            misses.append(self.low if self.closed in ("right", "neither") else self.low - 1.0)
        if self.high is not None:
            misses.append(self.high if self.closed in ("left", "neither") else self.high + 1.0)
        if self.finite:
            misses.append(float("inf"))
        return misses


class Options(Constraint):
    """One of the listed values (compared with ``==`` only for same-typed values).

    ``hints`` maps a refused value that users are known to try to a sentence that
    the message adds (e.g. scikit-learn's meaning of the same setting name).
    """

    def __init__(self, *values, hints: dict | None = None):
        self.values = values
        self.hints = hints or {}

    def is_satisfied_by(self, value) -> bool:
        # an array compared with == gives an array: only scalars can match
        if isinstance(value, np.ndarray):
            return False
        return any(_same_kind(value, v) and value == v for v in self.values)

    def describe(self) -> str:
        if len(self.values) == 1:
            return repr(self.values[0])
        return "one of " + ", ".join(repr(v) for v in self.values)

    def near_misses(self) -> list:
        return ["no-such-option"]


class Boolean(Constraint):
    """``True`` or ``False`` (Python or NumPy bool)."""

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, (bool, np.bool_))

    def describe(self) -> str:
        return "a bool"

    def near_misses(self) -> list:
        return ["yes"]


class IsNone(Constraint):
    def is_satisfied_by(self, value) -> bool:
        return value is None

    def describe(self) -> str:
        return "None"


class Callable(Constraint):
    def is_satisfied_by(self, value) -> bool:
        return callable(value)

    def describe(self) -> str:
        return "a callable"


class ArrayLike(Constraint):
    """An array or a (nested) list/tuple of numbers; shapes are checked against the data."""

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, (np.ndarray, list, tuple)) or hasattr(value, "__array__")

    def describe(self) -> str:
        return "an array"

    def near_misses(self) -> list:
        return ["not-an-array"]


class InstanceOf(Constraint):
    """An instance of ``kind`` (e.g. ``dict``), described as ``what``."""

    def __init__(self, kind, what: str):
        self.kind, self.what = kind, what

    def is_satisfied_by(self, value) -> bool:
        return isinstance(value, self.kind)

    def describe(self) -> str:
        return self.what

    def near_misses(self) -> list:
        return [1.5j]


class LayerSizes(Constraint):
    """Hidden layer widths: a positive integer or a sequence of them (empty: none)."""

    def is_satisfied_by(self, value) -> bool:
        if Integer(1).is_satisfied_by(value):
            return True
        return isinstance(value, (tuple, list, np.ndarray)) and all(
            Integer(1).is_satisfied_by(v) for v in np.ravel(np.asarray(value, dtype=object))
        )

    def describe(self) -> str:
        return "a positive integer or a sequence of positive integers"

    def near_misses(self) -> list:
        return [0, (4, 0)]


class RandomState(Constraint):
    """What :func:`sklearn.utils.check_random_state` takes: None, a seed in
    [0, 2**32 - 1], or a ``numpy.random.RandomState``."""

    def is_satisfied_by(self, value) -> bool:
        return (
            value is None
            or Integer(0, 2**32 - 1).is_satisfied_by(value)
            or isinstance(value, np.random.RandomState)
        )

    def describe(self) -> str:
        return "None, an integer seed in [0, 2**32 - 1] or a numpy RandomState"

    def near_misses(self) -> list:
        return [-1, "seed"]


class AnyOf(Constraint):
    """Any one of several constraints (built with ``|``)."""

    def __init__(self, *items):
        flat = []
        for item in map(_as_constraint, items):
            flat.extend(item.items if isinstance(item, AnyOf) else [item])
        # adjacent single options merge: "auto" | "mle" lists as one set of options
        self.items = []
        for item in flat:
            if isinstance(item, Options) and self.items and isinstance(self.items[-1], Options):
                last = self.items[-1]
                hints = {**last.hints, **item.hints}
                self.items[-1] = Options(*last.values, *item.values, hints=hints)
            else:
                self.items.append(item)

    def is_satisfied_by(self, value) -> bool:
        return any(item.is_satisfied_by(value) for item in self.items)

    def describe(self) -> str:
        return " or ".join(item.describe() for item in self.items)

    def near_misses(self) -> list:
        return [miss for item in self.items for miss in item.near_misses()]


def Dtype() -> Options:  # noqa: N802 (reads as a constraint in the tables)
    """The precision setting every estimator has."""
    return Options("float64", "float32")


def Verbose() -> AnyOf:  # noqa: N802
    """A verbosity level: a non-negative integer or a bool."""
    return Integer(0, None) | Boolean()


def scale_settings() -> dict:
    """The out-of-core and multi-device settings: rows per chunk, and the devices
    to shard over (``"all"``, or a list of them)."""
    return {
        "chunk_size": Integer(1, None) | None,
        "devices": InstanceOf((list, tuple), "a list of devices") | None | "all",
    }


def validate_settings(estimator) -> None:
    """Check each of ``estimator``'s settings against its ``_settings`` table.

    Raises ``ValueError`` naming the first setting that fails, its value and what it
    may be.  String values outside a set of options read "Unknown name=value", as
    everywhere in latentlab.
    """
    table = getattr(type(estimator), "_settings", None) or {}
    for name, constraint in table.items():
        constraint = _as_constraint(constraint)
        value = getattr(estimator, name)
        if not constraint.is_satisfied_by(value):
            raise ValueError(_message(name, value, constraint))


def _message(name: str, value, constraint: Constraint) -> str:
    items = constraint.items if isinstance(constraint, AnyOf) else [constraint]
    options = [item for item in items if isinstance(item, Options)]
    if options and (isinstance(value, str) or len(options) == len(items)):
        hint = next((o.hints[value] for o in options if _hashable(value) in o.hints), None)
        return f"Unknown {name}={value!r}; expected {constraint.describe()}" + (
            f": {hint}" if hint else ""
        )
    # A number of the right kind out of range: say only what that kind must satisfy.
    reals = [item for item in items if isinstance(item, Real)]
    integers = [item for item in items if isinstance(item, Integer)]
    if _is_integer(value) and len(integers) == 1:
        return f"{name} must be {integers[0].describe()}, got {value!r}"
    if _is_real(value) and len(reals) == 1 and not integers:
        real = reals[0]
        finite = real.finite and not np.isfinite(value)
        return f"{name} must {real.verb} {real.describe(finite)}, got {value!r}"
    return f"{name} must be {constraint.describe()}, got {value!r}"


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return None
    return value
