"""Saving fitted estimators as arrays + JSON.  Loading never executes code from the file.

The file is an ``.npz`` archive read with ``allow_pickle=False``: NumPy arrays of plain
dtypes, plus one JSON document naming the estimator class (looked up in a fixed
registry, never imported by name), its constructor settings (scalars, and lists of
scalars), its scalar fitted attributes and a SHA-256 digest of everything,
checked on load.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

__all__ = ["save", "load"]

FORMAT = "latentlab-model"
VERSION = 1
_META = "__meta__"
_JSON_TYPES = (bool, int, float, str, type(None))


def _registry():
    import latentlab.estimators as estimators

    return {name: getattr(estimators, name) for name in estimators.__all__}


def _digest(meta: dict, arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    return value


def _setting(value):
    """``(JSON value, saved?)`` of a constructor setting: scalars as they are, lists,
    tuples and 1-D arrays of scalars (a vocabulary, say) as lists; anything else (a
    RandomState, an array of initial means) is not saved."""
    value = _plain(value)
    if isinstance(value, _JSON_TYPES):
        return value, True
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        if all(isinstance(v, _JSON_TYPES) for v in items):
            return items, True
    return None, False


def save(estimator, path) -> None:
    """Write a fitted estimator to ``path`` (``.npz``)."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(estimator)
    name = type(estimator).__name__
    if _registry().get(name) is not type(estimator):
        raise ValueError(f"{name} is not a latentlab estimator that can be saved")
    params = estimator.get_params(deep=False)
    settings, unsaved = {}, []
    for k, v in params.items():
        # e.g. a RandomState object is not saved: the fit is, not the generator
        settings[k], saved = _setting(v)
        if not saved:
            unsaved.append(k)
    scalars, arrays, lists = {}, {}, {}
    for key, value in vars(estimator).items():
        if not key.endswith("_") or key.startswith("_"):
            continue
        value = _plain(value)
        if isinstance(value, dict):
            for k, v in value.items():
                arrays[f"{key}/{k}"] = np.asarray(v)
        elif isinstance(value, np.ndarray) and value.dtype == object:
            lists[key] = [str(v) for v in value]
        elif isinstance(value, np.ndarray):
            arrays[key] = value
        elif isinstance(value, _JSON_TYPES):
            scalars[key] = value
        else:
            raise ValueError(f"cannot save fitted attribute {key!r} of type {type(value)}")
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "class": name,
        "settings": settings,
        "unsaved_settings": unsaved,
        "scalars": scalars,
        "string_arrays": lists,
    }
    meta["sha256"] = _digest(meta, arrays)
    blob = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(os.fspath(path), "wb") as f:
        np.savez(f, **{_META: blob}, **arrays)


def load(path):
    """Read an estimator written by ``save``.  Raises ``ValueError`` if the file was altered."""
    try:
        with np.load(os.fspath(path), allow_pickle=False) as archive:
            contents = {k: archive[k] for k in archive.files}
    except (OSError, ValueError) as err:  # includes zip errors and pickled payloads
        raise ValueError(f"{path} is not a readable latentlab model file: {err}") from err
    if _META not in contents:
        raise ValueError(f"{path} is not a latentlab model file (no metadata)")
    try:
        meta = json.loads(contents.pop(_META).tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: corrupted metadata ({err})") from err
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not a latentlab model file")
    if meta.get("version") != VERSION:
        raise ValueError(f"{path}: unsupported format version {meta.get('version')!r}")
    expected = meta.pop("sha256", None)
    if expected != _digest(meta, contents):
        raise ValueError(
            f"{path}: checksum mismatch; the file was modified or corrupted after saving"
        )
    cls = _registry().get(meta["class"])
    if cls is None:
        raise ValueError(f"{path}: unknown estimator class {meta['class']!r}")
    names = [*meta["scalars"], *meta["string_arrays"], *(k.split("/", 1)[0] for k in contents)]
    odd = [name for name in names if not name.endswith("_") or name.startswith("_")]
    if odd:
        raise ValueError(f"{path}: unexpected entries {odd}; not a fitted-attribute name")
    estimator = cls(**meta["settings"])
    for key, value in meta["scalars"].items():
        setattr(estimator, key, value)
    for key, value in meta["string_arrays"].items():
        setattr(estimator, key, np.asarray(value, dtype=object))
    for name, value in contents.items():
        if "/" in name:
            attr, site = name.split("/", 1)
            getattr(estimator, attr, None) or setattr(estimator, attr, {})
            getattr(estimator, attr)[site] = value
        else:
            setattr(estimator, name, value)
    return estimator
