"""Float8 tensors: the dtypes and finfo, creation and casts through the Tensor API, printing, save/load, which
ops take them (mixprec/ops/float8.py) and which refuse, promotion, autograd, and the devices that cannot hold
them. torch (the oracle) where it is importable."""
from __future__ import annotations

import io

import numpy as np
import pytest

import mixprec as mp
from mixprec.ops import float8 as float8_ops

FORMATS = [pytest.param(d, id=d.name) for d in (mp.float8_e4m3fn, mp.float8_e5m2, mp.float8_e8m0fnu)]
SIGNED = [pytest.param(d, id=d.name) for d in (mp.float8_e4m3fn, mp.float8_e5m2)]


def bits(t):
    return t.numpy().view(np.uint8).tolist()


def _torch():
    return pytest.importorskip("torch")


def as_torch(dtype):
    return getattr(_torch(), dtype.name)


# ------------------------------------------------------------------ dtypes
def test_the_dtypes_are_ml_dtypes_numpy_dtypes_with_torch_names():
    import ml_dtypes
    assert mp.float8_e4m3fn == np.dtype(ml_dtypes.float8_e4m3fn)
    assert mp.float8_e5m2 == np.dtype(ml_dtypes.float8_e5m2)
    assert mp.float8_e8m0fnu == np.dtype(ml_dtypes.float8_e8m0fnu)
    assert mp.dtypes.as_dtype("float8_e5m2") == mp.float8_e5m2
    assert not hasattr(mp, "float4_e2m1fn")  # torch's is packed two to a byte (float4_e2m1fn_x2): not offered


@pytest.mark.parametrize("dtype", FORMATS)
def test_finfo_matches_torch(dtype):
    ours, theirs = mp.finfo(dtype), _torch().finfo(as_torch(dtype))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert ours.dtype == dtype.name


def test_finfo_known_values_without_torch():
    assert (mp.finfo(mp.float8_e4m3fn).max, mp.finfo(mp.float8_e4m3fn).eps) == (448.0, 0.125)
    assert (mp.finfo(mp.float8_e5m2).max, mp.finfo(mp.float8_e5m2).tiny) == (57344.0, 2.0 ** -14)
    assert (mp.finfo(mp.float8_e8m0fnu).min, mp.finfo(mp.float8_e8m0fnu).max) == (2.0 ** -127, 2.0 ** 127)


