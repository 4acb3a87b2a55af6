"""Module: registration, traversal, modes, dtype/device moves and state_dict round trips."""
import copy

import numpy as np
import pytest

import mixprec as mp

nn = mp.nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.scale = nn.Parameter(mp.ones(1))
        self.register_buffer("steps", mp.tensor(0))
        self.register_buffer("cache", mp.zeros(2), persistent=False)

    def forward(self, x):
        return self.bn(self.fc(x)) * self.scale


def make():
    return nn.Sequential(Block(), nn.ReLU(), nn.Linear(4, 2))


def test_names_follow_pytorch():
    m = make()
    assert list(m.state_dict()) == [
        "0.scale", "0.steps", "0.fc.weight", "0.fc.bias", "0.bn.weight", "0.bn.bias", "0.bn.running_mean",
        "0.bn.running_var", "0.bn.num_batches_tracked", "2.weight", "2.bias"]  # own entries, then children
    assert [n for n, _ in m.named_parameters()] == ["0.scale", "0.fc.weight", "0.fc.bias", "0.bn.weight",
                                                    "0.bn.bias", "2.weight", "2.bias"]
    assert [n for n, _ in m.named_buffers()] == ["0.steps", "0.cache", "0.bn.running_mean", "0.bn.running_var",
                                                 "0.bn.num_batches_tracked"]
    assert [n for n, _ in m.named_modules()] == ["", "0", "0.fc", "0.bn", "1", "2"]
    assert [n for n, _ in m.named_children()] == ["0", "1", "2"]
    assert len(list(m.parameters())) == 7 and all(isinstance(p, nn.Parameter) for p in m.parameters())


