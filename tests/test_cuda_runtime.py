"""mp.cuda's runtime: devices, streams, events, memory statistics, RNG, NVTX.

Without a GPU (here: no CuPy, or a CuPy stand-in with no driver or no
device) every function must raise DeviceUnavailableError saying why. The
behaviour on a GPU is in the tests marked gpu.
"""
from __future__ import annotations

import types

import numpy as np
import pytest

import mixprec as mp
from mixprec import backend
from mixprec.backend import availability
from mixprec.backend.bfloat16 import cuda_bfloat16_unsupported_reason
from mixprec.cuda import memory as cuda_memory

from conftest import CUDA_OK

cuda = mp.cuda

CALLS = {
    "current_device": lambda: cuda.current_device(),
    "set_device": lambda: cuda.set_device(0),
    "device": lambda: cuda.device(0),
    "get_device_name": lambda: cuda.get_device_name(),
    "get_device_properties": lambda: cuda.get_device_properties(0),
    "get_device_capability": lambda: cuda.get_device_capability(),
    "synchronize": lambda: cuda.synchronize(),
    "is_bf16_supported": lambda: cuda.is_bf16_supported(),
    "Stream": lambda: cuda.Stream(),
    "current_stream": lambda: cuda.current_stream(),
    "default_stream": lambda: cuda.default_stream(),
    "Event": lambda: cuda.Event(enable_timing=True),
    "memory_allocated": lambda: cuda.memory_allocated(),
    "max_memory_allocated": lambda: cuda.max_memory_allocated(),
    "memory_reserved": lambda: cuda.memory_reserved(),
    "max_memory_reserved": lambda: cuda.max_memory_reserved(),
    "reset_peak_memory_stats": lambda: cuda.reset_peak_memory_stats(),
    "empty_cache": lambda: cuda.empty_cache(),
    "memory_stats": lambda: cuda.memory_stats(),
    "memory_summary": lambda: cuda.memory_summary(),
    "manual_seed": lambda: cuda.manual_seed(0),
    "manual_seed_all": lambda: cuda.manual_seed_all(0),
    "get_rng_state": lambda: cuda.get_rng_state(),
    "set_rng_state": lambda: cuda.set_rng_state(mp.random.get_rng_state()),
    "nvtx.range_push": lambda: cuda.nvtx.range_push("x"),
    "nvtx.range_pop": lambda: cuda.nvtx.range_pop(),
    "nvtx.mark": lambda: cuda.nvtx.mark("x"),
    "nvtx.range": lambda: cuda.nvtx.range("x").__enter__(),
    "ExternalStream": lambda: cuda.ExternalStream(0),
    "set_stream": lambda: cuda.set_stream(object()),
    "is_current_stream_capturing": lambda: cuda.is_current_stream_capturing(),
    "mem_get_info": lambda: cuda.mem_get_info(),
    "memory_snapshot": lambda: cuda.memory_snapshot(),
    "memory._record_memory_history": lambda: cuda.memory._record_memory_history(),
    "memory._snapshot": lambda: cuda.memory._snapshot(),
    "reset_max_memory_allocated": lambda: cuda.reset_max_memory_allocated(),  # (after its FutureWarning)
    "set_per_process_memory_fraction": lambda: cuda.set_per_process_memory_fraction(0.5),
    "seed": lambda: cuda.seed(),
    "seed_all": lambda: cuda.seed_all(),
    "initial_seed": lambda: cuda.initial_seed(),
    "CUDAGraph": lambda: cuda.CUDAGraph(),
    "graph_pool_handle": lambda: cuda.graph_pool_handle(),
    "make_graphed_callables": lambda: cuda.make_graphed_callables(mp.nn.Linear(2, 2), (mp.ones(1, 2),)),
}


