"""mp.amp.inspect on crafted models whose failure is known, the definitions of its numbers against independent
NumPy computations, and the promise that inspecting changes nothing."""
import math

import numpy as np
import pytest

import mixprec as mp
from mixprec.amp import numerics
from mixprec import observers

nn, F = mp.nn, mp.nn.functional
F16, BF16, F32 = mp.float16, mp.bfloat16, mp.float32


def _inspect(model, x, y=None, dtype=F16, scaler=None, backward=False, overrides=None):
    scaler_obj = mp.GradScaler("cpu", init_scale=scaler) if scaler is not None else None
    with mp.amp.inspect(model, scaler=scaler_obj) as insp:
        with mp.amp.override(overrides or {}), mp.autocast("cpu", dtype=dtype):
            out = model(x)
            loss = F.cross_entropy(out, y) if y is not None else None
        if backward:
            (scaler_obj.scale(loss) if scaler_obj else loss).backward()
    return insp.report(), out


def _mlp(seed=0, width=32):
    mp.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 4))


def _cnn(seed=0):
    """The digits CNN's layers (examples/train_digits.py), on 8x8 images."""
    mp.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10))


# ---------------------------------------------------------------- crafted failures
def test_activations_beyond_float16_are_ranked_first_with_float32_or_bfloat16_suggested():
    model = _mlp()
    with mp.no_grad():
        model[0].weight.mul_(2e4)  # the first layer's outputs reach ~1e5 > 65504
    x, y = mp.randn(8, 16) * 10, mp.tensor([0, 1, 2, 3] * 2)
    report, out = _inspect(model, x, y)
    first = report.ops[0]
    assert (first.name, first.index, first.params) == ("linear", 1, ("0.weight", "0.bias"))
    assert "makes inf/NaN" in first.flags and first.stats.new_nonfinite == first.stats.overflow > 0
    assert first.stats.amax > 65504 and first.stats.shadow_nonfinite == 0
    later = [r for r in report.ops[1:] if r.stats.nonfinite]  # downstream ops only inherit the infs
    assert later and all(r.stats.new_nonfinite == 0 and "makes inf/NaN" not in r.flags for r in later)
    advice = report.suggestions[0]
    assert advice.startswith("#1 linear (0.weight, 0.bias)") and 'mp.amp.override({"linear": "fp32"})' in advice \
        and "bfloat16" in advice
    assert report.ops[0].label in report.table().split("Ops, most harmful first")[1].splitlines()[3]
    # the suggestions work: bfloat16, or the layer in float32, makes no inf
    for kw in (dict(dtype=BF16), dict(overrides={"linear": "fp32"})):
        fixed, _ = _inspect(model, x, y, **kw)
        assert not any(r.stats.nonfinite for r in fixed.ops if r.stats) and fixed.flagged == []


def _tiny_gradient_run(scale, dtype=F16):
    model = _mlp(width=64)
    x, y = mp.randn(64, 16), mp.randint(0, 4, (64,))
    scaler = mp.GradScaler("cpu", init_scale=scale)
    with mp.amp.inspect(model, scaler=scaler) as insp:
        with mp.autocast("cpu", dtype=dtype):
            loss = F.cross_entropy(model(x), y) * 1e-5  # gradients ~1e-7 and below: under float16's range
        scaler.scale(loss).backward()
    return insp.report()


def test_gradients_too_small_for_float16_underflow_at_scale_one_and_recover_as_the_scale_grows():
    reports = {k: _tiny_gradient_run(2.0 ** k) for k in (0, 8, 16)}
    lost = {k: {g.name: g.stats.zero_fraction for g in r.gradients} for k, r in reports.items()}
    assert set(lost[0]) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert lost[0]["0.weight"] > 0.5  # measured: most of the first layer's gradient is lost at scale 1
    for name in lost[0]:
        assert lost[0][name] >= lost[8][name] >= lost[16][name]
    assert max(lost[16].values()) < 0.01 and max(lost[0].values()) > max(lost[8].values())
    # the predicted curve (float32 reference rounded at each scale) falls as the scale grows, up to overflow
    for g in reports[16].gradients:
        s = g.stats
        assert s.reference and sum(s.at_scale(1.0)[:2]) > 0  # zero or subnormal at scale 1
        curve = [z + sub for z, sub, k in zip(s.zero_at, s.subnormal_at, s.exponents) if k <= s.max_safe_exponent]
        assert all(a >= b for a, b in zip(curve, curve[1:])) and curve[0] > curve[-1]
    flagged = dict(reports[0].flagged)
    assert "underflows at this scale" in flagged["0.weight"]
    assert any("mp.GradScaler(init_scale=2.**" in s for s in reports[0].suggestions)
    assert reports[16].flagged == []
    # bfloat16 has float32's exponent range: nothing underflows at scale 1
    assert all(g.stats.zero_fraction == 0 for g in _tiny_gradient_run(1.0, BF16).gradients)


