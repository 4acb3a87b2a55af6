"""Layers: initialisation, forward against float64 references, gradients (gradcheck) and input checks."""
import math

import numpy as np
import pytest

import mixprec as mp
from mixprec.autograd import gradcheck

nn = mp.nn
F = nn.functional
rng = np.random.default_rng(2)


def x64(*shape, grad=True):
    return mp.tensor(rng.standard_normal(shape), dtype=mp.float64, requires_grad=grad)


def check_module_grads(module, x):
    """gradcheck the module's output w.r.t. its input and each parameter (float64)."""
    module.double()
    assert gradcheck(lambda a: module(a), (x,))
    for name, p in module.named_parameters():
        w = mp.tensor(p.numpy().copy(), dtype=mp.float64, requires_grad=True)
        fn = _with(module, name, w)
        fn.x = x.detach()
        assert gradcheck(fn, (w,)), name


def _with(module, name, w):
    """module(x) as a function of w, which stands in for the parameter called name."""
    *path, attr = name.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part)

    def run(weight):
        saved = owner._parameters[attr]
        owner._parameters[attr] = weight
        try:
            return module(run.x)
        finally:
            owner._parameters[attr] = saved
    return run


def test_linear_init_forward_and_grads():
    mp.manual_seed(0)
    m = nn.Linear(5, 3)
    bound = 1 / math.sqrt(5)
    assert np.abs(m.weight.numpy()).max() <= bound and np.abs(m.bias.numpy()).max() <= bound
    assert np.abs(m.weight.numpy()).max() > 0.5 * bound  # really spread over the range
    mp.manual_seed(0)
    np.testing.assert_array_equal(nn.Linear(5, 3).weight.numpy(), m.weight.numpy())  # seeded init
    x = x64(4, 5)
    m.double()
    np.testing.assert_allclose(m(x).detach().numpy(), x.numpy() @ m.weight.numpy().T + m.bias.numpy(), rtol=1e-12)
    gradcheck(lambda a, w, b: F.linear(a, w, b), (x64(2, 5), x64(3, 5), x64(3)))
    with pytest.raises(ValueError,
                       match=r"Linear\(in_features=5.*expected input\[\.\.\., 5\], got input of shape \(4, 4\)"):
        m(x64(4, 4))


def naive_conv2d(x, w, b, stride, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w) + b
    return out


def test_conv2d_layer_init_forward_and_grads():
    mp.manual_seed(1)
    m = nn.Conv2d(2, 3, 3, stride=2, padding=1)
    bound = 1 / math.sqrt(2 * 9)
    assert m.weight.shape == (3, 2, 3, 3) and np.abs(m.weight.numpy()).max() <= bound
    m.double()
    x = x64(2, 2, 5, 5)
    ref = naive_conv2d(x.numpy(), m.weight.numpy(), m.bias.numpy(), 2, 1)
    np.testing.assert_allclose(m(x).detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    check_module_grads(nn.Conv2d(1, 2, 2), x64(1, 1, 3, 3))
    with pytest.raises(ValueError, match="with 2 channels"):
        m(x64(2, 3, 5, 5))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)


