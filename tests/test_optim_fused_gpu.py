"""Fused optimizers on a GPU (marked gpu): kernels/multi_tensor_optimizers.cu against its NumPy twin bit for bit,
no uploads and no host reads in a steady loop, and torch's CUDA fused Adam/SGD as the oracle when torch has CUDA.

The same checks run on the CPU against the kernels built for the host (tests/test_kernels_host.py); what only a GPU
can show is that NVRTC's code (the PTX of amp_common.cuh, -ftz=true appended) computes those same bits.
"""
import numpy as np
import pytest

import mixprec as mp
from mixprec import backend
from mixprec.backend import devices
from mixprec.amp import _kernels, _reference
from mixprec.amp._layout import AdamRule, SGDRule

pytestmark = pytest.mark.gpu

RULES = [("ADAM", AdamRule(1e-3, 0.9, 0.999, 1e-8, 0.0, False, False, False)),
         ("ADAM", AdamRule(2e-2, 0.6, 0.99, 1e-6, 0.1, True, True, False)),
         ("ADAM", AdamRule(5e-3, 0.2, 0.9, 1e-30, 0.3, True, False, True)),
         ("SGD", SGDRule(0.1, 0.9, 0.0, 0.0, False, False, True)),
         ("SGD", SGDRule(0.1, 0.9, 0.3, 0.01, False, True, False)),
         ("SGD", SGDRule(0.05, 0.8, 0.0, 0.02, True, False, False))]
SIZES = (1, 0, 7, 65536 + 3, 300_001)


def bits(a):
    a = np.ascontiguousarray(devices.to_device(a, devices.CPU))
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def lists_for(kind, rule, dtype, copy, rng, poison=0.0):
    def values(n, positive=False, bad=0.0):
        x = (rng.uniform(-2, 2, n) * np.exp2(rng.integers(-30, 14, n))).astype(np.float32)
        if bad and n:
            x[rng.choice(n, max(1, int(bad * n)), replace=False)] = np.nan
        return (np.abs(x) if positive else x).astype(dtype)
    lists = {"PARAM": [values(n) for n in SIZES], "GRAD": [values(n, bad=poison) for n in SIZES],
             "WEIGHT_COPY": [np.zeros(n, copy) if copy else None for n in SIZES]}
    if kind == "ADAM":
        lists.update(EXP_AVG=[values(n) for n in SIZES], EXP_AVG_SQ=[values(n, True) for n in SIZES],
                     MAX_EXP_AVG_SQ=[values(n, True) if rule.amsgrad else None for n in SIZES],
                     STEP=[np.array([k * 7], np.int64) for k in range(len(SIZES))])
    else:
        lists["MOMENTUM_BUFFER"] = [values(n) if rule.momentum else None for n in SIZES]
    return lists


@pytest.mark.parametrize("types", _kernels.OPTIMIZER_TYPES, ids=lambda t: f"{t[0]}+{t[1]}")
@pytest.mark.parametrize("kind, rule", RULES)
def test_the_kernels_compute_the_twins_bits(kind, rule, types):
    cp = backend.cupy_module()
    rng = np.random.default_rng(3)
    dtype, copy = mp.dtypes.as_dtype(types[0]), None if types[1] is None else mp.dtypes.as_dtype(types[1])
    for grad_scale, poison in ((None, 0.0), (np.array([3.0 * 2 ** 12], np.float32), 0.0), (None, 0.001)):
        host = lists_for(kind, rule, dtype, copy, rng, poison)
        device = {name: [None if a is None else cp.asarray(a) for a in arrays] for name, arrays in host.items()}
        found = np.zeros(1, np.float32)
        _kernels.optimizer_step(kind, device, rule, None if grad_scale is None else cp.asarray(grad_scale),
                                cp.asarray(found))
        _reference.optimizer_step(kind, host, rule, grad_scale, found)
        for name, arrays in device.items():
            for d, h in zip(arrays, host[name]):
                if d is not None:
                    assert np.array_equal(bits(d), bits(h)), name


def test_a_steady_fused_amp_loop_uploads_nothing_and_reads_nothing(monkeypatch):
    model = mp.nn.Sequential(mp.nn.Linear(32, 64), mp.nn.ReLU(), mp.nn.Linear(64, 8)).to("cuda")
    opt = mp.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    scaler = mp.amp.GradScaler("cuda")
    x, y = mp.randn(16, 32, device="cuda"), mp.randint(0, 8, (16,), device="cuda")

    def one_step():
        opt.zero_grad(set_to_none=False)
        with mp.autocast("cuda"):
            loss = mp.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    one_step()
    uploads, launches = _kernels.TABLES.uploads, _kernels.launch_count()
    monkeypatch.setattr(mp.amp.GradScaler, "_read_found_inf", lambda *a: pytest.fail("a host read"))
    for _ in range(3):
        one_step()
    assert _kernels.TABLES.uploads == uploads
    assert _kernels.launch_count() - launches == 3 * 4  # check, count steps, Adam, scale update


@pytest.mark.parametrize("cls, kw", [("Adam", dict(lr=1e-2, weight_decay=0.1)), ("AdamW", dict(lr=1e-2)),
                                     ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True))])
def test_trajectories_equal_torchs_cuda_fused_optimizers(cls, kw):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    # torch's CUDA Adam kernels compute the bias corrections 1 - beta**step in float32, its CPU kernel (like
    # mixprec's kernels and twin, on every device) in float64: their trajectories part by ~1e-5 relative per
    # step (seen on an H200: 3.7e-8 after 8 steps). A wrong update rule moves parameters by ~lr.
    tolerance = dict(rtol=2e-6, atol=2e-8) if cls == "SGD" else dict(rtol=1e-5, atol=1e-6)
    rng = np.random.default_rng(0)
    w = [rng.standard_normal(s).astype(np.float32) for s in ((64, 32), (32,), (1000,))]
    grads = [[(rng.standard_normal(a.shape) * 0.01).astype(np.float32) for a in w] for _ in range(8)]
    grads[3][1][0] = np.inf
    ours = [mp.nn.Parameter(mp.tensor(a, device="cuda")) for a in w]
    theirs = [torch.nn.Parameter(torch.tensor(a, device="cuda")) for a in w]
    opt_m = getattr(mp.optim, cls)(ours, fused=True, **kw)
    opt_t = getattr(torch.optim, cls)(theirs, fused=True, **kw)
    sc_m, sc_t = mp.amp.GradScaler("cuda", init_scale=1024.0), torch.amp.GradScaler("cuda", init_scale=1024.0)
    for g in grads:
        for params, opt, sc, wrap in ((ours, opt_m, sc_m, lambda a: mp.tensor(a, device="cuda")),
                                      (theirs, opt_t, sc_t, lambda a: torch.tensor(a, device="cuda"))):
            opt.zero_grad()
            sc.scale(sum((p * wrap(gi)).sum() for p, gi in zip(params, g))).backward()
            sc.step(opt)
            sc.update()
        assert sc_m.get_scale() == sc_t.get_scale()
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.numpy(), b.detach().cpu().numpy(), **tolerance)
