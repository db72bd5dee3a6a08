"""What every plot shares: the Axes to draw on, the refusal of a model a plot cannot
show, feature labels and integer ticks."""

from __future__ import annotations

__all__: list[str] = []


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    return ax


def _refuse(plot: str, est, accepts: str):
    raise TypeError(f"{plot} cannot show {type(est).__name__}; it accepts {accepts}")


def _feature_label(est, j: int) -> str:
    names = getattr(est, "feature_names_in_", None)
    return str(names[j]) if names is not None else f"x{j}"


def _integer_ticks(axis):
    """Ticks only at integers, on an axis of counts (K, component, iteration, row)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))
