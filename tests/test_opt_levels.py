"""mp.amp.initialize: apex-style O0-O3 on the digits model, master weights, skipped steps, checkpoints, errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mixprec as mp
from mixprec import nn
from mixprec.backend import devices
from mixprec.amp import functional as AF
from mixprec.amp import StaticGradScaler, master_params
from mixprec.nn import functional as F

LEVELS = ["O0", "O1", "O2", "O3"]


def host(array):
    """A NumPy copy of a NumPy or CuPy array."""
    return devices.to_device(array, devices.CPU).copy()


@pytest.fixture(autouse=True)
def _quiet_overflow():
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # O3's float16 Adam divides by zero
        yield


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(x))
    return x[perm[:1400]], y[perm[:1400]], x[perm[1400:]], y[perm[1400:]]


def mlp(norm="layer"):
    layer = nn.LayerNorm(64) if norm == "layer" else nn.BatchNorm1d(64)
    return nn.Sequential(nn.Linear(64, 64), layer, nn.ReLU(), nn.Linear(64, 10))


def train(data, level, optimizer="adam", dtype=mp.float16, epochs=4, device="cpu", **options):
    """A few epochs of the digits MLP at one level; returns (accuracy, model, optimizer, scaler, skipped)."""
    x, y, x_test, y_test = data
    mp.manual_seed(0)
    model = mlp().to(device)
    opt = (mp.optim.Adam(model.parameters(), lr=3e-3) if optimizer == "adam"
           else mp.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    model, opt = mp.amp.initialize(model, opt, level, dtype=dtype, **options)
    scaler = mp.amp.loss_scaler()
    skipped = 0
    for epoch in range(epochs):
        order = np.random.default_rng(epoch).permutation(len(x))
        for i in range(0, len(x), 64):
            idx = order[i:i + 64]
            opt.zero_grad()
            loss = F.cross_entropy(model(mp.tensor(x[idx], device=device)), mp.tensor(y[idx], device=device))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            skipped += bool(scaler.last_step_skipped)
    model.eval()
    with mp.no_grad():
        logits = model(mp.tensor(x_test, device=device))
    accuracy = float((logits.cpu()._array.argmax(1) == y_test).mean())
    return accuracy, model, opt, scaler, skipped


# ---------------------------------------------------------------- the four levels train
def test_o0_o1_o2_land_in_the_same_accuracy_band(digits, device):
    results = {level: train(digits, level, device=device) for level in ("O0", "O1", "O2")}
    acc = {level: r[0] for level, r in results.items()}
    print("digits MLP, Adam, 4 epochs, test accuracy:", acc)
    assert min(acc.values()) >= 0.93, acc
    assert max(acc.values()) - min(acc.values()) <= 0.02, acc
    assert all(r[4] == 0 for r in results.values())  # no overflow on this model at 2**16


def test_o3_with_adam_breaks_on_float16_and_o3_with_sgd_learns(digits):
    """Reported as it is: Adam's second moment (1 - beta2) * g**2 and its eps (1e-8) underflow to 0 in
    float16, so the first step divides by zero and the weights become inf/NaN; every later step sees
    non-finite gradients and is skipped. Plain SGD with momentum trains in pure float16 on this model."""
    acc_adam, model, _, _, skipped = train(digits, "O3", "adam")
    n_steps = 4 * 22
    finite = all(bool(np.isfinite(p._array.astype(np.float32)).all()) for p in model.parameters())
    print(f"O3 float16 + Adam: accuracy {acc_adam:.4f}, skipped {skipped}/{n_steps} steps, weights finite: {finite}")
    assert not finite
    assert skipped == n_steps - 1  # only the first step ran
    assert acc_adam < 0.3
    acc_sgd, model, _, _, skipped = train(digits, "O3", "sgd")
    print(f"O3 float16 + SGD(momentum): accuracy {acc_sgd:.4f}, skipped {skipped}")
    assert all(p.dtype == mp.float16 for p in model.parameters())
    assert acc_sgd >= 0.93 and skipped == 0


@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_bfloat16_levels_train_without_loss_scaling(digits, level):
    acc, model, opt, scaler, skipped = train(digits, level, dtype=mp.bfloat16)
    print(f"{level} bfloat16: accuracy {acc:.4f}")
    assert isinstance(scaler, StaticGradScaler) and scaler.get_scale() == 1.0 and scaler.is_enabled()
    assert acc >= 0.93 and skipped == 0
    expected = {"O1": mp.float32, "O2": mp.bfloat16, "O3": mp.bfloat16}[level]
    assert model[0].weight.dtype == expected
    if level == "O2":
        assert all(p.dtype == mp.float32 for p in master_params(opt))


@pytest.mark.parametrize("dtype", [mp.float16, mp.bfloat16])
def test_asking_for_scaling_with_bfloat16_warns_float16_does_not(dtype):
    model = mlp()
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    if dtype == mp.bfloat16:
        with pytest.warns(UserWarning, match="bfloat16 has float32's exponent range"):
            mp.amp.initialize(model, opt, "O2", dtype=dtype, loss_scale="dynamic")
            scaler = mp.amp.loss_scaler()
    else:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mp.amp.initialize(model, opt, "O2", dtype=dtype, loss_scale="dynamic")
            scaler = mp.amp.loss_scaler()
    assert type(scaler) is mp.amp.GradScaler and scaler.get_scale() == 2.0 ** 16


# ---------------------------------------------------------------- what each level sets up
def test_level_defaults():
    expect = {  # level: (first Linear weight, LayerNorm weight, scaler type, scale)
        "O0": (mp.float32, mp.float32, StaticGradScaler, 1.0),
        "O1": (mp.float32, mp.float32, mp.amp.GradScaler, 2.0 ** 16),
        "O2": (mp.float16, mp.float32, mp.amp.GradScaler, 2.0 ** 16),
        "O3": (mp.float16, mp.float16, StaticGradScaler, 1.0),
    }
    for level, (linear, norm, scaler_type, scale) in expect.items():
        model = mlp()
        opt = mp.optim.Adam(model.parameters(), lr=1e-3)
        params_before = [p for g in opt.param_groups for p in g["params"]]
        model2, opt2 = mp.amp.initialize(model, opt, level)
        scaler = mp.amp.loss_scaler()
        assert model2 is model and opt2 is opt
        assert model[0].weight.dtype == linear and model[1].weight.dtype == norm, level
        assert type(scaler) is scaler_type and scaler.get_scale() == scale and scaler.is_enabled(), level
        has_masters = level == "O2"
        assert (mp.amp.MasterWeights.of(opt) is not None) == has_masters
        if not has_masters:  # the optimizer still steps the model's own parameters
            assert [p for g in opt.param_groups for p in g["params"]] == params_before
        out = model(mp.randn(3, 64))
        assert out.dtype == mp.float32  # outputs come back float32 at every level


def test_o2_masters_are_float32_copies_stepped_by_the_same_optimizer():
    model = mlp()
    original = [p._array.copy() for p in model.parameters()]
    opt = mp.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.8, 0.95), weight_decay=0.05)
    _, opt2 = mp.amp.initialize(model, opt, "O2")
    assert opt2 is opt and type(opt) is mp.optim.AdamW
    group = opt.param_groups[0]
    assert (group["lr"], group["betas"], group["weight_decay"]) == (2e-3, (0.8, 0.95), 0.05)
    masters = mp.amp.MasterWeights.of(opt)
    params = list(model.parameters())
    stepped = list(master_params(opt))
    for p, value, q in zip(params, original, stepped):
        m = masters.master_of(p)
        if p.dtype == mp.float16:  # Linear: a float32 master holding the exact original values
            assert q is m and m.dtype == mp.float32 and m is not p
            np.testing.assert_array_equal(m._array, value)
            np.testing.assert_array_equal(p._array, value.astype(np.float16))
        else:  # LayerNorm: float32, its own master
            assert m is None and q is p and p.dtype == mp.float32


def test_o2_norm_layers_compute_in_float32_and_hand_back_float16():
    model = mlp()
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    mp.amp.initialize(model, opt, "O2")
    x = mp.randn(5, 64)
    h = model[0](x.half())
    assert h.dtype == mp.float16
    out = model[1](h)
    expected = F.layer_norm(h.float(), (64,), model[1].weight, model[1].bias, 1e-5).half()
    assert out.dtype == mp.float16
    np.testing.assert_array_equal(out._array, expected._array)


def test_o2_batchnorm_keeps_float32_parameters_and_running_stats():
    model = mlp(norm="batch")
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    mp.amp.initialize(model, opt, "O2")
    bn = model[1]
    assert bn.weight.dtype == bn.running_mean.dtype == bn.running_var.dtype == mp.float32
    assert bn.num_batches_tracked.dtype == mp.int64
    x = mp.randn(16, 64)
    model(x)
    h = model[0](x.half()).float()._array
    np.testing.assert_allclose(bn.running_mean._array, 0.1 * h.mean(0), rtol=1e-5, atol=1e-6)
    model2 = mlp(norm="batch")
    mp.amp.initialize(model2, mp.optim.SGD(model2.parameters(), lr=0.1), "O3")
    assert model2[1].weight.dtype == model2[1].running_var.dtype == mp.float16  # O3: norms too


def test_o1_runs_the_forward_under_autocast_with_float32_weights():
    mp.manual_seed(1)
    model = mlp()
    reference = mlp()
    reference.load_state_dict(model.state_dict())
    mp.amp.initialize(model, mp.optim.SGD(model.parameters(), lr=0.1), "O1")
    x = mp.randn(4, 64)
    with mp.autocast("cpu", dtype=mp.float16):
        expected = reference(x)
    out = model(x)
    assert expected.dtype == mp.float16 and out.dtype == mp.float32
    np.testing.assert_array_equal(out._array, expected._array.astype(np.float32))
    out.sum().backward()
    assert all(p.dtype == p.grad.dtype == mp.float32 for p in model.parameters())


def test_integer_inputs_are_not_cast():
    model = nn.Sequential(nn.Embedding(20, 8), nn.Flatten(), nn.Linear(24, 3))
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    mp.amp.initialize(model, opt, "O2")
    out = model(mp.tensor([[1, 2, 3], [4, 5, 19]]))
    assert out.dtype == mp.float32 and out.shape == (2, 3)
    assert model[0].weight.dtype == mp.float16


# ---------------------------------------------------------------- master weights keep small updates
def test_updates_below_half_a_float16_ulp_move_o2_weights_and_are_lost_in_o3():
    """w = 1.0; each SGD step subtracts 1e-4, below half a float16 ulp at 1.0 (2**-12 below it)."""
    steps, lr = 100, 1e-4
    final = {}
    for level in ("O2", "O3"):
        model = nn.Linear(1, 1, bias=False)
        with mp.no_grad():
            model.weight.fill_(1.0)
        opt = mp.optim.SGD(model.parameters(), lr=lr)
        model, opt = mp.amp.initialize(model, opt, level)
        scaler = mp.amp.loss_scaler()
        x = mp.ones(1, 1)
        taken = 0
        for _ in range(steps):
            opt.zero_grad()
            scaler.scale(model(x).sum()).backward()  # d/dw (w * 1) = 1
            scaler.step(opt)
            scaler.update()
            taken += not scaler.last_step_skipped
        final[level] = (model.weight._array.copy(), opt, taken)
    w3, _, taken3 = final["O3"]
    assert taken3 == steps and w3.dtype == np.float16 and w3[0, 0] == 1.0  # every update rounded away
    w2, opt2, taken2 = final["O2"]
    # the first scaled gradient, 1 * 2**16, overflows float16 (max 65504): that step is skipped, the scale halves
    assert taken2 == steps - 1
    master = next(master_params(opt2))._array
    reference = np.float32(1.0)
    for _ in range(taken2):  # the float32 update SGD makes: w -= float32(lr) * 1
        reference = reference - np.float32(lr)
    assert master.dtype == np.float32 and master[0, 0] == reference
    assert abs(float(master[0, 0]) - (1 - taken2 * lr)) < 1e-5  # float32 rounding of 99 subtractions
    assert w2.dtype == np.float16 and w2[0, 0] == np.float16(master[0, 0]) and w2[0, 0] < 1.0


# ---------------------------------------------------------------- overflow: skipped at every level
@pytest.mark.parametrize("level", LEVELS)
def test_injected_inf_skips_the_step_at_every_level(level, device):
    mp.manual_seed(0)
    model = mlp().to(device)
    opt = mp.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)  # (float16 Adam breaks O3 by itself)
    model, opt = mp.amp.initialize(model, opt, level)
    scaler = mp.amp.loss_scaler()
    x, y = mp.randn(8, 64, device=device), mp.randint(0, 10, (8,), device=device)

    def snapshot():
        return ([host(p._array) for p in model.parameters()], [host(p._array) for p in master_params(opt)],
                {id(k): {n: host(v) for n, v in s.items()} for k, s in opt.state.items()})

    def iteration(inject):
        opt.zero_grad()
        scaler.scale(F.cross_entropy(model(x), y)).backward()
        if inject:
            model[0].weight.grad._array[3, 5] = np.inf  # the model's own (float16 at O2/O3) gradient
        scaler.step(opt)
        scaler.update()
        return scaler.last_step_skipped

    # on the CPU the scaler reads found_inf to decide; on a GPU the step is taken back on the device, unread
    clean, overflow = (None, None) if device == "cuda" else (False, True)
    assert iteration(False) is clean
    before, scale = snapshot(), scaler.get_scale()
    assert iteration(True) is overflow
    after = snapshot()
    for a, b in zip(before[0] + before[1], after[0] + after[1]):  # model weights and masters, bit for bit
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    assert before[2].keys() == after[2].keys() and len(before[2]) == 6
    for k in before[2]:  # the momentum buffers too
        np.testing.assert_array_equal(before[2][k]["momentum_buffer"], after[2][k]["momentum_buffer"])
    static = level in ("O0", "O3")
    assert scaler.get_scale() == (scale if static else scale / 2)
    assert scaler.statistics()["skipped_steps"] == 1
    assert iteration(False) is clean  # training goes on
    assert not all(np.array_equal(a, host(p._array)) for a, p in zip(after[0], model.parameters()))


# ---------------------------------------------------------------- the fused unscale into the masters
def test_o2_unscales_float16_grads_into_float32_master_grads_in_one_call(monkeypatch):
    model = mlp()
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    model, opt = mp.amp.initialize(model, opt, "O2")
    scaler = mp.amp.loss_scaler()
    calls = []
    real = AF.non_finite_check_and_unscale_

    def spy(arrays, found_inf, inv_scale, out=None):
        calls.append(([a.dtype for a in arrays], None if out is None else [o.dtype for o in out]))
        return real(arrays, found_inf, inv_scale, out=out)
    monkeypatch.setattr(AF, "non_finite_check_and_unscale_", spy)
    x, y = mp.randn(8, 64), mp.randint(0, 10, (8,))
    opt.zero_grad()
    scaler.scale(F.cross_entropy(model(x), y)).backward()
    scaled = {id(p): p.grad._array.copy() for p in model.parameters()}
    scaler.unscale_(opt)
    f16, f32 = np.dtype(np.float16), np.dtype(np.float32)
    assert calls == [([f16, f16, f32, f32, f16, f16], [f32] * 6)]  # Linear, Linear, LayerNorm, Linear
    inv = np.float32(1.0 / np.float64(np.float32(2.0 ** 16)))
    masters = mp.amp.MasterWeights.of(opt)
    for p in model.parameters():
        g = scaled[id(p)]
        m = masters.master_of(p)
        if m is not None:  # the model's float16 grad is read, and left as it was
            np.testing.assert_array_equal(p.grad._array, g)
        target = p if m is None else m  # LayerNorm's float32 grads are unscaled in place
        np.testing.assert_array_equal(target.grad._array, (g.astype(np.float32) * inv).astype(np.float32))
        assert target.grad.dtype == mp.float32


def test_a_plain_grad_scaler_works_with_an_o2_optimizer():
    """The master-gradient pairs come from the optimizer, so any GradScaler unscales into the masters."""
    model = mlp()
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    model, opt = mp.amp.initialize(model, opt, "O2")
    scaler = mp.amp.GradScaler("cpu", init_scale=1024.0)
    x, y = mp.randn(8, 64), mp.randint(0, 10, (8,))
    loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    g16 = model[0].weight.grad._array.copy()
    scaler.step(opt)
    master = mp.amp.MasterWeights.of(opt).master_of(model[0].weight)
    np.testing.assert_array_equal(master.grad._array, g16.astype(np.float32) / np.float32(1024))


def test_master_grad_buffers_keep_their_addresses():
    model = mlp()
    model, opt = mp.amp.initialize(model, mp.optim.SGD(model.parameters(), lr=0.1), "O2")
    scaler = mp.amp.loss_scaler()
    x, y = mp.randn(8, 64), mp.randint(0, 10, (8,))
    addresses = []
    for _ in range(3):
        opt.zero_grad()
        scaler.scale(F.cross_entropy(model(x), y)).backward()
        scaler.step(opt)
        scaler.update()
        addresses.append([m.grad._array.__array_interface__["data"][0] for _, m in mp.amp.MasterWeights.of(opt).pairs])
    assert addresses[0] == addresses[1] == addresses[2]


def test_optimizer_step_without_the_scaler_copies_the_model_grads():
    """A bfloat16 user who skips the scaler: optimizer.step() alone steps the masters with the model grads."""
    mp.manual_seed(2)
    model = mlp()
    ref = mlp()
    ref.load_state_dict(model.state_dict())
    opt = mp.optim.SGD(model.parameters(), lr=0.5)
    model, opt = mp.amp.initialize(model, opt, "O2", dtype=mp.bfloat16)
    x, y = mp.randn(8, 64), mp.randint(0, 10, (8,))
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    g = model[0].weight.grad._array.astype(np.float32)
    w = mp.amp.MasterWeights.of(opt).master_of(model[0].weight)._array.copy()
    opt.step()
    master = mp.amp.MasterWeights.of(opt).master_of(model[0].weight)
    np.testing.assert_array_equal(master._array, w - np.float32(0.5) * g)
    np.testing.assert_array_equal(model[0].weight._array, master._array.astype(mp.bfloat16))
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters()) and all(m.grad is None for m in master_params(opt))


def test_clip_the_master_params_after_unscale():
    model = mlp()
    model, opt = mp.amp.initialize(model, mp.optim.SGD(model.parameters(), lr=0.1), "O2")
    scaler = mp.amp.loss_scaler()
    x, y = mp.randn(8, 64), mp.randint(0, 10, (8,))
    scaler.scale(F.cross_entropy(model(x), y)).backward()
    scaler.unscale_(opt)
    norm = nn.utils.clip_grad_norm_(master_params(opt), 0.01)
    assert float(norm.item()) > 0.01
    total = np.sqrt(sum(float((p.grad._array.astype(np.float64) ** 2).sum()) for p in master_params(opt)))
    assert abs(total - 0.01) < 1e-6
    scaler.step(opt)
    scaler.update()


# ---------------------------------------------------------------- static loss scale
def test_static_loss_scale_never_changes_but_skips_non_finite_steps():
    model = mlp()
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    model, opt = mp.amp.initialize(model, opt, "O2", loss_scale=128.0)
    scaler = mp.amp.loss_scaler()
    assert isinstance(scaler, StaticGradScaler)
    scaler.set_growth_interval(2)
    x, y = mp.randn(8, 64), mp.randint(0, 10, (8,))
    skipped = []
    for step in range(6):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        scaled = scaler.scale(loss)
        assert float(scaled.item()) == pytest.approx(128 * float(loss.item()), rel=1e-6)
        scaled.backward()
        if step in (1, 2):
            model[3].bias.grad._array[0] = np.nan
        scaler.step(opt)
        scaler.update()
        skipped.append(scaler.last_step_skipped)
        assert scaler.get_scale() == 128.0
    assert skipped == [False, True, True, False, False, False]
    stats = scaler.statistics()
    assert stats["skipped_steps"] == 2 and stats["scale_history"] == []


def test_static_scaler_state_dict_and_refusals():
    scaler = StaticGradScaler("cpu", scale=64.0)
    state = scaler.state_dict()
    assert state["scale"] == 64.0 and state["growth_factor"] == state["backoff_factor"] == 1.0
    other = StaticGradScaler("cpu", scale=8.0)
    other.load_state_dict(state)
    assert other.get_scale() == 64.0 and other.get_growth_factor() == 1.0
    with pytest.raises(ValueError, match="dynamic scaler's; load it into mp.amp.GradScaler"):
        other.load_state_dict(mp.amp.GradScaler("cpu").state_dict())
    with pytest.raises(ValueError, match="scale is fixed"):
        other.set_growth_factor(2.0)
    with pytest.raises(ValueError, match="scale is fixed"):
        other.set_backoff_factor(0.5)
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})


def test_static_scale_of_one_accepts_float16_grads_a_larger_one_does_not():
    p = mp.nn.Parameter(mp.ones(3, dtype=mp.float16))
    opt = mp.optim.SGD([p], lr=0.5)
    for scale, ok in ((1.0, True), (2.0, False)):
        scaler = StaticGradScaler("cpu", scale=scale)
        opt.zero_grad()
        scaler.scale((p * p.dtype.type(2)).sum()).backward()
        if ok:
            scaler.step(opt)
            np.testing.assert_array_equal(p._array, np.zeros(3, np.float16))
        else:
            with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
                scaler.step(opt)


def test_dynamic_bounds_reach_the_scaler():
    model = mlp()
    mp.amp.initialize(model, mp.optim.SGD(model.parameters(), lr=0.1), "O1",
                      min_loss_scale=4.0, max_loss_scale=1024.0)
    scaler = mp.amp.loss_scaler()
    state = scaler.state_dict()
    assert (state["min_scale"], state["max_scale"], state["scale"]) == (4.0, 1024.0, 1024.0)
    model = mlp()
    mp.amp.initialize(model, mp.optim.SGD(model.parameters(), lr=0.1), "O2", max_loss_scale=None)
    scaler = mp.amp.loss_scaler()
    assert scaler.state_dict().get("max_scale") is None and scaler.get_scale() == 2.0 ** 16


# ---------------------------------------------------------------- checkpoints
def run_steps(model, opt, scaler, n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = mp.tensor(rng.normal(size=(8, 64)).astype(np.float32))
        y = mp.tensor(rng.integers(0, 10, 8))
        opt.zero_grad()
        scaler.scale(F.cross_entropy(model(x), y)).backward()
        scaler.step(opt)
        scaler.update()


def fresh_o2(seed=5):
    mp.manual_seed(seed)
    model = mlp()
    model, opt = mp.amp.initialize(model, mp.optim.Adam(model.parameters(), lr=1e-2), "O2")
    return model, opt, mp.amp.loss_scaler()


def test_o2_checkpoint_round_trips_masters_in_float32(tmp_path):
    model, opt, scaler = fresh_o2()
    run_steps(model, opt, scaler, 5, seed=1)
    state = model.state_dict()
    assert all(v.dtype == mp.float32 for k, v in state.items())  # masters, not the float16 copies
    masters = mp.amp.MasterWeights.of(opt)
    np.testing.assert_array_equal(state["0.weight"]._array, masters.master_of(model[0].weight)._array)
    path = tmp_path / "o2.mpk"
    mp.save({"model": state, "opt": opt.state_dict(), "scaler": scaler.state_dict()}, path)
    run_steps(model, opt, scaler, 4, seed=2)  # the uninterrupted run

    model2, opt2, scaler2 = fresh_o2(seed=9)  # different initial weights: everything must come from the file
    ckpt = mp.load(path)
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["opt"])
    scaler2.load_state_dict(ckpt["scaler"])
    for p in model2.parameters():
        m = mp.amp.MasterWeights.of(opt2).master_of(p)
        if m is not None:  # loading refreshed the float16 copy from the float32 master
            np.testing.assert_array_equal(p._array, m._array.astype(np.float16))
    run_steps(model2, opt2, scaler2, 4, seed=2)
    for a, b in zip(list(model.parameters()) + list(master_params(opt)),
                    list(model2.parameters()) + list(master_params(opt2))):
        np.testing.assert_array_equal(a._array, b._array)
    assert scaler2.get_scale() == scaler.get_scale()


def test_o2_checkpoint_loads_into_a_float32_model():
    model, opt, scaler = fresh_o2()
    run_steps(model, opt, scaler, 3, seed=1)
    plain = mlp()
    plain.load_state_dict(model.state_dict())
    for p, q in zip(plain.parameters(), master_params(opt)):
        np.testing.assert_array_equal(p._array, q._array)
    # and a float32 checkpoint into an O2 model: masters exact, model = masters rounded
    model2, opt2, _ = fresh_o2(seed=3)
    model2.load_state_dict(plain.state_dict())
    for p, q in zip(plain.parameters(), master_params(opt2)):
        np.testing.assert_array_equal(p._array, q._array)
    np.testing.assert_array_equal(model2[0].weight._array, plain[0].weight._array.astype(np.float16))


def test_o2_failed_load_changes_nothing():
    model, opt, _ = fresh_o2()
    before = [p._array.copy() for p in list(model.parameters()) + list(master_params(opt))]
    bad = dict(model.state_dict())
    bad["0.weight"] = mp.zeros(3, 3)
    with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):
        model.load_state_dict(bad)
    for b, p in zip(before, list(model.parameters()) + list(master_params(opt))):
        np.testing.assert_array_equal(b, p._array)


# ---------------------------------------------------------------- errors
def fresh(level=None):
    model = mlp()
    return model, mp.optim.SGD(model.parameters(), lr=0.1)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(opt_level="O4"), ValueError, "opt_level must be one of 'O0', 'O1', 'O2', 'O3', got 'O4'"),
    (dict(opt_level="02"), ValueError, "the letter O, not zero"),
    (dict(opt_level=2), ValueError, "opt_level must be one of"),
    (dict(opt_level=["O2"]), ValueError, "opt_level must be one of"),
    (dict(dtype=mp.float32), ValueError, "dtype must be mp.float16 or mp.bfloat16"),
    (dict(dtype="int8"), ValueError, "dtype must be mp.float16 or mp.bfloat16"),
    (dict(opt_level="O1", keep_norm_fp32=False), ValueError, "keep_norm_fp32=False contradicts O1"),
    (dict(opt_level="O0", master_weights=True), ValueError, "nothing to keep a master copy of"),
    (dict(opt_level="O1", master_weights=True), ValueError, "nothing to keep a master copy of"),
    (dict(opt_level="O2", master_weights=False), ValueError, "would have to be unscaled in float16"),
    (dict(opt_level="O2", master_weights=False, loss_scale=128.0), ValueError, "unscaled in float16"),
    (dict(opt_level="O3", loss_scale="dynamic"), ValueError, "unscaled in float16"),
    (dict(opt_level="O2", keep_norm_fp32="yes"), TypeError, "keep_norm_fp32 must be True, False or None"),
    (dict(loss_scale="static"), ValueError, "loss_scale must be 'dynamic' or a finite number"),
    (dict(loss_scale=-1.0), ValueError, "loss_scale must be"),
    (dict(loss_scale=float("inf")), ValueError, "loss_scale must be"),
    (dict(loss_scale=True), ValueError, "loss_scale must be"),
    (dict(loss_scale=128.0, min_loss_scale=1.0), ValueError, "bound a dynamic loss scale"),
    (dict(loss_scale=128.0, max_loss_scale=2.0 ** 10), ValueError, "bound a dynamic loss scale"),
    (dict(min_loss_scale=2.0 ** 20, max_loss_scale=2.0 ** 10), ValueError, "must not exceed max_loss_scale"),
    (dict(min_loss_scale=0.0), ValueError, "min_loss_scale must be a finite number > 0"),
])
def test_bad_options_are_clear_errors(kwargs, error, match):
    model, opt = fresh()
    level = kwargs.pop("opt_level", "O1")
    with pytest.raises(error, match=match):
        mp.amp.initialize(model, opt, level, **kwargs)
    assert all(p.dtype == mp.float32 for p in model.parameters())  # nothing was changed
    assert mp.amp.MasterWeights.of(opt) is None


def test_consistent_overrides_are_accepted():
    for level, kwargs, linear, norm, masters in [
        ("O2", dict(master_weights=False, loss_scale=1.0), mp.float16, mp.float32, False),
        ("O2", dict(keep_norm_fp32=False), mp.float16, mp.float16, True),
        ("O3", dict(keep_norm_fp32=True), mp.float16, mp.float32, False),
        ("O3", dict(master_weights=True, loss_scale="dynamic"), mp.float16, mp.float16, True),
        ("O2", dict(master_weights=False, loss_scale="dynamic", dtype=mp.bfloat16), mp.bfloat16, mp.float32, False),
        ("O1", dict(keep_norm_fp32=True), mp.float32, mp.float32, False),
    ]:
        model, opt = fresh()
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the bfloat16 + dynamic note
            mp.amp.initialize(model, opt, level, **kwargs)
            scaler = mp.amp.loss_scaler()
        assert (model[0].weight.dtype, model[1].weight.dtype) == (linear, norm), (level, kwargs)
        assert (mp.amp.MasterWeights.of(opt) is not None) == masters, (level, kwargs)
        run_steps(model, opt, scaler, 2, seed=0)
        assert all(bool(np.isfinite(p._array.astype(np.float32)).all()) for p in model.parameters())


def test_bad_objects_and_states_are_clear_errors():
    model, opt = fresh()
    with pytest.raises(TypeError, match="model must be an mp.nn.Module"):
        mp.amp.initialize(lambda x: x, opt, "O2")
    with pytest.raises(TypeError, match="optimizer must be an mp.optim.Optimizer"):
        mp.amp.initialize(model, list(model.parameters()), "O2")
    half = mlp().half()
    with pytest.raises(ValueError, match="expects a float32 model .* '0.weight' is float16"):
        mp.amp.initialize(half, mp.optim.SGD(half.parameters(), lr=0.1), "O2")
    stray = mp.zeros(3, dtype=mp.float16, requires_grad=True)
    with pytest.raises(ValueError, match="optimizer's parameters in float32"):
        mp.amp.initialize(model, mp.optim.SGD([stray], lr=0.1), "O2")
    for level, ok in (("O2", False), ("O1", True)):  # a stepped optimizer: fine where nothing is cast
        stepped_model = mlp()
        adam = mp.optim.Adam(stepped_model.parameters())
        run_steps(stepped_model, adam, mp.amp.GradScaler("cpu", enabled=False), 1, seed=0)
        if ok:
            mp.amp.initialize(stepped_model, adam, level)
        else:
            with pytest.raises(ValueError, match="already has state"):
                mp.amp.initialize(stepped_model, adam, level)
    model, opt = fresh()
    mp.amp.initialize(model, opt, "O2")
    with pytest.raises(RuntimeError, match="already initialized at O2"):
        mp.amp.initialize(model, opt, "O1")


def test_master_grads_follow_parameters_not_positions():
    """An optimizer listing the parameters in another order (two groups, reversed) steps each master with its own
    model parameter's gradient."""
    mp.manual_seed(3)
    model = mlp()
    params = list(model.parameters())
    opt = mp.optim.SGD([{"params": params[3:][::-1], "lr": 0.25}, {"params": params[:3][::-1]}], lr=0.5)
    model, opt = mp.amp.initialize(model, opt, "O2", loss_scale=256.0)
    scaler = mp.amp.loss_scaler()
    masters = mp.amp.MasterWeights.of(opt)
    stepped_tensor = {id(p): p if masters.master_of(p) is None else masters.master_of(p) for p in params}
    before = {id(p): host(stepped_tensor[id(p)]._array) for p in params}
    x, y = mp.randn(8, 64), mp.randint(0, 10, (8,))
    scaler.scale(F.cross_entropy(model(x), y)).backward()
    grads = {id(p): host(p.grad._array).astype(np.float32) / np.float32(256) for p in params}
    scaler.step(opt)
    for i, p in enumerate(params):
        stepped = host(stepped_tensor[id(p)]._array)
        lr = np.float32(0.25 if i >= 3 else 0.5)
        np.testing.assert_array_equal(stepped, before[id(p)] - lr * grads[id(p)])