def _fake_cupy(driver=12090, devices=1):
    """A CuPy whose runtime reports a driver version (0: none installed) and a device count, its libraries loaded."""
    def count():
        if driver == 0:
            raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
        return devices
    runtime = types.SimpleNamespace(driverGetVersion=lambda: driver, runtimeGetVersion=lambda: 12090,
                                    getDeviceCount=count, getDevice=lambda: 0)
    return types.SimpleNamespace(__version__="14.2.0", ndarray=type("ndarray", (), {}),
                                 cuda=types.SimpleNamespace(runtime=runtime, cublas=object(), curand=object()))


@pytest.mark.skipif(CUDA_OK, reason="checks the behaviour without a usable GPU")
@pytest.mark.parametrize("name", sorted(CALLS))
def test_without_a_gpu_every_function_says_why(name):
    with pytest.raises(mp.DeviceUnavailableError) as info:
        CALLS[name]()
    message = str(info.value)
    assert availability.cuda_unavailable_reason() in message  # no CuPy / no driver / no device, as the case is
    assert f"mp.cuda.{name} needs a CUDA GPU" in message  # names the function called


@pytest.mark.parametrize("driver,devices,why", [(0, 1, "no NVIDIA driver is installed"),
                                                (12090, 0, "CUDA reports 0 devices")])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_cupy_present_but_no_driver_or_no_device(monkeypatch, name, driver, devices, why):
    monkeypatch.setattr(backend, "_cupy", _fake_cupy(driver, devices))
    monkeypatch.setattr(backend.devices, "_cuda_devices", {})
    with pytest.raises(mp.DeviceUnavailableError, match=why):
        CALLS[name]()
    assert not cuda.is_available() and cuda.device_count() == 0


def test_no_op_contexts_need_no_gpu():
    # torch's no-op forms: a None device or stream changes nothing, so they work everywhere
    with cuda.device(None), cuda.stream(None) as s:
        assert s is None


def test_device_arguments_are_checked(monkeypatch):
    from mixprec.cuda._runtime import device_index
    monkeypatch.setattr(backend, "_cupy", _fake_cupy(devices=2))
    monkeypatch.setattr(backend.devices, "_cuda_devices", {})
    assert [device_index(d, "f") for d in (None, 0, 1, "cuda", "cuda:1", mp.Device("cuda", 1))] == [0, 0, 1, 0, 1, 1]
    with pytest.raises(ValueError, match="mp.cuda.f: expected a CUDA device, got 'cpu'"):
        device_index("cpu", "f")
    with pytest.raises(ValueError, match="index must be >= 0"):
        device_index(-1, "f")
    with pytest.raises(TypeError, match="device must be None, an int"):
        device_index(True, "f")
    with pytest.raises(TypeError, match="device must be None, an int"):
        device_index(1.0, "f")
    with pytest.raises(mp.DeviceUnavailableError, match="only 2 CUDA device"):
        device_index("cuda:2", "f")


def test_one_generator_for_every_device(monkeypatch):
    seeded = []
    fake = _fake_cupy()
    fake.random = types.SimpleNamespace(seed=seeded.append)
    monkeypatch.setattr(backend, "_cupy", fake)
    monkeypatch.setattr(backend.devices, "_cuda_devices", {})
    cuda.manual_seed(123)
    a = mp.randn(5).numpy()
    mp.manual_seed(123)
    np.testing.assert_array_equal(mp.randn(5).numpy(), a)  # cuda.manual_seed seeds the one generator
    assert seeded == [123, 123]  # and CuPy's own, for user code that calls cupy.random
    state = cuda.get_rng_state("cuda:0")
    assert state == mp.random.get_rng_state()
    first = mp.rand(3).numpy()
    cuda.set_rng_state(state)
    np.testing.assert_array_equal(mp.rand(3).numpy(), first)
    cuda.set_rng_state_all(cuda.get_rng_state_all())
    with pytest.raises(ValueError, match="expected a dict from mp.random.get_rng_state"):
        cuda.set_rng_state({"bit_generator": "nope"})


