"""Each shortcut of the hot path gives what its plain equivalent gives (the shortcut sits beside it in the code)."""
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
