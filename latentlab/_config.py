"""latentlab's global settings: :func:`set_config`, :func:`get_config`, :func:`config_context`.

Settings
--------
padding : bool, default True
    Pad row and component counts to the buckets of :mod:`latentlab._shapes`, so that
    fits of nearby shapes (a K grid, cross-validation folds) share compiled programs.
    Padding never changes a result beyond round-off; ``False`` makes every fit run at
    its exact shape (one compile per new shape).
progress : bool, default True
    Show a progress bar (tqdm's, notebook-aware) for a search, refit loop or
    comparison once it has run for two seconds, on a terminal or in a notebook
    (:mod:`latentlab._progress`).  ``False`` turns these bars off; ``verbose=1`` where
    an estimator has it shows its bars in any case.
"""

from __future__ import annotations

import contextlib

__all__ = ["config_context", "get_config", "set_config"]

_DEFAULTS = {"padding": True, "progress": True}
_config = dict(_DEFAULTS)


def get_config() -> dict:
    """A copy of the current settings."""
    return dict(_config)


def set_config(**settings) -> None:
    """Change settings for the rest of the process (see the module docstring).

    An unknown name or a value of the wrong type raises ``ValueError``.
    """
    for name, value in settings.items():
        if name not in _DEFAULTS:
            known = ", ".join(sorted(_DEFAULTS))
            raise ValueError(f"unknown latentlab setting {name!r}; the settings are: {known}")
        if not isinstance(value, bool):
            raise ValueError(f"latentlab setting {name!r} must be True or False, got {value!r}")
    _config.update(settings)


@contextlib.contextmanager
def config_context(**settings):
    """Settings changed inside a ``with`` block only::

    with latentlab.config_context(padding=False):
        model.fit(X)  # at its exact shape
    """
    saved = get_config()
    set_config(**settings)
    try:
        yield
    finally:
        _config.clear()
        _config.update(saved)
