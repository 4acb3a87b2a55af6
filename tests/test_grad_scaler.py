"""GradScaler on the CPU (the NumPy reference path): torch.amp.GradScaler's behaviour.

The CUDA path runs the same state machine on the fused kernels; test_unscale_gpu.py
checks those kernels against the reference this file exercises.
"""
import math
import warnings

import numpy as np
import pytest

import mixprec as mp


# ---- a small model: y = tanh(x @ w1) @ w2, mean squared error ----
def make_params(seed=0, dtype=mp.float32):
    rng = np.random.default_rng(seed)
    w1 = mp.tensor(rng.normal(0, 0.5, (4, 8)).astype(np.float32), dtype=dtype, requires_grad=True)
    w2 = mp.tensor(rng.normal(0, 0.5, (8, 2)).astype(np.float32), dtype=dtype, requires_grad=True)
    return [w1, w2]


def batch(step, n=16):
    rng = np.random.default_rng(100 + step)
    x = mp.tensor(rng.normal(size=(n, 4)).astype(np.float32))
    y = mp.tensor(rng.normal(size=(n, 2)).astype(np.float32))
    return x, y


def loss_of(params, x, y):
    w1, w2 = params
    return ((mp.tanh(x @ w1) @ w2 - y) ** 2).mean()


def snapshot(params):
    return [p._array.copy() for p in params]


def same_bits(a, b):
    return all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def inject(p, index, value):
    """Put a non-finite value into p's gradient (a fresh array: gradients may be read-only views)."""
    g = p.grad.numpy().copy()
    g.flat[index] = value
    p.grad = mp.tensor(g, dtype=p.grad.dtype)


def scaler(**kw):
    kw.setdefault("device", "cpu")
    return mp.amp.GradScaler(**kw)


# ---- construction and the no-GPU default ----
def test_exported_names_and_torch_defaults():
    assert mp.GradScaler is mp.amp.GradScaler
    s = scaler()
    assert s.is_enabled() and s.get_scale() == 65536.0
    assert (s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == (2.0, 0.5, 2000)
    assert s.state_dict() == {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                              "growth_interval": 2000, "_growth_tracker": 0}


@pytest.mark.skipif(mp.is_cuda_available(), reason="checks the behaviour without a usable GPU")
def test_default_cuda_scaler_without_gpu_warns_and_disables_itself_like_torch():
    with pytest.warns(UserWarning, match="CUDA is not available.*disabling"):
        s = mp.GradScaler()
    assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}


@pytest.mark.parametrize("kw, match", [
    (dict(growth_factor=1.0), "growth factor"), (dict(backoff_factor=1.0), "backoff factor"),
    (dict(backoff_factor=0.0), "backoff factor"), (dict(growth_interval=0), "growth_interval"),
    (dict(growth_interval=2.5), "growth_interval"), (dict(init_scale=0.0), "init_scale"),
    (dict(init_scale=float("inf")), "init_scale"), (dict(init_scale=1e39), "float32"),
    (dict(hysteresis=0), "hysteresis"), (dict(min_scale=8.0, max_scale=4.0), "min_scale"),
    (dict(init_scale=2.0, min_scale=4.0), "within"), (dict(device="tpu"), "device"),
])
def test_bad_constructor_arguments_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        scaler(**kw)


def test_disabled_scaler_is_a_pass_through_that_still_answers_getters():
    s = scaler(enabled=False, growth_interval=7)
    params = make_params()
    opt = mp.optim.SGD(params, lr=0.1)
    loss = loss_of(params, *batch(0))
    assert s.scale(loss) is loss
    loss.backward()
    before = snapshot(params)
    s.unscale_(opt)
    assert s.step(opt) is None and not same_bits(before, snapshot(params))
    s.update()
    assert (s.get_scale(), s.get_growth_interval(), s.is_enabled(), s.state_dict()) == (1.0, 7, False, {})
    s.load_state_dict({})  # a disabled scaler ignores checkpoints, as torch's does


