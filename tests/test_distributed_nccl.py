"""The nccl backend on one GPU: a world of one exercising every call end to end.

Marked gpu (skipped without a usable CUDA device); also skipped when CuPy
cannot load the NCCL library (pip install nvidia-nccl-cu12 provides it).
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import mixprec as mp
import mixprec.distributed as dist

pytestmark = pytest.mark.gpu

LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
               "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")


@pytest.fixture
def nccl_group(monkeypatch):
    if mp.backend.strict_standin() is not None:
        pytest.skip("needs real GPUs: the strict CuPy stand-in has no NCCL (docs/cuda.md)")
    if not getattr(importlib.import_module("cupy.cuda.nccl"), "available", False):
        pytest.skip("CuPy cannot load NCCL (pip install nvidia-nccl-cu12)")
    for var in LAUNCH_VARS:
        monkeypatch.delenv(var, raising=False)
    yield monkeypatch
    dist.destroy_process_group()


def test_nccl_needs_to_know_rank_and_world_size(nccl_group):
    with pytest.raises(RuntimeError, match="cannot tell this process's rank and world size"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


def test_nccl_world_of_one_smoke(nccl_group):
    nccl_group.setenv("RANK", "0")
    nccl_group.setenv("WORLD_SIZE", "1")
    dist.init_process_group("nccl")
    assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "nccl")
    dev = dist.get_device()
    assert dev.type == "cuda"

    for dtype in (mp.float32, mp.float16, mp.bfloat16, mp.float64, mp.int32, mp.int64):
        base = np.arange(-3, 4)
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.AVG):
            if op == dist.ReduceOp.AVG and not mp.dtypes.is_floating(dtype):
                continue
            t = mp.tensor(base, dtype=dtype, device=dev)
            v = t._version
            dist.all_reduce(t, op=op)  # one rank: every op is the identity
            assert t._version == v + 1
            np.testing.assert_array_equal(t.numpy().astype(np.float64), base)
        t = mp.tensor(base, dtype=dtype, device=dev)
        dist.broadcast(t, src=0)
        np.testing.assert_array_equal(t.numpy().astype(np.float64), base)
    t = mp.arange(6, dtype=mp.float32, device=dev).reshape(2, 3).T  # non-contiguous
    dist.all_reduce(t)
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3).T)
    dist.barrier()

    with pytest.raises(RuntimeError, match="communicates tensors on cuda"):
        dist.all_reduce(mp.ones(2))  # a CPU tensor on the nccl backend

    reducer = dist.make_found_inf_reducer()
    flag = mp.ones(1, device=dev)._array
    reducer(flag)
    assert float(flag[0]) == 1.0

    net = mp.nn.Linear(4, 3).to(dev)
    model = dist.DistributedDataParallel(net)
    model(mp.ones(2, 4, device=dev)).sum().backward()
    g = net.weight.grad.numpy().copy()
    model.sync_gradients()
    np.testing.assert_array_equal(net.weight.grad.numpy(), g)

    with pytest.raises(RuntimeError, match="already called"):
        dist.init_process_group("nccl", rank=0, world_size=1)
    dist.destroy_process_group()
    dist.init_process_group("nccl", rank=0, world_size=1)  # again after destroy
    assert dist.is_initialized()
