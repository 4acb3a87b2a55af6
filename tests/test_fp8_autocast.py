"""mp.amp.fp8_autocast: nn.Linear's GEMMs on FP8 values.

The references here are written from the documented formulas, independently of
mixprec.amp.fp8.scaling: a cast is ``fp8(clip(float32(x * scale), +-fp8_max))`` rounded
to nearest even by ml_dtypes, a dequantized value is ``q / scale``, and the GEMMs are
done in float64 on the dequantized values; results are compared at float32 tolerance.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec.amp import _kernels
from mixprec.distributed import process_group as dist_pg
from mixprec.amp.fp8 import autocast as fp8_region
from mixprec.amp.fp8 import scaling
from mixprec.amp.fp8 import watch

E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"
MAX = {E4M3: 448.0, E5M2: 57344.0}


def quantize(x, scale, fmt):
    """The reference quantize-dequantize, in float64 at the end."""
    scale = np.float32(scale)
    y = np.asarray(x, np.float32) * scale
    q = np.clip(y, -MAX[fmt], MAX[fmt]).astype(getattr(ml_dtypes, fmt))
    return q.astype(np.float64) / np.float64(scale)


def close(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=rtol, atol=atol)


def linear(n_in=32, n_out=8, seed=0, bias=True):
    mp.manual_seed(seed)
    return mp.nn.Linear(n_in, n_out, bias=bias)


def data(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def step(m, x, g, recipe=None):
    """One forward in a region and a backward after it (the usual loop); returns (y, x.grad)."""
    xt = mp.tensor(x, requires_grad=True)
    with mp.amp.fp8_autocast(recipe=recipe):
        y = m(xt)
    y.backward(mp.tensor(g))
    return y, xt.grad


def scales(m):
    return m.fp8_scale.numpy().copy()


# ---- values: forward and backward against the reference ----
def test_delayed_forward_and_backward_equal_the_reference():
    m = linear()
    x1, g1 = data((4, 32), 1, 3.0), data((4, 8), 2, 1e-3)
    step(m, x1, g1)                 # step 1: the scales move from 1 to the data's
    step(m, x1, g1)                 # step 2: the grad_output scale follows step 1's gradients
    m.zero_grad()
    x, g = data((4, 32), 3, 3.0), data((4, 8), 4, 1e-3)
    s_before = scales(m)            # what the forward casts use
    xt = mp.tensor(x, requires_grad=True)
    with mp.amp.fp8_autocast():
        y = m(xt)
    s_grad = scales(m)[2]           # what the backward cast uses: updated at this region's exit
    y.backward(mp.tensor(g))
    assert np.all(s_before != 1) and s_grad != 1
    w, b = m.weight.numpy().astype(np.float64), m.bias.numpy().astype(np.float64)
    qx, qw = quantize(x, s_before[0], E4M3), quantize(w, s_before[1], E4M3)
    qg = quantize(g, s_grad, E5M2)
    close(y.numpy(), qx @ qw.T + b)
    close(xt.grad.numpy(), qg @ qw)
    close(m.weight.grad.numpy(), qg.T @ qx)
    close(m.bias.grad.numpy(), g.astype(np.float64).sum(0))   # bgrad from the unquantized gradient
    # the gradient really was quantized (to E5M2, coarser than E4M3): the unquantized GEMM differs
    assert not np.allclose(xt.grad.numpy(), g.astype(np.float64) @ qw, rtol=1e-3, atol=0)
    assert not np.allclose(xt.grad.numpy(), quantize(g, s_grad, E4M3) @ qw, rtol=1e-3, atol=0)


@pytest.mark.parametrize("power_2", [False, True])
def test_current_scaling_equals_the_reference(power_2):
    m = linear(bias=False)
    x, g = data((5, 32), 5, 100.0), data((5, 8), 6, 1e-4)
    y, dx = step(m, x, g, mp.amp.CurrentScaling(use_power_2_scales=power_2))

    def scale(a, fmt):
        s = np.float32(MAX[fmt]) / np.float32(np.abs(a).max())
        return np.float32(2.0 ** np.floor(np.log2(s))) if power_2 else s
    w = m.weight.numpy()
    qx, qw, qg = quantize(x, scale(x, E4M3), E4M3), quantize(w, scale(w, E4M3), E4M3), quantize(g, scale(g, E5M2), E5M2)
    close(y.numpy(), qx @ qw.T)
    close(dx.numpy(), qg @ qw)
    close(m.weight.grad.numpy(), qg.T @ qx)
    assert not hasattr(m, "fp8_scale")   # current scaling keeps no state


def test_e4m3_format_quantizes_the_gradient_to_e4m3():
    m = linear(bias=False)
    x, g = data((4, 32), 7), data((4, 8), 8)
    recipe = mp.amp.CurrentScaling(fp8_format=mp.amp.Format.E4M3)
    _, dx = step(m, x, g, recipe)
    w = m.weight.numpy()
    sw = np.float32(448.0) / np.abs(w).max()
    sg = np.float32(448.0) / np.abs(g).max()
    close(dx.numpy(), quantize(g, sg, E4M3) @ quantize(w, sw, E4M3))


# ---- MXFP8 ----
def mx_quantize(a, fmt):
    """The OCP MX rule per block of 32 along the last dimension: X = 2**(floor(log2(amax)) - emax_elem)."""
    a = np.asarray(a, np.float32)
    blocks = a.reshape(a.shape[0], -1, 32)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    emax = {E4M3: 8, E5M2: 15}[fmt]
    shared = np.clip(np.floor(np.log2(np.where(amax == 0, 2.0 ** -126, amax))) - emax, -127, 127)
    q = np.clip(blocks / np.float32(2.0) ** shared.astype(np.float32), -MAX[fmt], MAX[fmt])
    return (q.astype(getattr(ml_dtypes, fmt)).astype(np.float64) * 2.0 ** shared).reshape(a.shape)


@pytest.mark.parametrize("fmt", [mp.amp.Format.E4M3, mp.amp.Format.HYBRID], ids=["e4m3", "hybrid"])
def test_mxfp8_forward_and_backward_equal_the_ocp_reference(fmt):
    m = linear(64, 32)
    # blocks of very different magnitudes: a per-tensor scale would flush the small ones
    x = data((32, 64), 150) * np.repeat([1e-3, 1e2], 32)[None, :].astype(np.float32)
    g = data((32, 32), 151, 1e-2)
    y, dx = step(m, x, g, mp.amp.MXFP8BlockScaling(fp8_format=fmt))
    w, b = m.weight.numpy(), m.bias.numpy().astype(np.float64)
    fwd, bwd = fmt.forward, fmt.backward
    def near(actual, expected):   # float32 sums of terms up to ~100: within float32 rounding of the largest
        close(actual, expected, atol=1e-6 * np.abs(expected).max())
    near(y.numpy(), mx_quantize(x, fwd) @ mx_quantize(w, fwd).T + b)
    near(dx.numpy(), mx_quantize(g, bwd) @ mx_quantize(w.T, fwd).T)           # blocks along out_features
    near(m.weight.grad.numpy(), mx_quantize(g.T, bwd) @ mx_quantize(x.T, fwd).T)   # blocks along the batch
    close(m.bias.grad.numpy(), g.astype(np.float64).sum(0))
    assert not hasattr(m, "fp8_scale")


def test_mxfp8_refuses_dimensions_off_the_block():
    recipe = mp.amp.MXFP8BlockScaling()
    with pytest.raises(ValueError, match="in_features to be a multiple of 32"):
        with mp.amp.fp8_autocast(recipe=recipe):
            mp.nn.Linear(48, 32)(mp.randn(32, 48))
    m = mp.nn.Linear(32, 32)
    with pytest.raises(ValueError, match="batch .* multiple of 32"):
        with mp.amp.fp8_autocast(recipe=recipe):
            m(mp.randn(5, 32))
    with mp.amp.fp8_autocast(recipe=recipe), mp.no_grad():   # without gradients any batch works
        assert m(mp.randn(5, 32)).shape == (5, 32)


# ---- delayed scaling's state ----
def test_delayed_trajectory_follows_the_formula():
    recipe = mp.amp.DelayedScaling(margin=1, amax_history_len=3)
    m = linear(16, 4)
    w_amax = np.float32(np.abs(m.weight.numpy()).max())
    history, scale = np.zeros((3, 3), np.float32), np.ones(3, np.float32)
    fmts = (E4M3, E4M3, E5M2)
    grad_amax = np.float32(0)        # the previous backward's, folded in at this exit
    for k, (xs, gs) in enumerate([(1.0, 1e-2), (50.0, 1e-5), (0.1, 3.0), (2.0, 1e-3), (0.5, 1e-1)]):
        x, g = data((6, 16), 10 + k, xs), data((6, 4), 20 + k, gs)
        step(m, x, g, recipe)
        m.weight.grad = None
        # Transformer Engine's rule, replayed: roll in the new amax, amax = max(history), scale = max / 2**margin / amax
        for row, amax in enumerate((np.abs(x).max(), w_amax, grad_amax)):
            if amax > 0:
                history[row] = np.append(history[row, 1:], amax)
                scale[row] = np.float32(MAX[fmts[row]] / 2) / history[row].max()
        grad_amax = np.float32(np.abs(g).max())
        np.testing.assert_array_equal(m.fp8_amax_history.numpy(), history)
        np.testing.assert_array_equal(m.fp8_scale.numpy(), scale)


def test_most_recent_uses_the_newest_amax():
    recipe = mp.amp.DelayedScaling(amax_history_len=4, amax_compute_algo="most_recent")
    m = linear(16, 4)
    for xs in (10.0, 0.5):
        x = data((3, 16), 30, xs)
        step(m, x, np.ones((3, 4), np.float32), recipe)
    assert m.fp8_scale.numpy()[0] == np.float32(448.0) / np.abs(x).max()


def test_one_update_call_for_all_modules_at_exit(monkeypatch):
    calls = []
    real = scaling.delayed_update
    monkeypatch.setattr(scaling, "delayed_update", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    net = mp.nn.Sequential(mp.nn.Linear(8, 8), mp.nn.ReLU(), mp.nn.Linear(8, 8), mp.nn.Linear(8, 2))
    with mp.amp.fp8_autocast():
        with mp.amp.fp8_autocast():      # a nested region does not update
            net(mp.randn(4, 8))
        assert calls == []
        net(mp.randn(4, 8))
    assert len(calls) == 1 and calls[0][0] >= 9   # every module's three rows, in one call


def test_evaluation_under_no_grad_leaves_the_state_as_training_left_it():
    """A forward under no_grad uses the scales, records no amax and its region's exit updates nothing: the
    training that follows is that of a run without the evaluation."""
    x, g = data((4, 32), 40, 3.0), data((4, 8), 41, 1e-3)
    evaluated, plain = linear(seed=5), linear(seed=5)   # trained one after the other: an exit updates every module
    step(evaluated, x, g)
    before = (evaluated.fp8_scale.numpy().copy(), evaluated.fp8_amax_history.numpy().copy())
    with mp.no_grad(), mp.amp.fp8_autocast():
        evaluated(mp.tensor(data((4, 32), 42, 50.0)))     # a batch far larger than any trained on
    np.testing.assert_array_equal(evaluated.fp8_scale.numpy(), before[0])
    np.testing.assert_array_equal(evaluated.fp8_amax_history.numpy(), before[1])
    step(evaluated, x, g)
    after = (evaluated.fp8_scale.numpy().copy(), evaluated.fp8_amax_history.numpy().copy())
    step(plain, x, g)
    step(plain, x, g)
    np.testing.assert_array_equal(after[0], plain.fp8_scale.numpy())
    np.testing.assert_array_equal(after[1], plain.fp8_amax_history.numpy())


def test_scales_used_are_from_the_previous_update():
    m = linear(16, 4)
    x = data((4, 16), 40, 10.0)
    with mp.amp.fp8_autocast():
        m(mp.tensor(x))
        np.testing.assert_array_equal(m.fp8_scale.numpy(), [1, 1, 1])   # nothing changes inside the region
        y = m(mp.tensor(x))
    w, b = m.weight.numpy(), m.bias.numpy()
    close(y.numpy(), quantize(x, 1, E4M3) @ quantize(w, 1, E4M3).T + b)
    assert m.fp8_scale.numpy()[0] == np.float32(448.0) / np.abs(x).max()


def test_state_dict_round_trip_into_a_fresh_module():
    m = linear(16, 4)
    for k in range(3):
        step(m, data((4, 16), 50 + k, 5.0), data((4, 4), 60 + k))
    sd = m.state_dict()
    assert set(sd) == {"weight", "bias", "fp8_amax_history", "fp8_scale", "fp8_amax"}
    assert tuple(sd["fp8_amax_history"].shape) == (3, 1024) and tuple(sd["fp8_scale"].shape) == (3,)
    np.testing.assert_array_equal(sd["fp8_amax"].numpy(), [0, 0, np.abs(data((4, 4), 62)).max()])  # the last grad
    fresh = mp.nn.Linear(16, 4)
    fresh.load_state_dict(sd)
    for name in ("fp8_amax_history", "fp8_scale", "fp8_amax"):
        np.testing.assert_array_equal(getattr(fresh, name).numpy(), getattr(m, name).numpy())
    x = mp.tensor(data((4, 16), 70, 5.0))
    with mp.amp.fp8_autocast():
        a, b = m(x), fresh(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(fresh.fp8_scale.numpy(), m.fp8_scale.numpy())


def test_history_length_mismatch_is_refused():
    m = linear(16, 4)
    with mp.amp.fp8_autocast():
        m(mp.randn(2, 16))
    with pytest.raises(ValueError, match="amax_history_len=8"):
        with mp.amp.fp8_autocast(recipe=mp.amp.DelayedScaling(amax_history_len=8)):
            m(mp.randn(2, 16))


# ---- checkpoints and moves between steps ----
def train(m, steps, recipe, start=0):
    """Steps start..start+steps-1 of a loop whose second step has a gradient 10x larger than the others."""
    for k in range(start, start + steps):
        m.weight.grad = m.bias.grad = None
        step(m, data((8, 16), 300 + k), data((8, 4), 310 + k, 10.0 if k == 1 else 1.0), recipe)


def fp8_state(m):
    return [getattr(m, n).cpu().numpy().copy() for n in ("fp8_amax_history", "fp8_scale", "fp8_amax")]


def test_a_checkpoint_between_steps_resumes_bit_for_bit():
    """The gradients' amaxes recorded during a backward wait in the module's fp8_amax until the next exit, so a
    checkpoint taken in between (mp.save, mp.load, load_state_dict into a fresh module) keeps them: the resumed
    run's state, outputs and gradients are those of the run that never stopped."""
    import io
    recipe = mp.amp.DelayedScaling(amax_history_len=4)
    straight, first = linear(16, 4), linear(16, 4)
    train(straight, 4, recipe)
    want, want_grad = fp8_state(straight), straight.weight.grad.numpy().copy()   # before an exit updates it again
    train(first, 2, recipe)
    buffer = io.BytesIO()
    mp.save(first.state_dict(), buffer)
    buffer.seek(0)
    resumed = linear(16, 4, seed=9)   # other weights: everything comes from the checkpoint
    resumed.load_state_dict(mp.load(buffer))
    train(resumed, 2, recipe, start=2)
    for got, expected in zip(fp8_state(resumed), want):
        np.testing.assert_array_equal(got, expected)
    assert want[0][2, 2] == np.float32(np.abs(data((8, 4), 311, 10.0)).max())   # the large gradient, kept
    np.testing.assert_array_equal(resumed.weight.grad.numpy(), want_grad)