# ------------------------------------------------------------------ creation and casts through the Tensor API
VALUES = [0.0, -0.0, 1.0, -2.5, 0.1, 300.0, 460.0, 500.0, 61440.0, 1e-9, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("dtype", FORMATS)
def test_tensor_to_and_type_store_what_torch_stores(dtype):
    torch = _torch()
    expected = torch.tensor(VALUES).to(as_torch(dtype)).view(torch.uint8).tolist()
    x = mp.tensor(VALUES)
    assert bits(mp.tensor(VALUES, dtype=dtype)) == expected
    assert bits(x.to(dtype)) == expected and bits(x.type(dtype)) == expected
    assert bits(x.to(mp.float64).to(dtype)) == torch.tensor(VALUES, dtype=torch.float64).to(
        as_torch(dtype)).view(torch.uint8).tolist()
    back = mp.tensor(VALUES, dtype=dtype)
    t = torch.tensor(VALUES).to(as_torch(dtype))
    for ours, theirs in ((back.float(), t.float()), (back.half(), t.half()), (back.double(), t.double()),
                         (back.bfloat16(), t.bfloat16()), (back.long(), t.long()), (back.bool(), t.bool())):
        np.testing.assert_array_equal(ours.numpy().astype(np.float64), theirs.double().numpy())


@pytest.mark.parametrize("dtype", FORMATS)
def test_writes_round_as_torch(dtype):
    torch = _torch()
    ours, theirs = mp.zeros(4, dtype=dtype), torch.zeros(4, dtype=as_torch(dtype))
    assert bits(ours) == theirs.view(torch.uint8).tolist()  # (e8m0fnu's zero pattern is 2**-127)
    ours.copy_(mp.tensor([500.0, 3.0, 1e-3, 70000.0]))
    theirs.copy_(torch.tensor([500.0, 3.0, 1e-3, 70000.0]))
    assert bits(ours) == theirs.view(torch.uint8).tolist()
    ours[1], theirs[1] = 500.0, 500.0
    assert bits(ours) == theirs.view(torch.uint8).tolist()
    assert bits(mp.full((2,), 3.0, dtype=dtype)) == torch.full((2,), 3.0, dtype=as_torch(dtype)).view(
        torch.uint8).tolist()
    assert bits(mp.ones(2, dtype=dtype).fill_(0.3)) == torch.ones(2, dtype=as_torch(dtype)).fill_(0.3).view(
        torch.uint8).tolist()


@pytest.mark.parametrize("dtype", FORMATS)
@pytest.mark.parametrize("value", [500.0, 60000.0, 1e39, float("inf"), -1.0, float("nan")])
def test_fill_refuses_what_torch_refuses(dtype, value):
    torch = _torch()
    try:
        expected = torch.full((2,), value, dtype=as_torch(dtype)).view(torch.uint8).tolist()
    except RuntimeError:
        with pytest.raises(RuntimeError, match="without overflow"):
            mp.full((2,), value, dtype=dtype)
        with pytest.raises(RuntimeError, match="without overflow"):
            mp.zeros(2, dtype=dtype).fill_(value)
    else:
        assert bits(mp.full((2,), value, dtype=dtype)) == expected


def test_integer_and_bool_tensors_cast_as_torch():
    torch = _torch()
    ints = [0, 1, 3, 100, 1000, -7, 2 ** 40]
    for dtype in (mp.float8_e4m3fn, mp.float8_e5m2, mp.float8_e8m0fnu):
        assert bits(mp.tensor(ints).to(dtype)) == torch.tensor(ints).to(as_torch(dtype)).view(torch.uint8).tolist()
        assert bits(mp.tensor([True, False]).to(dtype)) == torch.tensor([True, False]).to(
            as_torch(dtype)).view(torch.uint8).tolist()


def test_item_tolist_and_is_floating_point():
    x = mp.tensor([1.5, -2.0], dtype=mp.float8_e4m3fn)
    assert x.tolist() == [1.5, -2.0] and type(x[0].item()) is float and x.is_floating_point()


# ------------------------------------------------------------------ printing, save/load
@pytest.mark.parametrize("dtype", FORMATS)
def test_repr_names_the_dtype_as_other_dtypes_do(dtype):
    x = mp.tensor([1.0, 2.0, 0.5], dtype=dtype)
    assert repr(x) == f"tensor([1. , 2. , 0.5], dtype={dtype.name})"
    assert repr(mp.tensor([1.0, 2.0], dtype=mp.float16)) == "tensor([1., 2.], dtype=float16)"


@pytest.mark.parametrize("dtype", FORMATS)
def test_save_and_load_keep_every_bit_pattern(dtype):
    x = mp.from_numpy(np.arange(256, dtype=np.uint8).view(dtype).reshape(16, 16))
    buffer = io.BytesIO()
    mp.save({"x": x, "scalar": x.numpy()[0, 3]}, buffer)
    buffer.seek(0)
    loaded = mp.load(buffer)
    assert loaded["x"].dtype == dtype and bits(loaded["x"]) == bits(x)
    assert loaded["scalar"].dtype == dtype and loaded["scalar"].view(np.uint8) == 3


def test_dlpack_export_is_refused_clearly():
    x = mp.tensor([1.0], dtype=mp.float8_e4m3fn)
    with pytest.raises(TypeError, match="float8_e4m3fn.*DLPack"):
        x.__dlpack__()


# ------------------------------------------------------------------ which ops take float8 tensors
def _pair(dtype):
    values = [1.0, 2.0, 4.0, 0.5, 8.0, 1.0]
    torch = _torch()
    return mp.tensor(values, dtype=dtype), torch.tensor(values).to(as_torch(dtype))


CALLS = {  # name -> f(module, x) for torch and mixprec alike
    "reshape": lambda m, x: x.reshape(2, 3), "view": lambda m, x: x.view(3, 2), "transpose": lambda m, x: x.reshape(
        2, 3).transpose(0, 1), "permute": lambda m, x: x.reshape(2, 3).permute(1, 0), "clone": lambda m, x: x.clone(),
    "contiguous": lambda m, x: x.reshape(2, 3).t().contiguous(), "getitem": lambda m, x: x[1:4],
    "index": lambda m, x: x[m.tensor([0, 2])], "mask": lambda m, x: x[x == x], "cat": lambda m, x: m.cat([x, x]),
    "stack": lambda m, x: m.stack([x, x]), "where": lambda m, x: m.where(x == x, x, x),
    "squeeze": lambda m, x: x[None].squeeze(0), "unsqueeze": lambda m, x: x.unsqueeze(1),
    "expand": lambda m, x: x[None].expand(2, 6), "flatten": lambda m, x: x.reshape(2, 3).flatten(),
    "narrow": lambda m, x: x.narrow(0, 1, 2), "split": lambda m, x: x.split(2)[1], "chunk": lambda m, x: x.chunk(3)[2],
    "unbind": lambda m, x: x.reshape(2, 3).unbind()[1], "roll": lambda m, x: x.roll(1),
    "repeat": lambda m, x: x.repeat(2), "index_select": lambda m, x: x.index_select(0, m.tensor([1, 1])),
    "masked_select": lambda m, x: x.masked_select(x == x), "eq": lambda m, x: x == x, "ne": lambda m, x: x != x,
    "eq_scalar": lambda m, x: x == 2.0, "isnan": lambda m, x: x.isnan(), "abs": lambda m, x: x.abs(),
    "movedim": lambda m, x: x.reshape(2, 3).movedim(0, 1), "unfold": lambda m, x: x.unfold(0, 2, 2),
    "add": lambda m, x: x + x, "add_scalar": lambda m, x: x + 1.0, "sub": lambda m, x: x - x,
    "neg": lambda m, x: -x, "div": lambda m, x: x / x, "exp": lambda m, x: x.exp(), "sum": lambda m, x: x.sum(),
    "max": lambda m, x: x.max(), "lt": lambda m, x: x < x, "sort": lambda m, x: x.sort()[0],
    "relu": lambda m, x: m.relu(x), "clamp": lambda m, x: x.clamp(0, 1), "gather": lambda m, x: m.gather(
        x, 0, m.tensor([0, 1])), "flip": lambda m, x: x.flip(0), "isinf": lambda m, x: x.isinf(),
    "maximum": lambda m, x: m.maximum(x, x), "mean": lambda m, x: x.mean(), "cumsum": lambda m, x: x.cumsum(0),
    "tril": lambda m, x: x.reshape(2, 3).tril(), "masked_fill": lambda m, x: x.masked_fill(x == x, 0.0),
    "mul_scalar": lambda m, x: x * 2, "pow": lambda m, x: x ** 2, "sign": lambda m, x: x.sign(),
}


@pytest.mark.parametrize("dtype", FORMATS)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_op_takes_float8_exactly_when_torch_does(name, dtype):
    torch = _torch()
    x, t = _pair(dtype)
    try:
        expected = CALLS[name](torch, t)
    except NotImplementedError:
        with pytest.raises(NotImplementedError, match=f"not implemented for {dtype.name}"):
            CALLS[name](mp, x)
        return
    got = CALLS[name](mp, x)
    assert got.dtype.name == str(expected.dtype).removeprefix("torch.").replace("bool", "bool")
    assert got.shape == tuple(expected.shape)
    width = torch.uint8 if expected.dtype != torch.bool else torch.bool
    np.testing.assert_array_equal(got.numpy().view(np.uint8) if got.dtype != mp.bool_ else got.numpy(),
                                  expected.contiguous().view(width).numpy())


def test_torch_elementwise_mul_and_mm_on_float8_are_refused_here():
    x = mp.tensor([1.0, 2.0], dtype=mp.float8_e4m3fn)
    for call in (lambda: x * x, lambda: mp.mm(x.reshape(2, 1), x.reshape(1, 2))):
        with pytest.raises(NotImplementedError, match="not implemented for float8_e4m3fn"):
            call()


def test_the_list_names_registered_ops_only():
    assert float8_ops.TAKE_FLOAT8 <= set(mp.ops.names())


# ------------------------------------------------------------------ promotion
@pytest.mark.parametrize("other", [mp.float32, mp.float16, mp.bfloat16, mp.int64, mp.bool_, mp.float8_e5m2],
                         ids=lambda d: d.name)
def test_promotion_with_any_other_dtype_raises_as_torch(other):
    torch = _torch()
    x, y = mp.tensor([1.0, 2.0], dtype=mp.float8_e4m3fn), mp.ones(2, dtype=other)
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        torch.promote_types(torch.float8_e4m3fn, as_torch(other))
    for call in (lambda: mp.dtypes.promote(mp.float8_e4m3fn, other), lambda: x + y, lambda: y + x,
                 lambda: x == y, lambda: mp.where(x == x, x, y), lambda: mp.cat([x, y])):
        with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
            call()


def test_a_weak_scalar_takes_the_float8_dtype():
    x = mp.tensor([1.0, 2.0], dtype=mp.float8_e5m2)
    assert mp.result_type(x, 2.0) == mp.float8_e5m2 and (x == 2.0).tolist() == [False, True]


# ------------------------------------------------------------------ autograd: torch lets float8 tensors require grad
def test_float8_tensors_require_grad_and_casts_pass_gradients_as_torch():
    torch = _torch()
    leaf = mp.tensor([1.0, 2.0], dtype=mp.float8_e4m3fn, requires_grad=True)
    assert leaf.requires_grad and torch.tensor([1.0], dtype=torch.float8_e4m3fn, requires_grad=True).requires_grad
    w, tw = mp.tensor([0.3, 500.0], requires_grad=True), torch.tensor([0.3, 500.0], requires_grad=True)
    (w.to(mp.float8_e4m3fn).reshape(2, 1).float() * mp.tensor([[3.0], [5.0]])).sum().backward()
    (tw.to(torch.float8_e4m3fn).reshape(2, 1).float() * torch.tensor([[3.0], [5.0]])).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())


