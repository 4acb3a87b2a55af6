"""Learning-rate schedulers: closed forms, torch parity, chaining, skipped optimizer steps, state_dict."""
import copy
import math
import warnings

import numpy as np
import pytest

import mixprec as mp

S = mp.optim.lr_scheduler


def optimizer(lr=0.5, groups=1):
    ps = [mp.nn.Parameter(mp.zeros(2)) for _ in range(groups)]
    for p in ps:
        p.grad = mp.ones(2)
    return mp.optim.SGD([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(ps)], lr=lr)


def lrs(opt, sched, n):
    out = [sched.get_last_lr()[0]]
    for _ in range(n):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
    return out


@pytest.mark.parametrize("make, closed", [
    (lambda o: S.StepLR(o, step_size=3, gamma=0.5), lambda e: 0.5 * 0.5 ** (e // 3)),
    (lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.05),
     lambda e: 0.05 + (0.5 - 0.05) * (1 + math.cos(math.pi * e / 10)) / 2),
    (lambda o: S.LinearLR(o, start_factor=0.1, total_iters=4), lambda e: 0.5 * (0.1 + 0.9 * min(e, 4) / 4)),
    (lambda o: S.LambdaLR(o, lambda e: 1 / (1 + e)), lambda e: 0.5 / (1 + e)),
])
def test_schedules_follow_their_closed_forms(make, closed):
    opt = optimizer()
    got = lrs(opt, make(opt), 25)
    for e, lr in enumerate(got):
        assert math.isclose(lr, closed(e), rel_tol=1e-12, abs_tol=1e-15), e
    assert opt.param_groups[0]["lr"] == got[-1]


def test_warmup_then_cosine_with_sequential_lr():
    opt = optimizer()
    warm = S.LinearLR(opt, start_factor=0.2, total_iters=3)
    cos = S.CosineAnnealingLR(opt, T_max=6)
    seq = S.SequentialLR(opt, [warm, cos], milestones=[3])
    got = lrs(opt, seq, 9)
    expected = [0.5 * (0.2 + 0.8 * e / 3) for e in range(3)] + \
               [0.5 * (1 + math.cos(math.pi * e / 6)) / 2 for e in range(7)]
    for a, b in zip(got, expected):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)


def test_chained_schedulers_multiply():
    opt = optimizer()
    s1 = S.StepLR(opt, step_size=2, gamma=0.1)
    s3 = S.LinearLR(opt, start_factor=0.5, total_iters=2)
    for _ in range(4):
        opt.step()
        s1.step()
        s3.step()
    # StepLR decays twice (x0.01); LinearLR's warm-up has finished (x1)
    assert math.isclose(opt.param_groups[0]["lr"], 0.5 * 0.01, rel_tol=1e-12)


def test_skip_unstepped_does_not_advance_when_the_optimizer_skipped():
    opt = optimizer()
    sched = S.LinearLR(opt, start_factor=0.25, total_iters=4, skip_unstepped=True)
    plain = S.StepLR(optimizer(), step_size=1, gamma=0.5)
    history = []
    for it in range(6):
        if it not in (1, 2):  # iterations 1 and 2 overflowed: the scaler did not call optimizer.step()
            opt.step()
        sched.step()
        history.append(sched.last_epoch)
    assert history == [1, 1, 1, 2, 3, 4] and sched.skipped_steps == 2
    assert math.isclose(opt.param_groups[0]["lr"], 0.5)
    with pytest.warns(UserWarning, match="before the optimizer ever stepped"):
        plain.step()
    assert plain.last_epoch == 1  # without skip_unstepped, step() always advances (torch's behaviour)


def test_multiple_groups_and_initial_lr():
    opt = optimizer(groups=2)
    sched = S.StepLR(opt, step_size=1, gamma=0.1)
    assert sched.base_lrs == [0.5, 1.0] and opt.param_groups[1]["initial_lr"] == 1.0
    opt.step()
    sched.step()
    assert [round(x, 12) for x in sched.get_last_lr()] == [0.05, 0.1]