def test_a_module_moved_between_steps_keeps_its_pending_amaxes(device):
    """Module.to moves fp8_amax with the other buffers: a move between a backward and the next exit loses nothing."""
    recipe = mp.amp.DelayedScaling(amax_history_len=4)
    straight, moved = linear(16, 4), linear(16, 4)
    train(straight, 3, recipe)
    want = fp8_state(straight)
    train(moved, 2, recipe)
    moved.to(device)
    x, g = data((8, 16), 302), data((8, 4), 312)
    xt = mp.tensor(x, device=device, requires_grad=True)
    with mp.amp.fp8_autocast(recipe=recipe):
        y = moved(xt)
    y.backward(mp.tensor(g, device=device))
    assert moved.fp8_amax.device.type == device
    for got, expected in zip(fp8_state(moved), want):
        np.testing.assert_array_equal(got, expected)
    moved.to("cpu")   # and back, its pending grad amax with it
    np.testing.assert_array_equal(fp8_state(moved)[2], want[2])


def test_a_failed_load_leaves_no_fp8_buffers_behind():
    """Module.load_state_dict's promise: a load refused by its checks leaves the module as it was, so the FP8
    buffers the checkpoint's state made (the load pre-hook) are taken back, in any module of the tree."""
    src = mp.nn.Sequential(mp.nn.Linear(32, 16), mp.nn.ReLU(), mp.nn.Linear(16, 16))
    with mp.amp.fp8_autocast():
        src(mp.randn(4, 32))
    for dst in (mp.nn.Linear(32, 32), mp.nn.Sequential(mp.nn.Linear(32, 16), mp.nn.ReLU(), mp.nn.Linear(16, 8))):
        sd = src[0].state_dict() if isinstance(dst, mp.nn.Linear) else src.state_dict()
        before = {k: v.numpy().copy() for k, v in dst.state_dict().items()}
        with pytest.raises(RuntimeError, match="size mismatch"):
            dst.load_state_dict(sd)
        after = dst.state_dict()
        assert set(after) == set(before) and all(np.array_equal(after[k].numpy(), before[k]) for k in before)
        assert all(m._fixed_dtype_buffers == frozenset() for m in dst.modules())
        with mp.amp.fp8_autocast(recipe=mp.amp.DelayedScaling(amax_history_len=4)):   # a fresh state, as before
            dst(mp.randn(4, 32))


@pytest.mark.parametrize("name, values, rule", [
    ("fp8_scale", [1.0, 0.0, 1.0], "finite and > 0"), ("fp8_scale", [1.0, float("nan"), 1.0], "finite and > 0"),
    ("fp8_scale", [float("inf"), 1.0, 1.0], "finite and > 0"), ("fp8_scale", [1.0, -2.0, 1.0], "finite and > 0"),
    ("fp8_amax_history", float("nan"), "finite and >= 0"), ("fp8_amax_history", -1.0, "finite and >= 0"),
    ("fp8_amax", [0.0, -1.0, 0.0], ">= 0")])
def test_a_checkpoint_with_an_unusable_fp8_state_is_refused(name, values, rule):
    src = linear(16, 4)
    step(src, data((4, 16), 320), data((4, 4), 321), mp.amp.DelayedScaling(amax_history_len=4))
    for dst in (linear(16, 4, seed=1), src):   # a fresh module (no buffers yet) and one with its own state
        sd = {k: v.clone() for k, v in src.state_dict().items()}
        if name == "fp8_amax_history":
            sd[name][1, -1] = values
        else:
            sd[name] = mp.tensor(values)
        before = {k: v.numpy().copy() for k, v in dst.state_dict().items()}
        with pytest.raises(ValueError, match=f"Linear.load_state_dict: {name} must be {rule}"):
            dst.load_state_dict(sd)
        after = dst.state_dict()
        assert set(after) == set(before) and all(np.array_equal(after[k].numpy(), before[k]) for k in before)


def test_pending_amaxes_may_be_inf_or_nan_in_a_checkpoint():
    """An overflow's amax (inf, NaN) recorded by a backward is a valid pending value: the update skips its row."""
    src = linear(16, 4)
    step(src, data((4, 16), 330), data((4, 4), 331), mp.amp.DelayedScaling(amax_history_len=4))
    sd = src.state_dict()
    sd["fp8_amax"] = mp.tensor([0.0, 0.0, float("nan")])
    fresh = linear(16, 4)
    fresh.load_state_dict(sd)
    x = data((4, 16), 332)
    step(fresh, x, data((4, 4), 333), mp.amp.DelayedScaling(amax_history_len=4))
    np.testing.assert_array_equal(fresh.fp8_amax_history.numpy()[0], [0, 0, np.abs(data((4, 16), 330)).max(),
                                                                       np.abs(x).max()])
    assert not fresh.fp8_amax_history.numpy()[2].any() and fresh.fp8_scale.numpy()[2] == 1   # the NaN row skipped


