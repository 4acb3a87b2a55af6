"""The process group: one per process, set up by init_process_group, and the collectives on it.

mixprec has no communication layer of its own: the "mpi" backend calls MPI
through mpi4py (CPU arrays), the "nccl" backend calls NCCL through CuPy (CUDA
arrays). Both offer the same three array operations (all_reduce with
sum/avg/max/min, broadcast, barrier); everything else here is checking and the
Tensor-level API, which follows torch.distributed.
"""
from __future__ import annotations

from ..backend import availability, devices
from .. import dtypes as _dt
from .env import launch_info
from ..tensor import Tensor
from ._nccl import NCCLBackend
from ._mpi import MPIBackend

BACKENDS = ("nccl", "mpi")


class ReduceOp:
    """How all_reduce combines the ranks' values (torch.distributed.ReduceOp's names)."""

    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


_OPS = (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX, ReduceOp.MIN)
_group = None  # the backend object while initialized


def init_process_group(backend: str | None = None, *, rank: int | None = None, world_size: int | None = None,
                       timeout: float = 300.0) -> None:
    """Join the job: connect this process to the others.

    ``backend`` is "nccl" (one GPU per process) or "mpi" (CPU, processes started
    by mpirun); None picks "nccl" when a GPU is usable, else "mpi". Rank and
    world size come from the launcher's environment (torchrun's RANK/WORLD_SIZE,
    mpirun's OMPI_COMM_WORLD_*, Hydra's PMI_*) unless passed explicitly.
    ``timeout`` (seconds) bounds the nccl start-up handshake.
    """
    global _group
    if _group is not None:
        raise RuntimeError(f"init_process_group was already called (backend {_group.name!r}, rank "
                           f"{_group.rank} of {_group.world_size}); call destroy_process_group() first")
    if backend is None:
        backend = "nccl" if availability.is_cuda_available() else "mpi"
    if backend not in BACKENDS:
        hint = " (mixprec's CPU backend is 'mpi')" if backend == "gloo" else ""
        raise ValueError(f"unknown backend {backend!r}{hint}; expected one of {', '.join(map(repr, BACKENDS))}")
    for name, value in (("rank", rank), ("world_size", world_size)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if world_size is not None and (world_size < 1 or (rank is not None and rank >= world_size)):
        raise ValueError(f"rank={rank} and world_size={world_size} do not fit (need 0 <= rank < world_size)")
    if (rank is None) != (world_size is None):
        raise ValueError("pass both rank= and world_size=, or neither (then the launcher's environment is read)")
    info = launch_info()
    if backend == "nccl":
        _group = NCCLBackend(info, rank, world_size, timeout)
    else:
        _group = MPIBackend(info, rank, world_size)


def destroy_process_group() -> None:
    """Leave the job and free the communicator (a no-op when not initialized)."""
    global _group
    if _group is not None:
        group, _group = _group, None
        group.close()


def is_initialized() -> bool:
    return _group is not None


def _require():
    if _group is None:
        raise RuntimeError("mixprec.distributed is not initialized: call "
                           "mp.distributed.init_process_group(backend) first")
    return _group


def get_rank() -> int:
    return _require().rank


def get_world_size() -> int:
    return _require().world_size


def get_backend() -> str:
    return _require().name


def get_device() -> devices.Device:
    """Where this rank's tensors belong: its own GPU for nccl, the CPU for mpi."""
    return _require().device


def barrier() -> None:
    """Wait until every rank has called barrier()."""
    _require().barrier()


def _checked_array(tensor, what):
    """The tensor's array, after checking the backend can communicate it."""
    group = _require()
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what} expects an mp.Tensor, got {type(tensor).__name__}")
    if tensor.dtype == _dt.bool_:
        raise TypeError(f"{what}: bool tensors cannot be communicated; convert to int32 first")
    if group.name == "nccl" and tensor.device != group.device:
        raise RuntimeError(f"{what}: the nccl backend of rank {group.rank} communicates tensors on "
                           f"{group.device}, this one is on {tensor.device} (move it with .to(...))")
    return tensor._array


def _check_op(op):
    if op not in _OPS:
        raise ValueError(f"unknown reduce op {op!r}; use mp.distributed.ReduceOp.SUM, AVG, MAX or MIN")


def all_reduce(tensor, op: str = ReduceOp.SUM) -> None:
    """Combine ``tensor`` across ranks in place: every rank ends with the same result."""
    _check_op(op)
    a = _checked_array(tensor, "all_reduce")
    if op == ReduceOp.AVG and not _dt.is_floating(a.dtype):
        raise TypeError(f"all_reduce with AVG needs a floating-point tensor, got {a.dtype.name}")
    all_reduce_array(a, op)
    tensor._bump_version()


def broadcast(tensor, src: int = 0) -> None:
    """Overwrite ``tensor`` on every rank with rank ``src``'s values."""
    a = _checked_array(tensor, "broadcast")
    world = _require().world_size
    if not isinstance(src, int) or isinstance(src, bool) or not 0 <= src < world:
        raise ValueError(f"broadcast: src must be a rank in 0..{world - 1}, got {src!r}")
    broadcast_array(a, src)
    tensor._bump_version()


def all_reduce_array(a, op: str = ReduceOp.SUM) -> None:
    """all_reduce on a raw NumPy/CuPy array, in place (what DDP and the loss scaler use)."""
    group = _require()
    with devices.on_device(group.device):
        group.all_reduce(a, op)


def broadcast_array(a, src: int = 0) -> None:
    """broadcast on a raw NumPy/CuPy array, in place."""
    group = _require()
    with devices.on_device(group.device):
        group.broadcast(a, src)