def test_gradient_headroom_and_overflow_at_too_large_a_scale():
    report = _tiny_gradient_run(2.0 ** 16)
    g = next(g for g in report.gradients if g.name == "0.weight").stats
    assert g.headroom == pytest.approx(math.log2(65504) - math.log2(g.amax * 2 ** 16))
    assert g.max_safe_exponent == math.floor(math.log2(65504) - math.log2(g.amax))
    over = _tiny_gradient_run(2.0 ** (g.max_safe_exponent + 2))
    assert any("overflows at this scale" in f for _, f in over.flagged)
    assert any(s.startswith("gradients overflow float16") for s in over.suggestions)


def insp_suggestions(record):
    from mixprec.amp.report import InspectReport
    return InspectReport([record], [], [], numerics.DEFAULT_SCALE_EXPONENTS).suggestions


def test_softmax_forced_to_float16_shows_its_error():
    logits = mp.randn(16, 50) * 20

    def run(overrides):
        with mp.amp.inspect() as insp, mp.amp.override(overrides), mp.autocast("cpu", dtype=F16):
            F.softmax(logits, dim=1)
        return insp.report().ops[0]
    forced, default = run({"softmax": F16}), run({})
    assert forced.output_dtype == F16 and "mp.amp.override" in forced.why and forced.policy == "cast to float16 [f16]"
    assert forced.stats.error_max > 4 * 2.0 ** -11 and forced.flags == ["underflow"]  # visible, and flagged
    assert forced.stats.local_underflow_fraction > 0.5  # exp(-x) of large logits: below float16's range
    assert any('mp.amp.override({"softmax": "fp32"})' in s for s in insp_suggestions(forced))
    assert default.stats.error_max == 0 and default.flags == [] and default.output_dtype == F32
    assert "no cpu policy" in default.why


def test_healthy_models_flag_nothing():
    x, y = mp.rand(32, 1, 8, 8), mp.randint(0, 10, (32,))
    for dtype, scale in ((F16, 2.0 ** 16), (BF16, None)):
        report, _ = _inspect(_cnn(), x, y, dtype=dtype, scaler=scale, backward=True)
        assert report.flagged == [] and report.suggestions == [], report.table()
        assert max(r.stats.local_error_in_u for r in report.ops if r.stats) < 4
        assert len(report.gradients) == 8  # every conv/linear weight and bias, in the lower dtype
    assert "none: nothing flagged" in report.table()


# ---------------------------------------------------------------- the numbers, defined independently
def test_errors_follow_the_float32_path_and_the_ops_own_inputs():
    mp.manual_seed(3)
    x = mp.randn(8, 16)
    w1, b1, w2, b2 = mp.randn(32, 16), mp.randn(32), mp.randn(4, 32), mp.randn(4)
    with mp.amp.inspect() as insp, mp.autocast("cpu", dtype=F16):
        h = F.relu(F.linear(x, w1, b1))
        out = F.linear(h, w2, b2)
    lin2 = [r for r in insp.report().calls if r.name == "linear"][1]
    X, W1, B1, W2, B2 = (t.numpy().astype(np.float64) for t in (x, w1, b1, w2, b2))
    path = np.maximum(X @ W1.T + B1, 0) @ W2.T + B2  # the whole model in high precision
    own = h.numpy().astype(np.float64) @ W2.T + B2   # this layer in high precision on what it was given
    low = out.numpy().astype(np.float64)
    assert lin2.stats.error_max == pytest.approx(np.abs(low - path).max() / np.abs(path).max(), rel=1e-3)
    assert lin2.stats.error_mean == pytest.approx(np.abs(low - path).sum() / np.abs(path).sum(), rel=1e-3)
    assert lin2.stats.local_error_max == pytest.approx(np.abs(low - own).max() / np.abs(own).max(), rel=1e-3)
    assert lin2.stats.u == 2.0 ** -11 and lin2.stats.amax == pytest.approx(np.abs(path).max(), rel=1e-5)