# ---- nested regions: the innermost decides ----
@pytest.mark.parametrize("outer", [mp.amp.DelayedScaling(), mp.amp.CurrentScaling(), mp.amp.MXFP8BlockScaling()],
                         ids=["delayed", "current", "mxfp8"])
def test_a_module_is_updated_with_the_recipe_its_casts_used(outer):
    """The outermost region's exit, whatever its recipe, updates each module with the recipe of the innermost
    region it ran in: its margin, history length, format and algorithm."""
    inner = [mp.amp.DelayedScaling(amax_history_len=4, margin=3),
             mp.amp.DelayedScaling(amax_history_len=8, fp8_format=mp.amp.Format.E4M3),
             mp.amp.DelayedScaling(amax_history_len=2, amax_compute_algo="most_recent")]
    mods = [linear(16, 4, seed=s) for s in range(3)]
    x1, x2, g = data((4, 16), 340, 8.0), data((4, 16), 341, 2.0), data((4, 4), 342, 1e-2)
    for x in (x1, x2):
        outs = []
        with mp.amp.fp8_autocast(recipe=outer):
            for m, recipe in zip(mods, inner):
                with mp.amp.fp8_autocast(recipe=recipe):
                    outs.append(m(mp.tensor(x)))
        for y in outs:
            y.backward(mp.tensor(g))
    with mp.amp.fp8_autocast(recipe=outer):   # folds the gradients' amaxes in
        pass
    for m, recipe in zip(mods, inner):
        n, fmt = recipe.amax_history_len, recipe.fp8_format
        amaxes = [(np.abs(x1).max(), np.abs(x2).max()), (np.abs(m.weight.numpy()).max(),) * 2, (np.abs(g).max(),) * 2]
        history = np.zeros((3, n), np.float32)
        history[:, -2:] = np.float32(amaxes)
        pick = history[:, -1] if recipe.amax_compute_algo == "most_recent" else history.max(axis=1)
        want = np.float32([MAX[fmt.forward], MAX[fmt.forward], MAX[fmt.backward]]) / np.float32(2.0 ** recipe.margin)
        np.testing.assert_array_equal(m.fp8_amax_history.numpy(), history)
        np.testing.assert_array_equal(m.fp8_scale.numpy(), want / pick)


def test_one_update_call_per_recipe_and_the_reduce_follows_each_recipe(monkeypatch):
    """Modules under different recipes are updated in one delayed_update call per recipe; the all-reduce carries,
    in one flat buffer, the rows of the recipes with reduce_amax, and those of reduce_amax=False stay local."""
    calls = []
    real = scaling.delayed_update
    monkeypatch.setattr(scaling, "delayed_update", lambda *a, **k: calls.append((a[0].shape, k["margin"])) or
                        real(*a, **k))
    recipes = [mp.amp.DelayedScaling(amax_history_len=4), mp.amp.DelayedScaling(amax_history_len=4, margin=1),
               mp.amp.DelayedScaling(amax_history_len=4, reduce_amax=False)]
    mods = [linear(16, 4, seed=s) for s in range(4)]
    x = mp.tensor(data((4, 16), 350))
    with mp.amp.fp8_autocast(recipe=recipes[0]):
        for m, recipe in zip(mods, recipes + [mp.amp.DelayedScaling(amax_history_len=4)]):   # equal recipes: one group
            with mp.amp.fp8_autocast(recipe=recipe):
                m(x)
    local = np.stack([m.fp8_amax_history.numpy()[:, -1] for m in mods])
    for m in mods:   # the same step again, beside another rank whose amaxes are twice as large
        m.fp8_amax_history._array[...] = 0
    group = OtherRank(2 * np.concatenate([local[0], local[3], local[1]]))
    monkeypatch.setattr(dist_pg, "_group", group)
    calls.clear()
    with mp.amp.fp8_autocast(recipe=mp.amp.CurrentScaling()):
        for m, recipe in zip(mods, recipes + [mp.amp.DelayedScaling(amax_history_len=4)]):
            with mp.amp.fp8_autocast(recipe=recipe):
                m(x)
    assert calls == [((6, 4), 0), ((3, 4), 1), ((3, 4), 0)]
    assert [(shape, op) for shape, op, _ in group.calls] == [((9,), "max")]
    np.testing.assert_array_equal(group.calls[0][2], np.concatenate([local[0], local[3], local[1]]))
    got = np.stack([m.fp8_amax_history.numpy()[:, -1] for m in mods])
    np.testing.assert_array_equal(got[[0, 1, 3]], 2 * local[[0, 1, 3]])
    np.testing.assert_array_equal(got[2], local[2])


# ---- nesting and accuracy ----
def test_nested_in_autocast_outputs_its_dtype():
    m = linear(16, 4)
    x = data((3, 16), 80)
    xt = mp.tensor(x, requires_grad=True)
    with mp.autocast("cpu", dtype=mp.bfloat16):
        with mp.amp.fp8_autocast():
            y = m(xt)
        z = (y * 2).sum()       # a non-GEMM op follows autocast as usual
    assert y.dtype == mp.bfloat16
    w, b = m.weight.numpy(), m.bias.numpy()
    ref = (quantize(x, 1, E4M3) @ quantize(w, 1, E4M3).T + b).astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.float().numpy(), ref.astype(np.float32))
    z.backward()
    assert xt.grad.dtype == mp.float32 and m.weight.grad.dtype == mp.float32 and m.bias.grad.dtype == mp.float32


def test_bfloat16_input_outside_autocast_keeps_its_dtype():
    m = linear(16, 4)
    with mp.amp.fp8_autocast():
        y = m(mp.randn(3, 16).to(mp.bfloat16))
    assert y.dtype == mp.bfloat16


@pytest.mark.parametrize("recipe", [mp.amp.DelayedScaling(), mp.amp.CurrentScaling()], ids=["delayed", "current"])
def test_mlp_gradients_close_to_float32(recipe):
    def mlp():
        mp.manual_seed(1)
        return mp.nn.Sequential(mp.nn.Linear(64, 128), mp.nn.ReLU(), mp.nn.Linear(128, 10))
    ref, net = mlp(), mlp()
    x, t = mp.tensor(data((32, 64), 90)), mp.tensor(data((32, 10), 91))
    for _ in range(3):                   # delayed scaling: scales settle on the data first
        net.zero_grad()
        with mp.amp.fp8_autocast(recipe=recipe):
            loss = ((net(x) - t) ** 2).mean()
        loss.backward()
    ((ref(x) - t) ** 2).mean().backward()
    # Measured: the last layer's gradients are ~6-8% off (E4M3 values, one E5M2 gradient cast); the first
    # layer's ~20% (a second E5M2 cast, and ReLU's mask flips where quantization changes a preactivation's sign)
    bounds = [0.3, 0.3, 0.1, 0.1]
    for bound, p, q in zip(bounds, net.parameters(), ref.parameters()):
        a, b = p.grad.numpy().ravel(), q.grad.numpy().ravel()
        assert np.linalg.norm(a - b) / np.linalg.norm(b) < bound
        assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) > 0.95   # the same direction


def test_functional_linear_is_not_quantized():
    x, w = mp.randn(3, 16), mp.randn(4, 16)
    with mp.amp.fp8_autocast():
        y = mp.nn.functional.linear(x, w)
    np.testing.assert_array_equal(y.numpy(), mp.nn.functional.linear(x, w).numpy())


def test_disabled_region_runs_the_plain_linear():
    m = linear(16, 4)
    x = mp.randn(3, 16)
    with mp.amp.fp8_autocast(enabled=False):
        y = m(x)
    np.testing.assert_array_equal(y.numpy(), m.__class__.forward(m, x).numpy())
    assert not hasattr(m, "fp8_scale")


# ---- hostile inputs ----
def test_all_zero_input_keeps_the_state():
    m = linear(16, 4)
    step(m, data((4, 16), 100, 4.0), data((4, 4), 101))
    before_h, before_s = m.fp8_amax_history.numpy().copy(), scales(m)
    y, dx = step(m, np.zeros((4, 16), np.float32), np.zeros((4, 4), np.float32))
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(m.bias.numpy(), (4, 4)))
    assert np.all(dx.numpy() == 0)
    np.testing.assert_array_equal(m.fp8_amax_history.numpy()[0], before_h[0])   # input row: amax 0, skipped
    assert m.fp8_scale.numpy()[0] == before_s[0]


def test_inf_in_the_input_saturates_and_leaves_the_scales_finite():
    m = linear(16, 4)
    step(m, data((4, 16), 110, 4.0), data((4, 4), 111))
    before_h, before_s = m.fp8_amax_history.numpy().copy(), scales(m)
    x = data((4, 16), 112, 4.0)
    x[1, 3] = np.inf
    y, _ = step(m, x, data((4, 4), 113))
    assert np.all(np.isfinite(y.numpy()))                  # inf saturates to 448 / scale
    assert np.all(np.isfinite(m.fp8_scale.numpy())) and np.all(np.isfinite(m.fp8_amax_history.numpy()))
    np.testing.assert_array_equal(m.fp8_amax_history.numpy()[0], before_h[0])   # an overflow step is skipped
    assert m.fp8_scale.numpy()[0] == before_s[0]


def test_empty_batch():
    m = linear(16, 4)
    step(m, data((4, 16), 120), data((4, 4), 121))
    with mp.amp.fp8_autocast():     # folds in the gradient amax of that step
        pass
    before, before_h = scales(m), m.fp8_amax_history.numpy().copy()
    m.zero_grad()
    y, dx = step(m, np.zeros((0, 16), np.float32), np.zeros((0, 4), np.float32))
    with mp.amp.fp8_autocast():     # folds in the (empty) gradient's amax 0
        pass
    assert y.shape == (0, 4) and dx.shape == (0, 16)
    assert np.all(m.weight.grad.numpy() == 0)
    np.testing.assert_array_equal(scales(m)[[0, 2]], before[[0, 2]])
    np.testing.assert_array_equal(m.fp8_amax_history.numpy()[[0, 2]], before_h[[0, 2]])


