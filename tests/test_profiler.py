"""mp.profiler: events per call, self/total times, the autocast columns, ranges, schedules, the Chrome trace."""
import json
import warnings

import numpy as np
import pytest

import mixprec as mp
from mixprec import observers
from mixprec.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule

F = mp.nn.functional
BF16 = mp.bfloat16


def _mlp():
    mp.manual_seed(0)
    return mp.nn.Sequential(mp.nn.Linear(8, 16), mp.nn.ReLU(), mp.nn.Linear(16, 3)), mp.randn(4, 8), \
        mp.tensor([0, 2, 1, 0])


def _step(model, x, y):
    with record_function("forward"), mp.autocast("cpu"):
        loss = F.cross_entropy(model(x), y)
    with record_function("backward"):
        loss.backward()


def _check_nesting(events):
    for ev in events:
        assert ev.end_us >= ev.start_us and ev.self_cpu_time_total >= -1e-6
        for child in ev.children:
            assert child.parent is ev and ev.start_us <= child.start_us and child.end_us <= ev.end_us


def test_events_match_the_calls_and_nest_by_time():
    model, x, y = _mlp()
    with profile(activities=[ProfilerActivity.CPU]) as prof, mp.amp.trace() as t:
        _step(model, x, y)
    events = prof.events()
    _check_nesting(events)
    ops = [e for e in events if e.kind in ("op", "cast", "backward", "backward pass")]
    assert len(ops) == len(t.records)  # one event per call the trace saw (the same observer mechanism)
    assert sorted(e.name.replace(" (autocast)", "") for e in ops) == sorted(r.name for r in t.records)
    fwd = next(e for e in events if e.name == "forward")
    assert fwd.kind == "user" and fwd.parent is None and {c.name for c in fwd.children} == {"linear", "relu",
                                                                                          "cross_entropy"}
    bwd_pass = next(e for e in events if e.kind == "backward pass")
    assert bwd_pass.parent.name == "backward" and any(c.name == "linear backward" for c in bwd_pass.children)
    assert not observers.observing()


def test_autocast_columns_show_policy_dtypes_and_what_the_casts_cost():
    model, x, y = _mlp()
    with profile() as prof:
        _step(model, x, y)
    events = prof.events()
    first_linear = next(e for e in events if e.name == "linear")
    assert first_linear.policy == "lower_precision_fp [bf16]"
    assert first_linear.input_dtypes == (mp.float32,) * 3 and first_linear.run_dtypes == (BF16,) * 3
    casts = [c for c in first_linear.children if c.kind == "cast"]
    assert len(casts) == first_linear.casts == 3 and all(c.name == "_to_copy (autocast)" for c in casts)
    assert first_linear.cast_time == pytest.approx(sum(c.cpu_time_total for c in casts))
    assert first_linear.self_cpu_time_total == pytest.approx(
        first_linear.cpu_time_total - sum(c.cpu_time_total for c in first_linear.children))
    rows = {r.key: r for r in prof.key_averages()}
    lin = rows["linear"]
    assert lin.count == 2 and lin.casts == 5  # the second linear's input is already bfloat16
    assert lin.policies == ["lower_precision_fp [bf16]"] and lin.run_dtypes == ["bf16, bf16, bf16"]
    assert set(lin.input_dtypes) == {"f32, f32, f32", "bf16, f32, f32"}
    assert rows["cross_entropy"].policies == ["fp32 [bf16]"] and rows["relu"].policies == ["-"]
    assert rows["_to_copy (autocast)"].count == 6
    total_cast = sum(r.cast_time_total for r in prof.key_averages())
    assert total_cast == pytest.approx(rows["_to_copy (autocast)"].cpu_time_total)
    text = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    head = text.splitlines()[0]
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total", "# of Calls", "Autocast", "Input dtypes", "Ran in",
                "Casts", "Cast time"):
        assert col in head
    body = text.splitlines()[2:7]
    selfs = [rows[line.split("  ")[0].strip()].self_cpu_time_total for line in body]
    assert selfs == sorted(selfs, reverse=True) and len(body) == 5
    assert "Autocast: 6 casts took" in text


def test_table_arguments_are_checked():
    model, x, y = _mlp()
    with profile() as prof:
        _step(model, x, y)
    with pytest.raises(ValueError, match="sort_by must be one of"):
        prof.key_averages().table(sort_by="self_cpu")
    with pytest.raises(ValueError, match="row_limit"):
        prof.key_averages().table(row_limit=-5)
    with pytest.raises(ValueError, match="record_shapes=True"):
        prof.key_averages(group_by_input_shape=True)
    assert prof.key_averages().table(row_limit=-1).count("\n") > 10


