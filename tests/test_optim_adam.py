"""Adam and AdamW against a hand-written float64 reference (the paper's formulas) and against torch."""
import copy
import math

import numpy as np
import pytest

import mixprec as mp

rng = np.random.default_rng(5)
GRADS = [rng.standard_normal((3, 4)) for _ in range(6)]
W0 = rng.standard_normal((3, 4))


def reference(w, grads, lr, betas, eps, wd, amsgrad=False, maximize=False, decoupled=False):
    """Adam as written in the paper (bias-corrected moments), element by element in Python floats."""
    b1, b2 = betas
    w = w.copy()
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    vmax = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        g = -g if maximize else g.copy()
        if wd and decoupled:
            w = w * (1 - lr * wd)
        elif wd:
            g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        m_hat = m / (1 - b1 ** t)
        v_hat = (vmax if amsgrad else v) / (1 - b2 ** t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
    return w


CASES = [
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.02, amsgrad=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.01, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.03, weight_decay=0.2, amsgrad=True, maximize=True, betas=(0.3, 0.9))),
]


def run(cls, kw, grads=GRADS, dtype=mp.float64):
    p = mp.nn.Parameter(mp.tensor(W0, dtype=dtype))
    opt = getattr(mp.optim, cls)([p], **kw)
    for g in grads:
        p.grad = mp.tensor(g, dtype=dtype)
        opt.step()
    return p, opt


@pytest.mark.parametrize("cls, kw", CASES)
def test_matches_hand_written_reference_over_several_steps(cls, kw):
    p, _ = run(cls, kw)
    defaults = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2 if cls == "AdamW" else 0.0)
    full = defaults | kw
    expected = reference(W0, GRADS, full["lr"], full["betas"], full["eps"], full["weight_decay"],
                         full.get("amsgrad", False), full.get("maximize", False), decoupled=cls == "AdamW")
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-12, atol=1e-14)


def test_first_step_moves_every_weight_by_lr():
    # after one step m_hat/sqrt(v_hat) = g/|g| = sign(g): the textbook sanity check
    p, _ = run("Adam", dict(lr=0.1, eps=0.0), grads=GRADS[:1])
    np.testing.assert_allclose(p.numpy(), W0 - 0.1 * np.sign(GRADS[0]), rtol=1e-14)


@pytest.mark.parametrize("dtype", [mp.float32, mp.float16, mp.bfloat16])
def test_state_keeps_the_parameter_dtype(dtype):
    p, opt = run("Adam", dict(lr=0.01, amsgrad=True), dtype=dtype)
    state = opt.state[p]
    assert state["step"] == len(GRADS)
    for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
        assert state[key].dtype == dtype and state[key].shape == p.shape


