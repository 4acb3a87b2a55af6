"""fused=True optimizers on the CPU (the kernels' NumPy twin): torch's fused trajectories with a GradScaler, skipped
steps bit-identical and decided without reading found_inf, O2 masters in the same pass, checkpoints, errors.

The kernels themselves (built for the host) are checked against this twin in tests/test_kernels_host.py.
"""
import numpy as np
import pytest

import mixprec as mp
from mixprec.backend import capture

SHAPES = [(3, 4), (5,), (7, 2), (1,)]
W0 = [np.random.default_rng(1).standard_normal(s).astype(np.float32) for s in SHAPES]


def gradients(steps, seed=2, poison=()):
    """Per step, a gradient per parameter; (step, parameter index, value) in poison is written into element 0."""
    rng = np.random.default_rng(seed)
    grads = [[(rng.standard_normal(s) * 0.05).astype(np.float32) for s in SHAPES] for _ in range(steps)]
    for step, i, value in poison:
        grads[step][i].reshape(-1)[0] = value
    return grads


def train(framework, cls, kw, grads, init_scale=2.0 ** 10, dtype="float32"):
    """A GradScaler("cpu") loop over the given gradients: the loss is sum(p * g), so each p.grad is g * scale."""
    if framework == "torch":
        import torch
        params = [torch.nn.Parameter(torch.tensor(w, dtype=getattr(torch, dtype))) for w in W0]
        opt = getattr(torch.optim, cls)(params, **kw)
        scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=3)
        wrap = torch.tensor
    else:
        params = [mp.nn.Parameter(mp.tensor(w, dtype=getattr(mp, dtype))) for w in W0]
        opt = getattr(mp.optim, cls)(params, **kw)
        scaler = mp.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=3)
        wrap = mp.tensor
    history = []
    for g in grads:
        opt.zero_grad()
        loss = sum((p * wrap(gi).to(p.dtype)).sum() for p, gi in zip(params, g))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        history.append((snapshot(params, opt, framework), scaler.get_scale()))
    return history


def snapshot(params, opt, framework):
    """Parameters, gradients and optimizer state as float64 NumPy arrays (steps as ints)."""
    as_np = (lambda t: t.detach().double().numpy()) if framework == "torch" else (lambda t: np.asarray(t, np.float64))
    out = {}
    for i, p in enumerate(params):
        out[f"param{i}"] = as_np(p)
        out[f"grad{i}"] = as_np(p.grad)
        for key, value in opt.state.get(p, {}).items():
            if key == "step":
                value = int(value.item()) if framework == "torch" else int(np.asarray(value).reshape(-1)[0])
            elif framework != "torch":
                value = np.asarray(value, np.float64)
            else:
                value = as_np(value)
            out[f"{key}{i}"] = value
    return out


def assert_close(a, b, rtol=2e-6, atol=2e-8, msg=""):
    assert a.keys() == b.keys(), msg
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=rtol, atol=atol, err_msg=f"{msg} {key}")


TORCH_CASES = [
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.01, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.03, weight_decay=0.2, amsgrad=True, betas=(0.3, 0.9))),  # lerp from the other end
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True)),
]


@pytest.mark.parametrize("cls, kw", TORCH_CASES, ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v)))
def test_trajectories_equal_torchs_fused_optimizers_with_a_grad_scaler(cls, kw):
    """Steps 2 (inf) and 5 (NaN) overflow: both libraries skip them, back the scale off and keep everything."""
    torch = pytest.importorskip("torch")
    grads = gradients(8, poison=[(2, 1, np.inf), (5, 0, np.nan)])
    ours = train("mp", cls, dict(kw, fused=True), grads)
    theirs = train("torch", cls, dict(kw, fused=True), grads)
    assert getattr(torch.optim, cls)([torch.zeros(1, requires_grad=True)], fused=True)._step_supports_amp_scaling
    for step, ((a, scale_a), (b, scale_b)) in enumerate(zip(ours, theirs)):
        assert scale_a == scale_b, step
        assert_close(a, b, msg=f"step {step}")
    assert [s for _, s in ours][:3] == [1024.0, 1024.0, 512.0]


