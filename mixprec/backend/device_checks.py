"""Checks the GPU makes without the host waiting (torch's device-side asserts), raised where the host waits.

``check`` tests a bool array: on the CPU at once; on a GPU by setting a flag on
the device, read at the next point that waits for the GPU anyway
(mp.cuda.synchronize, Stream/Event.synchronize, a copy to the host).
"""
from __future__ import annotations

import numpy as np

from .. import backend
from .capture import is_capturing

_SLOTS = 32  # distinct messages tracked between two reads; the last slot gathers any beyond
_flags: dict[int, object] = {}  # device index -> int32 flags on that device, one per message
_messages: dict[tuple, int] = {}  # (exception type, message) -> slot, since the flags were last all read
_pending: set[int] = set()  # devices with flags set since they were last read
_captured: set[tuple] = set()  # messages checked inside a graph capture: their slots are baked into the graph


def flags(index: int):
    """The device's flag array, made on first use (and before a graph capture, so none is made inside one)."""
    found = _flags.get(index)
    if found is None:
        cupy = backend._cupy
        with cupy.cuda.Device(index):
            found = _flags[index] = cupy.zeros(_SLOTS, dtype=np.int32)
    return found


def check(bad, error: type, message: str, culprit=None) -> None:
    """Raise ``error(message)`` if any element of the bool array ``bad`` is True.

    On the CPU the check happens now, and ``culprit()`` (if given) names the
    offending values. On a GPU, reading ``bad`` would make the host wait for
    the GPU at every call; instead the GPU sets a flag (no wait), and the
    error is raised at the next point that waits anyway: mp.cuda.synchronize,
    Stream/Event.synchronize, or a copy to the host. torch's device-side
    asserts are reported the same way, late.
    """
    if not backend.is_cupy_array(bad):  # NumPy arrays and scalars (0-d arithmetic gives NumPy scalars)
        if np.size(bad) and np.any(bad):
            raise error(message if culprit is None else f"{message}; got {culprit()}")
        return
    if bad.size == 0:
        return
    index = bad.device.id
    key = (error, message)
    slot = _messages.get(key)
    if slot is None:   # the lowest free slot
        taken = set(_messages.values())
        slot = _messages[key] = next((i for i in range(_SLOTS - 1) if i not in taken), _SLOTS - 1)
    if is_capturing():
        _captured.add(key)
    flag = flags(index)[slot:slot + 1]
    backend._cupy.bitwise_or(flag, bad.any(), out=flag)
    _pending.add(index)


def asnumpy(a):
    """A host copy of CuPy array ``a`` that also raises what ``check`` found on its device.

    When checks are pending there, the array and their flags come over in one
    transfer (through a contiguous device copy of the array), so the host waits once.
    """
    cupy = backend._cupy
    index = a.device.id
    if index not in _pending or is_capturing():
        return cupy.asnumpy(a)
    with cupy.cuda.Device(index):
        both = cupy.concatenate([cupy.ascontiguousarray(a).reshape(-1).view(np.uint8), _flags[index].view(np.uint8)])
    host = cupy.asnumpy(both)
    _pending.discard(index)
    _report(index, host[a.nbytes:].view(np.int32))
    return host[:a.nbytes].view(a.dtype).reshape(a.shape)


def raise_device_errors(index: int | None = None) -> None:
    """Raise what ``check`` found on a device (all devices when index is None); call only where the host waits."""
    for dev in [index] if index is not None else list(_pending):
        if dev not in _pending or is_capturing():
            continue
        _pending.discard(dev)
        _report(dev, backend._cupy.asnumpy(_flags[dev]))


def _forget_slots() -> None:
    """Once every device's flags are read (all zero), the messages give up their slots, so the slots count the
    distinct messages checked between two reads, not in the whole process (messages name sizes, so they are
    many); a message that met the shared last slot would be reported among strangers, with their error type.
    Those checked in a graph capture keep theirs: a replay of the graph sets that slot."""
    if not _pending:
        for key in [key for key in _messages if key not in _captured]:
            del _messages[key]


def _report(dev: int, found) -> None:
    """Raise what the flags read back from device ``dev`` (found, on the host) say ``check`` found; clear them."""
    if not found.any():
        _forget_slots()
        return
    _flags[dev].fill(0)
    failed = [(err, msg) for (err, msg), slot in _messages.items() if found[slot]]
    error = failed[0][0]
    listed = "; ".join(msg for _, msg in failed)
    _forget_slots()
    raise error(f"{listed} (found on cuda:{dev} by an earlier call, reported here where the host waits "
                "for the GPU)")


def discard_device_errors() -> None:
    """Forget what ``check`` found that was never reported (tests start each test from clean flags with it)."""
    for dev in list(_pending):
        _pending.discard(dev)
        _flags[dev].fill(0)
    _forget_slots()
