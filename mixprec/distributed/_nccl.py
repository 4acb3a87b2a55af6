"""The "nccl" backend: collectives on CUDA arrays through CuPy's NCCL binding.

One process drives one GPU (``cuda:<local rank>``). Collectives are enqueued on
CuPy's current stream and return at once: no host synchronisation, except in
``barrier()``, whose job is to wait. bfloat16 and float16 are reduced in their
own dtype, as torch's NCCL backend does.

CuPy is reached through ``backend.cupy_module()``; the NCCL binding
(``cupy.cuda.nccl``) is a CuPy submodule loaded on first use here.
"""
from __future__ import annotations


from .. import backend as _be
from ..backend import availability, devices
from .. import dtypes as _dt
from . import rendezvous
from .env import describe_variables
from ._mpi import _import_mpi

# ncclDataType_t and ncclRedOp_t values (nccl.h); bfloat16 needs NCCL >= 2.10.
_NCCL_DTYPES = {_dt.int32: 2, _dt.int64: 4, _dt.float16: 6, _dt.float32: 7, _dt.float64: 8, _dt.bfloat16: 9}
_NCCL_UINT8 = 1
_NCCL_OPS = {"sum": 0, "max": 2, "min": 3, "avg": 4}  # ncclAvg: NCCL >= 2.10


def _load_nccl():
    reason = availability.cuda_unavailable_reason()
    if reason is not None:
        raise availability.DeviceUnavailableError(f"backend 'nccl' needs a CUDA GPU, but {reason}; "
                                         "on CPUs use backend='mpi'")
    try:
        nccl = _be.cupy_module().cuda.nccl  # a CuPy submodule, loaded on first use
    except (ImportError, AttributeError) as exc:
        nccl, why = None, exc
    else:
        why = "the NCCL library could not be loaded"
    if nccl is None or not getattr(nccl, "available", False):
        raise RuntimeError(f"backend 'nccl': CuPy has no usable NCCL ({why}); install the wheel matching "
                           "your CUDA, e.g. pip install nvidia-nccl-cu12")
    return nccl


def unique_id_for_cupy(data: bytes, cupy_version: str):
    """The NCCL unique id (128 bytes, as sent between ranks) in the form this CuPy's NcclCommunicator takes.

    CuPy 14 takes bytes (its get_unique_id returns bytes); CuPy 13 takes a
    tuple of signed chars (what its get_unique_id returned).
    """
    if _be.version_tuple(cupy_version) >= (14, 0, 0):
        return bytes(data)
    return tuple(b - 256 if b > 127 else b for b in data)


class NCCLBackend:
    name = "nccl"

    def __init__(self, info, rank=None, world_size=None, timeout=300.0):
        nccl = _load_nccl()
        cupy = _be.cupy_module()
        rank = info.rank if rank is None else rank
        world_size = info.world_size if world_size is None else world_size
        if rank is None or world_size is None:
            raise RuntimeError("backend 'nccl' cannot tell this process's rank and world size: start it with "
                               f"torchrun or mpirun, which set them ({describe_variables()}), or pass rank= "
                               "and world_size= to init_process_group")
        n_gpus = cupy.cuda.runtime.getDeviceCount()
        local_rank = info.local_rank if info.local_rank is not None else rank % n_gpus
        if local_rank >= n_gpus:
            raise availability.DeviceUnavailableError(
                f"backend 'nccl': local rank {local_rank} needs GPU cuda:{local_rank}, but this machine has {n_gpus}; "
                "start at most one process per GPU")
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.device = devices.as_device(f"cuda:{local_rank}")
        cupy.cuda.Device(local_rank).use()  # NCCL binds the communicator to the current device
        self._cupy = cupy
        uid = self._unique_id(nccl, info, timeout)
        self.comm = nccl.NcclCommunicator(world_size, uid, rank)

    def _unique_id(self, nccl, info, timeout):
        """Rank 0 makes the NCCL id; the others receive it over TCP (torchrun) or MPI (mpirun)."""
        if self.world_size == 1:
            return nccl.get_unique_id()
        mine = bytes(b & 0xFF for b in nccl.get_unique_id()) if self.rank == 0 else None
        if info.master_addr is not None and info.master_port is not None:
            data = rendezvous.share_from_rank0(mine, self.rank, self.world_size, info.master_addr,
                                               info.master_port, timeout)
        elif info.by_mpi:
            data = _import_mpi().COMM_WORLD.bcast(mine, root=0)
        else:
            raise RuntimeError(f"backend 'nccl' with {self.world_size} processes needs to know where rank 0 "
                               "is: set MASTER_ADDR and MASTER_PORT (torchrun does), or start the job with "
                               "mpirun and mpi4py installed")
        return unique_id_for_cupy(data, self._cupy.__version__)

    def _stream(self):
        return self._cupy.cuda.get_current_stream().ptr

    def all_reduce(self, a, op: str):
        buf = a if a.flags.c_contiguous else self._cupy.ascontiguousarray(a)
        if buf.size:
            self.comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, _NCCL_DTYPES[a.dtype], _NCCL_OPS[op],
                                self._stream())
        if buf is not a:
            a[...] = buf

    def broadcast(self, a, src: int):
        buf = a if a.flags.c_contiguous else self._cupy.ascontiguousarray(a)
        if buf.size:
            self.comm.broadcast(buf.data.ptr, buf.data.ptr, buf.nbytes, _NCCL_UINT8, src, self._stream())
        if buf is not a:
            a[...] = buf

    def barrier(self):
        """All-reduce one number and wait for it: returns once every rank got here."""
        with devices.on_device(self.device):
            token = self._cupy.zeros(1, dtype=self._cupy.float32)
            self.all_reduce(token, "sum")
            self._cupy.cuda.get_current_stream().synchronize()

    def close(self):
        if self.comm is not None:
            self.comm.destroy()
            self.comm = None
