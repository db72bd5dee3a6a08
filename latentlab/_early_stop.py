"""The early-stopping rule of the model searches (``compare(stop_early=True)`` and
``Imputer()``'s search): when is a candidate clearly worse than the best so far?

Both score candidates on the same held-out rows, so the question is whether the
per-row differences d (candidate minus best, over the rows both have scored) have a
negative mean.  A z-test on their sum, ``sum(d) + z sqrt(m) sd(d) < 0``, has no power
against a candidate whose deficit comes from a few catastrophic rows (a mixture that
puts a hidden entry 10^5 nats out): they inflate sd(d) as much as the sum, and such a
candidate was never stopped.  So the differences are first winsorised from below at
their 10th percentile.  That only raises the candidate's side -- its rows where it is
better are untouched -- so a candidate whose winsorised sum is still clearly below zero
is below it without the winsorising too, and the winsorised values have the light
tail the z-test needs.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STOP_Z", "clearly_worse"]

# standard errors below zero at which a candidate stops: its remaining folds or masks
# would be expected to widen the gap, not close it
STOP_Z = 4.0
_WINSOR_QUANTILE = 0.1


def clearly_worse(d, z: float = STOP_Z) -> bool:
    """Whether per-row differences ``d`` (candidate minus best, m > 1 rows) sum to more
    than ``z`` standard errors below zero once winsorised from below at their 10th
    percentile (module docstring)."""
    d = np.asarray(d, dtype=np.float64)
    if d.size < 2:
        return False
    clipped = np.maximum(d, np.quantile(d, _WINSOR_QUANTILE))
    return bool(clipped.sum() + z * np.sqrt(d.size) * clipped.std(ddof=1) < 0)
