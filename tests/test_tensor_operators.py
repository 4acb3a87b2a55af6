"""Python's operators on Tensors, side by side with torch: values, result dtypes and exception types.

Tables run every binary operator over every dtype pair and operand kind (a tensor, a 0-d tensor, a Python
int/float/bool, the reflected form), every augmented operator in place, and the integer rules of storing
Python numbers (creation, fill_, full, t[k] = v) and of using them in arithmetic (they wrap around, as torch).
"""
from __future__ import annotations

import operator

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
          "%": operator.mod, "**": operator.pow, "&": operator.and_, "|": operator.or_, "^": operator.xor,
          "<<": operator.lshift, ">>": operator.rshift, "==": operator.eq, "<": operator.lt}
INPLACE = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
           "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "&": operator.iand, "|": operator.ior,
           "^": operator.ixor, "<<": operator.ilshift, ">>": operator.irshift}
LEFT = [-3, 0, 1, 2, 5, 7]   # (uint8 stores -3 as 253, in both libraries)
RIGHT = [2, 3, 1, 2, 3, 1]   # no zero: division by zero has its own test
SCALARS = {"int": 3, "float": 2.5, "bool": True}


def make(lib, values, dtype):
    return lib.tensor(values, dtype=getattr(lib, dtype))


def outcome(fn):
    """The result (a tensor, a bool) or the type of the exception raised."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return type(e)


def same(ours, theirs):
    """'' when mixprec's outcome matches torch's (same exception type, or same dtype and values), else a note."""
    if isinstance(theirs, type) or isinstance(ours, type):
        return "" if ours is theirs else f"mixprec {getattr(ours, '__name__', ours)!s:.60}, torch {theirs!s:.60}"
    if not isinstance(theirs, torch.Tensor):
        return "" if ours == theirs else f"mixprec {ours!r}, torch {theirs!r}"
    dtype = str(theirs.dtype).removeprefix("torch.")
    if ours.dtype.name != dtype:
        return f"dtype mixprec {ours.dtype.name}, torch {dtype}"
    want = (theirs.float() if theirs.dtype == torch.bfloat16 else theirs).numpy().astype(np.float64)
    got = np.asarray(ours.numpy(), dtype=np.float64)
    # (torch computes 3 / t as 3 * (1 / t), a rounding more than mixprec's division: float64 gets a little room)
    rtol = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6, "float64": 1e-15}.get(dtype, 0)
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=0, equal_nan=True):
        return f"values mixprec {got.tolist()}, torch {want.tolist()}"
    return ""


def operands(lib, dtype):
    """The operand kinds: name -> (left, right) for ``left op right``."""
    a = make(lib, LEFT, dtype)
    kinds = {f"tensor {d}": (a, make(lib, RIGHT, d)) for d in DTYPES}
    kinds.update({f"0-d {d}": (a, make(lib, 3, d)) for d in DTYPES})
    kinds.update({f"scalar {k}": (a, v) for k, v in SCALARS.items()})
    kinds.update({f"reflected {k}": (v, a) for k, v in SCALARS.items()})
    return kinds


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("symbol", list(BINARY))
def test_binary_operator_matches_torch(symbol, dtype):
    fn = BINARY[symbol]
    ours, theirs = operands(mp, dtype), operands(torch, dtype)
    wrong = {k: same(outcome(lambda: fn(*ours[k])), outcome(lambda: fn(*theirs[k]))) for k in ours}
    assert not {k: v for k, v in wrong.items() if v}, f"{dtype} {symbol}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("symbol", list(INPLACE))
def test_augmented_operator_writes_in_place_as_torch(symbol, dtype):
    fn = INPLACE[symbol]
    wrong = {}
    for kind in operands(torch, dtype):
        if kind.startswith("reflected"):
            continue
        results = []
        for lib in (mp, torch):
            a, b = operands(lib, dtype)[kind]
            alias = a
            result = outcome(lambda: fn(a, b))
            # a result is the tensor itself, holding the new values (its other references see them)
            results.append((result, result is alias or isinstance(result, type), alias))
        (r_mp, kept_mp, alias_mp), (r_torch, kept_torch, alias_torch) = results
        note = same(r_mp, r_torch) or same(alias_mp, alias_torch)
        if note or not kept_mp or not kept_torch:
            wrong[kind] = note or "not written in place"
    assert not wrong, f"{dtype} {symbol}="


def test_in_place_identity_is_kept():
    seen = []
    for lib in (mp, torch):
        a = lib.tensor([5, 6, 7])
        b = a
        a &= 6
        a //= 2
        a %= 3
        a <<= 2
        a |= 1
        a ^= 2
        a >>= 1
        a -= 1
        a **= 2
        assert b is a
        seen.append(b.tolist())
    assert seen[0] == seen[1]


def test_matmul_assignment_rebinds_as_torch():
    for lib in (mp, torch):  # neither defines __imatmul__: a @= b is a = a @ b, a new tensor
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]])
        b = a
        a @= lib.tensor([[0.0, 1.0], [1.0, 0.0]])
        assert a is not b and b.tolist() == [[1.0, 2.0], [3.0, 4.0]] and a.tolist() == [[2.0, 1.0], [4.0, 3.0]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["neg", "pos", "invert", "abs"])
def test_unary_operator_matches_torch(name, dtype):
    fn = {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert, "abs": operator.abs}[name]
    ours, theirs = make(mp, LEFT, dtype), make(torch, LEFT, dtype)
    if name == "abs" and dtype == "bool":
        pytest.skip("abs(bool tensor): torch raises NotImplementedError, mixprec TypeError (left as it is)")
    assert not same(outcome(lambda: fn(ours)), outcome(lambda: fn(theirs)))


def test_positive_is_the_tensor_itself():
    a = mp.tensor([1.0, -2.0])
    assert +a is a and a.positive() is a


@pytest.mark.parametrize("symbol", ["//", "%"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_division_by_zero_matches_torch(symbol, dtype):
    fn = BINARY[symbol]
    for right in (0, [0, 1, 0, 1, 0, 1]):
        ours = outcome(lambda: fn(make(mp, LEFT, dtype), right if right == 0 else make(mp, right, dtype)))
        theirs = outcome(lambda: fn(make(torch, LEFT, dtype), right if right == 0 else make(torch, right, dtype)))
        assert not same(ours, theirs), (dtype, symbol, right)


def test_integer_division_by_zero_names_the_op():
    with pytest.raises(RuntimeError, match=r"floor_divide: integer division by zero"):
        mp.tensor([1, 2]) // mp.tensor([1, 0])
    with pytest.raises(RuntimeError, match=r"remainder: integer division by zero"):
        7 % mp.tensor([0])
    with pytest.raises(RuntimeError, match=r"fmod: integer division by zero"):
        mp.fmod(mp.tensor([3]), 0)


def test_floor_division_and_remainders_follow_torch_signs():
    a = [-7.5, 7.5, -7.0, 7.0, -0.0, 5.0, -5.0, float("inf"), float("nan")]
    b = [2.0, -2.0, -3.0, 3.0, 3.0, float("inf"), float("inf"), 2.0, 1.0]
    for fn in (torch.floor_divide, torch.remainder, torch.fmod):
        ours = getattr(mp, fn.__name__)(mp.tensor(a), mp.tensor(b))
        theirs = fn(torch.tensor(a), torch.tensor(b))
        assert not same(ours, theirs), fn.__name__
        assert np.array_equal(np.signbit(ours.numpy()), np.signbit(theirs.numpy())), fn.__name__  # zeros' signs too
    ints = ([-7, 7, -7, 7, -2 ** 63], [2, -2, -3, 3, -1])
    for fn in (torch.floor_divide, torch.remainder, torch.fmod):
        ours = getattr(mp, fn.__name__)(*(mp.tensor(x) for x in ints))
        assert not same(ours, fn(*(torch.tensor(x) for x in ints))), fn.__name__


def test_divmod_is_not_defined_as_in_torch():
    for lib in (mp, torch):
        with pytest.raises(TypeError):
            divmod(lib.tensor([7]), 2)


@pytest.mark.parametrize("name", ["remainder", "fmod"])
def test_remainder_gradients_match_torch(name):
    values = ([7.5, -7.5, 2.6, -0.4], [2.0, 2.0, -1.5, 3.0])
    grads = []
    for lib in (mp, torch):
        a, b = (lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in values)
        getattr(lib, name)(a, b).backward(lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64))
        grads.append((a.grad.tolist(), b.grad.tolist()))
    assert grads[0] == grads[1]


def test_floor_divide_has_no_derivative_as_in_torch():
    for lib in (mp, torch):
        x = lib.tensor([3.0, -3.0], requires_grad=True)
        y = lib.floor_divide(x, 2)
        assert y.requires_grad
        with pytest.raises(RuntimeError, match="floor_divide"):
            y.sum().backward()


def test_bitwise_ops_refuse_floats_with_a_clear_message():
    with pytest.raises(NotImplementedError, match=r"bitwise_and: not implemented for float32 tensors; it takes "
                                                  r"integer and bool tensors"):
        mp.tensor([1.0, 2.0]) & 3
    with pytest.raises(NotImplementedError, match=r"bitwise_left_shift: .*float16"):
        1 << mp.tensor([1.0], dtype=mp.float16)
    with pytest.raises(TypeError, match=r"bitwise_not: ~ is only for integer and bool"):
        ~mp.tensor([1.0])


def test_logical_ops_stay_logical():
    a, b = [0, 2, 3, 0], [1, 1, 0, 0]
    for name in ("logical_and", "logical_or", "logical_xor"):
        assert not same(getattr(mp, name)(mp.tensor(a), mp.tensor(b)), getattr(torch, name)(torch.tensor(a),
                                                                                            torch.tensor(b)))
    assert (mp.tensor([1, 2, 6]) & 3).tolist() == [1, 2, 2]  # & is bitwise, not logical


def test_bool_subtraction_is_refused_as_in_torch():
    m = mp.tensor([True, False])
    with pytest.raises(RuntimeError, match=r"`-` operator.*two bool tensors.*`\^` operator or logical_xor"):
        m - m
    with pytest.raises(RuntimeError, match=r"`-` operator.*two bool tensors"):
        m -= mp.tensor([True, True])
    assert m.tolist() == [True, False]  # untouched
    for lib in (mp, torch):
        with pytest.raises(RuntimeError):
            lib.tensor([True]) - 1
        with pytest.raises(RuntimeError):
            -lib.tensor([True])


def test_in_place_refuses_what_the_tensor_cannot_hold():
    b = mp.tensor([True, False])
    with pytest.raises(RuntimeError, match=r"__iadd__: result type int64 can't be cast to the desired output type "
                                           r"bool"):
        b += 1
    i = mp.tensor([3, 4])
    with pytest.raises(RuntimeError, match=r"__itruediv__: result type float32 can't be cast .* int64"):
        i /= 2
    with pytest.raises(RuntimeError, match=r"__iand__: result type float32"):
        i &= mp.tensor([1.0])
    assert b.tolist() == [True, False] and i.tolist() == [3, 4]


def test_lists_are_not_operands_as_in_torch():
    t = mp.tensor([[1.0, 2.0]])
    for lib_t in (t, torch.tensor([[1.0, 2.0]])):
        with pytest.raises(TypeError, match="unsupported operand"):
            lib_t @ [1.0, 1.0]
        with pytest.raises(TypeError, match="unsupported operand"):
            lib_t + [1.0, 1.0]
        with pytest.raises(TypeError):
            lib_t += [1.0, 1.0]
    with pytest.raises(TypeError, match=r"matmul: other must be a Tensor, got list"):
        mp.matmul(t, [1.0, 1.0])


# ------------------------------------------------------------------ format, in, index
@pytest.mark.parametrize("values, spec", [(3.14159, ".2f"), (3, "5d"), (3, ".1f"), (True, ""), (2.5, ""),
                                          ([3.14159], ".2f"), ([1.0, 2.0], ".2f"), ([[1]], "")])
def test_format_matches_torch(values, spec):
    ours = outcome(lambda: format(mp.tensor(values), spec))
    theirs = outcome(lambda: format(torch.tensor(values), spec))
    if isinstance(theirs, str) and theirs.startswith("tensor("):
        assert ours == repr(mp.tensor(values))  # no format spec: the tensor's own text, like str(t)
    else:
        assert ours == theirs


@pytest.mark.parametrize("element", [3, 3.5, True, 0, "tensor-row", "tensor-0d", "str", "list"])
def test_contains_matches_torch(element):
    def run(lib):
        t = lib.tensor([[1, 2], [3, 4]])
        x = {"tensor-row": lib.tensor([9, 2]), "tensor-0d": lib.tensor(4.0), "str": "a", "list": [1, 2]}.get(
            element, element)
        return outcome(lambda: x in t)
    assert run(mp) == run(torch)


@pytest.mark.parametrize("dtype", DTYPES + ["complex64"])
@pytest.mark.parametrize("shape", ["0-d", "one", "two"])
def test_index_matches_torch(dtype, shape):
    def run(lib):
        t = make(lib, {"0-d": 1, "one": [1], "two": [1, 0]}[shape], dtype)
        return outcome(lambda: [10, 20, 30][t])
    assert run(mp) == run(torch)


# ------------------------------------------------------------------ Python ints and the integer dtypes
@pytest.mark.parametrize("values, dtype", [
    (2 ** 63, None), (2 ** 63 - 1, None), (-2 ** 63, None), ([2 ** 64], None), ([1, 2 ** 63], None),
    ([1.5, 2 ** 63], None), ([1.0, 2 ** 70], None), ([2 ** 40], "int32"), ([2 ** 31], "int32"),
    ([-2 ** 31], "int32"), ([300], "uint8"), ([-1, -255], "uint8"), ([-256], "uint8"), ([128], "int8"),
    ([-128, 127], "int8"), ([1e10], "int32"), ([float("nan")], "int16"), ([1.9, -1.9], "int8"),
    ([2 ** 70], "float16"), ([2 ** 63], "float32"), ([2, 0], "bool"), ([True, 2], "int8")])
def test_creation_from_python_numbers_matches_torch(values, dtype):
    def run(lib):
        return outcome(lambda: lib.tensor(values, dtype=None if dtype is None else getattr(lib, dtype)))
    assert not same(run(mp), run(torch))


def test_out_of_range_ints_name_the_value_and_dtype():
    with pytest.raises(ValueError, match=r"tensor: the Python int 9223372036854775808 does not fit in int64"):
        mp.tensor([1, 2 ** 63])
    with pytest.raises(RuntimeError, match=r"tensor: value 1099511627776 cannot be converted to int32 without "
                                           r"overflow"):
        mp.tensor([2 ** 40], dtype=mp.int32)
    with pytest.raises(RuntimeError, match=r"full: value 1099511627776 cannot be converted to int32"):
        mp.full((1,), 2 ** 40, dtype=mp.int32)
    t = mp.zeros(2, dtype=mp.int32)
    with pytest.raises(RuntimeError, match=r"fill_: value 1099511627776 cannot be converted to int32"):
        t.fill_(2 ** 40)
    with pytest.raises(RuntimeError, match=r"__setitem__: value 1000 cannot be converted to int8"):
        t.to(mp.int8)[0] = 1000
    assert t.tolist() == [0, 0]


@pytest.mark.parametrize("how", ["fill_", "full", "setitem"])
@pytest.mark.parametrize("value, dtype", [(2 ** 40, "int32"), (2 ** 31 - 1, "int32"), (-1, "uint8"), (-256, "uint8"),
                                          (1000, "int8"), (1.5, "int16"), (float("nan"), "int8"), (2, "bool"),
                                          (2 ** 64 - 1, "int64"), (1e10, "float16"), (float("inf"), "bfloat16")])
def test_storing_a_number_matches_torch(how, value, dtype):
    def run(lib):
        d = getattr(lib, dtype)
        if how == "full":
            return outcome(lambda: lib.full((2,), value, dtype=d))
        t = lib.zeros(2, dtype=d)
        if how == "fill_":
            return outcome(lambda: t.fill_(value))
        return outcome(lambda: t.__setitem__(0, value) or t)
    assert not same(run(mp), run(torch))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
@pytest.mark.parametrize("value", [1000, -1, 200, 2 ** 40, 2 ** 63 + 5, 2 ** 64 - 1, -2 ** 63, 2 ** 64])
@pytest.mark.parametrize("symbol", ["+", "*", "//", "&", "==", "<"])
def test_python_ints_wrap_around_in_arithmetic_as_torch(symbol, value, dtype):
    fn = BINARY[symbol]
    ours = outcome(lambda: fn(make(mp, [1, 100], dtype), value))
    theirs = outcome(lambda: fn(make(torch, [1, 100], dtype), value))
    assert not same(ours, theirs)


@pytest.mark.parametrize("call", ["clamp", "where", "pow"])
def test_bounds_that_do_not_fit_are_refused_as_in_torch(call):
    def run(lib):
        t = lib.tensor([1, 2], dtype=lib.int8)
        fn = {"clamp": lambda: t.clamp(max=1000), "where": lambda: lib.where(t > 1, t, 1000),
              "pow": lambda: t ** 1000}[call]
        return outcome(fn)
    assert run(mp) is run(torch) is RuntimeError


def test_small_integer_dtypes_promote_as_torch():
    pairs = [(a, b) for a in DTYPES for b in DTYPES]
    wrong = [(a, b) for a, b in pairs
             if str(torch.promote_types(getattr(torch, a), getattr(torch, b))).removeprefix("torch.")
             != mp.result_type(getattr(mp, a), getattr(mp, b)).name]
    assert not wrong


def test_arange_refuses_a_step_that_does_not_lead_to_end():
    for args in ((0, 5, 0), (0.0, 5.0, 0.0), (5, 0, 1), (0, 5, -1)):
        with pytest.raises(RuntimeError, match="arange: step must be nonzero and lead from start to end"):
            mp.arange(*args)
        with pytest.raises(RuntimeError):
            torch.arange(*args)
    assert mp.arange(5, 0, -2).tolist() == torch.arange(5, 0, -2).tolist()
