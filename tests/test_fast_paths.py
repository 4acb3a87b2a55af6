"""Each shortcut of the hot path gives what its plain equivalent gives (the shortcut sits beside it in the code)."""
import numpy as np

import mixprec as mp
from mixprec.ops import dispatch
from mixprec.ops.registry import _REGISTRY

OPTION = object()  # an option's value: neither a Tensor nor a number


def test_keyword_options_stay_keywords_as_the_general_binding_leaves_them():
    # _keyword_args_to_positional returns at once when no keyword names a data param or holds a tensor;
    # _move_keywords, given such a call, leaves it as it is too
    t = mp.ones(2)
    checked = 0
    for op in set(_REGISTRY.values()):
        if op.custom:
            continue
        for k, name in enumerate(op.arg_names):
            if name in op.data_names or name == "out":
                continue
            args = (t,) * min(k, 1)
            kwargs = {name: OPTION}
            fast = dispatch._keyword_args_to_positional(op, args, kwargs)
            assert fast == (args, kwargs)
            assert dispatch._move_keywords(op, args, kwargs) == fast, (op.name, name)
            checked += 1
    assert checked > 100


def test_a_keyword_data_param_or_tensor_moves_to_its_position():
    x, y = mp.ones(2), mp.full((2,), 3.0)
    assert mp.clamp(x, max=y).tolist() == [1.0, 1.0]
    assert mp.add(x, other=y).tolist() == [4.0, 4.0]


def test_promotion_of_weak_numbers_beside_one_dtype_agrees_with_the_general_rule():
    # _promote decides Tensors of one dtype with Python ints and floats itself; _promote_mixed (dtypes.result_type)
    # decides every case: both give the same arguments
    add = mp.ops.get("add")
    dtypes = [mp.float16, mp.bfloat16, mp.float32, mp.float64, mp.complex64, mp.int32, mp.int64, mp.bool_]
    for dtype in dtypes:
        t = mp.ones(2, dtype=dtype)
        for args in [(t, 2), (t, 2.5), (3, t), (0.5, t), (t, t), (t, True)]:
            fast, general = dispatch._promote(add, args), dispatch._promote_mixed(add, args)
            assert [type(a) for a in fast] == [type(a) for a in general], (dtype, args)
            assert [a.dtype for a in fast] == [a.dtype for a in general], (dtype, args)
            assert [a.tolist() if isinstance(a, mp.Tensor) else a for a in fast] == \
                [a.tolist() if isinstance(a, mp.Tensor) else a for a in general], (dtype, args)


def test_the_engine_plain_path_gives_what_the_general_one_gives(monkeypatch):
    # _run_plain (a node without hooks, in a pass without capture, observers or anomaly mode) and _run_node give the
    # same gradients: broadcast and cast ones (_fit), an op with two outputs, a leaf reached twice
    from mixprec.autograd import engine, graph

    def gradients():
        rng = np.random.default_rng(0)
        w = mp.tensor(rng.standard_normal((3, 4)), requires_grad=True)
        b = mp.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)  # promoted, summed back
        h = (mp.tensor(rng.standard_normal((5, 3))) @ w + b).relu()
        values, _ = h.max(dim=1)
        loss = mp.nn.functional.cross_entropy(h, mp.tensor([0, 1, 2, 3, 0]), label_smoothing=0.1)
        (loss + values.sum() + (w * w).sum()).backward()
        return [t.grad.numpy().tobytes() for t in (w, b)]

    plain, run_plain = [], engine._run_plain
    monkeypatch.setattr(engine, "_run_plain", lambda run, node, grads: plain.append(node) or run_plain(run, node, grads))
    fast = gradients()
    assert len(plain) > 8 and any(isinstance(n, graph.AccumulateGrad) for n in plain)
    monkeypatch.setattr(graph.Node, "_plain", False)  # every node takes the general path
    plain.clear()
    assert gradients() == fast and not plain