# ---- scale() ----
def test_scale_multiplies_tensors_in_nested_lists_and_tuples():
    s = scaler(init_scale=4.0)
    a, b, c = mp.tensor([1.0, 2.0]), mp.tensor(3.0), mp.tensor([0.5])
    out = s.scale([a, (b, [c])])
    assert isinstance(out, list) and isinstance(out[1], tuple) and isinstance(out[1][1], list)
    assert out[0].tolist() == [4.0, 8.0] and out[1][0].item() == 12.0 and out[1][1][0].tolist() == [2.0]
    lazy = s.scale(iter([a]))  # other iterables come back lazily, as in torch
    assert next(lazy).tolist() == [4.0, 8.0]
    with pytest.raises(ValueError, match="Tensor or an iterable"):
        s.scale(3.0)


def test_scaled_half_loss_is_float32_and_backward_scales_the_gradients():
    s = scaler(init_scale=1024.0)
    w = mp.tensor([1.0, -2.0], dtype=mp.bfloat16, requires_grad=True)
    loss = (w * w).sum()
    scaled = s.scale(loss)
    assert scaled.dtype == mp.float32 and scaled.item() == 5.0 * 1024
    scaled.backward()
    assert w.grad.dtype == mp.bfloat16 and w.grad.tolist() == [2048.0, -4096.0]


def test_backward_after_the_scale_changed_is_an_error_not_a_wrong_gradient():
    s = scaler(growth_interval=1)
    params = make_params()
    opt = mp.optim.SGD(params, lr=0.1)
    s.scale(loss_of(params, *batch(0))).backward()
    s.step(opt)
    stale = s.scale(loss_of(params, *batch(1)))
    s.update()  # the scale doubles while `stale` still needs the old one for backward
    with pytest.raises(RuntimeError, match="in-place"):
        stale.backward()


# ---- the typical loop ----
def plain_training(steps, lr=0.05, accumulate=1, clip=None, poison=()):
    params = make_params()
    opt = mp.optim.SGD(params, lr=lr, momentum=0.9)
    for step in range(steps):
        for micro in range(accumulate):
            (loss_of(params, *batch(step * accumulate + micro)) / accumulate).backward()
        if step not in poison:
            if clip:
                mp.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
        opt.zero_grad()
    return params


