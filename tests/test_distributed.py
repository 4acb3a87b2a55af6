"""mp.distributed in one process: launcher environment, start-up errors, the NCCL unique id, the TCP
rendezvous, gradient buckets and DistributedSampler. Multi-process behaviour is in test_distributed_mpi.py."""
from __future__ import annotations

import socket
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mixprec as mp
import mixprec.distributed as dist
from mixprec.distributed import _nccl, rendezvous
from mixprec.distributed.buckets import cap_from_mb, plan_buckets


@pytest.fixture(autouse=True)
def _no_group():
    """Every test starts and ends outside a process group."""
    assert not dist.is_initialized()
    yield
    dist.destroy_process_group()


# ---------------------------------------------------------------- launcher environment
def test_env_torchrun():
    info = dist.launch_info({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "node0",
                             "MASTER_PORT": "29500"})
    assert (info.rank, info.world_size, info.local_rank) == (3, 8, 1)
    assert (info.master_addr, info.master_port, info.launcher) == ("node0", 29500, "torchrun")
    assert not info.by_mpi


def test_env_open_mpi_and_hydra():
    info = dist.launch_info({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
                             "OMPI_COMM_WORLD_LOCAL_RANK": "0"})
    assert (info.rank, info.world_size, info.local_rank, info.by_mpi) == (2, 4, 0, True)
    assert info.master_addr is None and info.master_port is None
    info = dist.launch_info({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"})
    assert (info.rank, info.world_size, info.local_rank, info.by_mpi) == (1, 2, 1, True)


def test_env_torchrun_variables_win_over_mpi():
    info = dist.launch_info({"RANK": "1", "WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0",
                             "OMPI_COMM_WORLD_SIZE": "1"})
    assert (info.rank, info.world_size, info.launcher) == (1, 2, "torchrun")


def test_env_nothing_set():
    info = dist.launch_info({})
    assert info.launcher is None and info.rank is None and info.world_size is None


@pytest.mark.parametrize("env, message", [
    ({"RANK": "0"}, "RANK is set but WORLD_SIZE is not"),
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE is set but RANK is not"),
    ({"OMPI_COMM_WORLD_SIZE": "2"}, "OMPI_COMM_WORLD_RANK"),
    ({"RANK": "two", "WORLD_SIZE": "2"}, "RANK='two' is not an integer"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "not a valid rank"),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, "must be >= 0"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE='0' must be >= 1"),
    ({"MASTER_PORT": "70000"}, "not a TCP port"),
])
def test_env_errors_name_the_variable(env, message):
    with pytest.raises(ValueError, match=message):
        dist.launch_info(env)


# ---------------------------------------------------------------- start-up errors
def test_not_initialized_errors():
    for fn in (dist.get_rank, dist.get_world_size, dist.barrier, dist.get_device,
               dist.make_found_inf_reducer):
        with pytest.raises(RuntimeError, match="not initialized: call mp.distributed.init_process_group"):
            fn()
    with pytest.raises(RuntimeError, match="not initialized"):
        dist.all_reduce(mp.ones(2))
    with pytest.raises(RuntimeError, match="not initialized"):
        dist.DistributedDataParallel(mp.nn.Linear(2, 2))
    dist.destroy_process_group()  # a no-op, not an error
    assert not dist.is_initialized()


def test_unknown_backend():
    with pytest.raises(ValueError, match=r"unknown backend 'gloo' \(mixprec's CPU backend is 'mpi'\)"):
        dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="expected one of 'nccl', 'mpi'"):
        dist.init_process_group("tcp")


@pytest.mark.parametrize("kw, message", [
    (dict(rank=0), "pass both rank= and world_size="),
    (dict(rank=2, world_size=2), "do not fit"),
    (dict(rank=-1, world_size=2), "non-negative int"),
    (dict(rank=0, world_size=0), "do not fit"),
])
def test_bad_rank_arguments(kw, message):
    with pytest.raises(ValueError, match=message):
        dist.init_process_group("mpi", **kw)
    assert not dist.is_initialized()


@pytest.mark.skipif(mp.is_cuda_available(), reason="checks the message when there is no GPU")
def test_nccl_without_gpu_is_a_clear_error():
    with pytest.raises(mp.DeviceUnavailableError, match="backend 'nccl' needs a CUDA GPU.*use backend='mpi'"):
        dist.init_process_group("nccl", rank=0, world_size=1)
    assert not dist.is_initialized()


def test_mpi_without_mpi4py_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes `from mpi4py import MPI` fail
    with pytest.raises(RuntimeError, match=r"backend 'mpi' needs mpi4py.*pip install 'mixprec\[distributed\]'"):
        dist.init_process_group("mpi")
    assert not dist.is_initialized()
    if not mp.is_cuda_available():  # no backend given: "mpi" without a GPU
        with pytest.raises(RuntimeError, match="backend 'mpi' needs mpi4py"):
            dist.init_process_group()


def test_sync_scaler_rejects_other_objects():
    with pytest.raises(TypeError, match="expects an mp.amp.GradScaler"):
        dist.sync_scaler(object())


# ---------------------------------------------------------------- the NCCL unique id
def test_nccl_unique_id_takes_the_form_of_the_installed_cupy():
    raw = bytes(range(256))[:128]
    as14 = _nccl.unique_id_for_cupy(raw, "14.0.1")
    assert isinstance(as14, bytes) and as14 == raw
    as13 = _nccl.unique_id_for_cupy(raw, "13.6.0")
    assert isinstance(as13, tuple) and len(as13) == 128
    assert min(as13) >= -128 and max(as13) <= 127  # signed chars, as CuPy 13's get_unique_id returned
    assert bytes(b & 0xFF for b in as13) == raw  # what rank 0 sends is recovered exactly
    assert isinstance(_nccl.unique_id_for_cupy(raw, "15.0.0a1"), bytes)


# ---------------------------------------------------------------- TCP rendezvous (nccl's start-up)
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(world, payload, port, timeout=10.0, worlds=None):
    results, errors = {}, {}

    def one(rank):
        try:
            results[rank] = rendezvous.share_from_rank0(payload if rank == 0 else None, rank,
                                                        (worlds or {}).get(rank, world), "127.0.0.1", port,
                                                        timeout)
        except Exception as exc:
            errors[rank] = exc
    threads = [threading.Thread(target=one, args=(r,)) for r in reversed(range(world))]  # clients first
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results, errors


def test_rendezvous_gives_every_rank_rank0s_payload():
    payload = bytes(range(256)) * 2
    results, errors = _run_ranks(4, payload, _free_port())
    assert not errors
    assert results == {r: payload for r in range(4)}


def test_rendezvous_world_size_mismatch_is_reported():
    _, errors = _run_ranks(2, b"id", _free_port(), timeout=3.0, worlds={1: 3})
    assert "rank 1 was started with world size 3, rank 0 with 2" in str(errors[0])


def test_rendezvous_times_out_with_the_missing_ranks():
    with pytest.raises(TimeoutError, match=r"ranks \[1, 2\] did not connect"):
        rendezvous.share_from_rank0(b"id", 0, 3, "127.0.0.1", _free_port(), timeout=0.3)
    with pytest.raises(TimeoutError, match="could not reach rank 0"):
        rendezvous.share_from_rank0(None, 1, 2, "127.0.0.1", _free_port(), timeout=0.3)


# ---------------------------------------------------------------- buckets
DTYPES = [mp.float32, mp.float16, mp.bfloat16, mp.float64]
shapes = st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple)


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(st.tuples(shapes, st.sampled_from(DTYPES)), min_size=1, max_size=12),
       cap=st.integers(1, 400))