def test_bad_recipes_and_flags_are_refused():
    with pytest.raises(TypeError, match="fp8_autocast: recipe must be"):
        mp.amp.fp8_autocast(recipe="delayed")
    with pytest.raises(TypeError, match="fp8_autocast: recipe must be"):
        mp.amp.fp8_autocast(recipe=mp.amp.Format.HYBRID)
    with pytest.raises(TypeError, match="fp8_autocast: recipe must be"):
        mp.amp.fp8_autocast(recipe=mp.amp.DelayedScaling)     # the class, not a recipe
    with pytest.raises(TypeError, match="enabled must be a bool"):
        mp.amp.fp8_autocast(enabled=1)
    with pytest.raises(ValueError, match="fp8_group must be None: mixprec.distributed has one process group"):
        mp.amp.fp8_autocast(fp8_group="world")
    assert fp8_region.active() is None


def test_float64_input_is_refused_and_the_state_untouched():
    m = linear(16, 4)
    with pytest.raises(TypeError, match="fp8_autocast: .* float64"):
        with mp.amp.fp8_autocast():
            m(mp.randn(2, 16, dtype=mp.float64))
    assert not hasattr(m, "fp8_scale") and fp8_region.active() is None


# ---- data parallelism (the multi-process runs are in test_distributed_mpi.py) ----
class OtherRank:
    """A process group of two ranks in one process: all_reduce records each call and combines the array with
    the other rank's values (`other`) as a MAX all-reduce would."""
    name, rank, world_size, device = "mpi", 0, 2, mp.device("cpu")

    def __init__(self, other):
        self.other, self.calls = other, []

    def all_reduce(self, a, op):
        self.calls.append((a.shape, op, mp.backend.devices.to_device(a, mp.backend.devices.CPU).copy()))
        a[...] = mp.backend.array_module(a).maximum(a, mp.backend.array_module(a).asarray(self.other))

    def close(self):
        pass


def last_amaxes(net):
    return np.concatenate([m.fp8_amax_history.cpu().numpy()[:, -1] for m in net])


def test_the_amaxes_of_all_modules_travel_in_one_max_all_reduce(device, monkeypatch):
    """With a group of two ranks, each outermost exit sends every module's recorded amaxes (a NaN as inf) in
    one flat buffer with op "max", and the update takes the maxima; reduce_amax=False keeps them local."""
    def make():
        mp.manual_seed(3)
        return mp.nn.Sequential(mp.nn.Linear(16, 8), mp.nn.Linear(8, 4)).to(device)
    recipe = mp.amp.DelayedScaling(amax_history_len=4)
    alone, together, apart = make(), make(), make()
    x = mp.tensor(data((4, 16), 170, 2.0), device=device)
    with mp.amp.fp8_autocast(recipe=recipe):
        alone(x)                                        # no process group: local amaxes
    local = last_amaxes(alone)                          # (input, weight, grad) of each Linear; no gradients yet
    other = local * np.array([2.0, 0.5, 1.0, 0.5, 3.0, 1.0], np.float32)
    group = OtherRank(other)
    monkeypatch.setattr(dist_pg, "_group", group)
    with mp.amp.fp8_autocast(recipe=recipe):
        together(x)
    with mp.amp.fp8_autocast(recipe=mp.amp.DelayedScaling(amax_history_len=4, reduce_amax=False)):
        apart(x)
    assert [(shape, op) for shape, op, _ in group.calls] == [((6,), "max")]
    np.testing.assert_array_equal(group.calls[0][2], local)
    np.testing.assert_array_equal(last_amaxes(together), np.maximum(local, other))
    np.testing.assert_array_equal(last_amaxes(apart), local)
    bad = x.clone()
    bad[0, 0] = float("nan")
    with mp.amp.fp8_autocast(recipe=recipe):
        together(bad)
    sent = group.calls[1][2]
    assert np.isinf(sent[[0, 3]]).all() and not np.isnan(sent).any()   # the NaN inputs' amaxes went as inf
    np.testing.assert_array_equal(last_amaxes(together)[[0, 3]], np.maximum(local, other)[[0, 3]])  # skipped


# ---- devices ----
def same_steps_on_the_device(cpu, dev, device, recipe, x_shape, g_shape, seed):
    """Two steps of the module `cpu` and its copy `dev` on `device`, in one region (its exit updates both): the
    outputs, input and weight gradients agree within float32 summation order, and the delayed scaling state
    bit for bit (the kernels are bit-exact with their NumPy twins)."""
    for k in range(2):
        x, g = data(x_shape, seed + k, 3.0), data(g_shape, seed + 10 + k, 1e-3)
        xs = [mp.tensor(x, device=where, requires_grad=True) for where in ("cpu", device)]
        with mp.amp.fp8_autocast(recipe=recipe):
            ys = [cpu(xs[0]), dev(xs[1])]
        for y, where in zip(ys, ("cpu", device)):
            y.backward(mp.tensor(g, device=where))
        for got, want in ((ys[1], ys[0]), (xs[1].grad, xs[0].grad), (dev.weight.grad, cpu.weight.grad)):
            want = want.numpy()   # float32 sums in another order: within float32 rounding of the largest term
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    if isinstance(recipe, mp.amp.DelayedScaling):
        np.testing.assert_array_equal(dev.fp8_scale.cpu().numpy(), cpu.fp8_scale.numpy())
        np.testing.assert_array_equal(dev.fp8_amax_history.cpu().numpy(), cpu.fp8_amax_history.numpy())
        assert dev.fp8_scale.device.type == device


@pytest.mark.parametrize("recipe", [mp.amp.DelayedScaling(amax_history_len=4), mp.amp.CurrentScaling(),
                                    mp.amp.MXFP8BlockScaling()], ids=["delayed", "current", "mxfp8"])
def test_on_the_device_equal_to_the_cpu(device, recipe):
    """Two steps on `device` give the CPU's outputs, gradients and scaling state (the kernels are bit-exact
    with their NumPy twins; the GEMMs may sum in another order)."""
    same_steps_on_the_device(linear(32, 32), linear(32, 32).to(device), device, recipe, (32, 32), (32, 32), 130)


def test_a_module_moved_after_a_step_keeps_working(device):
    m = linear(16, 4)
    step(m, data((4, 16), 160, 2.0), data((4, 4), 161))
    scale = scales(m)
    m.to(device)
    x = mp.tensor(data((4, 16), 162, 2.0), device=device)
    with mp.amp.fp8_autocast():
        y = m(x)
    assert y.device.type == device and m.fp8_scale.device.type == device
    np.testing.assert_array_equal(m.fp8_scale.cpu().numpy()[1], scale[1])   # the weight did not change


@pytest.mark.gpu
@pytest.mark.skipif(mp.backend.strict_standin() is None, reason="counts come from the strict CuPy stand-in "
                    "(MIXPREC_CUPY=strict)")
@pytest.mark.parametrize("optimizer", ["SGD", "AdamW"])
@pytest.mark.parametrize("recipe", [mp.amp.DelayedScaling(amax_history_len=4), mp.amp.CurrentScaling(),
                                    mp.amp.MXFP8BlockScaling()], ids=["delayed", "current", "mxfp8"])
def test_a_steady_fp8_step_makes_no_host_sync(recipe, optimizer, monkeypatch):
    """Forward in the region, backward, optimizer step on "cuda": after two warm-up steps (kernels built,
    tables and state made) a step reads nothing back, copies nothing up, waits for nothing, and delayed
    scaling's update of every module is one kernel launch."""
    launched = []
    real_launch = _kernels._launch
    monkeypatch.setattr(_kernels, "_launch", lambda runner, f, name, *a: launched.append(name) or
                        real_launch(runner, f, name, *a))
    mp.manual_seed(0)
    model = mp.nn.Sequential(mp.nn.Linear(32, 64), mp.nn.ReLU(), mp.nn.Linear(64, 32)).to("cuda")
    opt = getattr(mp.optim, optimizer)(model.parameters(), lr=1e-2)
    x, t = mp.randn(32, 32, device="cuda"), mp.randn(32, 32, device="cuda")

    def step():
        opt.zero_grad()
        with mp.amp.fp8_autocast(recipe=recipe):
            loss = ((model(x) - t) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    step(), step()
    launched.clear()
    with mp.backend.strict_standin().counting() as seen:
        loss = step()
    assert (seen.host_reads, seen.uploads, seen.syncs) == (0, 0, 0), seen
    assert launched.count("fp8_delayed_update") == isinstance(recipe, mp.amp.DelayedScaling)
    assert any(name.startswith("fp8_cast") for name in launched)   # the FP8 kernels ran
    assert 0 < loss.item() < 10


# ---- the FP8 state stays float32 ----
@pytest.mark.parametrize("cast", [lambda m: m.half(), lambda m: m.bfloat16(), lambda m: m.to(mp.float16),
                                  lambda m: m.to(dtype=mp.bfloat16)], ids=["half", "bfloat16", "to", "to_dtype"])
def test_dtype_casts_of_a_module_keep_its_fp8_state_float32(cast):
    net = mp.nn.Sequential(mp.nn.Conv1d(4, 8, 3), mp.nn.Flatten(), mp.nn.Linear(32, 4))
    x = mp.tensor(data((2, 4, 6), 170, 2.0))
    with mp.amp.fp8_autocast():
        net(x).sum().backward()
    with mp.amp.fp8_autocast():   # folds in the gradients' amaxes: E5M2 scales far above float16's max
        pass
    state = [(m.fp8_amax_history.numpy().copy(), scales(m)) for m in (net[0], net[2])]
    assert max(s.max() for _, s in state) > 65504
    cast(net)
    for m, (history, scale) in zip((net[0], net[2]), state):
        assert m.weight.dtype != mp.float32
        assert m.fp8_amax_history.dtype == mp.float32 and m.fp8_scale.dtype == mp.float32
        np.testing.assert_array_equal(m.fp8_amax_history.numpy(), history)
        np.testing.assert_array_equal(m.fp8_scale.numpy(), scale)
    with mp.amp.fp8_autocast():   # and the cast model still trains in a region
        y = net(x.to(net[0].weight.dtype))
    assert y.dtype == net[0].weight.dtype and net[0].fp8_scale.dtype == mp.float32


# ---- convolution modules ----
def conv_reference(torch, kind, x, w, g, bias=None, **options):
    """y = conv(x, w) + bias and its input and weight gradients for the output gradient g, by torch in float64."""
    xt = torch.tensor(np.asarray(x, np.float64), requires_grad=True)
    wt = torch.tensor(np.asarray(w, np.float64), requires_grad=True)
    y = getattr(torch.nn.functional, kind)(xt, wt, None, **options)
    y.backward(torch.tensor(np.asarray(g, np.float64)))
    y = y.detach().numpy()
    if bias is not None:
        y = y + np.asarray(bias, np.float64).reshape((-1,) + (1,) * (y.ndim - 2))
    return y, xt.grad.numpy(), wt.grad.numpy()


CONVS = [  # (module, input shape, output gradient shape, the functional op and its options)
    (lambda: mp.nn.Conv1d(4, 6, 3, padding=1), (2, 4, 9), (2, 6, 9), "conv1d", dict(padding=1)),
    (lambda: mp.nn.Conv2d(4, 6, 3, stride=2, groups=2), (2, 4, 7, 7), (2, 6, 3, 3), "conv2d",
     dict(stride=2, groups=2)),
    (lambda: mp.nn.Conv3d(2, 4, (2, 3, 3), dilation=(1, 2, 1)), (1, 2, 4, 7, 5), (1, 4, 3, 3, 3), "conv3d",
     dict(dilation=(1, 2, 1))),
    (lambda: mp.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1), (2, 4, 4, 4), (2, 6, 8, 8),
     "conv_transpose2d", dict(stride=2, padding=1, output_padding=1)),
]
CONV_IDS = ["conv1d", "conv2d_strided_grouped", "conv3d_dilated", "conv_transpose2d"]


