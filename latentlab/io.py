"""Saving fitted estimators as arrays + JSON.  Loading never executes code from the file.

The file is an uncompressed ``.npz`` (zip) archive of ``.npy`` members of plain numeric
dtypes, plus one JSON document naming the estimator class (looked up in a fixed
registry, never imported by name), its constructor settings (scalars, and lists of
scalars), its scalar fitted attributes and a SHA-256 digest of everything, checked on
load.

The digest detects accidents (truncated downloads, flipped bits, hand edits that forgot
a field), not tampering: anyone who can edit the file can recompute it.  So ``load``
does not trust the contents either: it parses the archive itself, checking every
declared size against the size of the file before allocating anything, refuses
settings the class does not have, and checks the fitted values against the class's
description of its fitted state (its attribute names, their dtypes and shapes, and
values a fit can produce) before it returns a model.  Whatever is wrong, it raises
``ValueError`` naming the file.

Every piece of fitted state must be a public attribute ending in ``_`` (scikit-learn's
convention): ``save`` refuses an estimator carrying any other state, so nothing a model
needs to predict can be silently dropped.

The checks of restored fitted values are in :mod:`latentlab._io_checks`; the writer
and the parser stay together (~470 lines) because they are the two sides of one file
format and its limits.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import zipfile

import numpy as np

from latentlab._io_checks import _Corrupt, validate_restored
from latentlab._settings import validate_settings

__all__ = ["save", "load"]

FORMAT = "latentlab-model"
VERSION = 1
_META = "__meta__"
_JSON_TYPES = (bool, int, float, str, type(None))
_META_KEYS = {
    "format",
    "version",
    "class",
    "settings",
    "unsaved_settings",
    "scalars",
    "string_arrays",
    "sha256",
}
# optional: names among string_arrays whose values were NumPy str ("<U") arrays (class
# labels), restored as such; the others (feature names) are object arrays of str
_OPTIONAL_META_KEYS = {"unicode_arrays", "sparse_arrays"}
# optional "sparse_arrays": {name: [rows, cols]} of fitted scipy.sparse matrices, saved
# as their CSR arrays name/data, name/indices, name/indptr and rebuilt (checked) on load
_CSR_PARTS = ("data", "indices", "indptr")
# dtypes a saved array may have; anything else (objects, strings, structured) is refused
_DTYPES = {np.dtype(t) for t in ("<f8", "<f4", "<i8", "<i4", "|b1", "|u1")}
_MAX_MEMBERS = 4096
# private attributes scikit-learn itself may set on an estimator (not fitted state)
_SKLEARN_PRIVATE = {"_sklearn_output_config", "_sklearn_auto_wrap_output_keys", "_metadata_request"}


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


def _is_sparse(value) -> bool:
    sparse = sys.modules.get("scipy.sparse")  # nothing is sparse before SciPy is loaded
    return sparse is not None and sparse.issparse(value)


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    return value


def _setting(value):
    """``(JSON value, saved?)`` of a constructor setting: scalars as they are, lists,
    tuples and 1-D arrays of scalars (a vocabulary, say) as lists, dicts with string
    keys of such values (a factor pattern) as dicts; anything else (a RandomState, an
    array of initial means) is not saved."""
    if isinstance(value, dict):  # one level: values are scalars or lists of them
        items = {
            key: _setting(v) if not isinstance(v, dict) else (None, False)
            for key, v in value.items()
        }
        if all(isinstance(key, str) and saved for key, (_, saved) in items.items()):
            return {key: v for key, (v, _) in items.items()}, True
        return None, False
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


def _is_fitted_name(name) -> bool:
    return isinstance(name, str) and name.isidentifier() and name.endswith("_") and name[0] != "_"


def save(estimator, path) -> None:
    """Write a fitted estimator to ``path`` (``.npz``).

    An existing file is replaced only once the new one is completely written (a
    temporary file beside it, renamed over it; :mod:`latentlab._files`), so an
    interrupted or failed save leaves it as it was.

    Raises
    ------
    ValueError
        If the estimator is not a latentlab estimator, holds state other than
        constructor settings and public fitted attributes (ending in ``_``) of plain
        types, has a callable setting (code cannot be stored), or has a non-finite
        scalar fitted attribute.
    OSError
        If the file cannot be written (naming ``path``).
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(estimator)
    name = type(estimator).__name__
    if _registry().get(name) is not type(estimator):
        raise ValueError(f"{name} is not a latentlab estimator that can be saved")
    params = estimator.get_params(deep=False)
    settings, unsaved = {}, []
    for k, v in params.items():
        if callable(v) and not isinstance(v, type):
            # e.g. a user kernel: the file stores no code, and a model loaded without
            # it would silently compute something else
            raise ValueError(
                f"cannot save {name} with a callable {k}={v!r}: the file format stores "
                "no code; pickle the estimator instead if you trust the reader"
            )
        # e.g. a RandomState object is not saved: the fit is, not the generator
        settings[k], saved = _setting(v)
        if not saved:
            unsaved.append(k)
    scalars, arrays, lists, unicode, sparse_shapes = {}, {}, {}, [], {}
    for key, value in vars(estimator).items():
        if key in params or key in _SKLEARN_PRIVATE:
            continue
        if not _is_fitted_name(key):
            raise ValueError(
                f"cannot save {name}: attribute {key!r} is neither a constructor setting "
                "nor a public fitted attribute (ending in '_'), so it would be lost on "
                "load; keep fitted state in public attributes ending in '_'"
            )
        value = _plain(value)
        if isinstance(value, dict):
            for k, v in value.items():
                arrays[f"{key}/{k}"] = np.asarray(v)
        elif _is_sparse(value):
            csr = value.tocsr(copy=True)
            csr.sum_duplicates()  # canonical: sorted indices, one entry per position
            for part in _CSR_PARTS:
                arrays[f"{key}/{part}"] = np.asarray(getattr(csr, part))
            sparse_shapes[key] = [int(s) for s in csr.shape]
        elif isinstance(value, np.ndarray) and value.dtype == object:
            lists[key] = [str(v) for v in value]
        elif isinstance(value, np.ndarray) and value.dtype.kind == "U" and value.ndim == 1:
            lists[key] = value.tolist()
            unicode.append(key)
        elif isinstance(value, np.ndarray):
            arrays[key] = value
        elif isinstance(value, _JSON_TYPES):
            scalars[key] = value
        else:
            raise ValueError(f"cannot save fitted attribute {key!r} of type {type(value)}")
    for key, a in arrays.items():
        if np.dtype(a.dtype).newbyteorder("<") not in _DTYPES:
            raise ValueError(f"cannot save fitted attribute {key!r} of dtype {a.dtype}")
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "class": name,
        "settings": settings,
        "unsaved_settings": unsaved,
        "scalars": scalars,
        "string_arrays": lists,
    }
    if unicode:
        meta["unicode_arrays"] = unicode
    if sparse_shapes:
        meta["sparse_arrays"] = sparse_shapes
    try:
        meta["sha256"] = _digest(meta, arrays)
        blob = np.frombuffer(json.dumps(meta, allow_nan=False).encode(), dtype=np.uint8)
    except ValueError as err:
        raise ValueError(f"cannot save {name}: a setting or fitted scalar is not finite") from err
    little_endian = {k: a.astype(a.dtype.newbyteorder("<"), copy=False) for k, a in arrays.items()}
    from latentlab._files import write_file

    # through a temporary file renamed over ``path`` once complete: an interrupted or
    # failed save leaves the previous file intact
    write_file(os.fspath(path), lambda f: np.savez(f, **{_META: blob}, **little_endian))