def test_layer_norm_forward_and_grads():
    m = nn.LayerNorm(4).double()
    with mp.no_grad():
        m.weight.copy_(mp.tensor(rng.standard_normal(4)))
        m.bias.copy_(mp.tensor(rng.standard_normal(4)))
    x = x64(3, 4)
    xn = x.numpy()
    ref = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(xn.var(-1, keepdims=True) + 1e-5) * m.weight.numpy() \
        + m.bias.numpy()
    np.testing.assert_allclose(m(x).detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    check_module_grads(nn.LayerNorm(3), x64(2, 3))
    with pytest.raises(ValueError, match=r"expected input\[\.\.\., 4\]"):
        m(x64(3, 5))
    assert nn.LayerNorm(4, elementwise_affine=False).weight is None
    assert "bias" not in nn.LayerNorm(4, bias=False).state_dict()


def test_batchnorm_running_stats_eval_and_momentum_none():
    m = nn.BatchNorm2d(2, momentum=None)
    batches = [rng.standard_normal((4, 2, 3, 3)) * (i + 1) + i for i in range(3)]
    for b in batches:
        m(mp.tensor(b))
    assert m.num_batches_tracked.item() == 3
    # momentum=None: the running mean is the plain average of the batch means
    expected = np.mean([b.mean(axis=(0, 2, 3)) for b in batches], axis=0)
    np.testing.assert_allclose(m.running_mean.numpy(), expected, rtol=1e-5)
    m.eval()
    x = rng.standard_normal((2, 2, 3, 3))
    y = m(mp.tensor(x)).numpy()
    ref = (x - m.running_mean.numpy()[None, :, None, None]) / np.sqrt(m.running_var.numpy()[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    assert m.num_batches_tracked.item() == 3  # eval does not count batches
    check_module_grads(nn.BatchNorm1d(3), x64(4, 3))
    with pytest.raises(ValueError, match="4-D input with 2 channels"):
        m(mp.randn(2, 2, 3))
    with pytest.raises(ValueError, match="2-D or 3-D input with 3 channels"):
        nn.BatchNorm1d(3)(mp.randn(2, 4))
    no_stats = nn.BatchNorm1d(3, track_running_stats=False)
    assert no_stats.running_mean is None and "running_mean" not in no_stats.state_dict()
    no_stats.eval()
    out = no_stats(mp.randn(5, 3)).numpy()  # no running stats: batch statistics even in eval
    np.testing.assert_allclose(out.mean(0), 0, atol=1e-5)


def test_embedding_layer():
    mp.manual_seed(0)
    m = nn.Embedding(10, 4, padding_idx=-1)
    assert m.padding_idx == 9 and not m.weight.numpy()[9].any()
    assert abs(float(m.weight.numpy()[:9].std()) - 1) < 0.5
    idx = mp.tensor([[1, 9], [3, 3]])
    out = m(idx)
    assert out.shape == (2, 2, 4)
    out.sum().backward()
    assert not m.weight.grad.numpy()[9].any() and (m.weight.grad.numpy()[3] == 2).all()


def test_dropout_layer_train_and_eval():
    m = nn.Dropout(0.5)
    x = mp.ones(50, 50)
    assert (m(x).numpy() == 0).any()
    m.eval()
    assert m(x) is x
    with pytest.raises(ValueError):
        nn.Dropout(-0.1)


def test_activation_pool_and_flatten_layers_match_functional():
    x = mp.randn(2, 3, 4, 4)
    for layer, fn in [(nn.ReLU(), F.relu), (nn.Tanh(), F.tanh), (nn.Sigmoid(), F.sigmoid),
                      (nn.GELU(), F.gelu), (nn.GELU("tanh"), lambda a: F.gelu(a, approximate="tanh")),
                      (nn.MaxPool2d(2), lambda a: F.max_pool2d(a, 2)),
                      (nn.AvgPool2d(3, 1, 1), lambda a: F.avg_pool2d(a, 3, 1, 1)),
                      (nn.Softmax(dim=1), lambda a: F.softmax(a, dim=1)), (nn.Identity(), lambda a: a)]:
        np.testing.assert_array_equal(layer(x).numpy(), fn(x).numpy())
    assert nn.Flatten()(x).shape == (2, 48)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 4)
    with pytest.raises(ValueError, match="dims 1 and -1"):
        nn.Flatten()(mp.randn(3))
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")


def test_loss_modules():
    logits, target = mp.randn(6, 4), mp.randint(0, 4, (6,))
    np.testing.assert_array_equal(nn.CrossEntropyLoss(label_smoothing=0.1)(logits, target).numpy(),
                                  F.cross_entropy(logits, target, label_smoothing=0.1).numpy())
    assert nn.CrossEntropyLoss(reduction="none")(logits, target).shape == (6,)
    a, b = mp.randn(5), mp.randn(5)
    np.testing.assert_allclose(nn.MSELoss()(a, b).item(), float(((a.numpy() - b.numpy()) ** 2).mean()), rtol=1e-6)
    np.testing.assert_allclose(nn.L1Loss(reduction="sum")(a, b).item(), float(np.abs(a.numpy() - b.numpy()).sum()),
                               rtol=1e-6)
    assert nn.BCEWithLogitsLoss()(a, (b > 0).float()).shape == ()
    assert nn.NLLLoss()(F.log_softmax(logits, dim=1), target).shape == ()
    assert nn.SmoothL1Loss(beta=0.5)(a, b).shape == ()
    assert nn.BCELoss()(a.sigmoid(), (b > 0).float()).shape == ()
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


def test_small_cnn_matches_torch():
    torch = pytest.importorskip("torch")
    mp.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(4, 4, 3), nn.GELU(), nn.AvgPool2d(2, ceil_mode=True), nn.Flatten(),
                      nn.LayerNorm(4), nn.Linear(4, 3)).double()
    tm = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                             torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 4, 3), torch.nn.GELU(),
                             torch.nn.AvgPool2d(2, ceil_mode=True), torch.nn.Flatten(), torch.nn.LayerNorm(4),
                             torch.nn.Linear(4, 3)).double()
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    x = rng.standard_normal((5, 1, 8, 8))
    y = rng.integers(0, 3, 5)
    loss = F.cross_entropy(m(mp.tensor(x)), mp.tensor(y))
    tloss = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
    tparams = dict(tm.named_parameters())
    for name, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
    tbufs = dict(tm.named_buffers())
    for name, b in m.named_buffers():
        np.testing.assert_allclose(b.numpy(), tbufs[name].numpy(), rtol=1e-12, err_msg=name)