def test_reference_gradients_are_the_float32_gradients():
    model = _mlp()
    x, y = mp.randn(8, 16), mp.tensor([0, 1, 2, 3] * 2)
    report, _ = _inspect(model, x, y, scaler=2.0 ** 10, backward=True)
    ref = {n: p.detach().double().requires_grad_() for n, p in model.named_parameters()}
    h = F.relu(F.linear(x.double(), ref["0.weight"], ref["0.bias"]))
    F.cross_entropy(F.linear(h, ref["2.weight"], ref["2.bias"]), y).backward()
    for g in report.gradients:
        exact = np.abs(ref[g.name].grad.numpy())
        assert g.stats.reference and g.stats.scale == 2.0 ** 10
        assert g.stats.amax == pytest.approx(exact.max(), rel=1e-4)
        assert g.stats.amin == pytest.approx(exact[exact > 0].min(), rel=1e-3)
        assert g.stats.nonzero == np.count_nonzero(exact)


def test_forward_stats_count_overflow_underflow_and_subnormals():
    shadow = np.array([1e5, 1.0, 1e-9, 3e-6, -2.0, 0.0], dtype=np.float32)
    with np.errstate(over="ignore"):
        low = shadow.astype(np.float16)   # 1e5 -> inf, 1e-9 -> 0, 3e-6 -> subnormal
    s = numerics.forward_stats(low, shadow, None, F16, 2.0 ** -11)
    assert (s.overflow, s.nan, s.underflow, s.subnormal, s.shadow_nonfinite) == (1, 0, 1, 1, 0)
    assert s.new_nonfinite == 0  # compared with itself (no local run): nothing new
    local = shadow.astype(np.float32)
    s = numerics.forward_stats(low, shadow, local, F16, 2.0 ** -11)
    assert s.new_nonfinite == 1 and s.local_underflow == 1 and s.local_nonzero == 5
    assert (s.amax, s.amin) == (pytest.approx(1e5), pytest.approx(1e-9))
    assert s.headroom == pytest.approx(math.log2(65504) - math.log2(1e5))


def test_gradient_stats_at_each_scale_are_the_rounding_of_the_scaled_reference():
    ref = np.array([2.0 ** -30, 2.0 ** -20, 2.0 ** -10, 2.0 ** 4, 0.0], dtype=np.float32)  # at scale 1
    g = numerics.gradient_stats(ref.astype(F16), F16, 1.0, ref, exponents=range(0, 20))
    assert g.nonzero == 4 and g.zero == 1 and g.subnormal == 1  # 2^-30 -> 0, 2^-20 subnormal in float16
    assert g.at_scale(1.0) == (0.25, 0.25, 0.0)
    assert g.at_scale(2.0 ** 6) == (0.0, 0.25, 0.0)   # 2^-24: the smallest subnormal
    assert g.at_scale(2.0 ** 16) == (0.0, 0.0, 0.25)  # 2^-14 normal, 2^20 overflows
    assert g.max_safe_exponent == 11 and g.headroom == pytest.approx(math.log2(65504) - 4)


# ---------------------------------------------------------------- inspecting changes nothing
def _train_step(model, x, y, inspect):
    mp.manual_seed(7)
    scaler = mp.GradScaler("cpu", init_scale=2.0 ** 8)
    ctx = mp.amp.inspect(model, scaler=scaler) if inspect else None
    if ctx:
        ctx.__enter__()
    with mp.autocast("cpu", dtype=F16):
        out = model(x)
        loss = F.cross_entropy(out, y)
    scaler.scale(loss).backward()
    if ctx:
        ctx.__exit__(None, None, None)
    return out, mp.random.get_rng_state()


def test_inspection_changes_no_result_gradient_buffer_or_random_draw():
    def make():
        mp.manual_seed(1)
        return nn.Sequential(nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Dropout(0.5),
                             nn.Linear(8 * 36, 10))
    x, y = mp.rand(6, 1, 8, 8), mp.randint(0, 10, (6,))
    runs = []
    for inspect in (False, True):
        model = make()
        out, rng = _train_step(model, x, y, inspect)
        state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
        grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        runs.append((out.numpy().copy(), rng, state, grads))
    (o1, r1, s1, g1), (o2, r2, s2, g2) = runs
    assert np.array_equal(o1, o2) and r1 == r2  # dropout drew the same mask; the stream is where it was
    assert all(np.array_equal(s1[k], s2[k]) for k in s1)  # batch norm's running stats updated once
    assert all(np.array_equal(g1[k], g2[k]) for k in g1)
    assert not observers.observing()