def test_editing_model_grads_after_unscale_is_an_error():
    model = mlp()
    model, opt = mp.amp.initialize(model, mp.optim.SGD(model.parameters(), lr=0.1), "O2")
    scaler = mp.amp.loss_scaler()
    x, y = mp.randn(8, 64), mp.randint(0, 10, (8,))
    scaler.scale(F.cross_entropy(model(x), y)).backward()
    scaler.unscale_(opt)
    before = [host(p._array) for p in master_params(opt)]
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # the wrong tensors at O2: the model's scaled float16 grads
    with pytest.raises(RuntimeError, match="clip or edit the gradients of mp.amp.master_params"):
        scaler.step(opt)
    for b, p in zip(before, master_params(opt)):
        np.testing.assert_array_equal(b, host(p._array))


@settings(max_examples=12, deadline=None)
@given(level=st.sampled_from(LEVELS), dtype=st.sampled_from([mp.float16, mp.bfloat16]),
       injections=st.lists(st.booleans(), min_size=1, max_size=5), seed=st.integers(0, 2 ** 16))
def test_any_schedule_of_overflows_keeps_the_invariants(level, dtype, injections, seed):
    """Property: a skipped step changes no weight, master or optimizer state bit; a taken step leaves
    every model weight equal to its master rounded to the model's dtype."""
    mp.manual_seed(seed)
    model = mlp()
    model, opt = mp.amp.initialize(model, mp.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                   level, dtype=dtype)
    scaler = mp.amp.loss_scaler()
    masters = mp.amp.MasterWeights.of(opt)
    rng = np.random.default_rng(seed)
    for inject in injections:
        x = mp.tensor(rng.normal(size=(4, 64)).astype(np.float32))
        y = mp.tensor(rng.integers(0, 10, 4))
        before = [host(t._array) for t in list(model.parameters()) + list(master_params(opt))]
        state = [host(s["momentum_buffer"]) for s in opt.state.values()]
        opt.zero_grad()
        scaler.scale(F.cross_entropy(model(x), y)).backward()
        if inject:
            model[3].weight.grad._array[rng.integers(10), rng.integers(64)] = rng.choice([np.inf, -np.inf, np.nan])
        scaler.step(opt)
        scaler.update()
        if inject:
            assert scaler.last_step_skipped
            after = [host(t._array) for t in list(model.parameters()) + list(master_params(opt))]
            for b, a in zip(before, after):
                np.testing.assert_array_equal(b.view(np.uint8), a.view(np.uint8))
            for b, s in zip(state, opt.state.values()):
                np.testing.assert_array_equal(b, host(s["momentum_buffer"]))
        if masters is not None:
            for p, m in masters.pairs:
                rounded = host(m._array).astype(p.dtype)
                np.testing.assert_array_equal(host(p._array).view(np.uint16), rounded.view(np.uint16))