@pytest.mark.parametrize("make, x_shape, g_shape, kind, options", CONVS, ids=CONV_IDS)
def test_conv_modules_under_delayed_scaling_equal_the_reference(torch, make, x_shape, g_shape, kind, options):
    mp.manual_seed(3)
    m = make()
    x1, g1 = data(x_shape, 180, 3.0), data(g_shape, 181, 1e-3)
    step(m, x1, g1)          # step 1: the input and weight scales move to the data's
    step(m, x1, g1)          # step 2: the grad_output scale follows step 1's gradients
    m.zero_grad()
    x, g = data(x_shape, 182, 3.0), data(g_shape, 183, 1e-3)
    s_before = scales(m)
    xt = mp.tensor(x, requires_grad=True)
    with mp.amp.fp8_autocast():
        y = m(xt)
    s_grad = scales(m)[2]
    y.backward(mp.tensor(g))
    assert np.all(s_before != 1) and s_grad != 1
    w, b = m.weight.numpy(), m.bias.numpy()
    ref_y, ref_dx, ref_dw = conv_reference(torch, kind, quantize(x, s_before[0], E4M3),
                                           quantize(w, s_before[1], E4M3), quantize(g, s_grad, E5M2), b, **options)
    near = dict(rtol=1e-5, atol=1e-6)
    close(y.numpy(), ref_y, **near)
    close(xt.grad.numpy(), ref_dx, atol=1e-6 * np.abs(ref_dx).max())
    close(m.weight.grad.numpy(), ref_dw, atol=1e-6 * np.abs(ref_dw).max())
    close(m.bias.grad.numpy(), g.astype(np.float64).sum(axis=(0, *range(2, g.ndim))))   # unquantized bgrad
    assert tuple(m.fp8_amax_history.shape) == (3, 1024)


def current_scale(a, fmt, power_2=False):
    s = np.float32(MAX[fmt]) / np.float32(np.abs(a).max())
    return np.float32(2.0 ** np.floor(np.log2(s))) if power_2 else s


@pytest.mark.parametrize("make, x_shape, g_shape, kind, options", CONVS, ids=CONV_IDS)
def test_conv_modules_under_current_scaling_equal_the_reference(torch, make, x_shape, g_shape, kind, options):
    mp.manual_seed(4)
    m = make()
    x, g = data(x_shape, 190, 50.0), data(g_shape, 191, 1e-4)
    y, dx = step(m, x, g, mp.amp.CurrentScaling())
    w, b = m.weight.numpy(), m.bias.numpy()
    ref_y, ref_dx, ref_dw = conv_reference(
        torch, kind, quantize(x, current_scale(x, E4M3), E4M3), quantize(w, current_scale(w, E4M3), E4M3),
        quantize(g, current_scale(g, E5M2), E5M2), b, **options)
    close(y.numpy(), ref_y, atol=1e-6 * np.abs(ref_y).max())
    close(dx.numpy(), ref_dx, atol=1e-6 * np.abs(ref_dx).max())
    close(m.weight.grad.numpy(), ref_dw, atol=1e-6 * np.abs(ref_dw).max())
    assert not hasattr(m, "fp8_scale")


def test_conv_with_a_padding_mode_quantizes_the_padded_input(torch):
    mp.manual_seed(5)
    m = mp.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect", bias=False)
    x, g = data((2, 3, 5, 5), 200, 4.0), data((2, 4, 5, 5), 201)
    y, dx = step(m, x, g, mp.amp.CurrentScaling())
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect")   # reflect adds no new magnitude
    w = m.weight.numpy()
    ref_y, _, ref_dw = conv_reference(torch, "conv2d", quantize(padded, current_scale(x, E4M3), E4M3),
                                      quantize(w, current_scale(w, E4M3), E4M3),
                                      quantize(g, current_scale(g, E5M2), E5M2))
    close(y.numpy(), ref_y, atol=1e-6 * np.abs(ref_y).max())
    close(m.weight.grad.numpy(), ref_dw, atol=1e-6 * np.abs(ref_dw).max())


def test_unbatched_conv_input():
    m = mp.nn.Conv1d(2, 3, 3)
    x = data((2, 8), 205)
    with mp.amp.fp8_autocast(recipe=mp.amp.CurrentScaling()):
        y = m(mp.tensor(x))
        batched = m(mp.tensor(x[None]))
    np.testing.assert_array_equal(y.numpy(), batched.numpy()[0])