def test_state_dict_resume_continues_the_schedule():
    opt = optimizer()
    sched = S.CosineAnnealingLR(opt, T_max=8, eta_min=0.01)
    lrs(opt, sched, 3)
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 3
    opt2 = optimizer()
    opt2.load_state_dict(opt.state_dict())
    sched2 = S.CosineAnnealingLR(opt2, T_max=8, eta_min=0.01)
    sched2.load_state_dict(state)
    assert lrs(opt, sched, 4) == lrs(opt2, sched2, 4)
    with pytest.raises(KeyError, match="last_epoch"):
        sched2.load_state_dict({})
    seq = S.SequentialLR(opt2, [S.LinearLR(opt2, 0.5, total_iters=2), S.StepLR(opt2, 2)], milestones=[2])
    st = seq.state_dict()
    assert len(st["_schedulers"]) == 2 and "optimizer" not in st["_schedulers"][0]


def test_resume_needs_initial_lr_and_validates_arguments():
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(optimizer(), step_size=2, last_epoch=4)
    with pytest.raises(ValueError, match="step_size"):
        S.StepLR(optimizer(), step_size=0)
    with pytest.raises(ValueError, match="start_factor"):
        S.LinearLR(optimizer(), start_factor=0)
    with pytest.raises(ValueError, match="T_max"):
        S.CosineAnnealingLR(optimizer(), T_max=0)
    with pytest.raises(TypeError, match="Optimizer"):
        S.StepLR(object(), 1)
    opt = optimizer()
    with pytest.raises(ValueError, match="milestones"):
        S.SequentialLR(opt, [S.StepLR(opt, 1), S.StepLR(opt, 1)], milestones=[])
    with pytest.raises(ValueError, match="callable"):
        S.LambdaLR(opt, [lambda e: 1, lambda e: 2])


def test_matches_torch():
    torch = pytest.importorskip("torch")
    T = torch.optim.lr_scheduler
    pairs = [
        (lambda o: S.StepLR(o, 4, 0.5), lambda o: T.StepLR(o, 4, 0.5)),
        (lambda o: S.CosineAnnealingLR(o, 7, 0.01), lambda o: T.CosineAnnealingLR(o, 7, 0.01)),
        (lambda o: S.LinearLR(o, 0.1, 0.9, 8), lambda o: T.LinearLR(o, 0.1, 0.9, 8)),
        (lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.1, total_iters=5), S.StepLR(o, 3, 0.5),
                                      S.CosineAnnealingLR(o, 10)], [5, 12]),
         lambda o: T.SequentialLR(o, [T.LinearLR(o, 0.1, total_iters=5), T.StepLR(o, 3, 0.5),
                                      T.CosineAnnealingLR(o, 10)], [5, 12])),
    ]
    for make_ours, make_theirs in pairs:
        opt = optimizer()
        topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.5)
        ours, theirs = make_ours(opt), make_theirs(topt)
        for _ in range(30):
            opt.step()
            topt.step()
            ours.step()
            theirs.step()
            assert ours.get_last_lr() == theirs.get_last_lr()


def test_stepping_the_scheduler_before_the_optimizer_warns_as_torch_does():
    torch = pytest.importorskip("torch")

    def warnings_of(lib, optimizer_first, **kw):
        p = lib.nn.Parameter(lib.zeros(2))
        p.grad = lib.ones(2)
        opt = lib.optim.SGD([p], lr=0.5)
        sched = lib.optim.lr_scheduler.StepLR(opt, 1, **kw)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                if optimizer_first:
                    opt.step()
                sched.step()
        return [w.category for w in caught]

    assert warnings_of(mp, False) == warnings_of(torch, False) == [UserWarning]  # once, at the first step
    assert warnings_of(mp, True) == warnings_of(torch, True) == []
    # a skip_unstepped scheduler waits for the optimizer's first step rather than skipping a learning rate
    assert warnings_of(mp, False, skip_unstepped=True) == []


def _trained(lr=0.5, steps=2):
    p = mp.nn.Parameter(mp.zeros(2))
    opt = mp.optim.SGD([p], lr=lr, momentum=0.9)
    sched = S.StepLR(opt, step_size=1, gamma=0.5, skip_unstepped=True)
    for _ in range(steps):
        p.grad = mp.ones(2)
        opt.step()
        sched.step()
    return p, opt, sched