def test_buckets_respect_cap_dtype_and_order(specs, cap):
    tensors = [mp.zeros(*s, dtype=d) for s, d in specs]
    buckets = plan_buckets(tensors, cap)
    # every tensor exactly once, one dtype per bucket
    assert sorted(id(t) for b in buckets for t in b.tensors) == sorted(id(t) for t in tensors)
    for b in buckets:
        assert all(t.dtype == b.dtype and t.device == b.device for t in b.tensors)
        assert b.nbytes <= cap or len(b.tensors) == 1  # only a lone tensor may exceed the cap
        assert b.nbytes == sum(t.numel() for t in b.tensors) * b.dtype.itemsize
    # per dtype, buckets hold the tensors in their original order, and are filled greedily
    for d in DTYPES:
        mine = [b for b in buckets if b.dtype == d]
        assert [id(t) for b in mine for t in b.tensors] == [id(t) for t in tensors if t.dtype == d]
        for b, nxt in zip(mine, mine[1:]):
            assert b.nbytes + nxt.tensors[0].numel() * d.itemsize > cap
    # buckets come in the order of their first tensor (the same plan on every rank)
    first = [next(i for i, t in enumerate(tensors) if t is b.tensors[0]) for b in buckets]
    assert first == sorted(first)


def test_one_bucket_when_everything_fits():
    tensors = [mp.zeros(10, 10), mp.zeros(10), mp.zeros(3, 10)]
    (b,) = plan_buckets(tensors, cap_from_mb(25))
    assert b.numel == 140 and b.nbytes == 560