def test_record_shapes_groups_rows_by_input_shape():
    with profile(record_shapes=True) as prof:
        mp.randn(2, 3) + mp.randn(2, 3)
        mp.randn(5) + mp.randn(5)
        mp.randn(5) + mp.randn(5)
    rows = [r for r in prof.key_averages(group_by_input_shape=True) if r.key == "add"]
    assert sorted((r.input_shapes, r.count) for r in rows) == [(((2, 3), (2, 3)), 1), (((5,), (5,)), 2)]
    assert "Input Shapes" in prof.key_averages(group_by_input_shape=True).table()


def test_chrome_trace_is_valid_json_with_one_complete_event_per_call(tmp_path):
    model, x, y = _mlp()
    with profile(record_shapes=True) as prof:
        _step(model, x, y)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    for e, ev in zip(complete, prof.events()):
        assert (e["name"], e["cat"]) == (ev.name, ev.kind) and e["dur"] >= 0 and isinstance(e["ts"], float)
    lin = next(e for e in complete if e["name"] == "linear")
    assert lin["args"]["autocast"] == "lower_precision_fp [bf16]" and lin["args"]["ran in"] == "bf16, bf16, bf16"
    assert lin["args"]["input shapes"] == [[4, 8], [16, 8], [16]] and lin["args"]["autocast casts"] == 3
    # nesting by time: the cross_entropy event lies inside the "forward" range
    fwd = next(e for e in complete if e["name"] == "forward")
    ce = next(e for e in complete if e["name"] == "cross_entropy")
    assert fwd["ts"] <= ce["ts"] and ce["ts"] + ce["dur"] <= fwd["ts"] + fwd["dur"] + 1e-3
    assert any(e["ph"] == "M" and e["name"] == "process_name" for e in trace["traceEvents"])
    with pytest.raises(TypeError, match="path"):
        prof.export_chrome_trace(3)


def test_record_function_as_decorator_nests_and_costs_nothing_outside_a_profiler():
    @record_function("block")
    def block(depth):
        out = mp.randn(2) * 2
        return block(depth - 1) if depth else out

    block(2)  # no profiler: nothing happens, nothing is observed
    assert not observers.observing()
    with profile() as prof:
        block(2)
    blocks = [e for e in prof.events() if e.name == "block"]
    assert len(blocks) == 3 and blocks[1].parent is blocks[0] and blocks[2].parent is blocks[1]
    with pytest.raises(TypeError, match="name must be a str"):
        record_function(3)


def test_an_op_that_raises_leaves_the_profile_consistent():
    with profile() as prof:
        with record_function("outer"):
            with pytest.raises(RuntimeError):
                mp.randn(2, 3) @ mp.randn(2, 3)
            mp.randn(2) + 1
    events = prof.events()
    _check_nesting(events)
    outer = events[0]
    assert outer.name == "outer" and [c.name for c in outer.children] == ["matmul", "add"]


def _torch_actions(steps, **kw):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about warmup=0
        fn = torch.profiler.schedule(**kw)
    return [fn(i).name for i in range(steps)]


@pytest.mark.parametrize("kw", [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=0, active=1, repeat=2),
                                dict(wait=2, warmup=1, active=3, repeat=1, skip_first=3)])
def test_schedule_matches_torch(kw):
    ours = schedule(**kw)
    assert [ours(i).name for i in range(20)] == _torch_actions(20, **kw)


def test_schedule_records_only_active_steps_and_hands_each_cycle_over():
    model, x, y = _mlp()
    seen = []

    def ready(p):
        steps = [e.name for e in p.events() if e.kind == "step"]
        seen.append((p.step_num, steps, sum(e.name == "linear" for e in p.events())))

    observing = []
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2), on_trace_ready=ready) as prof:
        for _ in range(10):
            observing.append(observers.observing())
            _step(model, x, y)
            prof.step()
    assert seen == [(4, ["ProfilerStep#2", "ProfilerStep#3"], 4), (8, ["ProfilerStep#6", "ProfilerStep#7"], 4)]
    assert observing == [False, True, True, True] * 2 + [False, False]  # not attached while waiting
    assert [e.name for e in prof.events() if e.kind == "step"] == ["ProfilerStep#6", "ProfilerStep#7"]