def test_in_place_updates_ops_that_fail_and_exceptions_are_handled():
    w = mp.randn(4, 3, requires_grad=True)
    x = mp.randn(2, 3)
    with pytest.raises(ValueError, match="boom"):
        with mp.amp.inspect() as insp, mp.autocast("cpu"):
            h = F.linear(x, w)
            with mp.no_grad():
                g = h.detach().clone()
                g.mul_(2.0)          # in place behind the shadow's back: its shadow restarts from its value
            (g + 1).sum()
            with pytest.raises(RuntimeError):
                F.linear(x, mp.randn(4, 4))  # a failing op is not recorded
            raise ValueError("boom")
    assert not observers.observing()
    calls = insp.report().calls
    assert [r.name for r in calls] == ["linear", "clone", "mul", "add", "sum"]
    # g + 1 is compared with g's actual value + 1 (within bfloat16's rounding), not with a shadow that
    # missed the doubling (an error near 0.5)
    assert calls[3].stats.error_max <= 2.0 ** -8


def test_arguments_and_misuse_are_clear_errors():
    with pytest.raises(TypeError, match="model must be an mp.nn.Module"):
        mp.amp.inspect(model=3)
    with pytest.raises(TypeError, match="scaler must be a GradScaler"):
        mp.amp.inspect(scaler="big")
    with pytest.raises(ValueError, match="loss scale must be a finite number > 0"):
        mp.amp.inspect(scaler=-1.0)
    with pytest.raises(ValueError, match="scale_exponents"):
        mp.amp.inspect(scale_exponents=[3, 1])
    insp = mp.amp.inspect()
    with pytest.raises(RuntimeError, match="nothing inspected yet"):
        insp.report()
    with insp:
        with pytest.raises(RuntimeError, match="when the `with mp.amp.inspect"):
            insp.report()
    assert insp.report().calls == []


def test_markdown_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    report = _tiny_gradient_run(1.0)
    md = report.to_markdown()
    assert md.startswith("**AMP numerics**") and "| rank | op |" in md and "### Gradients in float16/bfloat16" in md
    assert "| 0.weight | f16 | 2^0 |" in md and "### Suggestions" in md
    path = tmp_path / "inspect.png"
    report.plot(str(path))
    assert path.read_bytes().startswith(b"\x89PNG") and path.stat().st_size > 20_000


@pytest.mark.gpu
def test_inspector_on_the_gpu_finds_the_overflowing_layer():
    model = _mlp().to("cuda")
    with mp.no_grad():
        model[0].weight.mul_(2e4)
    x, y = mp.randn(8, 16, device="cuda") * 10, mp.tensor([0, 1, 2, 3] * 2, device="cuda")
    with mp.amp.inspect(model) as insp, mp.autocast("cuda"):
        F.cross_entropy(model(x), y).backward()
    report = insp.report()
    assert report.ops[0].name == "linear" and "makes inf/NaN" in report.ops[0].flags


def test_a_custom_function_is_one_record_with_its_float32_shadow():
    class Square(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x
    x = mp.tensor([0.1, 3.0], dtype=mp.bfloat16, requires_grad=True)
    with mp.amp.inspect() as insp:
        Square.apply(x).sum().backward()
    ops = insp.report().ops
    square = [r for r in ops if r.name == "Square"]
    assert len(square) == 1 and "shadow failed" not in (square[0].note or "")
    assert not any(r.name == "mul" for r in ops)  # its forward's ops are inside its record


def test_a_custom_function_under_autocast_is_explained_as_not_autocast():
    class Twice(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    x = mp.randn(3, 3, requires_grad=True)
    with mp.amp.inspect() as insp:
        with mp.autocast("cpu", dtype=mp.bfloat16):
            Twice.apply(x @ x)
    record = next(r for r in insp.report().ops if r.name == "Twice")
    assert record.policy == "-" and "no cpu policy" in record.why