def test_class_losses_with_every_target_counted_agree_with_the_general_path(monkeypatch):
    # _nll_loss_core and _nll_loss_backward skip their masks when no weight is given and every target is a class
    # (ignore_index is none): the same bits as the general path, which _EXACT_COUNT = 0 forces, in every dtype,
    # reduction and layout, with infinities and NaN among the inputs
    from mixprec.ops import losses
    F = mp.nn.functional
    rng = np.random.default_rng(0)

    def results():
        found = []
        for dtype in (mp.float16, mp.bfloat16, mp.float32, mp.float64):
            for shape in ((5,), (6, 5), (3, 5, 2)):
                x_np = rng.standard_normal(shape) * 4
                x_np.reshape(-1)[:2] = -np.inf, np.nan
                target = mp.tensor(rng.integers(0, 5, shape[:1] + shape[2:] if len(shape) > 1 else ()))
                for reduction in ("mean", "sum", "none"):
                    for loss_fn in (F.nll_loss, F.cross_entropy):
                        x = mp.tensor(x_np, dtype=dtype, requires_grad=True)
                        loss = loss_fn(x, target, reduction=reduction)
                        loss.backward(mp.ones_like(loss) * 0.75)
                        found.append((loss.detach().float().numpy().tobytes(), x.grad.float().numpy().tobytes()))
        return found

    taken, every = [], losses._every_target_counted
    monkeypatch.setattr(losses, "_every_target_counted", lambda *a: taken.append(a) or every(*a))
    fast = results()
    assert len(taken) == 72
    monkeypatch.setattr(losses, "_EXACT_COUNT", 0)
    taken.clear()
    rng = np.random.default_rng(0)
    assert results() == fast and not taken


def test_the_backward_seed_of_a_host_output_is_what_ones_like_gives():
    # engine._seeds makes a host output's implicit gradient with np.ones; ones_like is its plain equivalent
    from mixprec.autograd import engine
    for dtype in (mp.float16, mp.bfloat16, mp.float32, mp.float64, mp.complex64):
        for shape in ((), (1,), (1, 1)):
            out = mp.ones(*shape, dtype=dtype, requires_grad=True) * 3
            seed, = engine._seeds([out], None, "backward")
            plain = mp.ones_like(out)
            assert type(seed._array) is type(plain._array) and seed._array.flags.c_contiguous
            assert (seed.dtype, seed.shape, seed.requires_grad, seed.grad_fn) == \
                (plain.dtype, plain.shape, plain.requires_grad, plain.grad_fn)
            assert seed.numpy().tobytes() == plain.numpy().tobytes()


def test_two_host_tensors_are_found_as_the_general_search_finds_them():
    # dispatch._find_two_host_tensors answers for two CPU Tensors of one dtype that are not views, and leaves
    # every other pair to _find_tensors; where it answers, it answers what _find_tensors does
    add, index_select = mp.ops.get("add"), mp.ops.get("index_select")
    base = mp.ones(3, 2)
    pairs = [(mp.ones(2), mp.zeros(2)), (mp.ones(2, requires_grad=True), mp.zeros(2)),
             (mp.ones(2, dtype=mp.float16), mp.zeros(2, dtype=mp.float16)), (mp.ones(2), mp.zeros(2, dtype=mp.float64)),
             (base[0], mp.ones(2)), (mp.ones(2), 3.0), (mp.ones(3), mp.tensor([0, 2]))]
    answered = 0
    for args in pairs:
        fast = dispatch._find_two_host_tensors(args)
        for op in (add, index_select):
            plain = dispatch._find_tensors(op, args)
            if fast:
                answered += 1
                assert fast[0] is args and fast[2:] == plain[2:]
                assert all(f is p for f, p in zip(fast[1], plain[1])) and len(fast[1]) == len(plain[1])
    assert answered == 2 * 3  # the first three pairs
    assert dispatch._find_two_host_tensors((base[0], mp.ones(2))) is None  # a view: refreshed by the general path