@pytest.mark.parametrize("dtype", DTYPES)
def test_bucket_pack_round_trips_bit_for_bit(dtype):
    rng = np.random.default_rng(0)
    arrays = [np.asarray(rng.standard_normal(s)).astype(dtype) for s in [(3, 4), (), (5,), (0, 2), (2, 1, 3)]]
    arrays[0][0, 0], arrays[0][1, 1], arrays[2][0] = np.inf, -np.inf, np.nan
    arrays.append(rng.standard_normal((4, 6)).astype(dtype)[:, ::2])  # a non-contiguous view
    tensors = [mp.from_numpy(a.copy()) for a in arrays]
    (b,) = plan_buckets(tensors, 1 << 20)
    flat = b.pack(arrays)
    assert flat.dtype == dtype and flat.shape == (sum(a.size for a in arrays),)
    for a, v in zip(arrays, b.views()):
        assert v.shape == a.shape and v.dtype == a.dtype
        assert v.tobytes() == a.tobytes()  # bit for bit, NaN and inf included
    assert np.shares_memory(b.views()[0], flat)  # views, not copies
    flat2 = b.pack([None] * len(arrays))  # missing gradients pack as zeros, into the same buffer
    assert flat2 is flat and not flat.any()


def test_bucket_cap_validation():
    for bad in (0, -1, "25", None, True):
        with pytest.raises(ValueError, match="bucket_cap_mb must be a positive number"):
            cap_from_mb(bad)
    with pytest.raises(ValueError, match="bucket cap must be positive"):
        plan_buckets([mp.zeros(2)], 0)
    assert cap_from_mb(25) == 25 * 1024 * 1024


# ---------------------------------------------------------------- DistributedSampler
def _shares(n, world, **kw):
    return [dist.DistributedSampler(n, num_replicas=world, rank=r, **kw) for r in range(world)]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), world=st.integers(1, 6), shuffle=st.booleans(), drop_last=st.booleans(),
       epoch=st.integers(0, 3))
def test_sampler_partitions_the_dataset(n, world, shuffle, drop_last, epoch):
    samplers = _shares(n, world, shuffle=shuffle, drop_last=drop_last, seed=5)
    for s in samplers:
        s.set_epoch(epoch)
    parts = [s.indices() for s in samplers]
    lengths = {len(p) for p in parts}
    assert lengths == {len(samplers[0])}  # every rank gets the same number of samples
    everything = np.concatenate(parts)
    assert all(0 <= i < n for i in everything)
    if drop_last:
        assert len(samplers[0]) == n // world  # torch: floor when the tail is dropped
        assert len(set(everything.tolist())) == len(everything)  # disjoint
    else:
        assert len(samplers[0]) == -(-n // world)  # ceil: padded
        assert set(everything.tolist()) == set(range(n))  # covering
        assert len(everything) - len(set(everything.tolist())) == len(everything) - n  # only padding repeats


def test_sampler_epochs_reshuffle_identically_on_every_rank():
    a, b = _shares(20, 2, seed=3)
    e0 = (a.indices(), b.indices())
    a.set_epoch(1)
    b.set_epoch(1)
    e1 = (a.indices(), b.indices())
    assert not np.array_equal(np.concatenate(e0), np.concatenate(e1))  # a new order
    assert sorted(np.concatenate(e1).tolist()) == list(range(20))
    again = dist.DistributedSampler(20, num_replicas=2, rank=1, seed=3)
    again.set_epoch(1)
    np.testing.assert_array_equal(again.indices(), e1[1])  # deterministic given seed and epoch
    other_seed = dist.DistributedSampler(20, num_replicas=2, rank=1, seed=4)
    other_seed.set_epoch(1)
    assert not np.array_equal(other_seed.indices(), e1[1])


def test_sampler_without_shuffle_matches_torchs_layout():
    # torch: indices = range(n), padded from the start, then rank::world
    s = _shares(10, 4, shuffle=False)
    assert [list(x) for x in s] == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    s = _shares(10, 4, shuffle=False, drop_last=True)
    assert [list(x) for x in s] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    s = _shares(3, 5, shuffle=False)  # padding longer than the dataset wraps around again
    assert [list(x) for x in s] == [[0], [1], [2], [0], [1]]


def test_sampler_accepts_sized_datasets_and_checks_arguments():
    assert len(dist.DistributedSampler(list(range(7)), num_replicas=2, rank=0)) == 4
    with pytest.raises(TypeError, match="needs a dataset with len"):
        dist.DistributedSampler(iter(range(3)), num_replicas=2, rank=0)
    with pytest.raises(ValueError, match=r"invalid rank 2: rank should be in the interval \[0, 1\]"):
        dist.DistributedSampler(10, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas must be a positive int"):
        dist.DistributedSampler(10, num_replicas=0, rank=0)
    with pytest.raises(RuntimeError, match="pass num_replicas= or call mp.distributed.init_process_group"):
        dist.DistributedSampler(10)


def test_sampler_matches_torch_lengths_and_padding():
    pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for n, world, drop_last in [(10, 4, False), (10, 4, True), (3, 5, False), (12, 3, True), (1, 4, True)]:
        for r in range(world):
            ours = dist.DistributedSampler(n, num_replicas=world, rank=r, shuffle=False, drop_last=drop_last)
            theirs = TorchSampler(range(n), num_replicas=world, rank=r, shuffle=False, drop_last=drop_last)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)