def test_conv_and_linear_share_one_update_at_exit(monkeypatch):
    calls = []
    real = scaling.delayed_update
    monkeypatch.setattr(scaling, "delayed_update", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    net = mp.nn.Sequential(mp.nn.Conv2d(3, 4, 3), mp.nn.ReLU(), mp.nn.Flatten(), mp.nn.Linear(36, 2))
    with mp.amp.fp8_autocast():
        net(mp.randn(2, 3, 5, 5))
    assert calls == [(6, 1024)]   # the convolution's three rows and the Linear's, in one call
    assert np.all(scales(net[0])[:2] != 1) and np.all(scales(net[3])[:2] != 1)


def test_conv_state_dict_round_trip_into_a_fresh_module():
    mp.manual_seed(6)
    m = mp.nn.Conv2d(3, 4, 3)
    for k in range(3):
        step(m, data((2, 3, 6, 6), 210 + k, 5.0), data((2, 4, 4, 4), 220 + k))
    sd = m.state_dict()
    assert set(sd) == {"weight", "bias", "fp8_amax_history", "fp8_scale", "fp8_amax"}
    fresh = mp.nn.Conv2d(3, 4, 3)
    fresh.load_state_dict(sd)
    for name in ("fp8_amax_history", "fp8_scale", "fp8_amax"):
        np.testing.assert_array_equal(getattr(fresh, name).numpy(), getattr(m, name).numpy())
    x = mp.tensor(data((2, 3, 6, 6), 230, 5.0))
    with mp.amp.fp8_autocast():
        a, b = m(x), fresh(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(fresh.fp8_scale.numpy(), m.fp8_scale.numpy())


def test_conv_in_autocast_outputs_its_dtype():
    m = mp.nn.Conv2d(3, 4, 3)
    xt = mp.randn(2, 3, 5, 5, requires_grad=True)
    with mp.autocast("cpu", dtype=mp.bfloat16), mp.amp.fp8_autocast():
        y = m(xt)
    assert y.dtype == mp.bfloat16
    y.float().sum().backward()
    assert xt.grad.dtype == mp.float32 and m.weight.grad.dtype == mp.float32 and m.bias.grad.dtype == mp.float32


def test_mxfp8_refuses_convolutions():
    x = mp.randn(1, 32, 4, 4)
    for conv in (mp.nn.Conv2d(32, 32, 1), mp.nn.ConvTranspose2d(32, 32, 1)):
        with pytest.raises(NotImplementedError, match=f"MXFP8BlockScaling does not quantize {type(conv).__name__}.*"
                                                      "use DelayedScaling or CurrentScaling"):
            with mp.amp.fp8_autocast(recipe=mp.amp.MXFP8BlockScaling()):
                conv(x)
    with pytest.raises(NotImplementedError, match="does not quantize conv2d"):
        with mp.amp.fp8_autocast(recipe=mp.amp.MXFP8BlockScaling()):
            mp.nn.functional.conv2d(x, mp.randn(32, 32, 1, 1))
    assert fp8_region.active() is None


@pytest.mark.parametrize("recipe", [mp.amp.DelayedScaling(), mp.amp.CurrentScaling()], ids=["delayed", "current"])
def test_cnn_gradients_close_to_float32(recipe):
    def cnn():
        mp.manual_seed(2)
        return mp.nn.Sequential(mp.nn.Conv2d(3, 16, 3, padding=1), mp.nn.ReLU(), mp.nn.Conv2d(16, 8, 3),
                                mp.nn.Flatten(), mp.nn.Linear(8 * 6 * 6, 10))
    ref, net = cnn(), cnn()
    x, t = mp.tensor(data((8, 3, 8, 8), 240)), mp.tensor(data((8, 10), 241))
    for _ in range(3):                   # delayed scaling: scales settle on the data first
        net.zero_grad()
        with mp.amp.fp8_autocast(recipe=recipe):
            loss = ((net(x) - t) ** 2).mean()
        loss.backward()
    ((ref(x) - t) ** 2).mean().backward()
    # Measured (relative error of weight, bias): the Linear's 8%, 2%; the second convolution's 9%, 5-6%; the
    # first's 15%, 12-15% (more E5M2 gradient casts behind it, and ReLU's mask flips where quantization changes a
    # preactivation's sign)
    bounds = [0.3, 0.3, 0.2, 0.15, 0.15, 0.05]
    for bound, p, q in zip(bounds, net.parameters(), ref.parameters()):
        a, b = p.grad.numpy().ravel(), q.grad.numpy().ravel()
        assert np.linalg.norm(a - b) / np.linalg.norm(b) < bound
        assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) > 0.95   # the same direction


# ---- functional GEMMs ----
def functional_step(fn, arrays, g, recipe, grad_of=None):
    """fn(*tensors) in a region, backward after it; returns (y, the tensors' gradients)."""
    ts = [mp.tensor(a, requires_grad=True) for a in arrays]
    with mp.amp.fp8_autocast(recipe=recipe):
        y = fn(*ts)
    y.backward(mp.tensor(g))
    return y, [t.grad for t in ts]


F = mp.nn.functional
CURRENT_GEMMS = [  # (name, fn, operand shapes, output shape, the reference from quantized x, w, c (float64))
    ("linear", lambda x, w, b: F.linear(x, w, b), [(2, 5, 32), (8, 32), (8,)], (2, 5, 8),
     lambda x, w, b: x @ w.T + b),
    ("matmul_stack_by_matrix", lambda x, w: x @ w, [(3, 4, 16), (16, 8)], (3, 4, 8), lambda x, w: x @ w),
    ("matmul_broadcast_batches", lambda x, w: mp.matmul(x, w), [(2, 1, 4, 16), (3, 16, 8)], (2, 3, 4, 8),
     lambda x, w: x @ w),
    ("matmul_vector", lambda x, w: x @ w, [(16,), (16, 8)], (8,), lambda x, w: x @ w),
    ("mm", lambda x, w: mp.mm(x, w), [(6, 16), (16, 8)], (6, 8), lambda x, w: x @ w),
    ("bmm", lambda x, w: x.bmm(w), [(3, 6, 16), (3, 16, 8)], (3, 6, 8), lambda x, w: x @ w),
    ("addmm", lambda c, x, w: mp.addmm(c, x, w, beta=0.5, alpha=2.0), [(8,), (6, 16), (16, 8)], (6, 8),
     lambda c, x, w: 2.0 * (x @ w) + 0.5 * c),
]


@pytest.mark.parametrize("name, fn, shapes, out, ref", CURRENT_GEMMS, ids=[c[0] for c in CURRENT_GEMMS])
def test_functional_gemms_under_current_scaling_equal_the_reference(torch, name, fn, shapes, out, ref):
    arrays = [data(s, 250 + i, 10.0 ** i) for i, s in enumerate(shapes)]
    g = data(out, 260, 1e-3)
    y, grads = functional_step(fn, arrays, g, mp.amp.CurrentScaling())
    # the reference, by torch in float64: the product of the quantized operands (an added c/bias unquantized);
    # the GEMM operands' gradients for the quantized output gradient, c's for the unquantized one
    gemm = [1, 2] if name == "addmm" else [0, 1]

    def reference(g):
        ts = [torch.tensor(quantize(a, current_scale(a, E4M3), E4M3) if i in gemm else a.astype(np.float64),
                           requires_grad=True) for i, a in enumerate(arrays)]
        out = ref(*ts)
        out.backward(torch.tensor(g))
        return out.detach().numpy(), [t.grad.numpy() for t in ts]
    expected, want = reference(quantize(g, current_scale(g, E5M2), E5M2))
    want = [w if i in gemm else reference(g.astype(np.float64))[1][i] for i, w in enumerate(want)]
    close(y.numpy(), expected, atol=1e-6 * np.abs(expected).max())
    for got, w in zip(grads, want):
        close(got.numpy(), w, atol=1e-6 * np.abs(w).max())
    # the operands really were quantized: the float64 product of the originals differs
    plain = ref(*[torch.tensor(a.astype(np.float64)) for a in arrays]).numpy()
    assert not np.allclose(y.numpy(), plain, rtol=1e-4, atol=0)


@pytest.mark.parametrize("kind, conv, options", [
    ("conv2d", lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2), dict(padding=1, groups=2)),
    ("conv_transpose1d", lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2), dict(stride=2)),
], ids=["conv2d", "conv_transpose1d"])
def test_functional_convolutions_under_current_scaling_equal_the_reference(torch, kind, conv, options):
    x, w, b = ((data((2, 4, 5, 5), 270, 20.0), data((6, 2, 3, 3), 271), data((6,), 272)) if kind == "conv2d"
               else (data((2, 4, 7), 270, 20.0), data((4, 3, 3), 271), data((3,), 272)))
    g = data((2, 6, 5, 5) if kind == "conv2d" else (2, 3, 15), 273, 1e-3)
    y, (dx, dw, db) = functional_step(conv, (x, w, b), g, mp.amp.CurrentScaling())
    ref_y, ref_dx, ref_dw = conv_reference(torch, kind, quantize(x, current_scale(x, E4M3), E4M3),
                                           quantize(w, current_scale(w, E4M3), E4M3),
                                           quantize(g, current_scale(g, E5M2), E5M2), b, **options)
    close(y.numpy(), ref_y, atol=1e-6 * np.abs(ref_y).max())
    close(dx.numpy(), ref_dx, atol=1e-6 * np.abs(ref_dx).max())
    close(dw.numpy(), ref_dw, atol=1e-6 * np.abs(ref_dw).max())
    close(db.numpy(), g.astype(np.float64).sum(axis=(0, *range(2, g.ndim))))


MX_GEMMS = [  # (name, fn, shapes of x and w, output shape)
    ("linear", lambda x, w: F.linear(x, w), [(2, 16, 64), (32, 64)], (2, 16, 32)),
    ("matmul", lambda x, w: x @ w, [(32, 64), (64, 32)], (32, 32)),
    ("bmm", lambda x, w: mp.bmm(x, w), [(2, 32, 64), (2, 64, 32)], (2, 32, 32)),
]


@pytest.mark.parametrize("fmt", [mp.amp.Format.E4M3, mp.amp.Format.HYBRID], ids=["e4m3", "hybrid"])
@pytest.mark.parametrize("name, fn, shapes, out", MX_GEMMS, ids=[c[0] for c in MX_GEMMS])
def test_functional_gemms_under_mxfp8_equal_the_ocp_reference(name, fn, shapes, out, fmt):
    # blocks of very different magnitudes along the contraction: a per-tensor scale would flush the small ones
    x = data(shapes[0], 280) * np.repeat([1e-3, 1e2], 32).astype(np.float32)
    w, g = data(shapes[1], 281), data(out, 282, 1e-2)
    y, (dx, dw) = functional_step(fn, (x, w), g, mp.amp.MXFP8BlockScaling(fp8_format=fmt))
    fwd, bwd = fmt.forward, fmt.backward

    def mx(a, fp8):   # blocks along the last dimension, matrix by matrix
        return np.stack([mx_quantize(m, fp8) for m in a.reshape(-1, *a.shape[-2:])]).reshape(a.shape)

    def T(a):
        return np.swapaxes(a, -1, -2)
    # as matrices: a stack of rows times one matrix is one matrix (x2 (rows, k), g2 (rows, n)); b is (..., k, n)
    b = w.T if name == "linear" else w
    x2, g2 = (x, g) if name == "bmm" else (x.reshape(-1, 64), g.reshape(-1, 32))
    expected_y = mx(x2, fwd) @ T(mx(T(b), fwd))        # blocks along the contraction k
    expected_dx = mx(g2, bwd) @ T(mx(b, fwd))          # dgrad: blocks along n
    expected_db = mx(T(x2), fwd) @ T(mx(T(g2), bwd))   # wgrad: blocks along the rows
    for actual, expected in ((y, expected_y), (dx, expected_dx), (dw, T(expected_db) if name == "linear" else
                                                                  expected_db)):
        # float32 sums of terms up to ~100: within float32 rounding of the largest
        close(actual.numpy().reshape(expected.shape), expected, atol=1e-6 * np.abs(expected).max())


def test_mxfp8_functional_gemms_refuse_dimensions_off_the_block():
    recipe = mp.amp.MXFP8BlockScaling()
    with pytest.raises(ValueError, match="contracted dimension of matmul to be a multiple of 32.*got 48"):
        with mp.amp.fp8_autocast(recipe=recipe):
            mp.randn(32, 48) @ mp.randn(48, 32)
    w = mp.randn(32, 64, requires_grad=True)
    with mp.amp.fp8_autocast(recipe=recipe):
        y = F.linear(mp.randn(5, 64), w)        # forward: fine (its blocks run along the 64 in_features)
    with pytest.raises(ValueError, match="rows .* of linear to be a multiple of 32.*got 5"):
        y.sum().backward()                      # wgrad's blocks run along the 5 rows
    with mp.amp.fp8_autocast(recipe=recipe), mp.no_grad():
        assert F.linear(mp.randn(5, 64), w).shape == (5, 32)


RECIPES = [mp.amp.DelayedScaling(), mp.amp.CurrentScaling(), mp.amp.MXFP8BlockScaling()]


@pytest.mark.parametrize("recipe", RECIPES, ids=["delayed", "current", "mxfp8"])
@pytest.mark.parametrize("shapes", [((0, 32), (32, 32)), ((2, 0, 32), (32, 32)), ((0, 32), (32, 5)),
                                    ((32, 0), (0, 32)), ((2, 3, 0), (0, 32)), ((5, 0), (0, 32))],
                         ids=["no_rows", "no_rows_3d", "no_rows_5_cols", "k0", "k0_3d", "k0_5_rows"])
def test_empty_batches_and_contractions_give_what_they_give_without_the_region(recipe, shapes):
    """An empty batch gives an empty result and a contraction over nothing zeros, forward and backward, as the
    plain product does, whatever the other dimensions (a gradient that is empty or sums nothing has no blocks to
    fit); a Linear on an empty batch too."""
    def run(region):
        a, b = (mp.zeros(*s, requires_grad=True) for s in shapes)
        with region:
            y = a @ b
        y.backward(mp.ones(*y.shape))
        return [t.numpy() for t in (y, a.grad, b.grad)]
    for got, want in zip(run(mp.amp.fp8_autocast(recipe=recipe)), run(mp.amp.fp8_autocast(enabled=False))):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    m, x = linear(32, 32), mp.zeros(0, 32, requires_grad=True)
    with mp.amp.fp8_autocast(recipe=recipe):
        y = m(x)
    y.sum().backward()
    assert y.shape == (0, 32) and x.grad.shape == (0, 32)
    assert not m.weight.grad.numpy().any() and not m.bias.grad.numpy().any()