# -- reading ---------------------------------------------------------------------------


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    """One ``.npy`` member, its declared shape checked against the bytes it holds
    before anything is allocated."""
    with archive.open(info) as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise _Corrupt(f"member {info.filename!r} has unsupported .npy version {version}")
        if dtype not in _DTYPES:
            raise _Corrupt(f"member {info.filename!r} has dtype {dtype}, not a plain number type")
        if not all(isinstance(s, int) and s >= 0 for s in shape):
            raise _Corrupt(f"member {info.filename!r} declares an invalid shape {shape}")
        nbytes = math.prod(shape) * dtype.itemsize
        held = info.file_size - f.tell()
        if nbytes != held:
            raise _Corrupt(
                f"member {info.filename!r} declares shape {shape} ({nbytes} bytes) but "
                f"holds {held} bytes"
            )
        data = f.read(nbytes + 1)  # reading to the end makes zipfile check the CRC
    if len(data) != nbytes:
        raise _Corrupt(f"member {info.filename!r} is truncated")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


def _read_archive(path) -> dict[str, np.ndarray]:
    size = os.path.getsize(path)
    if size == 0:
        raise _Corrupt("the file is empty")
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            raise _Corrupt("not a zip (.npz) archive")
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        if len(infos) > _MAX_MEMBERS:
            raise _Corrupt(f"{len(infos)} members; a model file has far fewer")
        declared = 0
        for info in infos:
            if info.compress_type != zipfile.ZIP_STORED:
                raise _Corrupt(f"member {info.filename!r} is compressed; save writes none")
            if not info.filename.endswith(".npy"):
                raise _Corrupt(f"member {info.filename!r} is not a .npy array")
            declared += info.file_size
        # an uncompressed member cannot hold more bytes than the file has
        if declared > size:
            raise _Corrupt(f"members declare {declared} bytes but the file has {size}")
        contents = {}
        for info in infos:
            name = info.filename[: -len(".npy")]
            if name in contents:
                raise _Corrupt(f"member {name!r} appears twice")
            contents[name] = _read_member(archive, info)
    return contents