def test_schedule_and_profile_arguments_are_checked():
    with pytest.raises(ValueError, match="active must be an int >= 1"):
        schedule(wait=1, warmup=0, active=0)
    with pytest.raises(ValueError, match="wait must be an int >= 0"):
        schedule(wait=-1, warmup=0, active=1)
    with pytest.raises(ValueError, match="warmup"):
        schedule(wait=1, warmup=True, active=1)
    with pytest.raises(ValueError, match="activities"):
        profile(activities=["cpu"])
    with pytest.raises(TypeError, match="schedule"):
        profile(schedule=3)
    with pytest.raises(TypeError, match="on_trace_ready"):
        profile(on_trace_ready="print")
    with pytest.raises(RuntimeError, match="nothing recorded yet"):
        profile().events()
    with pytest.raises(TypeError, match="ProfilerAction"):
        with profile(schedule=lambda step: "record"):
            pass
    prof = profile()
    with prof:
        with pytest.raises(RuntimeError, match="already running"):
            prof.start()
    assert ProfilerAction.RECORD_AND_SAVE.name == "RECORD_AND_SAVE"


@pytest.mark.skipif(mp.cuda.is_available(), reason="checks the no-GPU behaviour")
def test_cuda_activity_without_a_gpu_warns_and_profiles_the_cpu():
    with pytest.warns(UserWarning, match="no GPU can be used"):
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    assert prof.activities == {ProfilerActivity.CPU}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert profile().activities == {ProfilerActivity.CPU}  # the default asks for what is there


