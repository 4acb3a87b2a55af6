"""One rank of the MPI test job: `mpirun -n W python ddp_worker.py OUT_DIR`.

Runs every multi-process scenario once and saves what it observed to
OUT_DIR/rank<R>.npz; tests/test_distributed_mpi.py checks the files
(expected values are computed there, independently of this code).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import mixprec as mp  # noqa: E402
import mixprec.distributed as dist  # noqa: E402
from mixprec.distributed import process_group  # noqa: E402
import common  # noqa: E402

out: dict[str, object] = {}
COUNTER = None


def error_of(fn):
    try:
        fn()
    except Exception as exc:  # the message is what the test checks
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def collectives(rank, world):
    for dtype in ("float32", "float64", "float16", "bfloat16", "int32", "int64"):
        base = (np.arange(5) - 2) * (rank + 1) + rank  # small integers: exact in every dtype
        for op in ("sum", "max", "min", "avg"):
            if op == "avg" and dtype.startswith("int"):
                continue
            t = mp.tensor(base, dtype=getattr(mp, dtype))
            dist.all_reduce(t, op=op)
            out[f"{op}_{dtype}"] = t.numpy().astype(np.float64)
        t = mp.full((2, 3), rank, dtype=getattr(mp, dtype))
        dist.broadcast(t, src=world - 1)
        out[f"bcast_{dtype}"] = t.numpy().astype(np.float64)
    t = mp.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) * (rank + 1)).T  # non-contiguous view
    dist.all_reduce(t)
    out["sum_noncontiguous"] = t.numpy().astype(np.float64)
    out["err_bad_src"] = error_of(lambda: dist.broadcast(mp.zeros(2), src=world))
    out["err_bad_op"] = error_of(lambda: dist.all_reduce(mp.zeros(2), op="mean"))
    out["err_init_twice"] = error_of(lambda: dist.init_process_group("mpi"))
    dist.barrier()


class Counting:
    """Counts the all-reduce calls the backend makes (wraps the live backend object)."""

    def __init__(self):
        self.calls = 0
        group = process_group._group
        inner = group.all_reduce

        def counted(a, op):
            self.calls += 1
            inner(a, op)
        group.all_reduce = counted


def train(rank, world, accumulate=False, bucket_cap_mb=25.0, explicit_sync=True):
    X, y = common.make_data()
    net = common.make_model(seed=100 + rank)  # different on every rank until DDP broadcasts rank 0's
    model = dist.DistributedDataParallel(net, bucket_cap_mb=bucket_cap_mb)
    opt = common.make_optimizer(model)
    counter = COUNTER
    calls_per_sync = []
    for epoch in range(1 if accumulate else common.EPOCHS):
        for idx in common.local_batches(rank, world, epoch):
            opt.zero_grad()
            before = counter.calls
            if accumulate:
                first, second = idx[:len(idx) // 2], idx[len(idx) // 2:]
                with model.no_sync():
                    (common.loss_fn(model(mp.tensor(X[first])), mp.tensor(y[first])) / 2).backward()
                    model.sync_gradients()  # inside no_sync: must not communicate
                    out.setdefault("calls_inside_no_sync", counter.calls - before)
                (common.loss_fn(model(mp.tensor(X[second])), mp.tensor(y[second])) / 2).backward()
            else:
                common.loss_fn(model(mp.tensor(X[idx])), mp.tensor(y[idx])).backward()
            if explicit_sync:
                model.sync_gradients()  # backward already averaged: must not communicate again
            calls_per_sync.append(counter.calls - before)
            opt.step()
    return model, calls_per_sync


def ddp_runs(rank, world):
    X, _ = common.make_data()
    model, calls = train(rank, world)
    out["ddp_params"] = common.flat_params(model.module)
    out["ddp_calls_per_sync"] = np.array(calls)
    out["ddp_buckets"] = len(model.buckets)
    # the same training with 4 KiB buckets: several buckets, the same result
    model, calls = train(rank, world, bucket_cap_mb=4 / 1024)
    out["small_bucket_params"] = common.flat_params(model.module)
    out["small_bucket_calls_per_sync"] = np.array(calls)
    out["small_bucket_sizes"] = np.array([b.nbytes for b in model.buckets])
    model, _ = train(rank, world, accumulate=True)
    out["accum_params"] = common.flat_params(model.module)
    # torch's loop: no sync_gradients() anywhere, backward averages (4 KiB buckets: several per step)
    model, calls = train(rank, world, bucket_cap_mb=4 / 1024, explicit_sync=False)
    out["torch_loop_params"] = common.flat_params(model.module)
    out["torch_loop_calls_per_step"] = np.array(calls)
    # a second wrapper around the same parameters would average them twice: refused
    out["err_wrapped_twice"] = error_of(lambda: dist.DistributedDataParallel(model.module))
    # forgetting sync_gradients() is an error at the next forward, not silent drift
    x = mp.tensor(X[:4])
    model(x)
    out["err_forgot_sync"] = error_of(lambda: model(x))
    model.sync_gradients()
    # a model whose shape differs on one rank is refused on every rank
    out["err_different_models"] = error_of(
        lambda: dist.DistributedDataParallel(mp.nn.Linear(3, 2 if rank == 0 else 4)))


class Custom:
    """Not an nn.Module: anything callable with .parameters() can be wrapped.

    ``a`` (float32) is used on every rank, ``b`` only on rank 0, ``c`` nowhere, ``d`` is bfloat16.
    """

    def __init__(self, rank):
        self.rank = rank
        self.a = mp.zeros(3, requires_grad=True)
        self.b = mp.zeros(3, requires_grad=True)
        self.c = mp.zeros(3, requires_grad=True)
        self.d = mp.zeros(3, dtype=mp.bfloat16, requires_grad=True)

    def parameters(self):
        return [self.a, self.b, self.c, self.d]

    def __call__(self, x):
        loss = (self.a * x).sum() + (self.d * x.to(mp.bfloat16)).sum().float()
        if self.rank == 0:
            loss = loss + (self.b * x).sum()
        return loss


def unused_parameters(rank, world):
    for flag in (False, True):
        model = dist.DistributedDataParallel(Custom(rank), find_unused_parameters=flag)
        model(mp.full((3,), float(rank + 1))).backward()
        model.sync_gradients()
        m = model.module
        key = "unused" if flag else "default"
        out[f"{key}_buckets"] = len(model.buckets)
        for name in "abcd":
            g = getattr(m, name).grad
            out[f"{key}_grad_{name}"] = "None" if g is None else g.numpy().astype(np.float64)


def found_inf(rank, world):
    reducer = dist.make_found_inf_reducer()
    flag = np.array([1.0 if rank == world - 1 else 0.0], dtype=np.float32)
    reducer(flag)
    out["found_inf_one_rank"] = flag.copy()
    flag = np.zeros(1, dtype=np.float32)
    reducer(flag)
    out["found_inf_no_rank"] = flag.copy()


INF_STEP = 2  # the step at which the last rank alone sees an inf gradient


def scaler_agreement(rank, world):
    """AMP training with a GradScaler per rank; at INF_STEP one gradient turns inf on the last rank only
    (after the gradient sync, as when ranks hold different gradients). With sync_scaler every rank must
    skip that step and back off; without it the ranks disagree and drift apart."""
    X, y = common.make_data()
    for synced in (True, False):
        net = common.make_model(seed=100)
        model = dist.DistributedDataParallel(net)
        opt = common.make_optimizer(model)
        scaler = mp.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
        if synced:
            assert dist.sync_scaler(scaler) is scaler
        scales, skipped, params = [], [], []
        for step, idx in enumerate(common.local_batches(rank, world, 0)):
            opt.zero_grad()
            with mp.autocast("cpu", dtype=mp.float16):
                loss = common.loss_fn(model(mp.tensor(X[idx])), mp.tensor(y[idx]))
            scaler.scale(loss).backward()
            model.sync_gradients()
            if step == INF_STEP and rank == world - 1:
                net[0].weight.grad._array[0, 0, 1, 1] = np.inf
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            skipped.append(bool(scaler.last_step_skipped))
            params.append(common.flat_params(net))
        key = "synced" if synced else "unsynced"
        out[f"scaler_{key}_scales"] = np.array(scales)
        out[f"scaler_{key}_skipped"] = np.array(skipped)
        out[f"scaler_{key}_params"] = np.stack(params)


def fp8_amaxes(rank, world):
    """FP8 delayed scaling under DDP, each rank on its own data: the amaxes are MAX-reduced at each region's
    exit (reduce_amax=True, the default) or kept local (False, the control). Then, on the reduced run's model,
    forward-only regions in which one rank alone sees a NaN, each rank in turn."""
    for reduce in (False, True):
        model = dist.DistributedDataParallel(common.fp8_model())
        opt = mp.optim.SGD(model.parameters(), lr=common.FP8_LR)
        states = []
        for step in range(common.FP8_STEPS):
            x, t = common.fp8_batch(rank, step)
            opt.zero_grad()
            with mp.amp.fp8_autocast(recipe=common.fp8_recipe(reduce)):
                loss = ((model(mp.tensor(x)) - mp.tensor(t)) ** 2).mean()
            loss.backward()
            opt.step()
            states.append(common.fp8_state(model.module))
        out[f"fp8_{'reduced' if reduce else 'local'}_states"] = np.stack(states)
    before, after = [], []
    for who in range(world):
        x, _ = common.fp8_batch(rank, common.FP8_STEPS + who)
        if rank == who:
            x[0, 0] = np.nan
        before.append(common.fp8_state(model.module))
        with mp.amp.fp8_autocast(recipe=common.fp8_recipe()):   # grad mode on: a training region updates
            model.module(mp.tensor(x))
        after.append(common.fp8_state(model.module))
    out["fp8_nan_before"], out["fp8_nan_after"] = np.stack(before), np.stack(after)


def main():
    out_dir = sys.argv[1]
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    out["rank"], out["world"] = rank, world
    info = dist.launch_info()
    out["launcher"] = str(info.launcher)
    global COUNTER
    COUNTER = Counting()
    collectives(rank, world)
    ddp_runs(rank, world)
    unused_parameters(rank, world)
    found_inf(rank, world)
    scaler_agreement(rank, world)
    fp8_amaxes(rank, world)
    dist.barrier()
    dist.destroy_process_group()
    out["initialized_after_destroy"] = dist.is_initialized()
    np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **{k: np.asarray(v) for k, v in out.items()})


if __name__ == "__main__":
    main()