def _check_meta(meta) -> None:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _Corrupt("not a latentlab model file")
    if meta.get("version") != VERSION:
        raise _Corrupt(f"unsupported format version {meta.get('version')!r}")
    if not _META_KEYS <= set(meta) <= _META_KEYS | _OPTIONAL_META_KEYS:
        odd = (set(meta) - _OPTIONAL_META_KEYS) ^ _META_KEYS
        raise _Corrupt(f"metadata keys {sorted(odd)} are unexpected or missing")
    kinds = {
        "class": str,
        "sha256": str,
        "settings": dict,
        "unsaved_settings": list,
        "scalars": dict,
        "string_arrays": dict,
    }
    for key, kind in kinds.items():
        if not isinstance(meta[key], kind):
            raise _Corrupt(f"metadata {key!r} is not a {kind.__name__}")
    for key, value in meta["scalars"].items():
        if not isinstance(value, _JSON_TYPES):
            raise _Corrupt(f"fitted scalar {key!r} is not a scalar")
    for key, value in meta["string_arrays"].items():
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _Corrupt(f"fitted attribute {key!r} is not a list of strings")
    unicode = meta.get("unicode_arrays", [])
    if not (
        isinstance(unicode, list)
        and all(isinstance(v, str) for v in unicode)
        and set(unicode) <= set(meta["string_arrays"])
    ):
        raise _Corrupt("metadata 'unicode_arrays' does not name string attributes")
    shapes = meta.get("sparse_arrays", {})
    if not (
        isinstance(shapes, dict)
        and all(
            isinstance(v, list)
            and len(v) == 2
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in v)
            for v in shapes.values()
        )
    ):
        raise _Corrupt("metadata 'sparse_arrays' does not map names to (rows, cols)")


def _reject_constant(token):
    raise _Corrupt(f"non-finite number {token} in the metadata")


def _read(path):
    """The meta dict and the arrays of a model file, or ``_Corrupt``.

    The one place that parses the file.  A damaged archive, ``.npy`` header or JSON
    document can make the standard library and NumPy raise almost anything (zipfile,
    struct, ``tokenize.TokenError`` from a header's fallback parser, ``ValueError``
    from a number past int's digit limit, ``RecursionError``): all of it is reported
    as ``_Corrupt``, from the original error.
    """
    try:
        contents = _read_archive(path)
    except _Corrupt as err:
        raise _Corrupt(f"not a readable latentlab model file: {err}") from err
    except Exception as err:
        raise _Corrupt(
            f"not a readable latentlab model file ({type(err).__name__}: {err})"
        ) from err
    blob = contents.pop(_META, None)
    if blob is None:
        raise _Corrupt("not a latentlab model file (no metadata)")
    if blob.dtype != np.uint8 or blob.ndim != 1:
        raise _Corrupt("corrupted metadata")
    try:
        meta = json.loads(blob.tobytes().decode(), parse_constant=_reject_constant)
    except _Corrupt:
        raise
    except Exception as err:
        raise _Corrupt(f"corrupted metadata ({type(err).__name__}: {err})") from err
    _check_meta(meta)
    expected = meta.pop("sha256")
    if expected != _digest(meta, contents):
        raise _Corrupt("checksum mismatch; the file was modified or corrupted after saving")
    return meta, contents


def load(path):
    """Read an estimator written by :func:`save`.

    Nothing in the file is executed and nothing is allocated before its size is
    checked against the file's.  The SHA-256 digest catches accidental corruption;
    it is no protection against deliberate tampering (anyone can recompute it), so the
    restored model is checked against its class's description of its fitted state
    (:data:`latentlab._io_checks.FITTED_STATE`): the attributes the class has, their
    dtypes and shapes (consistent with each other and with the fitted counts), and
    values a fit can produce (finite, variances positive and invertible,
    probabilities on the simplex, magnitudes whose squares stay finite).

    Raises
    ------
    ValueError
        Naming ``path`` and the problem, for any file that is not an intact model
        file: empty or truncated, damaged bytes, not a ``.npz``, sizes that do not add
        up, an unknown class or setting, or fitted values a fit could not produce.
    """
    try:
        return _load(os.fspath(path))
    except _Corrupt as err:
        raise ValueError(f"{path}: {err}") from err.__cause__
    except OSError as err:
        raise ValueError(f"{path}: cannot be read ({err})") from err