# ------------------------------------------------------------------ devices
def test_cuda_refuses_float8_tensors_clearly():
    from mixprec.backend.bfloat16 import require_dtype_support
    with pytest.raises(TypeError, match="float8_e5m2 tensors cannot live on CUDA"):
        require_dtype_support(mp.float8_e5m2, mp.device("cuda"))


@pytest.mark.standin
def test_the_strict_standin_refuses_float8_arrays_as_cupy_does():
    pytest.importorskip("cupy")  # the stand-in reads its facts from the real package (CI's stand-in pass has it)
    from mixprec.strict_cupy import cupy
    with pytest.raises(ValueError, match="Unsupported dtype float8_e4m3fn"):
        cupy.empty(3, dtype=mp.float8_e4m3fn)
    with pytest.raises(ValueError, match="Unsupported dtype float8_e8m0fnu"):
        cupy.zeros(4, dtype=np.uint8).view(mp.float8_e8m0fnu)
    assert cupy.empty(2, dtype=mp.bfloat16).dtype == mp.bfloat16


@pytest.mark.gpu
def test_the_casts_run_on_device_arrays_as_bytes():
    from mixprec.backend import cupy_module
    from mixprec.backend.float8 import float8_bits, from_float8
    cupy = cupy_module()
    x = np.array([500.0, 1.0, -np.inf, np.nan, 3e-3], dtype=np.float32)
    on_device = float8_bits(cupy.asarray(x), mp.float8_e4m3fn)
    assert on_device.dtype == np.uint8 and np.array_equal(on_device.get(), float8_bits(x, mp.float8_e4m3fn))
    np.testing.assert_array_equal(from_float8(on_device, mp.float32, mp.float8_e4m3fn).get(),
                                  from_float8(on_device.get().view(mp.float8_e4m3fn), mp.float32))


@pytest.mark.gpu
def test_float8_tensors_are_refused_on_cuda_however_made():
    x = mp.tensor([1.0], dtype=mp.float8_e4m3fn)
    for make in (lambda: x.to("cuda"), lambda: mp.zeros(2, dtype=mp.float8_e5m2, device="cuda"),
                 lambda: mp.ones(2, device="cuda").to(mp.float8_e4m3fn),
                 lambda: mp.tensor([1.0], dtype=mp.float8_e8m0fnu, device="cuda")):
        with pytest.raises(TypeError, match="tensors cannot live on CUDA"):
            make()