@pytest.mark.parametrize("cls, kw", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_matches_torch(cls, kw, dtype):
    torch = pytest.importorskip("torch")
    p, _ = run(cls, kw, dtype=getattr(mp, dtype))
    t = torch.nn.Parameter(torch.tensor(W0, dtype=getattr(torch, dtype)))
    opt = getattr(torch.optim, cls)([t], **kw)
    for g in GRADS:
        t.grad = torch.tensor(g, dtype=getattr(torch, dtype))
        opt.step()
    ours = p.numpy().astype(np.float64)
    theirs = t.detach().double().numpy()
    # float32: torch fuses multiply-adds (1 ulp); half: each kernel rounds like torch's, give or take one ulp
    ulp = {"float32": 2 ** -23, "float16": 2 ** -10, "bfloat16": 2 ** -7}[dtype]
    np.testing.assert_allclose(ours, theirs, rtol=4 * ulp, atol=4 * ulp)


def test_param_groups_skip_missing_grads_and_state_dict_resume():
    a = mp.nn.Parameter(mp.tensor(W0))
    b = mp.nn.Parameter(mp.tensor(W0[0]))
    opt = mp.optim.AdamW([{"params": [a]}, {"params": [b], "lr": 0.1, "weight_decay": 0.0}], lr=0.01)
    a.grad = mp.tensor(GRADS[0])
    opt.step()  # b has no grad: untouched and without state
    np.testing.assert_array_equal(b.numpy(), W0[0])
    assert all(k is not b for k in opt.state) and opt.param_groups[1]["lr"] == 0.1

    def steps(o, pa, pb, gs):
        for g in gs:
            pa.grad, pb.grad = mp.tensor(g), mp.tensor(g[0])
            o.step()
    sd = opt.state_dict()
    a2, b2 = mp.nn.Parameter(mp.tensor(a.numpy())), mp.nn.Parameter(mp.tensor(b.numpy()))
    opt2 = mp.optim.AdamW([{"params": [a2]}, {"params": [b2], "lr": 0.5}], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[1]["lr"] == 0.1 and opt2.param_groups[0]["betas"] == (0.9, 0.999)
    steps(opt, a, b, GRADS[1:4])
    steps(opt2, a2, b2, GRADS[1:4])
    np.testing.assert_array_equal(a.numpy(), a2.numpy())
    np.testing.assert_array_equal(b.numpy(), b2.numpy())


@pytest.mark.parametrize("kw, message", [
    (dict(lr=-1.0), "learning rate"), (dict(eps=-1.0), "epsilon"), (dict(betas=(1.0, 0.9)), "index 0"),
    (dict(betas=(0.9, -0.1)), "index 1"), (dict(weight_decay=-0.1), "weight_decay"), (dict(betas=(0.9,)), "pair"),
])
def test_invalid_hyper_parameters(kw, message):
    with pytest.raises(ValueError, match=message):
        mp.optim.Adam([mp.nn.Parameter(mp.zeros(2))], **kw)


def test_adamw_default_weight_decay_and_sgd_maximize():
    opt = mp.optim.AdamW([mp.nn.Parameter(mp.zeros(2))])
    assert opt.param_groups[0]["weight_decay"] == 1e-2 and opt.param_groups[0]["decoupled_weight_decay"]
    p = mp.nn.Parameter(mp.zeros(2))
    sgd = mp.optim.SGD([p], lr=0.5, maximize=True)
    p.grad = mp.tensor([1.0, -2.0])
    sgd.step()
    np.testing.assert_array_equal(p.numpy(), [0.5, -1.0])
    assert math.isclose(mp.optim.Adam([p], lr=0.3).param_groups[0]["lr"], 0.3)


@pytest.mark.gpu
def test_a_skipped_step_on_the_device_keeps_state_even_a_count_loaded_from_a_checkpoint():
    """On a GPU a per-tensor Adam step given found_inf is taken back there: parameters, moments and the step
    count stay bit for bit, also when the count came from load_state_dict as a host int."""
    mp.manual_seed(0)
    p = mp.nn.Parameter(mp.randn(5, device="cuda"))
    opt = mp.optim.Adam([p], lr=0.1)
    for _ in range(3):
        p.grad = mp.randn(5, device="cuda")
        opt.step()
    resumed = mp.optim.Adam([p], lr=0.1)
    resumed.load_state_dict(opt.state_dict())
    weights, before = p.numpy().copy(), resumed.state_dict()["state"][0]
    p.grad = mp.randn(5, device="cuda")
    resumed.step(found_inf=mp.ones(1, device="cuda")._array)
    after = resumed.state_dict()["state"][0]
    np.testing.assert_array_equal(p.numpy(), weights)
    assert after["step"] == before["step"] == 3
    for key in ("exp_avg", "exp_avg_sq"):
        np.testing.assert_array_equal(after[key].numpy(), before[key].numpy())
    resumed.step(found_inf=mp.zeros(1, device="cuda")._array)  # a clear step goes on from 3
    assert resumed.state_dict()["state"][0]["step"] == 4 and not np.array_equal(p.numpy(), weights)


def test_a_checkpoint_resumes_each_moment_on_its_own_parameter_after_a_reassignment():
    """LayerNorm's weight and bias have one shape: resuming Adam by position puts their moments on the wrong
    one, silently, unless reassigning a parameter keeps its place in parameters() (as in torch)."""
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((4, 3))
    target = rng.standard_normal((4, 3))

    def model(lib, init):
        ln = lib.nn.LayerNorm(3)
        if init:  # a first run initialises the weight; a resumed one loads it
            ln.weight = lib.nn.Parameter(lib.tensor(np.array([0.5, 1.0, 2.0], dtype=np.float32)))
        return ln

    def train(lib, ln, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            ((ln(lib.tensor(x, dtype=lib.float32)) - lib.tensor(target, dtype=lib.float32)) ** 2).sum().backward()
            opt.step()

    final = {}
    for lib in (mp, torch):
        ln = model(lib, init=True)
        opt = lib.optim.Adam(ln.parameters(), lr=0.1)
        train(lib, ln, opt, 2)
        saved = copy.deepcopy({"model": ln.state_dict(), "optim": opt.state_dict()})  # as if on disk (torch's
        # state_dicts share memory with the live model and optimizer)
        resumed = model(lib, init=False)  # a new process: the model is built again, then loaded
        resumed_opt = lib.optim.Adam(resumed.parameters(), lr=0.1)
        resumed.load_state_dict(saved["model"])
        resumed_opt.load_state_dict(saved["optim"])
        for name, p in resumed.named_parameters():
            moment = resumed_opt.state[p]["exp_avg"]  # (mixprec keeps raw arrays, torch tensors)
            original = opt.state[dict(ln.named_parameters())[name]]["exp_avg"]
            np.testing.assert_array_equal(np.asarray(moment), np.asarray(original))
        train(lib, ln, opt, 2)
        train(lib, resumed, resumed_opt, 2)
        for name, p in resumed.named_parameters():
            np.testing.assert_array_equal(p.detach().numpy(), dict(ln.named_parameters())[name].detach().numpy())
        final[lib.__name__] = {n: p.detach().numpy() for n, p in resumed.named_parameters()}
    for name, value in final["torch"].items():
        np.testing.assert_allclose(final["mixprec"][name], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw, message", [
    (dict(lr="1e-3"), "Adam: lr must be a real number, got '1e-3'"), (dict(eps=None), "Adam: eps must be a real"),
    (dict(betas=None), "Adam: betas must be a pair"), (dict(betas="ab"), "Adam: betas must be a pair"),
    (dict(betas=(0.9, "x")), "Adam: betas\\[1\\] must be a real number"),
])
def test_hyper_parameters_of_the_wrong_type_are_type_errors_as_in_torch(kw, message):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        torch.optim.Adam([torch.nn.Parameter(torch.ones(1))], **kw)
    with pytest.raises(TypeError, match=message):
        mp.optim.Adam([mp.nn.Parameter(mp.ones(1))], **kw)