def _picture(p, opt, sched):
    return (p.numpy().tolist(), opt.param_groups[0]["lr"], sched.last_epoch,
            opt.state[p]["momentum_buffer"].tolist())


def _step_both(opt, sched):
    for p in opt.param_groups[0]["params"]:
        p.grad = mp.ones(2)
    opt.step()
    sched.step()


@pytest.mark.parametrize("how", ["deepcopy optimizer", "deepcopy scheduler", "state_dict"])
def test_a_copy_of_an_optimizer_with_a_scheduler_is_independent(how):
    p, opt, sched = _trained()
    if how == "deepcopy optimizer":
        opt2 = copy.deepcopy(opt)
        sched2 = S.StepLR(opt2, step_size=1, gamma=0.5, skip_unstepped=True)
        sched2.load_state_dict(sched.state_dict())
    elif how == "deepcopy scheduler":
        sched2 = copy.deepcopy(sched)
        opt2 = sched2.optimizer
    else:  # the pickle-free path: a new optimizer over new parameters, loaded from state_dicts
        q = mp.nn.Parameter(p.detach().clone())
        opt2 = mp.optim.SGD([q], lr=0.5, momentum=0.9)
        opt2.load_state_dict(opt.state_dict())
        sched2 = S.StepLR(opt2, step_size=1, gamma=0.5, skip_unstepped=True)
        sched2.load_state_dict(sched.state_dict())
    p2 = opt2.param_groups[0]["params"][0]
    assert opt2 is not opt and p2 is not p and sched2.optimizer is opt2
    before = _picture(p, opt, sched)
    _step_both(opt2, sched2)  # steps the copy's parameters, learning rate and schedule only
    assert _picture(p, opt, sched) == before
    assert _picture(p2, opt2, sched2) != before
    # and the original, stepped the same way, reaches the same place: the copy was exact
    _step_both(opt, sched)
    np.testing.assert_array_equal(p.numpy(), p2.numpy())
    assert _picture(p, opt, sched) == _picture(p2, opt2, sched2)
    # each scheduler counts its own optimizer's steps (skip_unstepped)
    sched.step()
    assert sched.skipped_steps == 1 and sched2.skipped_steps == 0


def test_a_scheduler_wraps_nothing_on_the_optimizer():
    p, opt, sched = _trained()
    assert "step" not in vars(opt)
    assert type(opt).step is mp.optim.SGD.step


def test_arguments_of_the_wrong_type_are_clear_type_errors():
    with pytest.raises(TypeError, match="StepLR: last_epoch must be an int >= -1"):
        S.StepLR(optimizer(), 1, last_epoch="3")
    with pytest.raises(TypeError, match="StepLR: gamma must be a real number, got '0.5'"):
        S.StepLR(optimizer(), 1, gamma="0.5")
    with pytest.raises(TypeError, match="CosineAnnealingLR: eta_min must be a real number"):
        S.CosineAnnealingLR(optimizer(), 4, eta_min=None)
    with pytest.raises(TypeError, match="LinearLR: start_factor must be a real number"):
        S.LinearLR(optimizer(), start_factor="0.1")
    with pytest.raises(TypeError, match="SequentialLR: schedulers must be a list, got int"):
        S.SequentialLR(optimizer(), 3, [1])
    with pytest.raises(TypeError, match="StepLR: list is not an mp.optim.Optimizer"):
        S.StepLR([], 1)


def test_a_lambda_that_fails_leaves_the_schedule_where_it_was():
    opt = optimizer()
    sched = S.LambdaLR(opt, lambda e: "high" if e == 2 else 1.0 / (1 + e))
    opt.step()
    sched.step()
    before = (sched.last_epoch, sched._step_count, opt.param_groups[0]["lr"], sched.get_last_lr())
    opt.step()
    with pytest.raises(TypeError, match="LambdaLR: lr_lambda\\[0\\]\\(2\\) must be a real number, got 'high'"):
        sched.step()
    assert (sched.last_epoch, sched._step_count, opt.param_groups[0]["lr"], sched.get_last_lr()) == before
