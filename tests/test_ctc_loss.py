"""ctc_loss against torch (CPU, float64): values, gradients, impossible alignments, empty targets, bad input.

The brute-force checks (every path enumerated), gradcheck, forward mode and
half precision are op cases (tests/op_cases/ctc.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.functional as F
from mixprec import nn

T, N, C = 12, 4, 5


def _problem(seed=0):
    """Logits (T, N, C), padded targets with repeats, and lengths (one sample cannot be aligned)."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((T, N, C)) * 2
    targets = np.array([[1, 2, 2, 3, 0], [4, 4, 4, 1, 2], [3, 0, 0, 0, 0], [1, 2, 3, 4, 1]])
    input_lengths = np.array([12, 10, 7, 4])   # the last needs 5 frames: inf
    target_lengths = np.array([4, 5, 0, 5])    # sample 2 has an empty target
    return logits, targets, input_lengths, target_lengths


def _torch_loss(torch, logits, targets, il, tl, through_softmax, **kw):
    x = torch.tensor(logits, requires_grad=True)
    lp = x.log_softmax(2) if through_softmax else x
    return x, torch.nn.functional.ctc_loss(lp, torch.tensor(targets), torch.tensor(il), torch.tensor(tl), **kw)


def _mp_loss(logits, targets, il, tl, through_softmax, **kw):
    x = mp.tensor(logits, requires_grad=True)
    lp = x.log_softmax(dim=2) if through_softmax else x
    return x, F.ctc_loss(lp, mp.tensor(targets), mp.tensor(il), tl.tolist(), **kw)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_values_and_gradients_through_log_softmax_match_torch(reduction, zero_infinity):
    torch = pytest.importorskip("torch")
    problem = _problem()
    tx, tl_ = _torch_loss(torch, *problem, True, reduction=reduction, zero_infinity=zero_infinity)
    mx, ml = _mp_loss(*problem, True, reduction=reduction, zero_infinity=zero_infinity)
    np.testing.assert_allclose(ml.numpy(), tl_.detach().numpy(), rtol=1e-12)
    if reduction == "none":
        assert np.isinf(ml.numpy()[3]) != zero_infinity
        assert ml.numpy()[2] == pytest.approx(-torch.tensor(problem[0][:7, 2]).log_softmax(1)[:, 0].sum().item())
    seed = np.random.default_rng(1).standard_normal(tuple(tl_.shape))
    (tl_ * torch.tensor(seed)).sum().backward()
    (ml * mp.tensor(seed)).sum().backward()
    # NaN where the alignment is impossible (without zero_infinity), as torch; equal elsewhere
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12, equal_nan=True)


def test_gradient_wrt_log_probs_is_the_derivative_torch_adds_exp_log_probs():
    """torch's backward returns d loss/d log_probs + exp(log_probs) (pytorch#52241): the extra term cancels
    through a log_softmax but is wrong for log_probs themselves. mixprec returns the derivative."""
    torch = pytest.importorskip("torch")
    logits, targets, il, tl = _problem(2)
    keep = tl <= il
    problem = (logits[:, keep], targets[keep], il[keep], tl[keep])
    tx, tloss = _torch_loss(torch, *problem, False, reduction="sum")
    mx, mloss = _mp_loss(*problem, False, reduction="sum")
    tloss.backward()
    mloss.backward()
    live = np.arange(T)[:, None, None] < problem[2][None, :, None]
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy() - np.exp(problem[0]) * live, atol=1e-12)


def test_concatenated_targets_blank_and_unbatched_match_torch():
    torch = pytest.importorskip("torch")
    logits, targets, il, tl = _problem(3)
    blank = 4
    padded = np.where(targets == 4, 0, targets)  # no target may be the blank
    flat = np.concatenate([padded[n, :tl[n]] for n in range(N)])
    lp = torch.tensor(logits).log_softmax(2)
    expected = torch.nn.functional.ctc_loss(lp, torch.tensor(flat), torch.tensor(il), torch.tensor(tl), blank=blank,
                                            reduction="none")
    got = F.ctc_loss(mp.tensor(lp.numpy()), mp.tensor(flat), il.tolist(), mp.tensor(tl), blank=blank,
                     reduction="none")
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)
    one = F.ctc_loss(mp.tensor(lp.numpy()[:, 0]), mp.tensor(padded[0, :4]), 12, 4, blank=blank)
    assert one.shape == () and one.item() == pytest.approx(expected[0].item() / 4, rel=1e-12)