# ---------------------------------------------------------------- built on hooks and the optimizer's extension point
def test_initialize_replaces_no_method_of_the_users_objects():
    model = mlp()
    opt = mp.optim.Adam(model.parameters(), lr=1e-3)
    before = (dict(vars(model)).keys(), dict(vars(opt)).keys())
    mp.amp.initialize(model, opt, "O2")
    for obj, keys in zip((model, opt), before):
        added = set(vars(obj)) - set(keys)
        assert not any(callable(getattr(obj, name)) for name in added), added
    assert "forward" not in vars(model) and "step" not in vars(opt) and "state_dict" not in vars(model)
    assert mp.amp.MasterWeights.of(opt) is opt.step_extension


def test_o1_autocast_region_is_left_when_forward_raises():
    class Failing(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            assert mp.amp.is_autocast_enabled("cpu")
            raise ValueError("inside forward")
    model = Failing()
    mp.amp.initialize(model, mp.optim.SGD(model.parameters(), lr=0.1), "O1")
    with pytest.raises(ValueError, match="inside forward"):
        model(mp.randn(2, 4))
    assert not mp.amp.is_autocast_enabled("cpu")


def test_master_weights_need_a_free_step_extension_and_nothing_changes_when_refused():
    model = mlp()
    opt = mp.optim.SGD(model.parameters(), lr=0.1)

    class Other:
        def unscale_pairs(self):
            return []
        before_update = after_update = zero_grad = lambda *args: None
    opt.set_step_extension(Other())
    with pytest.raises(ValueError, match="already has one"):
        mp.amp.initialize(model, opt, "O2")
    assert all(p.dtype == mp.float32 for p in model.parameters())
    assert model(mp.randn(2, 64)).dtype == mp.float32 and not model._hooks["forward_pre"]
