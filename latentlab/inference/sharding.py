"""Rows sharded over several JAX devices: the ``devices`` setting.

EM statistics are sums over rows (DESIGN.md section 4).  So a fit runs over several
devices by placing only the per-row arrays -- rows split over a one-axis
:class:`~jax.sharding.Mesh` with ``NamedSharding(mesh, P(..., "rows", ...))`` --
while every other input (parameters, summaries of complete rows) stays replicated.
The compiled EM program is the in-memory one, unchanged: jit is sharding-aware, so
XLA's SPMD partitioner runs each device's E-step over its own rows and adds the row
sums with an all-reduce (the ``psum`` of :func:`jax.shard_map`); the M-step, on
d x d or K x d statistics, runs replicated.

Rows are padded with zeros up to a multiple of the device count.  Every model's
E-step gives a zero row (all-zero mask / row weight) exactly zero statistics, so the
padding changes nothing but the order of the additions (results agree with one
device to round-off).

Across hosts: after ``jax.distributed.initialize()``, ``jax.devices()`` lists every
process's devices and ``devices="all"`` spans them; each process runs the same fit
on the same data and builds only its own devices' shards
(:func:`jax.make_array_from_callback`).

The helpers are model-agnostic: a model names the fields of its data that hold rows
(:func:`shard_fields`), or places one array (:func:`shard_rows`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

__all__ = ["ROWS", "resolve_devices", "row_mesh", "pad_axis", "shard_rows", "shard_fields"]

# the mesh axis the rows are split along
ROWS = "rows"


def resolve_devices(devices) -> tuple | None:
    """The ``devices`` setting as a tuple of JAX devices (None: the default device).

    Parameters
    ----------
    devices : None, "all", or a sequence of ``jax.Device`` or device ids (int)
        ``"all"`` is ``jax.devices()`` (every process's, after
        ``jax.distributed.initialize``); ids are matched against ``Device.id``.

    Raises
    ------
    ValueError
        If the setting is none of these, is empty, names a device id that does not
        exist, or repeats a device.
    """
    if devices is None:
        return None
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(
                f"devices must be None, 'all' or a list of jax devices, got {devices!r}"
            )
        return tuple(jax.devices())
    if not isinstance(devices, Sequence) or isinstance(devices, bytes):
        raise ValueError(f"devices must be None, 'all' or a list of jax devices, got {devices!r}")
    if len(devices) == 0:
        raise ValueError("devices is an empty list; give None, 'all' or at least one device")
    by_id = None
    resolved = []
    for device in devices:
        if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
            if by_id is None:
                by_id = {d.id: d for d in jax.devices()}
            if int(device) not in by_id:
                raise ValueError(
                    f"devices names device id {int(device)}, but the devices are "
                    f"{sorted(by_id)} (jax.devices())"
                )
            device = by_id[int(device)]
        elif not isinstance(device, jax.Device):
            raise ValueError(
                f"devices must be None, 'all' or a list of jax devices (or their ids); "
                f"got an entry {device!r}"
            )
        resolved.append(device)
    if len(set(resolved)) != len(resolved):
        raise ValueError(f"devices lists a device more than once: {list(devices)!r}")
    return tuple(resolved)


@functools.lru_cache(maxsize=16)
def _mesh(devices: tuple) -> Mesh:
    # Auto axes: the partitioner propagates the rows' sharding through the program
    # (current JAX makes Explicit the default for jax.make_mesh)
    return jax.make_mesh((len(devices),), (ROWS,), axis_types=(AxisType.Auto,), devices=devices)


def row_mesh(devices) -> Mesh | None:
    """A one-axis mesh (axis :data:`ROWS`) over the ``devices`` setting; None for None."""
    devices = resolve_devices(devices)
    return None if devices is None else _mesh(devices)


def pad_axis(array: np.ndarray, axis: int, multiple: int) -> np.ndarray:
    """``array`` with zeros appended along ``axis`` up to a multiple of ``multiple``."""
    extra = -array.shape[axis] % multiple
    if extra == 0:
        return array
    widths = [(0, 0)] * array.ndim
    widths[axis] = (0, extra)
    return np.pad(array, widths)


def shard_rows(array, mesh: Mesh, axis: int = 0) -> jax.Array:
    """``array`` (NumPy) zero-padded along ``axis`` to a multiple of the mesh's size and
    split along it over the mesh; other axes replicated.

    Each process builds only the shards of its own devices, so the same call works
    across hosts when every process holds the same ``array``.
    """
    array = pad_axis(np.asarray(array), axis, mesh.size)
    spec = PartitionSpec(*([None] * axis), ROWS)
    sharding = NamedSharding(mesh, spec)
    return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])


def shard_fields(data, fields: Sequence[str], devices, axis: int = 1):
    """``data`` (a NamedTuple) with its ``fields`` sharded along ``axis`` over
    ``devices`` (:func:`resolve_devices`); ``data`` itself when ``devices`` is None.

    The fields must be NumPy arrays (or tuples of them) whose ``axis`` indexes rows,
    and zero rows must contribute nothing (masked rows); all of them are padded
    alike.  Empty arrays (no rows of that kind) stay as they are.  Call inside the fit's precision
    context: the arrays keep their dtype.
    """
    mesh = row_mesh(devices)
    if mesh is None:
        return data
    placed = {}
    for name in fields:
        value = getattr(data, name)
        if isinstance(value, tuple):  # a tuple of arrays (a mixture's row groups)
            placed[name] = tuple(v if np.size(v) == 0 else shard_rows(v, mesh, axis) for v in value)
            continue
        if value is None or np.size(value) == 0:
            continue
        placed[name] = shard_rows(value, mesh, axis)
    return data._replace(**placed)