def test_nvtx_ranges_nest_and_close_on_errors(monkeypatch):
    log = []
    fake = _fake_cupy()
    fake.cuda.nvtx = types.SimpleNamespace(available=True, RangePush=lambda m: log.append(("push", m)),
                                           RangePop=lambda: log.append(("pop",)),
                                           Mark=lambda m: log.append(("mark", m)))
    monkeypatch.setattr(backend, "_cupy", fake)
    monkeypatch.setattr(backend.devices, "_cuda_devices", {})
    with pytest.raises(KeyError):
        with cuda.nvtx.range("step {}", 3):
            cuda.nvtx.mark("inside")
            raise KeyError("x")
    cuda.nvtx.range_push("a")
    cuda.nvtx.range_pop()
    assert log == [("push", "step 3"), ("mark", "inside"), ("pop",), ("push", "a"), ("pop",)]
    with pytest.raises(TypeError, match="message must be a str"):
        cuda.nvtx.mark(3)
    fake.cuda.nvtx.available = False
    with pytest.raises(mp.DeviceUnavailableError, match="built without NVTX"):
        cuda.nvtx.mark("x")


class _FakePool:
    def __init__(self):
        self.used = self.total = 0

    def used_bytes(self):
        return self.used

    def total_bytes(self):
        return self.total

    def free_all_blocks(self):
        self.total = self.used


def test_memory_peaks_follow_the_pool(monkeypatch):
    """The peak logic on a stand-in pool: the hook folds each allocation into the peak."""
    pool = _FakePool()
    hooks = []

    class MemoryHook:
        def __enter__(self):
            hooks.append(self)

    class Device:
        def __init__(self, index):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    fake = _fake_cupy()
    fake.get_default_memory_pool = lambda: pool
    fake.cuda.MemoryHook, fake.cuda.Device = MemoryHook, Device
    fake.cuda.runtime.memGetInfo = lambda: (1000, 4000)
    monkeypatch.setattr(backend, "_cupy", fake)
    monkeypatch.setattr(backend.devices, "_cuda_devices", {})
    monkeypatch.setattr(cuda_memory._watching(), "hook", None)
    monkeypatch.setattr(cuda_memory, "_peaks", {})

    def malloc(used, total):
        pool.used, pool.total = used, total
        for h in hooks:
            h.malloc_postprocess(0, used, used, 0, 0)

    malloc(100, 200)
    cuda.reset_peak_memory_stats()  # starts watching: one hook, registered once
    malloc(700, 800)
    pool.used = 300  # freed: allocated drops, the peak stays
    assert (cuda.memory_allocated(), cuda.max_memory_allocated()) == (300, 700)
    assert (cuda.memory_reserved(), cuda.max_memory_reserved()) == (800, 800)
    cuda.empty_cache()
    assert cuda.memory_reserved() == 300 and cuda.max_memory_reserved() == 800
    cuda.reset_peak_memory_stats()
    assert cuda.max_memory_allocated() == 300 and len(hooks) == 1
    summary = cuda.memory_summary()
    assert "allocated (live arrays)" in summary and "device free / total" in summary
    assert "device free" not in cuda.memory_summary(abbreviated=True)
    assert cuda.memory_stats()["allocated_bytes.all.peak"] == 300


# ================================================================ on a GPU
gpu = pytest.mark.gpu


@gpu
def test_devices_and_properties():
    cupy = mp.backend.cupy_module()
    n = cuda.device_count()
    assert n >= 1 and 0 <= cuda.current_device() < n
    props = cuda.get_device_properties()
    assert props.name == cuda.get_device_name() and props.total_memory > 2 ** 30
    assert cuda.get_device_capability() == (props.major, props.minor)
    assert f"{props.major}{props.minor}" == cupy.cuda.Device().compute_capability
    with cuda.device(n - 1):
        assert cuda.current_device() == n - 1
    cuda.set_device(0)
    assert cuda.current_device() == 0
    assert isinstance(cuda.is_bf16_supported(), bool)
    assert cuda.is_bf16_supported() == (cuda_bfloat16_unsupported_reason() is None)


