"""mp.amp.inspect's FP8 section: the counts and the headroom against NumPy on crafted tensors, the amax history
against the recipe's formula, each suggestion on the case that calls for it (and none on a healthy run), and the
promise that inspecting changes nothing of the FP8 region (outputs, gradients, scales, histories)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec.amp import numerics
from mixprec.amp.fp8 import scaling, watch

E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"
RECIPES = [mp.amp.DelayedScaling(amax_history_len=4), mp.amp.CurrentScaling(), mp.amp.MXFP8BlockScaling()]
IDS = ["delayed", "current", "mxfp8"]


def data(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def linear(n_in=32, n_out=32, seed=0):
    mp.manual_seed(seed)
    return mp.nn.Linear(n_in, n_out)


def step(model, x, g, recipe, inspect=True, device="cpu"):
    """One FP8 step (forward in the region, backward after it), inspected or not; (report or None, y, x.grad)."""
    xt = mp.tensor(x, device=device, requires_grad=True)
    insp = mp.amp.inspect(model) if inspect else None
    if insp:
        insp.__enter__()
    with mp.amp.fp8_autocast(recipe=recipe):
        y = model(xt)
    y.backward(mp.tensor(g, device=device))
    if insp:
        insp.__exit__(None, None, None)
    return (insp.report() if insp else None), y, xt.grad


def cast(report, label):
    found = [r for r in report.fp8 if r.label == label]
    assert len(found) == 1, [r.label for r in report.fp8]
    return found[0]


# ---- the numbers of one cast ----
def test_counts_and_headroom_of_a_crafted_cast():
    x = np.array([1000, 465, 463, 448, 1.0, 1e-4, 1e-3, 0.01, 0.0, -600, np.inf, np.nan], np.float32)
    scale = np.ones(1, np.float32)
    q, _ = scaling.cast_to_fp8(x, scale, E4M3)
    s = numerics.fp8_stats(x, scale, q, E4M3)
    # E4M3: max 448, and 464 (half its top step of 32 above) rounds to 448 by itself: beyond it the clip acts
    assert s.saturated == 3                  # 1000, 465, -600; 463 rounds to 448 on its own; inf is nonfinite
    assert s.flushed == 1                    # 1e-4 < 2^-10, half E4M3's smallest subnormal
    assert s.subnormal == 2                  # 1e-3 -> 2^-9 and 0.01 (< 2^-6, the smallest normal)
    assert (s.nonzero, s.nonfinite, s.numel) == (9, 2, 12)
    assert s.amax == 1000 and s.amin == np.float32(1e-4)
    assert s.headroom == pytest.approx(math.log2(448 / 1000))
    # the same values, scaled: the counts follow x * scale (E5M2's max 57344, its bound 61440)
    scale = np.array([64.0], np.float32)
    q, _ = scaling.cast_to_fp8(x, scale, E5M2)
    s = numerics.fp8_stats(x, scale, q, E5M2)
    assert s.saturated == 1 and s.headroom == pytest.approx(math.log2(57344 / 64000))   # only 1000 * 64 > 61440


def test_mx_block_counts_and_scale_spread():
    x = np.zeros((2, 64), np.float32)
    x[0, :32] = np.linspace(0.5, 1.0, 32)           # amax 1: block exponent 0 - 8
    x[0, 31] = 1.99                                  # amax 1.99 -> 2^(0 - 8); 1.99 * 2^8 = 509 > 464: saturates
    x[0, 32:] = 2.0 ** -20                           # one block of tiny values: scale 2^(-20 - 8), nothing lost
    x[1, :32] = 1.0
    x[1, 0] = 2.0 ** -12                             # 2^-12 * 2^8 = 2^-4 ... fine (E4M3 subnormals reach 2^-9)
    x[1, 1] = 2.0 ** -20                             # 2^-20 * 2^8 = 2^-12 < 2^-10: flushes
    q = scaling.quantize_mxfp8(x, E4M3)
    s = numerics.fp8_stats(x, q.scale, q.data, E4M3, blocked=True)
    assert (s.blocks, s.blocks_saturated, s.blocks_flushed) == (4, 1, 1)
    assert (s.saturated, s.flushed) == (1, 1)
    assert s.block_exponents == (-28, -8)           # 2^-20 - 8 .. 2^0 - 8; the all-zero block does not count
    assert s.headroom == pytest.approx(math.log2(448 / (1.99 * 2.0 ** 8)))


def test_amax_history_against_the_buffer():
    h = numerics.amax_history(np.array([0, 0, 3.0, 1.5], np.float32), 12.0, "max", 0)
    assert (h.steps, h.max, h.most_recent, h.length) == (2, 3.0, 1.5, 4)
    assert h.above_max == pytest.approx(2.0)
    assert numerics.amax_history(np.zeros(4), 1.0, "max", 0).above_max is None


# ---- through the region ----
def test_a_forced_scale_saturates_the_values_it_should():
    m = linear(32, 8)
    x, g = data((16, 32), 1), data((16, 8), 2)
    step(m, x, g, RECIPES[0], inspect=False)          # the scales exist and follow the data
    amax = np.abs(x).max()
    forced = np.float32(448.0) / amax * 4              # two doublings too large
    m.fp8_scale._array[0] = forced
    history = m.fp8_amax_history.numpy()[0].copy()
    report, _, _ = step(m, x, g, RECIPES[0])
    r = cast(report, "Linear input")                   # the model itself: its class name
    expected = int(np.count_nonzero(np.abs(x * forced) > 464))
    assert expected > 0 and r.stats.saturated == expected and r.stats.scale == forced
    assert r.stats.headroom == pytest.approx(math.log2(448 / (amax * float(forced))))   # -2
    assert "saturates" in r.flags and r.history.max == history.max() and r.history.steps == 1
    assert r.format == "E4M3" and not r.backward
    assert "saturates" not in cast(report, "Linear weight").flags


def test_each_role_is_seen_once_with_its_format_and_the_gradient_in_the_backward():
    model = mp.nn.Sequential(linear(32, 32), mp.nn.ReLU(), linear(32, 32, seed=1))
    for recipe in RECIPES[:2]:
        report, _, _ = step(model, data((32, 32), 3), data((32, 32), 4), recipe)
        got = [(r.label, r.format, r.backward) for r in report.fp8]
        assert got == [("0 input", "E4M3", False), ("0 weight", "E4M3", False), ("2 input", "E4M3", False),
                       ("2 weight", "E4M3", False), ("2 grad_output", "E5M2", True), ("0 grad_output", "E5M2", True)]
        assert report.fp8[0].op.endswith("QuantizeForward")
    report, _, _ = step(model, data((32, 32), 3), data((32, 32), 4), RECIPES[2])
    labels = [r.label for r in report.fp8]
    assert labels[:2] == ["0 input", "0 weight"] and len(labels) == 12   # forward 2 per layer, backward 4
    assert "2 weight (columnwise)" in labels and report.fp8[-1].backward


def test_a_spike_past_the_history_is_a_stale_scale_and_current_scaling_is_suggested():
    m = linear(32, 8)
    g = data((16, 8), 6)
    for k in range(3):
        step(m, data((16, 32), 10 + k), g, RECIPES[0], inspect=False)
    before = m.fp8_amax_history.numpy()[0].copy()
    x = data((16, 32), 20, 16.0)
    report, _, _ = step(m, x, g, RECIPES[0])
    r = cast(report, "Linear input")
    assert r.history.above_max == pytest.approx(math.log2(np.abs(x).max() / before.max()))
    assert r.history.above_max > 3 and {"saturates", "stale scale"} <= set(r.flags)
    line = next(s for s in report.suggestions if s.startswith("FP8 #1 "))
    need = math.ceil(-r.stats.headroom)
    assert "CurrentScaling()" in line and f"2^{r.history.above_max:.1f} above" in line and f"margin={need}" in line
    assert f"{r.stats.saturated} of its 512 nonzero values" in line
    # the suggestion works: current scaling saturates nothing on the same step
    report, _, _ = step(linear(32, 8), x, g, RECIPES[1])
    assert cast(report, "Linear input").stats.saturated == 0 and not report.flagged


def test_most_recent_that_saturates_is_told_to_use_max():
    recipe = mp.amp.DelayedScaling(amax_history_len=4, amax_compute_algo="most_recent")
    m, g = linear(32, 8), data((16, 8), 7)
    for scale in (8.0, 1.0):                      # the history holds 8x, the scale follows the newest (1x)
        step(m, data((16, 32), 30, scale), g, recipe, inspect=False)
    report, _, _ = step(m, data((16, 32), 31, 4.0), g, recipe)
    r = cast(report, "Linear input")
    assert "saturates" in r.flags and "stale scale" not in r.flags
    line = next(s for s in report.suggestions if s.startswith("FP8 #1 "))
    assert 'amax_compute_algo="max"' in line and f"margin={math.ceil(-r.stats.headroom)}" in line


def test_flushing_with_wasted_headroom_suggests_a_lower_margin_or_most_recent():
    m, g = linear(32, 8), data((16, 8), 8)
    step(m, data((16, 32), 40, 1e4), g, RECIPES[0], inspect=False)     # one huge step: the max of the history
    x = data((16, 32), 41)
    report, _, _ = step(m, x, g, RECIPES[0])
    r = cast(report, "Linear input")
    scale = m.fp8_scale.numpy()[0]
    flushed = int(np.count_nonzero((x != 0) & (np.clip(x * scale, -448, 448).astype(ml_dtypes.float8_e4m3fn) == 0)))
    assert r.stats.flushed == flushed and r.stats.flushed_fraction > 0.01 and r.flags == ["flushes"]
    k = math.floor(math.log2(448 / (np.abs(x).max() * scale)))
    line = next(s for s in report.suggestions if s.startswith("FP8 #1 "))
    assert f"margin={-k}" in line and 'amax_compute_algo="most_recent"' in line
    assert f"{r.stats.headroom:.1f} doublings unused" in line


def test_flushing_of_a_wide_tensor_suggests_mxfp8_with_its_measured_count():
    m, g = linear(64, 32), data((32, 32), 9)
    x = data((32, 64), 50) * np.repeat([1e-4, 1e2], 32)[None, :].astype(np.float32)   # two blocks, 20 doublings apart
    report, _, _ = step(m, x, g, RECIPES[1])
    r = cast(report, "Linear input")
    mx = scaling.quantize_mxfp8(x, E4M3).data.astype(np.float32)
    assert r.stats.mx_flushed == int(np.count_nonzero((x != 0) & (mx == 0))) < r.stats.flushed
    line = next(s for s in report.suggestions if s.startswith("FP8 #1 "))
    assert "MXFP8BlockScaling()" in line and f"flushes {r.stats.mx_flushed} of them" in line
    # and it holds: under MXFP8 the input flushes nothing worth a flag
    report, _, _ = step(m, x, g, RECIPES[2])
    assert "flushes" not in cast(report, "Linear input").flags


def test_the_first_cast_of_delayed_scaling_is_explained_not_blamed_on_the_recipe():
    report, _, _ = step(linear(32, 8), data((16, 32), 60, 1e3), data((16, 8), 61), RECIPES[0])
    r = cast(report, "Linear input")
    assert r.history.steps == 0 and r.stats.scale == 1 and "saturates" in r.flags
    line = next(s for s in report.suggestions if s.startswith("FP8 #1 "))
    assert "history is empty" in line and "warm-up step" in line and "margin=" not in line


@pytest.mark.parametrize("recipe", RECIPES, ids=IDS)
def test_a_healthy_run_flags_nothing(recipe):
    model = mp.nn.Sequential(linear(32, 64), mp.nn.ReLU(), linear(64, 32, seed=1))
    x, g = data((32, 32), 70), data((32, 32), 71, 1e-2)
    for _ in range(2):                       # delayed scaling: the scales settle on the data first
        step(model, x, g, recipe, inspect=False)
    report, _, _ = step(model, x, g, recipe)
    assert report.fp8 and all(r.stats is not None for r in report.fp8)
    assert not [f for f in report.flagged if f[0].startswith("FP8")]
    assert not [s for s in report.suggestions if s.startswith("FP8")]


@pytest.mark.parametrize("recipe", RECIPES, ids=IDS)
@pytest.mark.parametrize("autocast", [False, True], ids=["float32", "bfloat16"])
def test_inspecting_changes_nothing_of_the_region(recipe, autocast):
    runs = []
    for inspect in (False, True):
        model = mp.nn.Sequential(linear(32, 32), mp.nn.ReLU(), linear(32, 32, seed=1))
        outs = []
        for k in range(3):
            x = mp.tensor(data((32, 32), 80 + k, 4.0), requires_grad=True)
            insp = mp.amp.inspect(model) if inspect else None
            with (insp or _nothing()), mp.autocast("cpu", dtype=mp.bfloat16, enabled=autocast):
                with mp.amp.fp8_autocast(recipe=recipe):
                    y = model(x)
                loss = (y.float() ** 2).mean()
                loss.backward()
            outs.append((y.float().numpy().copy(), x.grad.numpy().copy()))
        state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
        grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        runs.append((outs, state, grads))
        if inspect:
            assert insp.report().fp8
    (o1, s1, g1), (o2, s2, g2) = runs
    assert all(np.array_equal(a, b) for (a1, b1), (a2, b2) in zip(o1, o2) for a, b in ((a1, a2), (b1, b2)))
    assert s1.keys() == s2.keys() and all(np.array_equal(s1[k], s2[k]) for k in s1)   # with the FP8 state, pending
    assert all(np.array_equal(g1[k], g2[k]) for k in g1)
    assert watch.WATCHERS == []


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_nobody_watching_costs_no_call(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a cast was reported with nobody watching")
    monkeypatch.setattr(watch, "seen", refuse)
    for recipe in RECIPES:
        step(linear(), data((32, 32), 90), data((32, 32), 91), recipe, inspect=False)


def test_the_report_renders_the_fp8_section(tmp_path):
    m = linear(32, 8)
    report, _, _ = step(m, data((16, 32), 100, 1e3), data((16, 8), 101), RECIPES[0])
    text = str(report)
    assert "FP8 casts (saturated" in text and "3 FP8 casts" in text
    rows = text.split("FP8 casts (saturated")[1].splitlines()
    assert rows[3].split()[:4] == ["1", "Linear", "input", "E4M3"] and "saturates" in rows[3]
    md = report.to_markdown()
    assert "### FP8 casts" in md and "| 1 | Linear input | E4M3 | delayed (max, len 4, margin 0) |" in md
    assert ("FP8 #1 Linear input", ["saturates"]) in report.flagged


def test_a_module_outside_the_model_gets_its_class_name():
    with mp.amp.inspect() as insp:
        with mp.amp.fp8_autocast(recipe=RECIPES[1]):
            linear(32, 8)(mp.randn(4, 32))
    assert [r.label for r in insp.report().fp8] == ["Linear#1 input", "Linear#1 weight"]


@pytest.mark.parametrize("recipe", RECIPES, ids=IDS)
def test_on_the_device_the_numbers_are_the_cpus(device, recipe):
    reports = []
    for where in ("cpu", device):
        m = linear(32, 32).to(where)
        for k in range(2):
            report, _, _ = step(m, data((32, 32), 110 + k, 3.0), data((32, 32), 120 + k, 1e-3), recipe,
                                device=where)
        reports.append(report)
    cpu, dev = reports
    assert [r.label for r in dev.fp8] == [r.label for r in cpu.fp8]
    for a, b in zip(cpu.fp8, dev.fp8):
        assert a.note is None and b.note is None
        assert (a.stats.saturated, a.stats.flushed, a.stats.subnormal, a.stats.amax, a.stats.scale) == \
            (b.stats.saturated, b.stats.flushed, b.stats.subnormal, b.stats.amax, b.stats.scale)
        assert a.history == b.history


@pytest.mark.gpu
@pytest.mark.skipif(mp.backend.strict_standin() is None, reason="counts come from the strict CuPy stand-in")
@pytest.mark.parametrize("recipe", RECIPES, ids=IDS)
def test_with_nobody_watching_an_fp8_step_reads_nothing_back(recipe):
    m = linear().to("cuda")
    x, g = mp.randn(32, 32, device="cuda", requires_grad=True), mp.randn(32, 32, device="cuda")
    for k in range(2):
        with mp.backend.strict_standin().counting() as seen:
            with mp.amp.fp8_autocast(recipe=recipe):
                y = m(x)
            y.backward(g)
    assert seen.host_reads == 0 and seen.syncs == 0


def test_the_plot_has_an_fp8_panel(tmp_path):
    pytest.importorskip("matplotlib")
    report, _, _ = step(linear(32, 8), data((16, 32), 130, 1e3), data((16, 8), 131), RECIPES[0])
    fig = report.plot(str(tmp_path / "fp8.png"))
    titles = [a.get_title() for a in fig.axes]
    assert any(t.startswith("FP8 casts") for t in titles)
    panel = next(a for a in fig.axes if a.get_title().startswith("FP8 casts"))
    heights = [p.get_height() for p in panel.patches]
    assert heights[0] == pytest.approx(100 * report.fp8[0].stats.saturated_fraction) and heights[0] > 0
    assert (tmp_path / "fp8.png").read_bytes().startswith(b"\x89PNG")


def test_functional_gemms_and_convolutions_are_named():
    model = mp.nn.Sequential(mp.nn.Conv2d(3, 4, 3))
    x, w = mp.randn(32, 64), mp.randn(64, 32)
    with mp.amp.inspect(model) as insp:
        with mp.amp.fp8_autocast(recipe=RECIPES[1]):
            model(mp.randn(1, 3, 5, 5))
            x @ w
            mp.nn.functional.conv1d(mp.randn(1, 2, 6), mp.randn(3, 2, 3))
    assert [r.label for r in insp.report().fp8] == ["0 input", "0 weight", "matmul input", "matmul weight",
                                                    "conv1d input", "conv1d weight"]
    with mp.amp.inspect() as insp:
        with mp.amp.fp8_autocast(recipe=RECIPES[2]):
            mp.nn.functional.linear(x, w.T)
    assert [r.label for r in insp.report().fp8] == ["linear input", "linear weight"]
