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