@gpu
def test_tensors_made_under_a_stream_run_on_it_and_events_time_them():
    s = cuda.Stream()
    before = cuda.current_stream()
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    s.wait_stream(before)
    with cuda.stream(s) as entered:
        assert entered is s and cuda.current_stream() == s
        start.record()
        a = mp.randn(1024, 1024, device="cuda")
        b = (a @ a).relu().sum()
        end.record()
    assert cuda.current_stream() == before
    before.wait_stream(s)
    end.synchronize()
    assert end.query() and s.query()
    assert start.elapsed_time(end) > 0
    np.testing.assert_allclose(b.item(), np.maximum(a.numpy() @ a.numpy(), 0).sum(), rtol=1e-3)
    with pytest.raises(RuntimeError, match="without enable_timing"):
        cuda.Event().elapsed_time(end)
    with pytest.raises(RuntimeError, match="has not been recorded"):
        cuda.Event(enable_timing=True).elapsed_time(end)
    e = s.record_event()
    cuda.current_stream().wait_event(e)
    e.synchronize()


@gpu
def test_memory_statistics_track_an_allocation():
    cuda.empty_cache()
    cuda.reset_peak_memory_stats()
    base = cuda.memory_allocated()
    x = mp.empty(64 * 2 ** 20 // 4, device="cuda")  # 64 MiB
    assert cuda.memory_allocated() - base >= 64 * 2 ** 20
    assert cuda.memory_reserved() >= cuda.memory_allocated()
    del x
    assert cuda.memory_allocated() == base
    assert cuda.max_memory_allocated() - base >= 64 * 2 ** 20
    cuda.empty_cache()
    assert cuda.memory_reserved() - cuda.memory_allocated() < 64 * 2 ** 20
    assert "peak" in cuda.memory_summary()


@gpu
def test_nvtx_runs():
    with cuda.nvtx.range("mixprec test"):
        cuda.nvtx.mark("inside")


@gpu
def test_gpu_checks_report_at_the_next_synchronisation():
    x = mp.randn(4, 5, device="cuda")
    loss = mp.nn.functional.cross_entropy(x, mp.tensor([0, 7, 1, 2], device="cuda"))  # no host wait, no raise
    with pytest.raises(IndexError, match="out of bounds for 5 classes"):
        cuda.synchronize()
    cuda.synchronize()  # reported once: the flags were cleared
    mp.nn.functional.embedding(mp.tensor([3, 11], device="cuda"), mp.randn(10, 2, device="cuda"))
    with pytest.raises(IndexError, match="out of range for a table of 10 rows"):
        loss.numpy()  # a copy to the host waits, so it reports too
    mp.nn.functional.nll_loss(x.log_softmax(1), mp.tensor([0, 1, 4, -100], device="cuda"))
    cuda.synchronize()


@gpu
def test_gpu_checks_report_their_own_message_after_many_distinct_ones():
    """Checks name sizes in their messages, so a process meets many: more than the device has slots. Each
    read gives the slots back, so a later failure reports its own message and error type, alone."""
    from mixprec.backend import device_checks
    ok = mp.zeros(3, device="cuda") > 0
    for n in range(3 * device_checks._SLOTS):      # passing checks, read in between as training does
        device_checks.check(ok._array, RuntimeError, f"a passing check on size {n}")
        if n % 8 == 7:
            cuda.synchronize()
    cuda.synchronize()
    mp.nn.functional.embedding(mp.tensor([3, 11], device="cuda"), mp.randn(10, 2, device="cuda"))
    with pytest.raises(IndexError) as raised:
        cuda.synchronize()
    assert str(raised.value).startswith("embedding: index out of range for a table of 10 rows (found on cuda:")


@gpu
def test_dropout_on_the_gpu_draws_there_from_one_host_seed():
    x = mp.ones(1000, 100, device="cuda")
    mp.manual_seed(5)
    state = mp.random.get_rng_state()
    a = mp.nn.functional.dropout(x, 0.25)
    after = mp.random.get_rng_state()
    gen = np.random.default_rng()
    gen.bit_generator.state = state
    gen.integers(2 ** 63)
    assert after == gen.bit_generator.state  # one draw on the host, not one per element
    mp.manual_seed(5)
    b = mp.nn.functional.dropout(x, 0.25)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    kept = (a.numpy() != 0).mean()
    assert abs(kept - 0.75) < 0.01 and set(np.unique(a.numpy())) <= {0.0, np.float32(1 / 0.75)}


def test_stream_context_of_none_changes_nothing_without_a_gpu(torch):
    """torch.cuda.StreamContext(None) / set_stream(None) are no-ops on any machine; so are mixprec's."""
    for lib in (torch, mp):
        with lib.cuda.StreamContext(None) as entered:
            assert entered is None
        lib.cuda.set_stream(None)
    assert mp.cuda.StreamContext is mp.cuda.stream


def test_out_of_memory_error_catches_what_a_failed_gpu_allocation_raises():
    cupy_oom = cuda_memory._cupy_oom()
    assert mp.OutOfMemoryError is mp.cuda.OutOfMemoryError
    assert mp.cuda.OutOfMemoryError is (cupy_oom or cuda_memory._OutOfMemoryError)
    assert issubclass(mp.cuda.OutOfMemoryError, MemoryError)


def test_seed_and_initial_seed_as_torchs(torch):
    for lib in (torch, mp):
        lib.manual_seed(1234)
        assert lib.initial_seed() == 1234
        s = lib.seed()
        assert isinstance(s, int) and lib.initial_seed() == s
        a = lib.rand(3)
        lib.manual_seed(s)
        np.testing.assert_array_equal(lib.rand(3).numpy(), a.numpy())  # seed() gave a usable seed


@gpu
def test_memory_info_snapshot_and_history(tmp_path):
    free, total = cuda.mem_get_info()
    assert 0 <= free <= total
    cuda.memory._record_memory_history(max_entries=100)
    try:
        x = mp.empty(2 ** 20, device="cuda")
        snap = cuda.memory._snapshot()
    finally:
        cuda.memory._record_memory_history(enabled=None)
    assert any(s["allocated_size"] >= x.numel() * 4 for s in snap["segments"])
    allocs = [t for trace in snap["device_traces"] for t in trace if t["action"] == "alloc"]
    assert any(t["size"] >= 2 ** 22 and t["frames"] for t in allocs)
    path = tmp_path / "snap.pickle"
    cuda.memory._dump_snapshot(str(path))
    assert path.stat().st_size > 0
    assert cuda.memory_snapshot() and all(s["total_size"] >= s["allocated_size"] for s in cuda.memory_snapshot())
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        cuda.reset_max_memory_allocated()
    with pytest.raises(ValueError, match="fraction must be a number in \\[0, 1\\]"):
        cuda.set_per_process_memory_fraction(2.0)
    cuda.set_per_process_memory_fraction(1.0)


@gpu
def test_external_stream_set_stream_and_capturing():
    s = cuda.Stream()
    ext = cuda.ExternalStream(s.cuda_stream)
    assert ext.cuda_stream == s.cuda_stream and ext.device_index == s.device_index
    before = cuda.current_stream()
    cuda.set_stream(s)
    try:
        assert cuda.current_stream() == s
        assert cuda.is_current_stream_capturing() is False
    finally:
        cuda.set_stream(before)
    assert cuda.current_stream() == before
    with pytest.raises(TypeError, match="stream_ptr"):
        cuda.ExternalStream("0x1")
    with pytest.raises(TypeError, match="set_stream expects"):
        cuda.set_stream(0)