@pytest.mark.gpu
def test_cuda_events_time_gpu_ops_and_appear_in_the_table_and_trace(tmp_path):
    x = mp.randn(512, 512, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("work"), mp.autocast("cuda"):
            (x @ x).sum()
    events = prof.events()
    mm = next(e for e in events if e.name == "matmul")
    assert mm.cuda_time_total is not None and mm.cuda_time_total > 0 and mm.self_cuda_time_total <= mm.cuda_time_total
    assert "Self CUDA" in prof.key_averages().table(sort_by="cuda_time_total")
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    trace = json.loads((tmp_path / "t.json").read_text())
    assert any(e.get("cat", "").startswith("cuda") for e in trace["traceEvents"])
    assert np.isfinite(mm.cuda_start_us)


def test_nvtx_ranges_stay_balanced_also_when_ranges_are_left_open(monkeypatch):
    """The CUDA path's NVTX bookkeeping, on stand-ins: one push per call or range, one pop each."""
    from mixprec.profiler import profiler as prof_mod
    log = []
    monkeypatch.setattr(prof_mod, "_nvtx_push", lambda name: log.append(("push", name)))
    monkeypatch.setattr(prof_mod, "_nvtx_pop", lambda: log.append(("pop",)))
    recorder = prof_mod._Recorder(0, cuda=True, record_shapes=False)
    monkeypatch.setattr(prof_mod._active(), "recorders", (recorder,))
    with observers.observe(recorder):
        outer = record_function("outer").__enter__()
        mp.randn(2) + 1
        record_function("left open").__enter__()
        mp.randn(2) * 2
        outer.__exit__(None, None, None)   # closes "left open" with it
    events = recorder.finish()
    pushes = [e for e in log if e[0] == "push"]
    assert [p[1] for p in pushes] == ["outer", "add", "left open", "mul"] and log.count(("pop",)) == len(pushes)
    assert all(e.end_us is not None for e in events)


class _TraceHandlerError(Exception):
    pass


def _failing_handler(prof):
    raise _TraceHandlerError("the user's handler failed")



def test_an_on_trace_ready_that_raises_propagates_and_leaves_the_profiler_stopped():
    model, x, y = _mlp()
    with pytest.raises(_TraceHandlerError):  # the user's error, not one of the profiler's
        with profile(on_trace_ready=_failing_handler) as prof:
            _step(model, x, y)
    assert prof.current_action is ProfilerAction.NONE and not mp.profiler.profiler._active().recorders
    assert prof.events()  # the cycle was finished before its handler ran
    prof.start()  # stopped cleanly: it can start again, and so can a new one
    _step(model, x, y)
    prof.on_trace_ready = None
    prof.stop()
    with profile() as fresh:
        _step(model, x, y)
    assert fresh.key_averages()
    # with a schedule the handler runs in step(): it raises there, the loop may go on, exit stops the profiler
    seen = []

    def flaky(p):
        seen.append(p.step_num)
        if len(seen) == 1:
            raise _TraceHandlerError("first cycle")

    with profile(schedule=schedule(wait=0, warmup=0, active=1, repeat=2), on_trace_ready=flaky) as prof:
        _step(model, x, y)
        with pytest.raises(_TraceHandlerError):
            prof.step()
        _step(model, x, y)
        prof.step()  # the second cycle is recorded and handed over as scheduled
        _step(model, x, y)
    assert seen == [1, 2] and not mp.profiler.profiler._active().recorders
    assert "ProfilerStep#1" in {e.name for e in prof.events()}


def test_leaving_a_profiler_or_range_that_was_not_entered_is_a_clear_error():
    with pytest.raises(RuntimeError, match="record_function\\('x'\\).__exit__: it was not entered"):
        record_function("x").__exit__(None, None, None)
    with pytest.raises(RuntimeError, match="profile.stop: the profiler is not running"):
        profile().__exit__(None, None, None)


def test_the_handlers_error_propagates_as_in_torch():
    torch = pytest.importorskip("torch")
    for lib, x in ((torch, torch.ones(3)), (mp, mp.ones(3))):
        with pytest.raises(_TraceHandlerError):
            with lib.profiler.profile(on_trace_ready=_failing_handler):
                x + 1
        with lib.profiler.profile() as fresh:  # a new profiler starts after it
            x + 1
        assert len(fresh.events()) > 0


# ----------------------------------------------------------------- torch's other profile options and totals
def _warnings_of(make):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        obj = make()
    return obj, [(w.category, str(w.message)) for w in record]


@pytest.mark.skipif(mp.is_cuda_available(), reason="the behaviour without a usable GPU")
def test_profile_accepts_torchs_options_on_the_cpu(torch):
    """use_cuda (deprecated), profile_memory, with_stack, with_flops, with_modules: accepted as torch's are."""
    _, tw = _warnings_of(lambda: torch.profiler.profile(use_cuda=True))
    p, w = _warnings_of(lambda: profile(use_cuda=True))
    assert [c for c, _ in tw] == [FutureWarning] and (FutureWarning, tw[0][1]) in w
    assert p.activities == {ProfilerActivity.CPU}  # no GPU: the CPU is profiled (with mixprec's warning)
    options = dict(profile_memory=True, with_stack=True, with_flops=True, with_modules=True)
    torch.profiler.profile(**options)
    _, w = _warnings_of(lambda: profile(**options))
    assert [m.split("=")[0] for _, m in w] == [f"mp.profiler: {k}" for k in options]
    assert all(c is UserWarning and "records no" in m for c, m in w)
    with pytest.raises(TypeError, match="profile: with_flops must be True or False"):
        profile(with_flops="yes")


def test_self_cpu_time_total_and_total_average_as_torchs(torch):
    x = mp.randn(32, 32)
    with profile() as prof:
        with record_function("block"):
            (x @ x).relu()
    events = prof.events()
    tx = torch.randn(32, 32)
    with torch.profiler.profile() as tprof:
        (tx @ tx).relu()
    for lib_events in (events, tprof.events()):
        total = lib_events.key_averages().total_average()
        assert total.key == "Total" and total.count == len(lib_events)
        assert total.self_cpu_time_total == pytest.approx(lib_events.self_cpu_time_total, rel=1e-6)
    assert events.self_cpu_time_total == pytest.approx(sum(e.self_cpu_time_total for e in events))
    assert events.total_average().count == len(events)


@pytest.mark.skipif(mp.is_cuda_available(), reason="the behaviour without a usable GPU")
def test_autograd_profiler_names_as_torchs(torch):
    """torch.autograd.profiler.profile/record_function/emit_nvtx as mp.autograd.profiler.*."""
    for lib in (torch, mp):
        x = lib.ones(16, 16)
        prof, w = _warnings_of(lambda: lib.autograd.profiler.profile(use_device="cuda"))
        assert w == [(UserWarning, "CUDA is not available, disabling CUDA profiling")]
        with prof:
            with lib.autograd.profiler.record_function("block"):
                x @ x
        names = [e.name for e in prof.function_events]
        assert names[0] == "block" and len(names) >= 2
        assert prof.self_cpu_time_total > 0
        assert prof.total_average().count == len(prof.function_events)
    off = mp.autograd.profiler.profile(enabled=False)  # (torch's disabled profiler has no function_events)
    with off:
        mp.ones(2) + 1
    assert off.function_events is None
    _, w = _warnings_of(lambda: mp.autograd.profiler.profile(use_cuda=True))
    assert w[0][0] is FutureWarning and "use_device" in w[0][1]
    with pytest.raises(RuntimeError, match="no results"):
        mp.autograd.profiler.profile(enabled=False).total_average()
    with pytest.raises(AssertionError):  # torch without CUDA refuses emit_nvtx as well
        with torch.autograd.profiler.emit_nvtx():
            pass
    with pytest.raises(mp.DeviceUnavailableError, match="emit_nvtx needs a CUDA GPU"):
        with mp.autograd.profiler.emit_nvtx():
            pass


@pytest.mark.gpu
def test_emit_nvtx_opens_a_range_per_op_on_a_gpu():
    x = mp.randn(8, 8, device="cuda", requires_grad=True)
    with mp.autograd.profiler.emit_nvtx(record_shapes=True) as nv:
        (x @ x).sum().backward()
    assert nv._observing is None and x.grad is not None