def _plain_setting(value, nested: bool = False) -> bool:
    """What :func:`_setting` writes: a scalar, a list of scalars, or (not nested) a
    dict with string keys of those."""
    if isinstance(value, _JSON_TYPES):
        return True
    if isinstance(value, list):
        return all(isinstance(v, _JSON_TYPES) for v in value)
    if isinstance(value, dict) and not nested:
        return all(isinstance(k, str) and _plain_setting(v, True) for k, v in value.items())
    return False


def _load(path):
    meta, contents = _read(path)
    cls = _registry().get(meta["class"])
    if cls is None:
        raise _Corrupt(f"unknown estimator class {meta['class']!r}")
    defaults = cls().get_params(deep=False)
    allowed = set(defaults)
    settings, unsaved = meta["settings"], meta["unsaved_settings"]
    unknown = sorted((set(settings) | set(map(str, unsaved))) - allowed)
    if unknown:
        raise _Corrupt(f"settings {unknown} are not settings of {cls.__name__}")
    for key, value in settings.items():
        if not _plain_setting(value):
            raise _Corrupt(f"setting {key!r} is not a scalar, a list of scalars or a dict of those")
    if settings.get("dtype", "float64") not in ("float64", "float32"):
        raise _Corrupt(f"unknown dtype setting {settings['dtype']!r}")
    # JSON has no tuples: a setting whose default is one (hidden_layer_sizes) is one
    settings = {
        k: tuple(v) if isinstance(v, list) and isinstance(defaults[k], tuple) else v
        for k, v in settings.items()
    }
    arrays, dicts = {}, {}
    for name, value in contents.items():
        attr, _, site = name.partition("/")
        if site:
            if not site.isidentifier():
                raise _Corrupt(f"unexpected entry {name!r}")
            dicts.setdefault(attr, {})[site] = value
        else:
            arrays[name] = value
    sparse_matrices = {
        key: _sparse_matrix(key, dicts.pop(key, {}), shape)
        for key, shape in meta.get("sparse_arrays", {}).items()
    }
    names = [*meta["scalars"], *meta["string_arrays"], *arrays, *dicts, *sparse_matrices]
    if len(names) != len(set(names)):
        raise _Corrupt("a fitted attribute appears twice")
    for name in names:
        # a fitted attribute may not replace a method or property of the class
        if not _is_fitted_name(name) or hasattr(cls, name) or name in allowed:
            raise _Corrupt(f"unexpected entry {name!r}; not a fitted-attribute name")
    try:
        estimator = cls(**settings)
        validate_settings(estimator)  # the class's settings table, as fit checks it
    except (TypeError, ValueError) as err:
        raise _Corrupt(f"invalid settings ({err})") from err
    for key, value in meta["scalars"].items():
        setattr(estimator, key, value)
    unicode = set(meta.get("unicode_arrays", []))
    for key, value in meta["string_arrays"].items():
        setattr(estimator, key, np.asarray(value, dtype=str if key in unicode else object))
    for key, value in arrays.items():
        setattr(estimator, key, value)
    for key, value in dicts.items():
        setattr(estimator, key, value)
    for key, value in sparse_matrices.items():
        setattr(estimator, key, value)
    try:
        validate_restored(estimator, meta["class"], names)
    except _Corrupt:
        raise
    except (ValueError, TypeError, AttributeError, KeyError) as err:
        raise _Corrupt(f"invalid fitted values ({err})") from err
    return estimator


def _sparse_matrix(name, parts, shape):
    """The CSR matrix of a saved sparse attribute, its arrays checked as SciPy would
    need them (SciPy itself does not check indices unless asked)."""
    if set(parts) != set(_CSR_PARTS):
        raise _Corrupt(f"sparse attribute {name} needs arrays {list(_CSR_PARTS)}")
    data, indices, indptr = (parts[p] for p in _CSR_PARTS)
    rows, cols = shape
    if data.dtype.kind != "f" or indices.dtype.kind != "i" or indptr.dtype.kind != "i":
        raise _Corrupt(f"sparse attribute {name} has arrays of the wrong dtypes")
    if not (data.ndim == indices.ndim == indptr.ndim == 1) or indptr.shape != (rows + 1,):
        raise _Corrupt(f"sparse attribute {name} has arrays of the wrong shapes")
    if not (
        indptr[0] == 0
        and np.all(np.diff(indptr) >= 0)
        and indptr[-1] == data.size == indices.size
        and np.all((indices >= 0) & (indices < cols))
    ):
        raise _Corrupt(f"sparse attribute {name} has inconsistent indices")
    if not np.all(np.isfinite(data)):
        raise _Corrupt(f"fitted attribute {name} is not finite")
    from scipy import sparse

    return sparse.csr_matrix((data, indices, indptr), shape=(rows, cols))