def test_ctc_module_and_zero_input_lengths():
    torch = pytest.importorskip("torch")
    logits, targets, _, _ = _problem()
    il, tl = np.array([0, 0, 3, 12]), np.array([0, 1, 0, 2])
    loss = nn.CTCLoss(reduction="none")(mp.tensor(logits), mp.tensor(targets), mp.tensor(il), mp.tensor(tl))
    ref = torch.nn.CTCLoss(reduction="none")(torch.tensor(logits), torch.tensor(targets), torch.tensor(il),
                                             torch.tensor(tl))
    np.testing.assert_allclose(loss.numpy(), ref.numpy(), rtol=1e-12)
    assert loss.numpy()[0] == 0 and np.isinf(loss.numpy()[1])  # no frames: p(empty) = 1, p(anything else) = 0
    assert repr(nn.CTCLoss(reduction="sum")) == "CTCLoss(reduction='sum')"


def test_float32_under_cpu_autocast_and_half_inputs():
    logits, targets, il, tl = _problem()
    x = mp.tensor(logits, dtype=mp.bfloat16).log_softmax(dim=2)
    with mp.autocast("cpu"):
        loss = F.ctc_loss(x, mp.tensor(targets), il.tolist(), tl.tolist(), zero_infinity=True)
    assert loss.dtype == mp.float32  # ctc_loss is on the CPU float32 list
    exact = F.ctc_loss(x.double(), mp.tensor(targets), il.tolist(), tl.tolist(), zero_infinity=True)
    assert loss.item() == pytest.approx(exact.item(), rel=1e-6)
    half = F.ctc_loss(x.half(), mp.tensor(targets), il.tolist(), tl.tolist(), zero_infinity=True)
    assert half.dtype == mp.float16 and half.item() == pytest.approx(exact.item(), rel=2e-3)


def test_second_derivative_is_refused_with_a_clear_error():
    logits, targets, il, tl = _problem()
    x = mp.tensor(logits[:, :3], requires_grad=True)
    loss = F.ctc_loss(x, mp.tensor(targets[:3]), il[:3].tolist(), tl[:3].tolist())
    (g,) = mp.autograd.grad(loss, x, create_graph=True)
    with pytest.raises(NotImplementedError, match="ctc_loss: the derivative of its gradient is not implemented"):
        g.sum().backward()


def test_bad_input_is_rejected_naming_the_argument():
    logits, targets, il, tl = _problem()
    x, t = mp.tensor(logits), mp.tensor(targets)
    with pytest.raises(IndexError, match=r"target is out of range for 5 classes \[0, 5\); got target 7"):
        F.ctc_loss(x, mp.tensor(np.where(targets == 3, 7, targets)), il.tolist(), tl.tolist())
    with pytest.raises(ValueError, match="a target equals the blank index 0"):
        F.ctc_loss(x, t, il.tolist(), [5, 5, 1, 5])
    with pytest.raises(RuntimeError, match="input_lengths to be at most T=12; got 13"):
        F.ctc_loss(x, t, [13, 1, 1, 1], tl.tolist())
    with pytest.raises(RuntimeError, match="larger than the padded targets' size S=5"):
        F.ctc_loss(x, t, il.tolist(), [6, 1, 1, 1])
    with pytest.raises(ValueError, match="target_lengths must be non-negative"):
        F.ctc_loss(x, t, il.tolist(), [-1, 1, 1, 1])
    with pytest.raises(RuntimeError, match="input_lengths to hold 4 lengths"):
        F.ctc_loss(x, t, [12, 12], tl.tolist())
    with pytest.raises(RuntimeError, match="concatenated targets hold 3 labels, but target_lengths add up to 14"):
        F.ctc_loss(x, mp.tensor([1, 2, 3]), il.tolist(), tl.tolist())
    with pytest.raises(TypeError, match="targets must be an integer tensor"):
        F.ctc_loss(x, t.double(), il.tolist(), tl.tolist())
    with pytest.raises(IndexError, match=r"blank must be a class index in \[0, 5\)"):
        F.ctc_loss(x, t, il.tolist(), tl.tolist(), blank=5)
    with pytest.raises(RuntimeError, match=r"log_probs of shape \(T, N, C\)"):
        F.ctc_loss(x[0, 0], t, il.tolist(), tl.tolist())
    with pytest.raises(RuntimeError, match=r"must not be empty .*got shape \(0, 4, 5\)"):
        F.ctc_loss(x[:0], t, [0, 0, 0, 0], [0, 0, 0, 0])
    with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
        F.ctc_loss(x, t, il.tolist(), tl.tolist(), reduction="avg")