def test_model_optimizer_and_checkpoint_on_each_device(device, tmp_path):
    """The same seeded CNN, one AdamW step and a checkpoint round trip: a device gives the CPU's numbers.
    (No dropout: a GPU draws its masks with cuRAND, so they differ from the CPU's by design. No bias in the
    convolution before BatchNorm, which cancels it: its gradient is 0 up to rounding, and Adam's first step,
    g / (|g| + eps), turns that rounding, different on each device, into a 1e-9 difference.)"""
    def run(dev):
        mp.manual_seed(3)
        m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.AvgPool2d(2), nn.Flatten(), nn.Linear(16, 3)).double().to(dev)
        emb = nn.Embedding(5, 3).double().to(dev)
        opt = mp.optim.AdamW(list(m.parameters()) + list(emb.parameters()), lr=0.1, amsgrad=True)
        x = mp.tensor(np.random.default_rng(0).standard_normal((6, 1, 8, 8)), device=dev)
        y = mp.tensor([0, 1, 2, 0, 1, 2], device=dev)
        loss = F.cross_entropy(m(x) + emb(y), y)
        loss.backward()
        total = nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        return m, loss.item(), total.item()

    ref, ref_loss, ref_total = run("cpu")
    m, loss, total = run(device)
    assert np.isclose(loss, ref_loss, rtol=1e-10) and np.isclose(total, ref_total, rtol=1e-10)
    for (name, a), b in zip(ref.state_dict().items(), m.state_dict().values()):
        assert b.device == device
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
    mp.save(m.state_dict(), tmp_path / "m.mp")
    back = mp.load(tmp_path / "m.mp")
    assert all(v.device == device for v in back.values())
    assert all(v.device == "cpu" for v in mp.load(tmp_path / "m.mp", map_location="cpu").values())


def _copy_parameters(ours, theirs):
    """Give the torch module the mixprec module's parameters and buffers."""
    import torch
    state = {k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state)


EMPTY_BATCH_LAYERS = [
    pytest.param(lambda nn: nn.Linear(3, 2), (0, 3), id="Linear"),
    pytest.param(lambda nn: nn.Linear(3, 2), (2, 0, 3), id="Linear-3d"),
    pytest.param(lambda nn: nn.LayerNorm(4), (0, 4), id="LayerNorm"),
    pytest.param(lambda nn: nn.BatchNorm1d(3), (0, 3), id="BatchNorm1d"),
    pytest.param(lambda nn: nn.BatchNorm2d(3), (0, 3, 2, 2), id="BatchNorm2d"),
    pytest.param(lambda nn: nn.BatchNorm2d(3).eval(), (0, 3, 2, 2), id="BatchNorm2d-eval"),
    pytest.param(lambda nn: nn.Dropout(0.5), (0, 3), id="Dropout"),
    pytest.param(lambda nn: nn.ReLU(), (0, 3), id="ReLU"),
    pytest.param(lambda nn: nn.GELU(), (0, 3), id="GELU"),
    pytest.param(lambda nn: nn.Softmax(dim=1), (0, 3), id="Softmax"),
    pytest.param(lambda nn: nn.LogSoftmax(dim=1), (2, 0), id="LogSoftmax-empty-dim"),
    pytest.param(lambda nn: nn.Flatten(), (0, 3, 2), id="Flatten"),
    pytest.param(lambda nn: nn.Conv2d(2, 3, 3, padding=1), (0, 2, 5, 5), id="Conv2d"),
    pytest.param(lambda nn: nn.MaxPool2d(2), (0, 2, 4, 4), id="MaxPool2d"),
    pytest.param(lambda nn: nn.AvgPool2d(2), (0, 2, 4, 4), id="AvgPool2d"),
]


@pytest.mark.parametrize("make,shape", EMPTY_BATCH_LAYERS)
def test_layers_handle_an_empty_batch_as_torch(make, shape):
    """Output shape, the input's gradient and every parameter's gradient (zeros) match torch, and so does
    the state after the step (BatchNorm's running statistics are not updated from nothing)."""
    torch = pytest.importorskip("torch")
    ours, theirs = make(mp.nn), make(torch.nn)
    _copy_parameters(ours, theirs)
    x, tx = mp.zeros(*shape, dtype=mp.float32, requires_grad=True), torch.zeros(*shape, requires_grad=True)
    out, want = ours(x), theirs(tx)
    assert out.shape == tuple(want.shape)
    out.sum().backward()
    want.sum().backward()
    assert x.grad.shape == shape
    for (k, p), tp in zip(ours.named_parameters(), theirs.parameters()):
        got = np.zeros(p.shape) if p.grad is None else p.grad.numpy()
        np.testing.assert_array_equal(got, np.zeros(p.shape) if tp.grad is None else tp.grad.numpy(), err_msg=k)
    after = theirs.state_dict()
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), after[k].numpy(), err_msg=f"{k} after an empty batch")
