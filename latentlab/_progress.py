"""Progress bars for the searches that take a while (model search, refits, compare).

A bar is tqdm's notebook-aware one (``tqdm.auto``) on stderr, left off the screen when
done.  With ``verbose`` it is always shown; otherwise, by default, only once the loop
has run for :data:`DELAY` seconds and only on a terminal or in a notebook (a log file
stays clean), so that a search that takes minutes never runs silently.
``latentlab.set_config(progress=False)`` turns the default bars off.
"""

from __future__ import annotations

import sys

from latentlab._config import get_config

__all__ = ["DELAY", "progress"]

DELAY = 2.0  # seconds before a default bar appears


def progress(items, desc: str, verbose: int = 0):
    """``items``, wrapped in a progress bar as the module docstring says.

    Parameters
    ----------
    items : iterable
    desc : str
        Label shown before the bar.
    verbose : int
        Nonzero: always show the bar.
    """
    if not verbose and not get_config()["progress"]:
        return items
    from tqdm.auto import tqdm

    if verbose:
        return tqdm(items, desc=desc, file=sys.stderr, leave=False)
    # disable=None: tqdm shows nothing unless stderr is a terminal (or a notebook)
    return tqdm(items, desc=desc, file=sys.stderr, leave=False, disable=None, delay=DELAY)