def test_shared_parameters_are_listed_once_and_keys_kept():
    a = nn.Linear(2, 2)
    m = nn.Sequential(a, a)
    assert len(list(m.parameters())) == 2
    assert list(m.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_assignment_rules_and_errors():
    m = nn.Linear(2, 3, bias=False)
    assert m.bias is None and "bias" not in m.state_dict()
    with pytest.raises(TypeError, match="Parameter or None"):
        m.weight = mp.zeros(3, 2)
    m.weight = nn.Parameter(mp.zeros(3, 2))
    assert (m.weight.numpy() == 0).all()

    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(mp.zeros(1))
    with pytest.raises(AttributeError, match="super\\(\\).__init__"):
        Bad()
    with pytest.raises(KeyError, match="'\\.'"):
        m.register_buffer("a.b", mp.zeros(1))
    with pytest.raises(TypeError, match="Tensor or None"):
        m.register_buffer("buf", np.zeros(1))
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("weight", mp.zeros(1))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        m.nope
    del m.weight
    assert "weight" not in dict(m.named_parameters())


def test_train_eval_is_recursive_and_zero_grad():
    m = make()
    assert m.training and m[0].bn.training
    m.eval()
    assert not m.training and not m[0].bn.training and not m[0].fc.training
    m.train()
    assert m[0].bn.training
    with pytest.raises(ValueError):
        m.train("no")
    m(mp.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_to_dtype_keeps_parameter_identity_and_integer_buffers():
    m = make()
    params = list(m.parameters())
    opt = mp.optim.SGD(m.parameters(), lr=0.1)
    m(mp.randn(4, 3)).sum().backward()
    m.to(mp.float64)
    assert [id(p) for p in m.parameters()] == [id(p) for p in params]
    assert all(p.dtype == mp.float64 and p.grad.dtype == mp.float64 for p in m.parameters())
    assert m[0].bn.running_mean.dtype == mp.float64
    assert m[0].bn.num_batches_tracked.dtype == mp.int64 and m[0].steps.dtype == mp.int64
    opt.step()  # the optimizer still holds the very same parameters
    m(mp.randn(4, 3, dtype=mp.float64))
    assert m.half()[2].weight.dtype == mp.float16
    with pytest.raises(TypeError, match="floating"):
        m.to(mp.int64)


def test_state_dict_shares_memory_and_round_trips_via_numpy_and_tensors():
    mp.manual_seed(0)
    a, b = make(), make()
    a(mp.randn(6, 3))  # move BatchNorm's running stats away from their init
    sd = a.state_dict()
    assert np.shares_memory(sd["2.weight"].numpy(), a[2].weight.numpy())
    assert not sd["2.weight"].requires_grad
    x = mp.randn(5, 3)
    a.eval(), b.eval()
    assert not np.array_equal(a(x).numpy(), b(x).numpy())
    result = b.load_state_dict({k: v.numpy().copy() for k, v in sd.items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    c = make().eval()
    c.load_state_dict(copy.deepcopy(dict(sd)))
    np.testing.assert_array_equal(a(x).numpy(), c(x).numpy())
    assert c[0].bn.num_batches_tracked.item() == 1


def test_load_state_dict_lists_every_problem_and_changes_nothing():
    m = make()
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    sd = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    del sd["2.bias"]
    sd["extra.weight"] = np.zeros(1)
    sd["0.fc.weight"] = np.zeros((4, 4))
    sd["0.bn.num_batches_tracked"] = np.float32(1.5)
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd)
    msg = str(info.value)
    assert "Missing key(s) in state_dict: \"2.bias\"" in msg
    assert "Unexpected key(s) in state_dict: \"extra.weight\"" in msg
    assert "size mismatch for 0.fc.weight: copying a param with shape (4, 4) from checkpoint, the shape in " \
           "current model is (4, 3)" in msg
    assert "dtype mismatch for 0.bn.num_batches_tracked" in msg
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_load_state_dict_non_strict_and_bad_values():
    m = nn.Linear(2, 2)
    res = m.load_state_dict({"weight": mp.zeros(2, 2), "junk": mp.zeros(1)}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["junk"]
    assert not m.weight.numpy().any()
    with pytest.raises(RuntimeError, match="size mismatch"):
        m.load_state_dict({"weight": mp.zeros(3, 2)}, strict=False)
    with pytest.raises(RuntimeError, match="value for bias is a str"):
        m.load_state_dict({"weight": mp.zeros(2, 2), "bias": "x"})
    with pytest.raises(TypeError, match="dict"):
        m.load_state_dict([("weight", mp.zeros(2, 2))])


def test_half_checkpoint_loads_into_float32_model():
    m = nn.Linear(3, 2)
    half = {k: v.half() for k, v in m.state_dict().items()}
    m2 = nn.Linear(3, 2)
    m2.load_state_dict(half)
    assert m2.weight.dtype == mp.float32
    np.testing.assert_array_equal(m2.weight.numpy(), m.weight.half().float().numpy())


def test_containers():
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(s) == 3 and isinstance(s[-1], nn.Linear)
    head = s[:2]
    assert isinstance(head, nn.Sequential) and list(head.state_dict()) == ["0.weight", "0.bias"]
    assert head(mp.randn(4, 2)).shape == (4, 3)
    with pytest.raises(IndexError):
        s[3]
    s.append(nn.Tanh())
    assert len(s) == 4 and list(dict(s.named_children())) == ["0", "1", "2", "3"]
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    holder = nn.Module()
    holder.layers = ml
    assert list(holder.state_dict())[:2] == ["layers.0.weight", "layers.0.bias"]
    assert len(list(holder.parameters())) == 6
    md = nn.ModuleDict({"enc": nn.Linear(2, 2)})
    md["dec"] = nn.Linear(2, 1)
    assert list(md.keys()) == ["enc", "dec"] and "enc" in md
    assert list(md.state_dict()) == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]


def test_repr_and_parameter():
    text = repr(make())
    assert "(0): Block(" in text and "(fc): Linear(in_features=3, out_features=4, bias=True)" in text
    t = mp.randn(2, 2)
    p = nn.Parameter(t)
    assert p.requires_grad and p.is_leaf and np.shares_memory(p.numpy(), t.numpy())
    assert repr(p).startswith("Parameter containing:")
    assert not nn.Parameter(mp.tensor([1, 2]), requires_grad=False).requires_grad
    with pytest.raises(RuntimeError, match="floating"):
        nn.Parameter(mp.tensor([1, 2]))


def test_deepcopy_gives_an_independent_model():
    m = make()
    c = copy.deepcopy(m)
    assert all(p is not q for p, q in zip(m.parameters(), c.parameters()))
    with mp.no_grad():
        c[2].weight.fill_(0.0)
    assert m[2].weight.numpy().any()


def test_apply_and_requires_grad():
    m = make()
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "Sequential" and "Linear" in seen
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def _reassigned(lib):
    """A module whose parameter, buffer and child are each replaced after registration, in `lib` (mp or torch)."""
    m = lib.nn.Module()
    m.a = lib.nn.Parameter(lib.ones(2))
    m.b = lib.nn.Parameter(lib.ones(2))
    m.register_buffer("x", lib.zeros(2))
    m.register_buffer("y", lib.zeros(2), persistent=False)
    m.first = lib.nn.Linear(2, 2)
    m.second = lib.nn.Linear(2, 2)
    m.a = lib.nn.Parameter(lib.zeros(2))                # a parameter replaced by attribute assignment
    m.x = lib.ones(2)                                    # a buffer replaced by attribute assignment
    m.register_buffer("y", lib.ones(2))                 # a buffer registered again, now persistent
    m.first = lib.nn.Linear(2, 2)                        # a child replaced
    m.b = None                                           # a parameter slot emptied, then filled again
    m.b = lib.nn.Parameter(lib.ones(2))
    return m


def test_replacing_a_parameter_buffer_or_child_keeps_its_place_as_in_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _reassigned(mp), _reassigned(torch)
    for what in ("named_parameters", "named_buffers", "named_children", "named_modules"):
        assert [n for n, _ in getattr(ours, what)()] == [n for n, _ in getattr(theirs, what)()], what
    assert list(ours.state_dict()) == list(theirs.state_dict()) == [
        "a", "b", "x", "y", "first.weight", "first.bias", "second.weight", "second.bias"]
    assert ours.a is dict(ours.named_parameters())["a"] and not ours.a.numpy().any()


def test_register_parameter_refuses_a_buffer_or_child_name_as_torch_does():
    torch = pytest.importorskip("torch")
    for lib in (mp, torch):
        m = lib.nn.Module()
        m.register_buffer("x", lib.zeros(1))
        m.child = lib.nn.Linear(1, 1)
        for name in ("x", "child"):
            with pytest.raises(KeyError, match=f"attribute '{name}' already exists"):
                m.register_parameter(name, lib.nn.Parameter(lib.zeros(1)))
        assert [n for n, _ in m.named_buffers()] == ["x"] and "child" in dict(m.named_children())


def test_load_state_dict_writes_into_the_existing_parameters_as_torch_does():
    torch = pytest.importorskip("torch")
    for lib in (mp, torch):
        m = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.BatchNorm1d(2))
        held = dict(m.named_parameters()), dict(m.named_buffers())
        source = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.BatchNorm1d(2))
        with lib.no_grad():
            for p in source.parameters():
                p.add_(1)
        m.load_state_dict(source.state_dict())
        for name, p in m.named_parameters():
            assert p is held[0][name] and type(p) is lib.nn.Parameter and p.requires_grad, name
            assert np.array_equal(np.asarray(p.detach().numpy()), source.state_dict()[name].numpy()), name
        assert all(b is held[1][name] for name, b in m.named_buffers())
        # the state_dict's tensors are views of those same parameters, outside autograd
        sd = m.state_dict()
        assert all(np.shares_memory(sd[n].numpy(), p.detach().numpy()) for n, p in m.named_parameters())
        assert not any(t.requires_grad for t in sd.values())


def test_module_dict_takes_a_dict_or_name_module_pairs_as_torch_does():
    torch = pytest.importorskip("torch")
    for lib in (torch, mp):
        assert list(lib.nn.ModuleDict([("b", lib.nn.ReLU()), ("a", lib.nn.Tanh())])) == ["b", "a"]
        with pytest.raises(TypeError):
            lib.nn.ModuleDict([1])
    with pytest.raises(TypeError, match="ModuleDict: entry 0 must be a \\(name, Module\\) pair, got int"):
        nn.ModuleDict([1])
    with pytest.raises(TypeError, match="ModuleDict expects a dict of name -> Module or \\(name, Module\\) pairs"):
        nn.ModuleDict(3)


def test_arguments_of_the_wrong_type_name_the_method():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="Linear.apply: fn must be a function of a module, got int"):
        m.apply(3)
    with pytest.raises(TypeError, match="Linear.state_dict: prefix must be a str, got int"):
        m.state_dict(prefix=3)
    with pytest.raises(TypeError, match="Linear.named_parameters: prefix must be a str"):
        list(m.named_parameters(prefix=3))
    with pytest.raises(TypeError, match="Linear.named_buffers: prefix must be a str"):
        list(m.named_buffers(prefix=None))
