"""Every load_state_dict checks the whole state first: a malformed one raises and changes nothing.

Each case loads a state from a *different* run (other values everywhere), broken in one place, late
in iteration order, so a load that applied anything before failing would show in the snapshot.
"""
import struct

import numpy as np
import pytest

import mixprec as mp
from mixprec.optim import lr_scheduler as S


def freeze(x):
    """A comparable picture of x: arrays and tensors as dtype + shape + bytes, floats as bits, objects by vars()."""
    if isinstance(x, mp.Tensor):
        x = x.numpy()
    if isinstance(x, (np.ndarray, np.generic)):
        return ("array", x.dtype.name, np.shape(x), np.asarray(x).tobytes())
    if isinstance(x, float):
        return ("float", struct.pack(">d", x))
    if isinstance(x, dict):
        return ("dict", [(freeze(k), freeze(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [freeze(v) for v in x])
    if hasattr(x, "__dict__") and not callable(x) and not isinstance(x, mp.Device):
        return (type(x).__name__, freeze(vars(x)))
    return x


def optimizer_snapshot(opt):
    params = [p for g in opt.param_groups for p in g["params"]]
    position = {id(p): i for i, p in enumerate(params)}
    groups = [{k: [position[id(p)] for p in v] if k == "params" else v for k, v in g.items()} for g in opt.param_groups]
    state = [(position[id(p)], s) for p, s in opt.state.items()]
    return freeze([groups, state, params])


def adam(lr, steps, seed):
    """A two-group AMSGrad Adam after ``steps`` steps: state for both parameters."""
    mp.manual_seed(seed)
    model = mp.nn.Linear(3, 2)
    opt = mp.optim.Adam([{"params": [model.weight]}, {"params": [model.bias], "lr": lr * 10}], lr=lr, amsgrad=True)
    for _ in range(steps):
        opt.zero_grad()
        (model(mp.randn(4, 3)) ** 2).sum().backward()
        opt.step()
    return opt


def edit(path, value=None, delete=False):
    """A case: the source state with state_dict[path...] set to value (or deleted)."""
    def apply(sd):
        node = sd
        for key in path[:-1]:
            node = node[key]
        if delete:
            del node[path[-1]]
        else:
            node[path[-1]] = value(node[path[-1]]) if callable(value) else value
        return sd
    return apply


OPTIMIZER_CASES = {  # name: (how to break the source state_dict, what the error says)
    "a list": (lambda sd: [sd], "dict with keys 'state' and 'param_groups'"),
    "None": (lambda sd: None, "dict with keys"),
    "no state": (edit(["state"], delete=True), "dict with keys"),
    "state is a list": (edit(["state"], lambda s: list(s.values())), r"\['state'\] must be a dict"),
    "param_groups a dict": (edit(["param_groups"], lambda g: dict(enumerate(g))), "list of dicts"),
    "group not a dict": (edit(["param_groups", 1], "group"), "list of dicts"),
    "three groups": (edit(["param_groups"], lambda g: g + g[:1]), "3 parameter groups"),
    "params missing": (edit(["param_groups", 1, "params"], delete=True), r"\['params'\] must be a list"),
    "params holds a str": (edit(["param_groups", 1, "params"], ["1"]), "parameter indices"),
    "params holds a bool": (edit(["param_groups", 1, "params"], [True]), "parameter indices"),
    "params repeats an index": (edit(["param_groups", 1, "params"], [0]), "repeats parameter index 0"),
    "params count": (edit(["param_groups", 1, "params"], [1, 2]), "has 2 params"),
    "lr a string": (edit(["param_groups", 1, "lr"], "fast"), r"\['lr'\] is 'fast', expected a number"),
    "betas of one": (edit(["param_groups", 1, "betas"], (0.9,)), "of length 2"),
    "beta a string": (edit(["param_groups", 1, "betas"], (0.9, "x")), r"\['betas'\]\[1\]"),
    "amsgrad a string": (edit(["param_groups", 1, "amsgrad"], "yes"), "expected a bool"),
    "weight_decay None": (edit(["param_groups", 1, "weight_decay"], None), "expected a number"),
    "key a str": (lambda sd: sd | {"state": {0: sd["state"][0], "1": sd["state"][1]}}, "got '1'"),
    "key a float": (lambda sd: sd | {"state": {0: sd["state"][0], 1.0: sd["state"][1]}}, "got 1.0"),
    "unknown index": (lambda sd: sd | {"state": {0: sd["state"][0], 7: sd["state"][1]}}, "indices in param_groups"),
    "negative index": (lambda sd: sd | {"state": {0: sd["state"][0], -1: sd["state"][1]}}, "got -1"),
    "entry a list": (edit(["state", 1], lambda s: list(s.values())), "must be a dict of state name"),
    "entry a tensor": (edit(["state", 1], mp.zeros(2)), "must be a dict of state name"),
    "another optimizer's state": (edit(["state", 1], {"momentum_buffer": mp.zeros(2)}), "lacks"),
    "unknown state key": (edit(["state", 1, "momentum_buffer"], mp.zeros(2)), "unknown key 'momentum_buffer'"),
    "missing moment": (edit(["state", 1, "exp_avg_sq"], delete=True), r"lacks \['exp_avg_sq'\]"),
    "moment of another shape": (edit(["state", 1, "exp_avg"], mp.zeros(5)), r"shape \(5,\), its parameter"),
    "integer moment": (edit(["state", 1, "exp_avg"], mp.zeros(2, dtype=mp.int64)), "dtype int64"),
    "moment a list": (edit(["state", 1, "exp_avg"], [0.0, 0.0]), "must be a tensor shaped like"),
    "moment a string": (edit(["state", 1, "max_exp_avg_sq"], "zeros"), "must be a tensor"),
    "negative step": (edit(["state", 1, "step"], -1), r"int >= 0 \(a step count\), got -1"),
    "fractional step": (edit(["state", 1, "step"], 1.5), "got 1.5"),
    "step a string": (edit(["state", 1, "step"], "3"), "got '3'"),
}


@pytest.mark.parametrize("name", list(OPTIMIZER_CASES))
def test_a_failed_optimizer_load_changes_nothing(name):
    breaks, message = OPTIMIZER_CASES[name]
    opt = adam(lr=0.01, steps=1, seed=0)
    before = optimizer_snapshot(opt)
    source = adam(lr=0.5, steps=3, seed=1).state_dict()
    with pytest.raises(ValueError, match=message):
        opt.load_state_dict(breaks(source))
    assert optimizer_snapshot(opt) == before
    opt.load_state_dict(adam(lr=0.5, steps=3, seed=1).state_dict())  # the unbroken state loads, and shows
    assert optimizer_snapshot(opt) != before
    assert opt.param_groups[1]["lr"] == 5.0 and opt.state[opt.param_groups[1]["params"][0]]["step"] == 3


def test_sgd_state_is_checked_against_its_layout():
    p = mp.nn.Parameter(mp.ones(3))
    opt = mp.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = mp.ones(3)
    opt.step()
    before = optimizer_snapshot(opt)
    for bad, message in [({"exp_avg": mp.zeros(3)}, "unknown key 'exp_avg'"),
                         ({"momentum_buffer": mp.zeros(2)}, r"shape \(2,\)"),
                         ({"momentum_buffer": mp.zeros(3, dtype=mp.bool_)}, "dtype bool")]:
        with pytest.raises(ValueError, match=message):
            opt.load_state_dict({"state": {0: bad}, "param_groups": [{"params": [0], "lr": 0.5}]})
        assert optimizer_snapshot(opt) == before
    opt.load_state_dict({"state": {0: {"momentum_buffer": None}}, "param_groups": [{"params": [0]}]})
    assert opt.state[p]["momentum_buffer"] is None  # torch's SGD saves None at momentum 0: a fresh buffer
    opt.step()
    np.testing.assert_array_equal(opt.state[p]["momentum_buffer"], np.ones(3, np.float32))


def test_floating_state_takes_the_parameters_dtype_as_in_torch():
    torch = pytest.importorskip("torch")
    tp = torch.nn.Parameter(torch.zeros(3, dtype=torch.float16))
    topt = torch.optim.Adam([tp])
    topt.load_state_dict({"state": {0: {"step": torch.tensor(2.0), "exp_avg": torch.ones(3, dtype=torch.float64),
                                        "exp_avg_sq": torch.ones(3, dtype=torch.float64)}},
                          "param_groups": [{"params": [0]} | {k: v for k, v in topt.defaults.items()}]})
    p = mp.nn.Parameter(mp.zeros(3, dtype=mp.float16))
    opt = mp.optim.Adam([p])
    opt.load_state_dict({"state": {0: {"step": 2, "exp_avg": mp.ones(3, dtype=mp.float64),
                                       "exp_avg_sq": np.ones(3)}}, "param_groups": [{"params": [0]}]})
    assert str(topt.state[tp]["exp_avg"].dtype) == "torch.float16"
    assert opt.state[p]["exp_avg"].dtype == np.float16 and opt.state[p]["exp_avg_sq"].dtype == np.float16


# ---------------------------------------------------------------- modules
def model(seed):
    mp.manual_seed(seed)
    m = mp.nn.Sequential(mp.nn.Linear(3, 4), mp.nn.BatchNorm1d(4))
    m(mp.randn(8, 3))  # running statistics and num_batches_tracked move
    return m


def module_snapshot(m):
    return freeze([(k, t) for k, t in m.state_dict().items()])


MODULE_CASES = {
    "missing key": (lambda sd: {k: v for k, v in sd.items() if k != "1.running_var"}, "Missing key"),
    "unexpected key": (lambda sd: sd | {"2.weight": mp.ones(1)}, "Unexpected key"),
    "shape": (lambda sd: sd | {"1.num_batches_tracked": mp.tensor([1, 2])}, "size mismatch"),
    "float into an int buffer": (lambda sd: sd | {"1.num_batches_tracked": mp.tensor(1.5)}, "dtype mismatch"),
    "strings": (lambda sd: sd | {"1.num_batches_tracked": np.array("7")}, "expected a real number type"),
    "complex": (lambda sd: sd | {"1.num_batches_tracked": np.array(1 + 2j)}, "expected a real number type"),
    "a list": (lambda sd: sd | {"1.running_var": [1.0] * 4}, "expected a Tensor"),
    "not a dict": (lambda sd: list(sd.items()), "expects a dict"),
}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("name", list(MODULE_CASES))
def test_a_failed_module_load_changes_nothing(name, strict):
    breaks, message = MODULE_CASES[name]
    if not strict and name in ("missing key", "unexpected key"):
        pytest.skip("not an error with strict=False")
    m = model(0)
    before = module_snapshot(m)
    with pytest.raises((RuntimeError, TypeError), match=message):
        m.load_state_dict(breaks(dict(model(1).state_dict())), strict=strict)
    assert module_snapshot(m) == before
    m.load_state_dict(model(1).state_dict())
    assert module_snapshot(m) == module_snapshot(model(1))


# ---------------------------------------------------------------- schedulers
def scheduler(kind, lr, steps):
    opt = mp.optim.SGD([{"params": [mp.nn.Parameter(mp.ones(2))]}, {"params": [mp.nn.Parameter(mp.ones(2))]}], lr=lr)
    if kind == "step":
        sched = S.StepLR(opt, step_size=2, gamma=0.5)
    else:
        sched = S.SequentialLR(opt, [S.LinearLR(opt, 0.1, total_iters=2), S.StepLR(opt, 3, gamma=0.3)],
                               milestones=[2])
    for _ in range(steps):
        opt.step()
        sched.step()
    return sched


def scheduler_snapshot(sched):
    return freeze([sched.state_dict(), [g["lr"] for g in sched.optimizer.param_groups], sched._seen_optimizer_steps])


SCHEDULER_CASES = {
    "a list": ("step", lambda sd: [sd], TypeError, "expects a dict"),
    "no last_epoch": ("step", lambda sd: {k: v for k, v in sd.items() if k != "last_epoch"}, KeyError, "last_epoch"),
    "shadows a method": ("step", lambda sd: sd | {"step": 3}, ValueError, "unknown key 'step'"),
    "last_epoch a string": ("step", lambda sd: sd | {"last_epoch": "3"}, ValueError, "must be an int"),
    "last_epoch fractional": ("step", lambda sd: sd | {"last_epoch": 2.5}, ValueError, "must be an int"),
    "last_epoch a bool": ("step", lambda sd: sd | {"last_epoch": True}, ValueError, "must be an int"),
    "base_lrs too short": ("step", lambda sd: sd | {"base_lrs": [0.1]}, ValueError, "of length 2"),
    "base_lr a string": ("step", lambda sd: sd | {"base_lrs": [0.1, "x"]}, ValueError, r"\['base_lrs'\]\[1\]"),
    "gamma a string": ("step", lambda sd: sd | {"gamma": "half"}, ValueError, "expected a number"),
    "skip_unstepped an int": ("step", lambda sd: sd | {"skip_unstepped": 1}, ValueError, "expected a bool"),
    "inner count": ("seq", lambda sd: sd | {"_schedulers": sd["_schedulers"][:1]}, KeyError, "2 schedulers"),
    "second inner broken": ("seq", lambda sd: sd | {"_schedulers": [sd["_schedulers"][0],
                                                                     sd["_schedulers"][1] | {"last_epoch": None}]},
                            ValueError, "StepLR state_dict"),
    "own broken, inner fine": ("seq", lambda sd: sd | {"_milestones": [2, 4]}, ValueError, "of length 1"),
}


@pytest.mark.parametrize("name", list(SCHEDULER_CASES))
def test_a_failed_scheduler_load_changes_nothing(name):
    kind, breaks, error, message = SCHEDULER_CASES[name]
    sched = scheduler(kind, lr=0.1, steps=1)
    before = scheduler_snapshot(sched)
    with pytest.raises(error, match=message):
        sched.load_state_dict(breaks(scheduler(kind, lr=1.0, steps=4).state_dict()))
    assert scheduler_snapshot(sched) == before
    sched.load_state_dict(scheduler(kind, lr=1.0, steps=4).state_dict())
    assert sched.state_dict() == scheduler(kind, lr=1.0, steps=4).state_dict()


# ---------------------------------------------------------------- GradScaler
def running_scaler(scale, steps):
    s = mp.GradScaler("cpu", init_scale=scale, growth_interval=2, hysteresis=2, min_scale=1.0)
    p = mp.nn.Parameter(mp.ones(2))
    opt = mp.optim.SGD([p], lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        s.scale((p * 2).sum()).backward()
        s.step(opt)
        s.update()
    return s


SCALER_CASES = {
    "a list": lambda sd: [sd],
    "empty": lambda sd: {},
    "no tracker": lambda sd: {k: v for k, v in sd.items() if k != "_growth_tracker"},
    "negative scale": lambda sd: sd | {"scale": -1.0},
    "scale a string": lambda sd: sd | {"scale": "big"},
    "nan scale": lambda sd: sd | {"scale": float("nan")},
    "growth factor below 1": lambda sd: sd | {"growth_factor": 0.5},
    "backoff above 1": lambda sd: sd | {"backoff_factor": 2.0},
    "growth interval 0": lambda sd: sd | {"growth_interval": 0},
    "negative tracker": lambda sd: sd | {"_growth_tracker": -1},
    "hysteresis 0": lambda sd: sd | {"hysteresis": 0},
    "negative overflow tracker": lambda sd: sd | {"_overflow_tracker": -3},
}


@pytest.mark.parametrize("name", list(SCALER_CASES))
def test_a_failed_grad_scaler_load_changes_nothing(name):
    s = running_scaler(1024.0, steps=3)
    before = freeze(vars(s))
    with pytest.raises((ValueError, TypeError, RuntimeError)):
        s.load_state_dict(SCALER_CASES[name](running_scaler(8.0, steps=5).state_dict()))
    assert freeze(vars(s)) == before
    s.load_state_dict(running_scaler(8.0, steps=5).state_dict())  # the unbroken state loads, and shows
    assert freeze(vars(s)) != before and s.get_scale() == running_scaler(8.0, steps=5).get_scale()
