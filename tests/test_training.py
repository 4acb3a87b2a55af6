"""End to end: AMP training on the CPU learns, and a checkpointed run resumes bit for bit."""
import numpy as np
import pytest

import mixprec as mp
from mixprec import nn
from mixprec.nn import functional as F


def patterns(n, seed=0):
    """8x8 single-channel images of 4 classes: a fixed random stroke pattern per class plus noise and shifts."""
    rng = np.random.default_rng(seed)
    protos = (np.random.default_rng(99).random((4, 8, 8)) > 0.6).astype(np.float32)
    y = rng.integers(0, 4, n)
    x = protos[y] + rng.normal(0, 0.35, (n, 8, 8)).astype(np.float32)
    shift = rng.integers(-1, 2, n)
    x = np.stack([np.roll(img, s, axis=1) for img, s in zip(x, shift)])
    return x[:, None].astype(np.float32), y.astype(np.int64)


def cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Dropout(0.1), nn.Linear(8 * 4 * 4, 4))


@pytest.fixture(autouse=True)
def _quiet_overflow():
    with np.errstate(over="ignore", invalid="ignore"):  # float16 overflows are expected; the scaler skips them
        yield


@pytest.mark.parametrize("dtype", [mp.float16, mp.bfloat16])
def test_amp_training_on_cpu_learns(dtype):
    mp.manual_seed(0)
    x, y = patterns(640)
    x_train, y_train, x_test, y_test = x[:512], y[:512], x[512:], y[512:]
    model = cnn()
    opt = mp.optim.Adam(model.parameters(), lr=5e-3)
    scaler = mp.GradScaler("cpu", init_scale=2.0 ** 16, growth_interval=20)
    losses, skipped = [], 0
    for epoch in range(4):
        perm = np.random.default_rng(epoch).permutation(512)
        for i in range(0, 512, 32):
            idx = perm[i:i + 32]
            with mp.autocast("cpu", dtype=dtype):
                logits = model(mp.tensor(x_train[idx]))
                loss = F.cross_entropy(logits, mp.tensor(y_train[idx]))
            assert logits.dtype == dtype and loss.dtype == mp.float32  # linear: lower precision; loss: fp32
            opt.zero_grad()
            scaler.scale(loss).backward()
            assert all(p.grad.dtype == mp.float32 for p in model.parameters())  # grads in the leaves' dtype
            scaler.step(opt)
            scaler.update()
            skipped += bool(scaler.last_step_skipped)
            losses.append(loss.item())
    assert all(p.dtype == mp.float32 for p in model.parameters())
    assert np.mean(losses[-8:]) < 0.25 * np.mean(losses[:8]), (losses[:8], losses[-8:])
    assert skipped < len(losses) // 4
    model.eval()
    with mp.no_grad(), mp.autocast("cpu", dtype=dtype):
        pred = model(mp.tensor(x_test)).argmax(dim=1).numpy()
    assert (pred == y_test).mean() >= 0.9


def _build(seed):
    mp.manual_seed(seed)
    model = cnn()
    opt = mp.optim.AdamW(model.parameters(), lr=3e-3)
    sched = mp.optim.lr_scheduler.SequentialLR(opt, [
        mp.optim.lr_scheduler.LinearLR(opt, start_factor=0.2, total_iters=5, skip_unstepped=True),
        mp.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=30)], milestones=[5], skip_unstepped=True)
    scaler = mp.GradScaler("cpu", init_scale=2.0 ** 22, growth_interval=4)
    return model, opt, sched, scaler


def _run(state, data, start, stop):
    model, opt, sched, scaler = state
    x, y = data
    for _ in range(start, stop):
        idx = mp.randint(0, len(x), (32,)).numpy()
        with mp.autocast("cpu", dtype=mp.float16):
            loss = F.cross_entropy(model(mp.tensor(x[idx])), mp.tensor(y[idx]))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)  # clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        sched.step()


def test_resume_equals_uninterrupted_run_bit_for_bit(tmp_path):
    data = patterns(256, seed=1)
    full = _build(0)
    _run(full, data, 0, 30)
    stats = full[3].statistics()
    assert stats["skipped_steps"] > 0  # the restart has to carry a moving loss scale across

    first = _build(0)
    _run(first, data, 0, 13)
    model, opt, sched, scaler = first
    mp.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
             "scaler": scaler.state_dict(), "rng": mp.get_rng_state(), "step": 13}, tmp_path / "ck.mp")
    del first, model, opt, sched, scaler
    mp.manual_seed(123)
    mp.randn(1000)  # disturb the generator: the checkpoint must restore it

    resumed = _build(7)
    ck = mp.load(tmp_path / "ck.mp")
    resumed[0].load_state_dict(ck["model"])
    resumed[1].load_state_dict(ck["opt"])
    resumed[2].load_state_dict(ck["sched"])
    resumed[3].load_state_dict(ck["scaler"])
    mp.set_rng_state(ck["rng"])
    _run(resumed, data, ck["step"], 30)

    for (name, a), b in zip(full[0].state_dict().items(), resumed[0].state_dict().values()):
        assert a.numpy().tobytes() == b.numpy().tobytes(), name
    assert full[3].get_scale() == resumed[3].get_scale()
    assert full[2].get_last_lr() == resumed[2].get_last_lr()
    for p, q in zip(full[0].parameters(), resumed[0].parameters()):
        for key in ("exp_avg", "exp_avg_sq"):
            assert full[1].state[p][key].tobytes() == resumed[1].state[q][key].tobytes()
