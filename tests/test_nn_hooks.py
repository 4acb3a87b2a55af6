"""nn.Module forward and state-dict hooks with torch's contracts, and Optimizer's step extension.

Each hook scenario runs twice, on a torch.nn.Module and on an mp.nn.Module, with the
same hook functions; the call logs must be equal (torch is the oracle; skipped without it).
"""
import warnings

import numpy as np
import pytest

import mixprec as mp
from mixprec import nn


def frameworks():
    torch = pytest.importorskip("torch")
    return [("torch", torch.nn), ("mixprec", nn)]


def echo_class(base):
    class Echo(base):
        """forward returns what it got, so a log shows what the hooks changed."""
        def forward(self, *args, **kwargs):
            return ("out", args, tuple(sorted(kwargs.items())))
    return Echo


def same_in_both(scenario):
    logs = {name: scenario(module_api) for name, module_api in frameworks()}
    assert logs["mixprec"] == logs["torch"], logs
    return logs["mixprec"]


# ---- forward hooks ----
def test_pre_hooks_run_in_order_prepend_first_and_replace_args():
    def scenario(api):
        log = []
        m = echo_class(api.Module)()
        m.register_forward_pre_hook(lambda mod, args: log.append(("a", args)))
        m.register_forward_pre_hook(lambda mod, args: args + (10,))                 # a tuple replaces args
        m.register_forward_pre_hook(lambda mod, args: (log.append(("first", args)), None)[1], prepend=True)
        m.register_forward_pre_hook(lambda mod, args: len(args))                     # a non-tuple: a 1-tuple
        log.append(m(1, 2, k=3))
        return log
    log = same_in_both(scenario)
    assert log[-1] == ("out", (3,), (("k", 3),))


def test_pre_hooks_with_kwargs_replace_args_and_kwargs_and_a_bad_return_is_refused():
    def scenario(api):
        m = echo_class(api.Module)()
        m.register_forward_pre_hook(lambda mod, args, kwargs: (args[::-1], {**kwargs, "extra": 1}),
                                    with_kwargs=True)
        out = m(1, 2, k=3)
        handle = m.register_forward_pre_hook(lambda mod, args, kwargs: (args, kwargs, "extra"), with_kwargs=True)
        try:
            m(1, 2)
            error = None
        except RuntimeError as exc:
            error = str(exc).split(",")[0]
        handle.remove()
        return [out, error]
    out, error = same_in_both(scenario)
    assert out == ("out", (2, 1), (("extra", 1), ("k", 3))) and "forward pre-hook must return None" in error


def test_forward_hooks_see_the_modified_args_and_kwargs_and_replace_the_output():
    def scenario(api):
        log = []
        m = echo_class(api.Module)()
        m.register_forward_pre_hook(lambda mod, args: args + ("pre",))
        m.register_forward_hook(lambda mod, args, out: log.append(("plain", args, out)))
        m.register_forward_hook(lambda mod, args, kwargs, out: ("replaced", kwargs), with_kwargs=True)
        m.register_forward_hook(lambda mod, args, out: log.append(("first", out)), prepend=True)
        m.register_forward_hook(lambda mod, args, out: log.append(("last", out)))
        log.append(m(5, z=6))
        return log
    log = same_in_both(scenario)
    assert log[-1] == ("replaced", {"z": 6})


def test_always_call_hooks_run_when_forward_raises_and_their_own_errors_only_warn():
    def scenario(api):
        log = []

        class Failing(api.Module):
            def forward(self, x):
                raise ValueError("forward failed")
        m = Failing()
        m.register_forward_hook(lambda mod, args, out: log.append(("normal", out)))
        m.register_forward_hook(lambda mod, args, out: log.append(("always", args, out)), always_call=True)

        def broken(mod, args, out):
            raise KeyError("hook failed")
        m.register_forward_hook(broken, always_call=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                m(7)
            except ValueError as exc:
                log.append(("raised", str(exc)))
        log.append([str(w.message).split(":")[0] for w in caught])
        return log
    log = same_in_both(scenario)
    assert ("always", (7,), None) in log and ("raised", "forward failed") in log
    assert all(entry[0] != "normal" for entry in log[:-1])


def test_always_call_hooks_already_run_are_not_run_again_when_a_later_hook_raises():
    def scenario(api):
        log = []
        m = echo_class(api.Module)()
        m.register_forward_hook(lambda mod, args, out: log.append("always"), always_call=True)

        def boom(mod, args, out):
            raise RuntimeError("later hook")
        m.register_forward_hook(boom)
        try:
            m(1)
        except RuntimeError as exc:
            log.append(str(exc))
        return log
    assert same_in_both(scenario) == ["always", "later hook"]


def test_handles_remove_once_as_context_managers_and_from_inside_a_hook():
    def scenario(api):
        log = []
        m = echo_class(api.Module)()
        with m.register_forward_pre_hook(lambda mod, args: log.append("ctx")):
            m(1)
        m(2)
        handle = m.register_forward_hook(lambda mod, args, out: (log.append("once"), handle.remove())[0])
        m(3)
        m(4)
        handle.remove()  # removing twice does nothing
        log.append(isinstance(handle.id, int))
        return log
    assert same_in_both(scenario) == ["ctx", "once", True]


def test_a_module_without_hooks_calls_forward_directly():
    layer = nn.Linear(3, 2)
    x = mp.randn(4, 3)
    np.testing.assert_array_equal(layer(x)._array, layer.forward(x)._array)


# ---- state-dict hooks ----
def build(api):
    return api.Sequential(api.Linear(2, 3), api.Sequential(api.Linear(3, 1)))


def test_state_dict_hooks_run_parents_first_then_children_first_with_prefixes():
    def scenario(api):
        log = []
        model = build(api)
        for name, m in model.named_modules():
            m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars, n=name: log.append(("pre", n, prefix,
                                                                                               keep_vars)))
            m.register_state_dict_post_hook(lambda mod, sd, prefix, meta, n=name: log.append(("post", n, prefix,
                                                                                               sorted(sd))))
        model.state_dict(keep_vars=True)
        return log
    log = same_in_both(scenario)
    assert [entry[:3] for entry in log] == [
        ("pre", "", ""), ("pre", "0", "0."), ("post", "0", "0."), ("pre", "1", "1."), ("pre", "1.0", "1.0."),
        ("post", "1.0", "1.0."), ("post", "1", "1."), ("post", "", "")]
    assert log[2][3] == ["0.bias", "0.weight"]  # a post-hook sees what was collected so far, as in torch


