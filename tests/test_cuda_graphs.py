"""CUDA graphs (mp.cuda.CUDAGraph, mp.cuda.graph, make_graphed_callables): all on a GPU.

test_captured_amp_step_replays_the_eager_trajectory_bit_for_bit captures a
whole AMP training step with a fused optimizer: GradScaler.step hands it the
scale and found_inf, and it skips on the device, so nothing in the step reads
the device. The same step, recorded and replayed on the kernels built for the
host, runs on every machine (tests/test_kernels_host.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.functional as F

pytestmark = pytest.mark.gpu
cuda = mp.cuda


def test_capture_and_replay_with_static_inputs():
    x = mp.zeros(1000, device="cuda")
    y = x * 2 + 1  # warm-up: kernels compiled before capture
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        y = (x * 2 + 1).relu()
    for value in (3.0, -4.0, 0.5):
        x.copy_(mp.full((1000,), value, device="cuda"))
        g.replay()
        np.testing.assert_array_equal(y.numpy(), np.full(1000, max(2 * value + 1, 0), np.float32))
    with pytest.raises(RuntimeError, match="already holds a capture"):
        g.capture_begin()
    g.reset()
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()


def test_graphs_share_a_pool_when_replayed_in_capture_order():
    x = mp.ones(256, device="cuda")
    (x + 1) * 3
    g1, g2 = cuda.CUDAGraph(), cuda.CUDAGraph()
    with cuda.graph(g1):
        a = x + 1
    with cuda.graph(g2, pool=g1.pool()):
        b = a * 3
    assert g2.pool() is g1.pool()
    x.copy_(mp.full((256,), 5.0, device="cuda"))
    g1.replay()
    g2.replay()
    np.testing.assert_array_equal(b.numpy(), np.full(256, 18.0, np.float32))
    handle = cuda.graph_pool_handle()
    g3 = cuda.CUDAGraph()
    with cuda.graph(g3, pool=handle):
        c = x - 1
    g3.replay()
    assert g3.pool() is handle and c.numpy()[0] == 4.0


def test_capture_refuses_the_default_stream_and_unsupported_work():
    g = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="legacy default stream"):
        g.capture_begin()
    x = mp.ones(10, device="cuda")
    with pytest.raises(Exception):
        with cuda.graph(g):
            float((x * 2).sum())  # a host read inside a capture
    assert not mp.backend.capture.is_capturing()
    with pytest.raises(RuntimeError, match="random draw"):
        with cuda.graph(cuda.CUDAGraph()):
            F.dropout(x, 0.5)
    y = x * 3  # eager work runs again after a failed capture
    assert y.numpy()[0] == 3.0
    with pytest.raises(ValueError, match="capture_error_mode"):
        cuda.CUDAGraph().capture_begin(capture_error_mode="loose")


def test_memory_of_a_live_graph_is_counted():
    x = mp.ones(1 << 20, device="cuda")
    x * 2
    before = cuda.memory_allocated()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        y = x * 2
    assert cuda.memory_allocated() - before >= 4 << 20  # y lives in the graph's private pool
    del y


def _mlp():
    return mp.nn.Sequential(mp.nn.Linear(16, 32), mp.nn.ReLU(), mp.nn.Linear(32, 4)).to("cuda")


def test_make_graphed_callables_matches_eager_forward_and_backward():
    mp.manual_seed(0)
    eager, graphed_model = _mlp(), _mlp()
    graphed_model.load_state_dict(eager.state_dict())
    sample = mp.randn(8, 16, device="cuda", requires_grad=True)
    graphed = cuda.make_graphed_callables(graphed_model, (sample,))
    for p in graphed_model.parameters():
        p.grad = None  # warm-up gradients are not part of the comparison
    for step in range(3):
        x = mp.randn(8, 16, device="cuda")
        xe, xg = x.detach().requires_grad_(), x.detach().requires_grad_()
        out_e, out_g = eager(xe), graphed(xg)
        np.testing.assert_array_equal(out_g.numpy(), out_e.numpy())
        (out_e ** 2).sum().backward()
        (out_g ** 2).sum().backward()
        np.testing.assert_array_equal(xg.grad.numpy(), xe.grad.numpy())
        for pe, pg in zip(eager.parameters(), graphed_model.parameters()):
            np.testing.assert_array_equal(pg.grad.numpy(), pe.grad.numpy())  # accumulated, as eager
    graphed_model.eval()
    np.testing.assert_array_equal(graphed(x).numpy(), eager(x).numpy())  # other mode: runs eagerly
    with pytest.raises(ValueError, match="differs from the captured"):
        graphed_model.train()
        graphed(mp.randn(4, 16, device="cuda"))


def test_make_graphed_callables_refuses_autocast_caching():
    with mp.autocast("cuda"), pytest.raises(RuntimeError, match="cache_enabled=False"):
        cuda.make_graphed_callables(_mlp(), (mp.randn(2, 16, device="cuda"),))


def _amp_step(model, opt, scaler, x, y):
    opt.zero_grad(set_to_none=False)  # backward accumulates into the same memory: the kernels' tables stay valid
    with mp.autocast("cuda", dtype=mp.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    return loss


@pytest.mark.parametrize("make_opt", [lambda ps: mp.optim.SGD(ps, lr=0.1, momentum=0.9),  # taken back there
                                      lambda ps: mp.optim.Adam(ps, lr=1e-2),
                                      lambda ps: mp.optim.SGD(ps, lr=0.1, momentum=0.9, fused=True),
                                      lambda ps: mp.optim.Adam(ps, lr=1e-2, fused=True)],
                         ids=["per-tensor-SGD", "per-tensor-Adam", "SGD", "Adam"])
def test_captured_amp_step_replays_the_eager_trajectory_bit_for_bit(make_opt):
    """Forward, scaled backward, unscale, step, update: eager vs one graph replayed, inf/NaN steps included."""
    mp.manual_seed(0)
    runs = []
    for _ in range(2):
        model = _mlp()
        opt = make_opt(model.parameters())
        scaler = mp.amp.GradScaler("cuda", init_scale=2.0 ** 14, growth_interval=3)
        runs.append((model, opt, scaler))
    runs[1][0].load_state_dict(runs[0][0].state_dict())
    data = mp.randn(12, 8, 16, device="cuda")
    targets = mp.randint(0, 4, (12, 8), device="cuda")
    data._array[4, 0, 0] = np.inf  # an overflowing step and a NaN step: both must be skipped, the scale backed off
    data._array[8, 3, 5] = np.nan

    warm = 2
    for model, opt, scaler in runs:  # identical warm-up: creates momentum buffers and the scaler's state
        for i in range(warm):
            _amp_step(model, opt, scaler, data[i], targets[i])
    model, opt, scaler = runs[1]
    static_x, static_y = data[warm].clone(), targets[warm].clone()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        _amp_step(model, opt, scaler, static_x, static_y)

    scales = {warm - 1: runs[0][2].get_scale()}
    for i in range(warm, data.shape[0]):
        _amp_step(*runs[0], data[i], targets[i])
        static_x.copy_(data[i])
        static_y.copy_(targets[i])
        g.replay()
        cuda.synchronize()
        scales[i] = runs[0][2].get_scale()
        assert runs[1][2].get_scale() == scales[i], f"step {i}"
        for pe, pg in zip(runs[0][0].parameters(), runs[1][0].parameters()):
            np.testing.assert_array_equal(pg.numpy(), pe.numpy(), err_msg=f"step {i}")
    for bad in (4, 8):  # the injected inf and NaN each backed the scale off (it grows again after 3 clean steps)
        assert scales[bad] == scales[bad - 1] / 2, scales


class _HostStateSGD(mp.optim.SGD):
    """A per-tensor optimizer with state the device cannot take back (as a user's own may have)."""
    state_on_device = False


def test_a_step_that_must_read_found_inf_on_the_host_refuses_capture():
    model = _mlp()
    opt = _HostStateSGD(model.parameters(), lr=0.1)  # the scaler must decide on the host
    scaler = mp.amp.GradScaler("cuda")
    x, y = mp.randn(8, 16, device="cuda"), mp.randint(0, 4, (8,), device="cuda")
    _amp_step(model, opt, scaler, x, y)
    with pytest.raises(RuntimeError, match="must read found_inf on the host.*fused=True"):
        with cuda.graph(cuda.CUDAGraph()):
            _amp_step(model, opt, scaler, x, y)
    assert not mp.backend.capture.is_capturing()
