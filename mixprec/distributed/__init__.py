"""Training on several processes: one per GPU (NCCL through CuPy) or per CPU slot (MPI through mpi4py).

    import mixprec as mp
    mp.distributed.init_process_group("mpi")           # or "nccl"; rank/world from mpirun or torchrun
    model = mp.distributed.DistributedDataParallel(net)
    sampler = mp.distributed.DistributedSampler(len(train_set))
    ...
    loss.backward(); optimizer.step()                    # backward averages the gradients over ranks

See docs/distributed.md for launching on one or several machines.
"""
from .ddp import DistributedDataParallel, make_found_inf_reducer, sync_scaler  # noqa: F401
from .env import LaunchInfo, launch_info  # noqa: F401
from .process_group import (ReduceOp, all_reduce, barrier, broadcast, destroy_process_group,  # noqa: F401
                            get_backend, get_device, get_rank, get_world_size, init_process_group,
                            is_initialized)
from .sampler import DistributedSampler  # noqa: F401

DDP = DistributedDataParallel