def test_a_state_dict_post_hook_edits_in_place_and_must_return_none():
    model = build(nn)

    def drop_bias(module, state_dict, prefix, meta):
        del state_dict[prefix + "bias"]
    model[0].register_state_dict_post_hook(drop_bias)
    assert "0.bias" not in model.state_dict() and "1.0.bias" in model.state_dict()
    model.register_state_dict_post_hook(lambda module, sd, prefix, meta: sd)
    with pytest.raises(RuntimeError, match="must return None"):
        model.state_dict()


def test_load_state_dict_hooks_get_torchs_arguments():
    def scenario(api):
        log = []
        model = build(api)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        model[1].register_load_state_dict_pre_hook(
            lambda mod, sd, prefix, meta, strict, missing, unexpected, errors: log.append(
                ("pre", prefix, sorted(sd), strict, missing, unexpected, errors)))
        model[1].register_load_state_dict_post_hook(lambda mod, keys: log.append(("post", list(keys.missing_keys))))
        model.load_state_dict(state, strict=False)
        return log
    same_in_both(scenario)


def test_load_pre_hook_errors_fail_the_load_and_post_hooks_run_only_after_a_success():
    model = build(nn)
    state = model.state_dict()
    before = [p._array.copy() for p in model.parameters()]
    seen = []
    model.register_load_state_dict_post_hook(lambda mod, keys: seen.append(keys))
    handle = model.register_load_state_dict_pre_hook(
        lambda mod, sd, prefix, meta, strict, missing, unexpected, errors: errors.append("refused by a hook"))
    with pytest.raises(RuntimeError, match="refused by a hook"):
        model.load_state_dict({k: mp.zeros(*v.shape) for k, v in state.items()})
    assert seen == [] and all(np.array_equal(b, p._array) for b, p in zip(before, model.parameters()))
    handle.remove()
    keys = model.load_state_dict(state)
    assert seen == [keys] and keys.missing_keys == [] and keys.unexpected_keys == []



def test_buffers_a_pre_hook_registers_are_taken_back_when_the_load_fails():
    """mixprec's load_state_dict leaves the module unchanged when it fails, including buffers a pre-hook registered
    for keys of the checkpoint (torch makes no such promise: this is mixprec's own contract)."""
    def make_room(mod, sd, prefix, *_):
        if prefix + "extra" in sd:
            mod.register_buffer("extra", mp.zeros(2))
            mod._fixed_dtype_buffers = mod._fixed_dtype_buffers | {"extra"}
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 2))
    model[0].register_load_state_dict_pre_hook(make_room)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["0.extra"] = mp.ones(2)
    with pytest.raises(RuntimeError, match="size mismatch for 1.weight"):
        model.load_state_dict({**state, "1.weight": mp.zeros(3, 3)})
    assert "extra" not in model[0]._buffers and "_fixed_dtype_buffers" not in model[0].__dict__
    model.load_state_dict(state)   # a load that succeeds keeps what the hook made
    np.testing.assert_array_equal(model[0].extra.numpy(), [1, 1])


# ---- the optimizer's step extension ----
class Recorder:
    """A step extension that logs the protocol calls; it routes each gradient into a buffer of its own."""

    def __init__(self, optimizer):
        self.optimizer, self.log = optimizer, []

    def unscale_pairs(self):
        self.log.append("unscale_pairs")
        params = [p for g in self.optimizer.param_groups for p in g["params"] if p.grad is not None]
        return [(p.grad, p.grad) for p in params]

    def before_update(self):
        self.log.append("before_update")

    def after_update(self):
        self.log.append("after_update")

    def zero_grad(self, set_to_none):
        self.log.append(("zero_grad", set_to_none))


def test_a_step_extension_is_called_around_every_update_and_by_the_scaler():
    w = mp.tensor([1.0, 2.0], requires_grad=True)
    opt = mp.optim.SGD([w], lr=0.5)
    ext = Recorder(opt)
    opt.set_step_extension(ext)
    assert opt.step_extension is ext
    scaler = mp.amp.GradScaler("cpu", init_scale=4.0)
    scaler.scale((w * w).sum()).backward()
    scaler.step(opt)
    calls = []
    opt.step(closure=lambda: calls.append("closure") or ext.log.append("closure"))
    opt.zero_grad(set_to_none=False)
    assert ext.log == ["unscale_pairs", "before_update", "after_update", "closure", "before_update",
                       "after_update", ("zero_grad", False)]
    assert w.tolist() == [-1.0, -2.0]  # two SGD steps of lr 0.5 on the unscaled gradient 2w


def test_a_step_extension_is_checked_and_there_is_only_one():
    opt = mp.optim.SGD([mp.zeros(2, requires_grad=True)], lr=0.1)
    with pytest.raises(TypeError, match="before_update"):
        opt.set_step_extension(object())
    opt.set_step_extension(Recorder(opt))
    with pytest.raises(RuntimeError, match="already has a step extension"):
        opt.set_step_extension(Recorder(opt))