def mx_matmul(a, b, fmt):
    """The OCP reference of a @ b for matmul's operands of any rank: blocks along the contraction, a vector a
    one row (a) or one column (b); the result has matmul's shape once the vectors' dimensions are dropped."""
    a2, b2 = (a[None] if a.ndim == 1 else a), (b[:, None] if b.ndim == 1 else b)

    def mx(m):   # blocks along the last dimension, matrix by matrix
        return np.stack([mx_quantize(x, fmt) for x in m.reshape(-1, *m.shape[-2:])]).reshape(m.shape)
    return np.matmul(mx(a2), np.swapaxes(mx(np.swapaxes(b2, -1, -2)), -1, -2))


@pytest.mark.parametrize("a_shape, b_shape", [((32,), (32,)), ((32,), (32, 64)), ((64, 32), (32,)),
                                              ((32,), (2, 32, 64)), ((2, 64, 32), (32,))],
                         ids=["1d_1d", "1d_2d", "2d_1d", "1d_3d", "3d_1d"])
def test_mxfp8_matmul_of_vectors_has_matmuls_shape_and_equals_the_ocp_reference(torch, a_shape, b_shape):
    a, b = data(a_shape, 330), data(b_shape, 331)
    want = torch.matmul(torch.tensor(a), torch.tensor(b)).shape
    fwd = mp.amp.Format.HYBRID.forward
    with mp.no_grad(), mp.amp.fp8_autocast(recipe=mp.amp.MXFP8BlockScaling()):
        y = mp.tensor(a) @ mp.tensor(b)
    assert y.shape == tuple(want)
    expected = mx_matmul(a, b, fwd).reshape(want)
    close(y.numpy(), expected, atol=1e-6 * np.abs(expected).max())


def test_mxfp8_gradients_of_vector_products_where_their_gemms_fit_the_blocks():
    """A vector's gradient GEMM contracts over the other operand's 32-multiple dimension and is computed; one
    that would contract over a vector's single row or column is refused (its blocks of 32 would run along 1)."""
    recipe = mp.amp.MXFP8BlockScaling()
    fwd, bwd = recipe.fp8_format.forward, recipe.fp8_format.backward
    v, m = data((32,), 340), data((32, 64), 341)
    g = data((64,), 342, 1e-2)
    vt = mp.tensor(v, requires_grad=True)
    with mp.amp.fp8_autocast(recipe=recipe):
        y = vt @ mp.tensor(m)   # (32) @ (32, 64): v's gradient g @ m.T contracts the 64 columns
    y.backward(mp.tensor(g))
    expected = (mx_quantize(g[None], bwd) @ mx_quantize(m, fwd).T)[0]
    close(vt.grad.numpy(), expected, atol=1e-6 * np.abs(expected).max())
    u = mp.tensor(data((32,), 343), requires_grad=True)
    with mp.amp.fp8_autocast(recipe=recipe):
        y = vt @ u                                    # the 0-d result...
    assert y.shape == ()
    with pytest.raises(ValueError, match="MXFP8BlockScaling needs .* of matmul to be a multiple of 32.*got 1"):
        y.backward()                                  # ...whose gradients contract over one value


def test_mxfp8_frozen_weight_needs_no_batch_blocks_and_makes_no_wgrad_casts():
    """Only the input's gradient (dgrad, along out_features) is computed for a frozen weight: any batch works,
    module and functional, and no wgrad cast is made; a trainable weight still needs batch blocks of 32."""
    recipe = mp.amp.MXFP8BlockScaling()
    fwd, bwd = recipe.fp8_format.forward, recipe.fp8_format.backward
    m = linear(32, 64)
    m.requires_grad_(False)
    w, b = m.weight.numpy(), m.bias.numpy().astype(np.float64)
    for rows in (5, 32):
        x, g = data((rows, 32), 350 + rows), data((rows, 64), 360 + rows, 1e-2)
        for name, forward in (("module", m), ("functional", lambda t: F.linear(t, m.weight, m.bias))):
            casts = []
            xt = mp.tensor(x, requires_grad=True)
            with watch.watching(lambda c: casts.append((c.role, c.columnwise))):
                with mp.amp.fp8_autocast(recipe=recipe):
                    y = forward(xt)
                y.backward(mp.tensor(g))
            expected_dx = mx_quantize(g, bwd) @ mx_quantize(w.T, fwd).T   # blocks along out_features
            close(xt.grad.numpy(), expected_dx, atol=1e-6 * np.abs(expected_dx).max())
            expected_y = mx_quantize(x, fwd) @ mx_quantize(w, fwd).T + b
            close(y.numpy(), expected_y, atol=1e-6 * np.abs(expected_y).max())
            assert casts == [("input", False), ("weight", False), ("grad_output", False), ("weight", True)], name
    m.weight.requires_grad_(True)
    with pytest.raises(ValueError, match="batch \\(5 rows\\) to be a multiple of 32 when the weight's gradient"):
        with mp.amp.fp8_autocast(recipe=recipe):
            m(mp.randn(5, 32, requires_grad=True))


def test_functional_gemms_under_delayed_scaling_follow_autocast():
    """Delayed scaling's state belongs to modules: functional GEMMs run as they would without the region (and under
    an enclosing autocast region, as autocast says), and keep no state."""
    x, w = mp.randn(3, 16), mp.randn(4, 16)
    xi, k = mp.randn(1, 2, 5, 5), mp.randn(3, 2, 3, 3)
    cases = [lambda: F.linear(x, w), lambda: x @ w.T, lambda: mp.mm(x, w.T), lambda: mp.addmm(mp.ones(4), x, w.T),
             lambda: F.conv2d(xi, k)]
    for fn in cases:
        with mp.amp.fp8_autocast():
            y = fn()
        np.testing.assert_array_equal(y.numpy(), fn().numpy())
        with mp.autocast("cpu", dtype=mp.bfloat16):
            with mp.amp.fp8_autocast():
                y = fn()
            expected = fn()
        assert y.dtype == mp.bfloat16
        np.testing.assert_array_equal(y.float().numpy(), expected.float().numpy())


def test_functional_gemms_in_autocast_output_its_dtype():
    x, w = mp.randn(3, 16, requires_grad=True), mp.randn(4, 16, requires_grad=True)
    with mp.autocast("cpu", dtype=mp.bfloat16), mp.amp.fp8_autocast(recipe=mp.amp.CurrentScaling()):
        y = F.linear(x, w)
    assert y.dtype == mp.bfloat16
    xb, wb = x.detach().to(mp.bfloat16).float().numpy(), w.detach().to(mp.bfloat16).float().numpy()
    ref = quantize(xb, current_scale(xb, E4M3), E4M3) @ quantize(wb, current_scale(wb, E4M3), E4M3).T
    ref = ref.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(y.float().numpy(), ref)
    y.float().sum().backward()
    assert x.grad.dtype == mp.float32 and w.grad.dtype == mp.float32


def test_functional_gemms_leave_other_dtypes_alone():
    for dtype in (mp.float64, mp.int64):
        a, b = mp.arange(12, dtype=dtype).reshape(3, 4), mp.arange(8, dtype=dtype).reshape(4, 2)
        with mp.amp.fp8_autocast(recipe=mp.amp.CurrentScaling()):
            y = a @ b
        np.testing.assert_array_equal(y.numpy(), (a @ b).numpy())
        assert y.dtype == dtype