@pytest.mark.parametrize("cls, kw", [("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.01))])
def test_a_skipped_first_step_is_as_if_it_never_happened(cls, kw):
    """The very first step overflows (torch's fused SGD then reads uninitialised momentum buffers; mixprec's start at
    zero, so with dampening=0 the first real step is torch's non-fused first step)."""
    pytest.importorskip("torch")
    grads = gradients(5, poison=[(0, 2, np.inf)])
    ours = train("mp", cls, dict(kw, fused=True), grads)
    theirs = train("torch", cls, dict(kw, foreach=False), grads)
    for step, ((a, _), (b, _)) in enumerate(zip(ours, theirs)):
        if step == 0:  # mixprec made the state (zeros) although the step was skipped; torch's non-fused made none.
            assert a.keys() - b.keys() and all(not np.any(a[k]) for k in a.keys() - b.keys())
            # A skipped fused step leaves the gradients scaled (torch's fused too); the non-fused path unscaled them.
            a, b = ({k: v for k, v in d.items() if k in b and not k.startswith("grad")} for d in (a, b))
        assert_close(a, b, msg=f"step {step}")


@pytest.mark.parametrize("cls, kw", [("SGD", dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.1)),
                                     ("SGD", dict(lr=0.1, momentum=0.5, nesterov=True, maximize=True)),
                                     ("SGD", dict(lr=0.3))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_sgd_is_the_per_tensor_sgd_bit_for_bit_in_float32_and_float64(cls, kw, dtype):
    grads = gradients(6, poison=[(3, 0, -np.inf)])
    fused = train("mp", cls, dict(kw, fused=True), grads, dtype=dtype)
    plain = train("mp", cls, kw, grads, dtype=dtype)
    for step, ((a, _), (b, _)) in enumerate(zip(fused, plain)):
        for key in a:
            if not (step == 3 and key.startswith("grad")):  # skipped: fused leaves them scaled, like torch's fused
                assert np.array_equal(a[key], b[key]), key


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_fused_adam_is_the_per_tensor_adam_to_the_last_bits(cls):
    """The same lines in float32; only the bias corrections differ (beta**step by squaring on the device, by pow() on
    the host): a float64 difference that rarely moves a float32 result by one ulp."""
    grads = gradients(12)
    fused = train("mp", cls, dict(lr=0.01, weight_decay=0.1, fused=True), grads)
    plain = train("mp", cls, dict(lr=0.01, weight_decay=0.1), grads)
    for (a, _), (b, _) in zip(fused, plain):
        assert_close(a, b, rtol=3e-7, atol=1e-9)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("cls, kw", [("Adam", dict(lr=0.01, amsgrad=True)), ("SGD", dict(lr=0.1, momentum=0.9))])
def test_half_precision_state_is_computed_in_float32_and_rounded_once(dtype, cls, kw):
    """One fused step on float16/bfloat16 parameters equals the float64 computation of the same step rounded once
    (the per-tensor optimizer rounds after every line, like torch's non-fused kernels)."""
    grads = gradients(1)
    (half, _), = train("mp", cls, dict(kw, fused=True), grads, init_scale=1.0, dtype=dtype)
    p64 = [mp.nn.Parameter(mp.tensor(mp.tensor(w, dtype=getattr(mp, dtype)).numpy(), dtype=mp.float64)) for w in W0]
    opt = getattr(mp.optim, cls)(p64, **kw)
    for p, g in zip(p64, grads[0]):
        p.grad = mp.tensor(mp.tensor(g, dtype=getattr(mp, dtype)).numpy(), dtype=mp.float64)
    opt.step()
    exact = snapshot(p64, opt, "mp")
    for key, value in half.items():
        if key.startswith("step"):
            assert value == exact[key]
            continue
        rounded = np.asarray(mp.tensor(exact[key]).to(getattr(mp, dtype)).numpy(), np.float64)
        ulp = np.spacing(np.abs(rounded).astype(np.float16 if dtype == "float16" else np.float32))
        if dtype == "bfloat16":
            ulp = ulp * 2.0 ** 16
        assert np.all(np.abs(value - rounded) <= ulp), key  # within one ulp of the exact result rounded once


def test_a_skipped_step_changes_nothing_and_is_not_read_on_the_host(monkeypatch):
    """found_inf is handed to the optimizer; its kernel skips. The scaler never reads found_inf."""
    params = [mp.nn.Parameter(mp.tensor(w)) for w in W0]
    opt = mp.optim.Adam(params, lr=0.1, amsgrad=True, fused=True)
    scaler = mp.amp.GradScaler("cpu", init_scale=2.0 ** 8)
    assert opt.supports_amp_scaling and not mp.optim.Adam(params, lr=0.1).supports_amp_scaling

    def no_host_read(*args):
        raise AssertionError("GradScaler.step read found_inf on the host")

    monkeypatch.setattr(mp.amp.GradScaler, "_read_found_inf", no_host_read)
    for step, g in enumerate(gradients(3, poison=[(2, 3, np.nan)])):
        opt.zero_grad()
        scaler.scale(sum((p * mp.tensor(gi)).sum() for p, gi in zip(params, g))).backward()
        before = snapshot(params, opt, "mp")
        result = scaler.step(opt)
        scaler.update()
        assert result is None and scaler.last_step_skipped is None
    after = snapshot(params, opt, "mp")
    for key in before:  # the NaN step: parameters, moments, counts and (scaled) gradients bit-identical
        assert np.array_equal(before[key], after[key], equal_nan=True), key
    assert after["step0"] == 2 and scaler.statistics()["skipped_steps"] == 1 and scaler.get_scale() == 2.0 ** 7


def test_unscale_first_hands_no_scale_to_the_step():
    """unscale_ (to clip) then step: the gradients are unscaled once, and the fused step gets grad_scale=None."""
    seen = []

    class Watched(mp.optim.SGD):
        def step(self, closure=None, **kwargs):
            seen.append({k: None if v is None else float(v[0]) for k, v in kwargs.items()})
            return super().step(closure, **kwargs)

    p = mp.nn.Parameter(mp.tensor([1.0, 2.0]))
    opt = Watched([p], lr=1.0, fused=True)
    scaler = mp.amp.GradScaler("cpu", init_scale=4.0)
    for clip in (False, True):
        opt.zero_grad()
        scaler.scale((p * mp.tensor([0.5, 0.25])).sum()).backward()
        if clip:
            scaler.unscale_(opt)
            assert p.grad.tolist() == [0.5, 0.25]
        scaler.step(opt)
        scaler.update()
        assert p.grad.tolist() == [0.5, 0.25]  # unscaled either way, as torch's fused step leaves them
    assert seen == [{"grad_scale": 4.0, "found_inf": 0.0}, {"grad_scale": None, "found_inf": 0.0}]
    assert p.tolist() == [0.0, 1.5]


def test_without_a_scaler_and_with_a_disabled_one_the_fused_step_is_a_plain_step():
    for scaler in (None, mp.amp.GradScaler("cpu", enabled=False)):
        p = mp.nn.Parameter(mp.tensor([1.0, -1.0]))
        opt = mp.optim.SGD([p], lr=0.5, momentum=0.5, fused=True)
        for _ in range(2):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step() if scaler is None else scaler.step(opt)
        assert p.tolist() == [-0.5, 0.5]  # step 1: buf = g = 2p = [2, -2], p = [0, 0]; step 2: buf = [1, -1]
        assert opt.state[p]["momentum_buffer"].tolist() == [1.0, -1.0]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the float16 overflow injected at step 2
def test_o2_masters_and_their_float16_weights_are_updated_in_one_pass():
    """mp.amp.initialize at O2 with a fused optimizer: the kernel writes the float32 master and its float16 model
    weight together (weight == master rounded, always), and the run equals the per-tensor O2 run (SGD: bit for bit,
    the float32 arithmetic is the same)."""
    runs = []
    for fused in (False, True):
        mp.manual_seed(0)
        model = mp.nn.Sequential(mp.nn.Linear(6, 8), mp.nn.LayerNorm(8), mp.nn.ReLU(), mp.nn.Linear(8, 3))
        opt = mp.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=fused)
        model, opt = mp.amp.initialize(model, opt, "O2")
        scaler = mp.amp.loss_scaler()
        rng = np.random.default_rng(3)
        for step in range(6):
            x = mp.tensor(rng.standard_normal((5, 6)).astype(np.float32) * (1e6 if step == 2 else 1.0))
            y = mp.tensor(rng.integers(0, 3, 5))
            opt.zero_grad()
            scaler.scale(mp.nn.functional.cross_entropy(model(x), y)).backward()
            scaler.step(opt)
            scaler.update()
        ext = mp.amp.MasterWeights.of(opt)
        for p, master in ext.pairs:
            assert np.array_equal(p.numpy(), master.numpy().astype(p.numpy().dtype))
        runs.append(([m.numpy().copy() for _, m in ext.pairs], scaler.statistics()))
    for a, b in zip(runs[0][0], runs[1][0]):
        assert np.array_equal(a, b)
    assert runs[0][1] == runs[1][1] and runs[0][1]["skipped_steps"] >= 1


def test_checkpoints_keep_counts_as_ints_and_move_between_fused_and_per_tensor():
    grads = gradients(6)
    params = [mp.nn.Parameter(mp.tensor(w)) for w in W0]
    fused = mp.optim.Adam(params, lr=0.01, fused=True)
    for g in grads[:3]:
        for p, gi in zip(params, g):
            p.grad = mp.tensor(gi)
        fused.step()
    saved = fused.state_dict()
    assert saved["state"][0]["step"] == 3 and isinstance(saved["state"][0]["step"], int)
    assert "fused" not in saved["param_groups"][0]  # a property of the optimizer object, not of a checkpoint
    copies = []
    for fused_flag in (False, True):
        ps = [mp.nn.Parameter(p.detach().clone()) for p in params]
        opt = mp.optim.Adam(ps, lr=0.01, fused=fused_flag)
        opt.load_state_dict(saved)
        copies.append((ps, opt))
    for g in grads[3:]:
        for ps, opt in [(params, fused)] + copies:
            for p, gi in zip(ps, g):
                p.grad = mp.tensor(gi)
            opt.step()
    for ps, opt in copies:
        for a, b in zip(ps, params):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=3e-7, atol=1e-9)
        assert opt.state_dict()["state"][0]["step"] == 6
    assert np.array_equal(copies[1][0][0].numpy(), params[0].numpy())  # fused after loading: bit for bit


# ---- capture ----
@pytest.fixture
def capturing():
    """What mp.cuda.graph sets while a stream captures (the CPU has no graphs; the checks are the same)."""
    capture.set_capturing(True)
    try:
        yield
    finally:
        capture.set_capturing(False)


def test_a_per_tensor_adam_and_a_scaler_deciding_on_the_host_refuse_capture_and_say_why(capturing):
    p = mp.nn.Parameter(mp.tensor([1.0]))
    p.grad = mp.tensor([1.0])
    with pytest.raises(RuntimeError, match="step count and bias corrections are kept on the host.*fused=True"):
        mp.optim.Adam([p]).step()
    mp.optim.SGD([p], lr=0.1).step()  # no host state: capturable as it is (torch's SGD too)
    mp.optim.Adam([p], fused=True).step()
    scaler = mp.amp.GradScaler("cpu")
    capture.set_capturing(False)
    scaler.scale(p.sum())
    capture.set_capturing(True)
    with pytest.raises(RuntimeError, match="must read found_inf on the host.*fused=True"):
        scaler.step(mp.optim.SGD([p], lr=0.1))
    assert p.tolist() == [np.float32(np.float32(0.9) - np.float32(0.001))] and p.grad.tolist() == [1.0]


# ---- bad input: clear errors, nothing changed ----
def test_bad_arguments_are_refused_before_anything_changes():
    with pytest.raises(TypeError, match="fused must be True or False"):
        mp.optim.SGD([mp.zeros(2, requires_grad=True)], fused=1)

    class Custom(mp.optim.Optimizer):
        def _update(self, p, grad, state, group):
            pass
    with pytest.raises(ValueError, match="Custom has no fused implementation"):
        Custom([mp.zeros(2, requires_grad=True)], {}, fused=True)
    p = mp.nn.Parameter(mp.tensor([1.0, 2.0]))
    p.grad = mp.tensor([1.0, 1.0])
    with pytest.raises(TypeError, match="grad_scale is for optimizers that unscale on the device"):
        mp.optim.SGD([p], lr=0.1).step(grad_scale=np.ones(1, np.float32))

    class HostCounter(mp.optim.SGD):  # per-tensor state the device cannot take back
        state_on_device = False
    with pytest.raises(TypeError, match="found_inf is for optimizers that can skip on the device"):
        HostCounter([p], lr=0.1).step(found_inf=np.zeros(1, np.float32))
    opt = mp.optim.Adam([p], lr=0.1, fused=True)
    with pytest.raises(TypeError, match="found_inf must be a one-element float32 array.*float64"):
        opt.step(found_inf=np.zeros(1))
    with pytest.raises(TypeError, match="grad_scale must be a one-element float32 array.*Tensor"):
        opt.step(grad_scale=mp.ones(1))
    q = mp.nn.Parameter(mp.tensor([[1.0, 2.0], [3.0, 4.0]]).T)
    q.grad = mp.ones(2, 2)
    opt = mp.optim.SGD([p, q], lr=0.1, fused=True)
    with pytest.raises(ValueError, match=r"parameter of shape \(2, 2\) \(float32\) is not contiguous"):
        opt.step()
    assert p.tolist() == [1.0, 2.0] and q.tolist() == [[1.0, 3.0], [2.0, 4.0]]  # nothing stepped


def test_a_schedule_that_counts_real_steps_refuses_steps_skipped_on_the_device():
    p = mp.nn.Parameter(mp.tensor([1.0]))
    opt = mp.optim.Adam([p], fused=True)
    counting = mp.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=4, skip_unstepped=True)
    plain = mp.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=1.0)
    scaler = mp.amp.GradScaler("cpu")
    scaler.scale(p.sum()).backward()
    scaler.step(opt)
    scaler.update()
    plain.step()  # torch's behaviour: advances every iteration
    with pytest.raises(RuntimeError, match="skip_unstepped=True cannot tell whether the optimizer stepped"):
        counting.step()