def test_typical_loop_trains_exactly_like_unscaled_float32_training():
    """Scales are powers of two, so scaling and unscaling float32 gradients is exact."""
    s = scaler(growth_interval=3)
    params = make_params()
    opt = mp.optim.SGD(params, lr=0.05, momentum=0.9)
    scales = []
    for step in range(10):
        loss = loss_of(params, *batch(step))
        s.scale(loss).backward()
        assert s.step(opt) is None and s.last_step_skipped is False
        s.update()
        opt.zero_grad()
        scales.append(s.get_scale())
    assert same_bits(snapshot(params), snapshot(plain_training(10)))
    assert scales == [65536.0 * 2 ** ((i + 1) // 3) for i in range(10)]


def test_clipping_after_unscale_sees_the_true_gradients():
    s = scaler()
    params = make_params()
    opt = mp.optim.SGD(params, lr=0.05, momentum=0.9)
    for step in range(6):
        s.scale(loss_of(params, *batch(step))).backward()
        s.unscale_(opt)
        norm = mp.nn.utils.clip_grad_norm_(params, 0.1)
        assert float(norm) < 100  # a norm of scaled gradients would be ~65536 times larger
        s.step(opt)  # does not unscale a second time
        s.update()
        opt.zero_grad()
    assert same_bits(snapshot(params), snapshot(plain_training(6, clip=0.1)))


def test_gradient_accumulation_over_micro_batches_then_one_step():
    s = scaler(growth_interval=2)
    params = make_params()
    opt = mp.optim.SGD(params, lr=0.05, momentum=0.9)
    n = 4
    for step in range(5):
        for micro in range(n):
            s.scale(loss_of(params, *batch(step * n + micro)) / n).backward()
        s.step(opt)
        s.update()
        opt.zero_grad()
    assert same_bits(snapshot(params), snapshot(plain_training(5, accumulate=n)))
    assert s.get_scale() == 65536.0 * 4  # growth counts iterations (updates), not micro-batches


def test_two_models_two_losses_two_optimizers_share_one_scaler():
    s = scaler(growth_interval=100)
    p0, p1 = make_params(0), make_params(1)
    o0, o1 = mp.optim.SGD(p0, lr=0.1), mp.optim.SGD(p1, lr=0.1)
    x, y = batch(0)
    out0, out1 = mp.tanh(x @ p0[0]) @ p0[1], mp.tanh(x @ p1[0]) @ p1[1]
    loss0 = ((out0 + 0.5 * out1 - y) ** 2).mean()
    loss1 = ((0.3 * out0 - out1 - y) ** 2).mean()
    s.scale(loss0).backward(retain_graph=True)
    s.scale(loss1).backward()
    inject(p1[1], 0, np.nan)  # only model 1 overflows
    b0, b1 = snapshot(p0), snapshot(p1)
    s.unscale_(o0)
    s.step(o0)
    assert s.last_step_skipped is False
    s.step(o1)
    assert s.last_step_skipped is True
    s.update()
    assert not same_bits(b0, snapshot(p0)) and same_bits(b1, snapshot(p1))
    assert s.get_scale() == 32768.0  # found_inf summed over both optimizers: one back-off


def test_gradient_penalty_through_create_graph_on_scaled_outputs():
    """torch's recipe: autograd.grad of the scaled loss, unscale by hand, add the penalty, scale again."""
    def penalised_step(use_scaler):
        s = scaler(init_scale=2.0 ** 12)
        params = make_params()
        opt = mp.optim.SGD(params, lr=0.05)
        for step in range(3):
            loss = loss_of(params, *batch(step))
            if use_scaler:
                grads = mp.autograd.grad(s.scale(loss), params, create_graph=True)
                grads = [g * (1.0 / s.get_scale()) for g in grads]
            else:
                grads = mp.autograd.grad(loss, params, create_graph=True)
            penalty = sum((g ** 2).sum() for g in grads).sqrt()
            total = loss + penalty
            if use_scaler:
                s.scale(total).backward()
                s.step(opt)
                s.update()
            else:
                total.backward()
                opt.step()
            opt.zero_grad()
        return params
    scaled, plain = penalised_step(True), penalised_step(False)
    for a, b in zip(scaled, plain):
        np.testing.assert_allclose(a._array, b._array, rtol=1e-6, atol=1e-7)


# ---- overflow handling ----
def test_injected_inf_and_nan_skip_exactly_those_steps_and_back_off():
    s = scaler(growth_interval=3)
    params = make_params()
    opt = mp.optim.SGD(params, lr=0.05, momentum=0.9)
    poison = {2: np.inf, 5: np.nan, 6: -np.inf}
    scales = []
    for step in range(9):
        s.scale(loss_of(params, *batch(step))).backward()
        if step in poison:
            inject(params[step % 2], 3, poison[step])
        before = snapshot(params)
        s.step(opt)
        assert s.last_step_skipped is (step in poison)
        if step in poison:
            assert same_bits(before, snapshot(params))  # parameters untouched, bit for bit
        s.update()
        scales.append(s.get_scale())
        opt.zero_grad()
    base = 65536.0
    assert scales == [base, base, base / 2, base / 2, base / 2, base / 4, base / 8, base / 8, base / 8]
    # momentum buffers never saw the skipped steps either: same as training without those batches
    assert same_bits(snapshot(params), snapshot(plain_training(9, poison=poison)))
    stats = s.statistics()
    assert (stats["steps"], stats["skipped_steps"], stats["last_overflow_step"]) == (9, 3, 6)
    assert stats["scale_history"] == [(2, base / 2), (5, base / 4), (6, base / 8)]


def test_overflow_from_a_huge_scale_backs_off_until_training_proceeds():
    s = scaler(init_scale=2.0 ** 127, growth_interval=1000)
    w = mp.tensor([3.0e10, -1.0], requires_grad=True)
    opt = mp.optim.SGD([w], lr=1e-12)
    with np.errstate(over="ignore", invalid="ignore"):  # the overflows are the point
        skipped = _train_until_a_step_is_taken(s, w, opt)
    assert 0 < skipped < 200 and math.isfinite(w._array[0]) and s.get_scale() * 6e10 < 3.4e38


def _train_until_a_step_is_taken(s, w, opt):
    skipped = 0
    for _ in range(200):
        s.scale((w * w).sum()).backward()  # d/dw = 6e10: times the scale it overflows float32
        s.step(opt)
        skipped += s.last_step_skipped
        s.update()
        opt.zero_grad()
        if not s.last_step_skipped:
            break
    return skipped


def test_hysteresis_backs_off_only_after_consecutive_overflows():
    s = scaler(hysteresis=2, growth_interval=100)
    w = mp.tensor([1.0], requires_grad=True)
    opt = mp.optim.SGD([w], lr=0.1)
    scales = []
    for bad in [1, 0, 1, 1, 1, 1]:
        s.scale(w.sum()).backward()
        if bad:
            inject(w, 0, np.inf)
        s.step(opt)
        s.update()
        opt.zero_grad()
        scales.append(s.get_scale())
    assert scales == [65536, 65536, 65536, 32768, 32768, 16384]
    assert s.state_dict()["_overflow_tracker"] == 0


def test_bounds_cap_the_scale_and_hitting_the_floor_warns_once():
    s = scaler(init_scale=8.0, min_scale=2.0, max_scale=16.0, growth_interval=1)
    w = mp.tensor([1.0], requires_grad=True)
    opt = mp.optim.SGD([w], lr=0.1)

    def iteration(bad):
        s.scale(w.sum()).backward()
        if bad:
            inject(w, 0, np.nan)
        s.step(opt)
        s.update()
        opt.zero_grad()
        return s.get_scale()
    assert [iteration(0), iteration(0)] == [16.0, 16.0]
    assert [iteration(1), iteration(1), iteration(1)] == [8.0, 4.0, 2.0]
    assert iteration(1) == 2.0  # clamped at the floor: noted on the device, warned at the next step
    with pytest.warns(RuntimeWarning, match="HIT ITS FLOOR"):
        iteration(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        iteration(1)  # only once
    assert s.statistics()["floor_hits"] == 3


# ---- the state machine ----
def ready(s, params=None):
    params = params or make_params()
    opt = mp.optim.SGD(params, lr=0.1)
    s.scale(loss_of(params, *batch(0))).backward()
    return opt


def test_unscale_twice_before_update_is_an_error():
    s = scaler()
    opt = ready(s)
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called on this optimizer since the last update"):
        s.unscale_(opt)


def test_unscale_after_step_and_step_twice_are_errors():
    s = scaler()
    opt = ready(s)
    s.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        s.unscale_(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last update"):
        s.step(opt)
    s.update()
    s.scale(loss_of(opt.param_groups[0]["params"], *batch(1))).backward()
    s.unscale_(opt)  # a new iteration starts clean


def test_methods_before_any_scale_name_the_missing_call():
    s = scaler()
    opt = mp.optim.SGD(make_params(), lr=0.1)
    for call in (lambda: s.unscale_(opt), lambda: s.step(opt), lambda: s.update()):
        with pytest.raises(RuntimeError, match="scaler.scale"):
            call()


def test_update_without_any_inf_check_and_step_without_gradients_are_errors():
    s = scaler()
    ready(s)
    with pytest.raises(RuntimeError, match="No inf checks were recorded prior to update"):
        s.update()
    empty = mp.optim.SGD([mp.zeros(2, requires_grad=True)], lr=0.1)
    with pytest.raises(RuntimeError, match="No inf checks were recorded for this optimizer"):
        s.step(empty)


def test_step_refuses_closures_and_passes_other_arguments_and_the_result_through():
    class Recording(mp.optim.SGD):
        def step(self, *args, **kwargs):
            super().step()
            return ("stepped", args, kwargs)
    s = scaler()
    opt = ready(s)
    with pytest.raises(RuntimeError, match="Closure"):
        s.step(opt, closure=lambda: 0.0)
    params = make_params()
    rec = Recording(params, lr=0.1)
    s.scale(loss_of(params, *batch(0))).backward()
    assert s.step(rec, 1, flag=True) == ("stepped", (1,), {"flag": True})


def test_step_needs_an_optimizer():
    s = scaler()
    ready(s)
    with pytest.raises(TypeError, match="param_groups"):
        s.step(object())


def test_float16_gradients_are_refused_bfloat16_accepted():
    s = scaler(init_scale=4.0)
    half = mp.tensor([1.0, 2.0], dtype=mp.float16, requires_grad=True)
    s.scale(half.sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        s.unscale_(mp.optim.SGD([half], lr=0.1))
    bf = mp.tensor([1.0, 2.0], dtype=mp.bfloat16, requires_grad=True)
    s.scale((bf * bf).sum()).backward()
    opt = mp.optim.SGD([bf], lr=0.25)
    s.step(opt)
    assert bf.tolist() == [0.5, 1.0]  # grad 2*w, unscaled: w - 0.25 * 2w


def test_broadcast_read_only_gradients_are_unscaled_too():
    s = scaler(init_scale=8.0)
    w = mp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s.scale(w.sum()).backward()  # the gradient of a sum can be a read-only broadcast view
    opt = mp.optim.SGD([w], lr=0.5)
    s.step(opt)
    assert w.tolist() == [0.5, 1.5, 2.5] and w.grad.tolist() == [1.0, 1.0, 1.0]


def test_unscale_bumps_gradient_versions():
    s = scaler()
    opt = ready(s)
    grads = [p.grad for p in opt.param_groups[0]["params"]]
    versions = [g._version for g in grads]
    s.unscale_(opt)
    assert [g._version for g in grads] == [v + 1 for v in versions]


def test_many_optimizers_in_one_iteration():
    s = scaler()
    groups = [make_params(i) for i in range(7)]
    opts = [mp.optim.SGD(p, lr=0.1) for p in groups]
    x, y = batch(0)
    s.scale(sum(loss_of(p, x, y) for p in groups)).backward()
    inject(groups[5][0], 0, np.inf)
    skipped = []
    for o in opts:
        s.step(o)
        skipped.append(s.last_step_skipped)
    s.update()
    assert skipped == [False] * 5 + [True, False] and s.get_scale() == 32768.0


# ---- update(new_scale), setters ----
def test_update_with_new_scale_sets_it_and_keeps_the_growth_tracker():
    s = scaler(growth_interval=3)
    for new, want in ((1024.0, 1024.0), (mp.tensor([256.0]), 256.0)):
        opt = ready(s)
        s.step(opt)
        s.update(new)
        assert s.get_scale() == want
    assert s.state_dict()["_growth_tracker"] == 0
    opt = ready(s)
    s.step(opt)
    s.update()
    assert s.state_dict()["_growth_tracker"] == 1 and s.get_scale() == 256.0
    for bad, err in ((mp.tensor([1.0, 2.0]), ValueError), (mp.tensor([2.0], requires_grad=True), ValueError),
                     ("big", TypeError), (0.0, ValueError), (float("inf"), ValueError)):
        opt = ready(s)
        s.step(opt)
        with pytest.raises(err):
            s.update(bad)
        s.update()


def test_setters_change_the_rule_and_validate():
    s = scaler(growth_interval=5)
    s.set_growth_factor(4.0)
    s.set_backoff_factor(0.25)
    s.set_growth_interval(1)
    opt = ready(s)
    s.step(opt)
    s.update()
    assert s.get_scale() == 65536.0 * 4
    with pytest.raises(ValueError):
        s.set_growth_factor(0.5)
    with pytest.raises(ValueError):
        s.set_backoff_factor(2.0)
    with pytest.raises(ValueError):
        s.set_growth_interval(0)


# ---- checkpoints ----
def test_checkpoint_resume_continues_the_exact_scale_trajectory():
    bad_steps = {1, 4, 9, 10}

    def run(s, params, opt, steps):
        scales = []
        for step in steps:
            s.scale(loss_of(params, *batch(step))).backward()
            if step in bad_steps:
                inject(params[0], 0, np.inf)
            s.step(opt)
            s.update()
            opt.zero_grad()
            scales.append(s.get_scale())
        return scales

    ref_params = make_params()
    ref_opt = mp.optim.SGD(ref_params, lr=0.05, momentum=0.9)
    full = run(scaler(growth_interval=2), ref_params, ref_opt, range(14))

    first = scaler(growth_interval=2)
    params = make_params()
    opt = mp.optim.SGD(params, lr=0.05, momentum=0.9)
    head = run(first, params, opt, range(7))
    ckpt = {"scaler": first.state_dict(), "opt": opt.state_dict(), "params": snapshot(params)}
    assert ckpt["scaler"]["_growth_tracker"] == 0 or ckpt["scaler"]["_growth_tracker"] == 1

    resumed = scaler(growth_interval=2)
    resumed.load_state_dict(ckpt["scaler"])  # before the first scale(): applied at lazy creation
    params2 = [mp.tensor(a, requires_grad=True) for a in ckpt["params"]]
    opt2 = mp.optim.SGD(params2, lr=0.05, momentum=0.9)
    opt2.load_state_dict(ckpt["opt"])
    tail = run(resumed, params2, opt2, range(7, 14))
    assert head + tail == full
    assert same_bits(snapshot(params2), snapshot(ref_params))


def test_load_state_dict_into_a_running_scaler_overwrites_its_device_state():
    s = scaler()
    opt = ready(s)
    s.step(opt)
    s.update()
    s.load_state_dict({"scale": 8.0, "growth_factor": 3.0, "backoff_factor": 0.5, "growth_interval": 2,
                       "_growth_tracker": 1})
    opt = ready(s)
    s.step(opt)
    s.update()
    assert s.get_scale() == 24.0 and s.state_dict()["_growth_tracker"] == 0


@pytest.mark.parametrize("state, error, match", [
    ({}, RuntimeError, "empty"),
    ([("scale", 1.0)], TypeError, "dict"),
    ({"scale": 2.0}, ValueError, "missing"),
    ({"scale": -1.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 1, "_growth_tracker": 0},
     ValueError, "scale"),
    ({"scale": 2.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": "10", "_growth_tracker": 0},
     ValueError, "growth_interval"),
    ({"scale": 2.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 10, "_growth_tracker": -3},
     ValueError, "_growth_tracker"),
])
def test_malformed_state_dicts_are_refused_and_change_nothing(state, error, match):
    s = scaler(init_scale=4.0)
    with pytest.raises(error, match=match):
        s.load_state_dict(state)
    assert s.state_dict()["scale"] == 4.0


def test_state_dict_of_a_scaler_with_extra_rules_round_trips():
    s = scaler(hysteresis=3, min_scale=1.0, max_scale=2.0 ** 20)
    d = s.state_dict()
    assert (d["hysteresis"], d["min_scale"], d["max_scale"], d["_overflow_tracker"]) == (3, 1.0, 2.0 ** 20, 0)
    t = scaler()
    t.load_state_dict(d)
    assert t.state_dict() == d


# ---- hooks and statistics ----
def test_found_inf_reducer_makes_every_rank_skip_together():
    """Two in-process 'ranks': rank 1 overflows; a MAX reducer makes rank 0 skip as well."""
    seen = []
    rank_found = {}

    def reducer_for(rank):
        def reduce_max(found_inf):
            assert found_inf.dtype == np.float32 and found_inf.shape == (1,)
            seen.append(rank)
            rank_found[rank] = found_inf
            if len(rank_found) == 2:  # both ranks arrived: all-reduce MAX in place
                top = max(float(f[0]) for f in rank_found.values())
                for f in rank_found.values():
                    f[0] = top
        return reduce_max

    scalers = [scaler(), scaler()]
    params = [make_params(), make_params()]
    opts = [mp.optim.SGD(p, lr=0.1) for p in params]
    for rank in (0, 1):
        scalers[rank].found_inf_reducer = reducer_for(rank)
        scalers[rank].scale(loss_of(params[rank], *batch(rank))).backward()
    inject(params[1][1], 0, np.inf)
    before = [snapshot(p) for p in params]
    for rank in (0, 1):
        scalers[rank].unscale_(opts[rank])
    for rank in (0, 1):
        scalers[rank].step(opts[rank])
        assert scalers[rank].last_step_skipped is True
        scalers[rank].update()
        assert scalers[rank].get_scale() == 32768.0
    assert seen == [0, 1] and same_bits(before[0], snapshot(params[0]))


def test_statistics_before_use_and_history_ring():
    s = scaler(growth_interval=1)
    assert s.statistics() == {"steps": 0, "skipped_steps": 0, "last_overflow_step": None, "floor_hits": 0,
                              "scale_history": []}
    s.HISTORY = 4  # a small ring (read when the device state is created)
    w = mp.tensor([1.0], requires_grad=True)
    opt = mp.optim.SGD([w], lr=0.0)
    for _ in range(6):
        s.scale(w.sum()).backward()
        s.step(opt)
        s.update()
        opt.zero_grad()
    st = s.statistics()
    assert st["steps"] == 6 and st["skipped_steps"] == 0 and st["last_overflow_step"] is None
    assert st["scale_history"] == [(i, 65536.0 * 2 ** (i + 1)) for i in range(2, 6)]


# ---- a nan through a kink of the loss, as torch ----
SCALED = [("relu", lambda m, z: m.relu(z).sum()), ("abs", lambda m, z: m.abs(z).sum()),
          ("clamp", lambda m, z: z.clamp(-1.0, 1.0).sum()), ("maximum", lambda m, z: m.maximum(z, z * 0.5).sum()),
          ("amax", lambda m, z: z.amax()), ("norm-inf", lambda m, z: m.norm(z, math.inf)),
          ("l1_loss", lambda m, z: m.nn.functional.l1_loss(z, z * 0.0 + 1.0)),
          ("smooth_l1_loss", lambda m, z: m.nn.functional.smooth_l1_loss(z, z * 0.0)),
          ("huber_loss", lambda m, z: m.nn.functional.huber_loss(z, z * 0.0 + 3.0)),
          ("cross_entropy", lambda m, z: m.nn.functional.cross_entropy(z.reshape(2, 2), (m.tensor([0, 1]))))]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the nan is the point: NumPy's warnings are expected
@pytest.mark.parametrize("where", [0, 2], ids=["nan-first", "nan-later"])
@pytest.mark.parametrize("name,loss_of", SCALED, ids=[s[0] for s in SCALED])
def test_a_nan_through_a_kink_makes_grad_scaler_skip_the_step_as_torch(name, loss_of, where):
    """w + x with a nan in x (an add, so only the kink decides what the nan does to w's gradient): a
    GradScaler step is skipped exactly when torch's is, and otherwise takes torch's step."""
    torch = pytest.importorskip("torch")
    x = np.array([0.5, -1.5, 2.0, -0.25])
    x[where] = math.nan
    steps = {}
    for m in (mp, torch):
        w = (mp.nn.Parameter if m is mp else torch.nn.Parameter)(m.tensor([1.0, 2.0, -1.0, 0.5]))
        opt = m.optim.SGD([w], lr=0.1)
        scaler = mp.amp.GradScaler("cpu", init_scale=8.0) if m is mp else torch.amp.GradScaler("cpu", init_scale=8.0)
        scaler.scale(loss_of(m, w + m.tensor(x, dtype=w.dtype))).backward()
        scaler.step(opt)
        scaler.update()
        steps[m.__name__] = (w.detach().numpy().copy(), float(scaler.get_scale()))
    np.testing.assert_array_equal(steps["mixprec"][0], steps["torch"][0])
    assert steps["mixprec"][1] == steps["torch"][1]