@pytest.mark.parametrize("recipe", [mp.amp.CurrentScaling(), mp.amp.MXFP8BlockScaling()], ids=["current", "mx"])
def test_attention_products_are_not_quantized(recipe):
    """scaled_dot_product_attention and nn.MultiheadAttention's attention are one fused unit: the region leaves
    their two products alone (a head size of 16 is no multiple of MXFP8's 32 and still runs), while the
    attention's projections, functional linears, are quantized."""
    q, k, v = (mp.tensor(data((2, 4, 8, 16), seed), requires_grad=True) for seed in (300, 301, 302))
    F = mp.nn.functional
    with mp.amp.fp8_autocast(recipe=recipe):
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y.sum().backward()
    inside = [t.grad.numpy().copy() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    plain = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    plain.sum().backward()
    np.testing.assert_array_equal(y.numpy(), plain.numpy())
    for got, t in zip(inside, (q, k, v)):
        np.testing.assert_array_equal(got, t.grad.numpy())
    mp.manual_seed(0)
    attention = mp.nn.MultiheadAttention(32, 2, batch_first=True)
    x = mp.tensor(data((2, 32, 32), 303))
    with mp.amp.fp8_autocast(recipe=recipe):
        quantized, _ = attention(x, x, x, need_weights=False)
    plain, _ = attention(x, x, x, need_weights=False)
    assert not np.array_equal(quantized.numpy(), plain.numpy())   # the projections' operands are FP8


def test_the_fp8_path_does_not_quantize_its_own_gemms_again(torch):
    """A backward run inside the region, and Linear's own matrix product, are quantized once: the results equal
    the single-quantization reference."""
    x, w, g = data((4, 32), 290, 5.0), data((8, 32), 291), data((4, 8), 292, 1e-3)
    xt, wt = mp.tensor(x, requires_grad=True), mp.tensor(w, requires_grad=True)
    with mp.amp.fp8_autocast(recipe=mp.amp.CurrentScaling()):
        y = xt @ wt.mT
        y.backward(mp.tensor(g))     # the backward's GEMMs inside the region
    qx, qw = quantize(x, current_scale(x, E4M3), E4M3), quantize(w, current_scale(w, E4M3), E4M3)
    qg = quantize(g, current_scale(g, E5M2), E5M2)
    for actual, expected in ((y, qx @ qw.T), (xt.grad, qg @ qw), (wt.grad, qg.T @ qx)):
        close(actual.numpy(), expected, atol=1e-6 * np.abs(expected).max())
    m = linear(32, 8, bias=False)
    with mp.amp.fp8_autocast(recipe=mp.amp.CurrentScaling()):
        y = m(mp.tensor(x))
    w = m.weight.numpy()
    expected = qx @ quantize(w, current_scale(w, E4M3), E4M3).T
    close(y.numpy(), expected, atol=1e-6 * np.abs(expected).max())


def test_functional_gemms_keep_the_dtype_autocast_gave_their_inputs():
    x, w = mp.randn(3, 16), mp.randn(4, 16)
    xi, k = mp.randn(1, 2, 5, 5), mp.randn(3, 2, 3, 3)
    with mp.autocast("cpu", dtype=mp.bfloat16), mp.amp.override({"linear": "fp32", "conv2d": "fp32"}, "cpu"), \
            mp.amp.fp8_autocast(recipe=mp.amp.CurrentScaling()):
        y, z = F.linear(x, w), F.conv2d(xi, k)
    assert y.dtype == mp.float32 and z.dtype == mp.float32


# ---- devices: convolutions and functional GEMMs ----
@pytest.mark.parametrize("recipe", [mp.amp.DelayedScaling(amax_history_len=4), mp.amp.CurrentScaling()],
                         ids=["delayed", "current"])
def test_conv_on_the_device_equal_to_the_cpu(device, recipe):
    def conv():
        mp.manual_seed(7)
        return mp.nn.Conv2d(4, 6, 3, padding=1)
    same_steps_on_the_device(conv(), conv().to(device), device, recipe, (2, 4, 6, 6), (2, 6, 6, 6), 300)


@pytest.mark.parametrize("recipe", [mp.amp.CurrentScaling(), mp.amp.MXFP8BlockScaling()], ids=["current", "mxfp8"])
def test_functional_gemms_on_the_device_equal_to_the_cpu(device, recipe):
    x, w, b = data((32, 64), 320, 3.0), data((32, 64), 321), data((32,), 322)
    g = data((32, 32), 323, 1e-3)
    results = []
    for where in ("cpu", device):
        ts = [mp.tensor(a, device=where, requires_grad=True) for a in (x, w, b)]
        with mp.amp.fp8_autocast(recipe=recipe):
            y = F.linear(ts[0], ts[1], ts[2]) + ts[0] @ ts[1].mT
        y.backward(mp.tensor(g, device=where))
        assert y.device.type == where
        results.append([y.cpu().numpy()] + [t.grad.cpu().numpy() for t in ts])
    for got, want in zip(*reversed(results)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


# ---- what the FP8 path owes the rest of training ----
@pytest.mark.parametrize("recipe", [mp.amp.DelayedScaling(), mp.amp.CurrentScaling()], ids=["delayed", "current"])
def test_an_overflowing_gradient_reaches_the_grad_scaler(recipe):
    """float16 autocast with a huge loss scale overflows the backward: the gradient cast must not saturate the
    inf into E5M2's max, or the scaler would step on garbage instead of skipping and backing off."""
    steps = {}
    for fp8 in (False, True):
        mp.manual_seed(0)
        layer = mp.nn.Linear(32, 32, bias=False)    # no bias: its unquantized gradient would show the inf anyway
        before = layer.weight.numpy().copy()
        opt = mp.optim.SGD(layer.parameters(), lr=0.1)
        scaler = mp.GradScaler("cpu", init_scale=2.0 ** 40)
        with mp.autocast("cpu", dtype=mp.float16):
            with mp.amp.fp8_autocast(enabled=fp8, recipe=recipe):
                y = layer(mp.randn(32, 32))
            loss = y.float().square().mean()
        scaler.scale(loss).backward()
        finite = bool(layer.weight.grad.isfinite().all().item())
        scaler.step(opt)
        scaler.update()
        steps[fp8] = (finite, scaler.get_scale())
        np.testing.assert_array_equal(layer.weight.numpy(), before)   # the step was skipped
    assert steps[True] == steps[False] == (False, 2.0 ** 39)


def test_a_backward_inside_the_region_leaves_ordinary_gemms_alone():
    """Running backward inside a CurrentScaling region: a product made outside the region gets its plain
    gradients, and attention's backward (16-wide heads) runs under MXFP8 too."""
    a, b = mp.randn(2, 32, 32, requires_grad=True), mp.randn(2, 32, 32, requires_grad=True)
    y = a @ b
    plain, = mp.autograd.grad(y.sum(), a, retain_graph=True)
    with mp.amp.fp8_autocast(recipe=mp.amp.CurrentScaling()):
        inside, = mp.autograd.grad(y.sum(), a)
    np.testing.assert_array_equal(inside.numpy(), plain.numpy())
    q, k, v = (mp.randn(2, 4, 8, 16, requires_grad=True) for _ in range(3))
    with mp.amp.fp8_autocast(recipe=mp.amp.MXFP8BlockScaling()):
        mp.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    assert q.grad.shape == q.shape


def test_double_backward_through_the_fp8_path_is_refused():
    """The quantizers' backward is not differentiable: create_graph then fails clearly instead of silently
    dropping the second-order terms."""
    layer, x = linear(), mp.randn(4, 32, requires_grad=True)
    with mp.amp.fp8_autocast(recipe=mp.amp.CurrentScaling()):
        y = layer(x)
    g, = mp.autograd.grad(y.square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.square().sum().backward()


@pytest.mark.parametrize("recipe", [mp.amp.CurrentScaling(), mp.amp.MXFP8BlockScaling()], ids=["current", "mx"])
def test_double_backward_through_a_functional_fp8_gemm_is_refused(recipe):
    x, w = mp.randn(32, 32, requires_grad=True), mp.randn(32, 32, requires_grad=True)
    with mp.amp.fp8_autocast(recipe=recipe):
        y = x @ w
    g, = mp.autograd.grad(y.square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.square().sum().backward()


@pytest.mark.parametrize("recipe", [mp.amp.CurrentScaling(), mp.amp.MXFP8BlockScaling()], ids=["current", "mx"])
def test_the_region_keeps_quantizing_after_a_backward_inside_it(recipe):
    x, w = mp.randn(32, 32, requires_grad=True), mp.randn(32, 32)
    plain = (x @ w).numpy()
    with mp.amp.fp8_autocast(recipe=recipe):
        first = x @ w
        first.sum().backward()
        second = x @ w
    np.testing.assert_array_equal(second.numpy(), first.numpy())
    assert not np.array_equal(second.numpy(), plain)


def test_a_threads_exit_updates_only_what_that_thread_recorded():
    """Thread B is between two uses of its Linear when thread A's region exits: B's casts and state are those of
    B running alone."""
    import threading
    recipe = mp.amp.DelayedScaling(amax_history_len=4)
    xa, xb = mp.tensor(data((8, 16), 360)), mp.tensor(data((8, 16), 361))

    def b_step(layer, x, pause=lambda: None):
        with mp.amp.fp8_autocast(recipe=recipe):
            h = layer(x)
            pause()
            return layer(h)             # the same module twice in one forward

    results = []
    for threaded in (False, True):
        mp.manual_seed(0)
        b, a = mp.nn.Linear(16, 16), mp.nn.Linear(16, 16)
        b_step(b, xb), b_step(b, xb)
        go, done = threading.Event(), threading.Event()

        def a_step():
            go.wait()
            with mp.amp.fp8_autocast(recipe=recipe):
                a(xa)
            done.set()

        def pause():
            go.set()
            done.wait()

        thread = threading.Thread(target=a_step)
        thread.start()
        if not threaded:
            go.set()
            done.wait()   # A ran before B's step, not in the middle of it
        y = b_step(b, xb * 100, pause if threaded else lambda: None)
        thread.join()
        results.append((y.numpy(), b.fp8_amax_history.numpy().copy(), b.fp8_scale.numpy().copy()))
    for alone, threaded in zip(*results):
        np.testing.assert_array_equal(threaded, alone)


def test_a_refused_reduction_leaves_the_amaxes_for_the_next_exit(monkeypatch):
    layer = linear(16, 4)
    x = mp.tensor(data((4, 16), 370))

    class Refusing(OtherRank):
        def all_reduce(self, a, op):
            raise RuntimeError("the collective failed")

    monkeypatch.setattr(dist_pg, "_group", Refusing(np.zeros(3)))
    with pytest.raises(RuntimeError, match="collective failed"):
        with mp.amp.fp8_autocast(recipe=mp.amp.DelayedScaling(amax_history_len=4)):
            layer(x)
    recorded = layer.fp8_amax.numpy().copy()
    assert recorded[0] > 0 and (layer.fp8_amax_history.numpy() == 0).all()
    monkeypatch.setattr(dist_pg, "_group", OtherRank(np.zeros(3)))
    with mp.amp.fp8_autocast(recipe=mp.amp.DelayedScaling(amax_history_len=4)):
        pass                            # an exit with nothing new: the kept amaxes are updated now
    np.testing.assert_array_equal(layer.fp8_amax_history.numpy()[:, -1], recorded)
    assert (layer.fp8_amax.numpy() == 0).all()


def test_a_checkpoint_history_of_no_columns_is_refused_and_one_without_pending_amaxes_is_named():
    src = linear(16, 4)
    step(src, data((4, 16), 380), data((4, 4), 381), mp.amp.DelayedScaling(amax_history_len=4))
    sd = dict(src.state_dict())
    sd["fp8_amax_history"] = mp.zeros(3, 0)
    with pytest.raises(ValueError, match=r"fp8_amax_history must have shape \(3, amax_history_len\)"):
        linear(16, 4).load_state_dict(sd)
    older = {k: v for k, v in src.state_dict().items() if k != "fp8_amax"}   # a history and a scale, no fp8_amax
    with pytest.raises(RuntimeError, match="fp8_amax"):
        linear(16, 4).load_state_dict(older)
    kept = linear(16, 4)
    kept.load_state_dict(older, strict=False)
    np.testing.assert_array_equal(kept.fp8_scale.numpy(), src.fp8_scale.numpy())
    np.testing.assert_array_equal(kept.fp8_amax_history.numpy(), src.fp8_amax_history.numpy())
