"""What the stand-in counts and what a capture records: the state behind its strictness.

- ``COUNTS``: every blocking read of device memory on the host (``.get()``,
  ``asnumpy``, ``.item()``, ``float()``/``int()``/``bool()``, ``tolist``,
  ``repr``), every host-to-device copy (``asarray`` of host data, a host
  array assigned into or indexing a device array), every explicit
  synchronisation, every kernel launch.
- ``CAPTURE``: the stream being captured and the work recorded on it. While a
  stream captures, nothing runs: an op's result is new memory holding
  garbage (NaN, or 0 for integers and booleans, so that a shape can still be
  worked out), in-place work is only recorded, and ``Graph.launch`` replays
  the records in order on the same memory. Host reads, host-to-device copies
  and CuPy's cuBLAS/cuSOLVER/cuRAND calls are refused, as CUDA and CuPy refuse
  them.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, fields


@dataclass
class Counts:
    """Events since the counter was made (see ``strict_cupy.counting()``)."""
    host_reads: int = 0   # device -> host copies that make the host wait
    uploads: int = 0      # host -> device copies
    syncs: int = 0        # explicit synchronisations (Stream/Event/Device.synchronize)
    launches: int = 0     # kernels (ufuncs, reductions, raw kernels) run or recorded

    def __sub__(self, other: "Counts") -> "Counts":
        return Counts(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})

    def copy(self) -> "Counts":
        return Counts(**{f.name: getattr(self, f.name) for f in fields(self)})


COUNTS = Counts()


class CaptureError(RuntimeError):
    """What CUDA answers when a capturing stream is asked to do something it cannot record."""


class Capture:
    """The one capture under way (CUDA's global capture mode: one per process here)."""

    def __init__(self, stream, mode):
        self.stream = stream
        self.mode = mode
        self.records: list = []   # callables, replayed in order
        self.keep: list = []      # memory the records use, kept alive with the graph


class _CaptureSlot:
    current: Capture | None = None


CAPTURE = _CaptureSlot()


class _ErrorState:
    """What cupyx.errstate set: with linalg == "raise", each cuSOLVER call's status is read back on the host."""
    linalg = None


ERRSTATE = _ErrorState()


class _Current(threading.local):
    """Per thread, as in CuPy: the current device and stream, and the allocator in use."""
    device = 0
    stream = None      # None: the legacy default stream
    allocator = None   # a MemoryPool.malloc bound method, or None for the default pool


CURRENT = _Current()


def capturing_here() -> Capture | None:
    """The capture, if the current stream is the one capturing."""
    cap = CAPTURE.current
    if cap is not None and CURRENT.stream is cap.stream:
        return cap
    return None


def host_read(what: str) -> None:
    """Count a blocking device-to-host read; refused while the current stream captures."""
    if capturing_here() is not None:
        raise CaptureError(f"{what} reads device memory on the host, which makes the host wait for the GPU: "
                           "cudaErrorStreamCaptureUnsupported (operation not permitted when stream is capturing)")
    COUNTS.host_reads += 1


def upload(what: str) -> None:
    """Count a host-to-device copy; refused while the current stream captures (a synchronous memcpy)."""
    if capturing_here() is not None:
        raise CaptureError(f"{what} copies host memory to the device synchronously: the current stream is "
                           "capturing, so synchronous API calls are disallowed")
    COUNTS.uploads += 1


def library_call(library: str) -> None:
    """cuBLAS, cuSOLVER, cuSPARSE and cuRAND calls: CuPy refuses them during a stream capture."""
    if capturing_here() is not None:
        raise NotImplementedError(f"calling {library} API during stream capture is currently unsupported")
