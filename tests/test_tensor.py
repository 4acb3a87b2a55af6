"""The Tensor API, creation functions and the dtype rules (promotion table, dtype-likes)."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec import dtypes as dt

ALL_DTYPES = [mp.bool, mp.int32, mp.int64, mp.float16, mp.bfloat16, mp.float32, mp.float64]
B, I32, I64, F16, BF16, F32, F64 = ALL_DTYPES

# The promotion table, written out by hand (torch's table restricted to mixprec's dtypes).
EXPECTED_PROMOTION = {
    (B, B): B, (B, I32): I32, (B, I64): I64, (B, F16): F16, (B, BF16): BF16, (B, F32): F32, (B, F64): F64,
    (I32, I32): I32, (I32, I64): I64, (I32, F16): F16, (I32, BF16): BF16, (I32, F32): F32, (I32, F64): F64,
    (I64, I64): I64, (I64, F16): F16, (I64, BF16): BF16, (I64, F32): F32, (I64, F64): F64,
    (F16, F16): F16, (F16, BF16): F32, (F16, F32): F32, (F16, F64): F64,
    (BF16, BF16): BF16, (BF16, F32): F32, (BF16, F64): F64,
    (F32, F32): F32, (F32, F64): F64, (F64, F64): F64,
}


def _sample(dtype, shape=(2,)):
    return mp.ones(*shape, dtype=dtype) if dtype != B else mp.tensor(np.ones(shape, dtype=bool))


# ------------------------------------------------------------------ dtypes
@pytest.mark.parametrize("a,b", list(itertools.product(ALL_DTYPES, ALL_DTYPES)),
                         ids=[f"{a.name}-{b.name}" for a, b in itertools.product(ALL_DTYPES, ALL_DTYPES)])
def test_promotion_table(a, b):
    expected = EXPECTED_PROMOTION.get((a, b)) or EXPECTED_PROMOTION[(b, a)]
    assert dt.promote(a, b) == expected
    assert mp.result_type(a, b) == expected
    # and every binary op dispatches through it
    assert (_sample(a) + _sample(b)).dtype == expected
    assert mp.maximum(_sample(a), _sample(b)).dtype == expected


def test_promotion_table_matches_torch():
    torch = pytest.importorskip("torch")
    to_torch = {B: torch.bool, I32: torch.int32, I64: torch.int64, F16: torch.float16, BF16: torch.bfloat16,
                F32: torch.float32, F64: torch.float64}
    for a, b in itertools.product(ALL_DTYPES, ALL_DTYPES):
        assert to_torch[dt.promote(a, b)] == torch.promote_types(to_torch[a], to_torch[b]), (a, b)


def test_no_silent_float64():
    """float64 appears only when an input is float64: never from scalars or mixed half types."""
    for d in (F16, BF16, F32, I32, I64, B):
        for scalar in (0.5, 2, True, np.float64(0.5), np.float32(2.0)):
            out = _sample(d) * scalar
            assert out.dtype != F64, (d, scalar)
    assert (mp.tensor([1, 2]) / mp.tensor([2, 4])).dtype == F32
    assert (mp.tensor([1, 2]) * 0.5).dtype == F32
    assert mp.tensor([1, 2]).to(F16).sum().dtype == F16


@pytest.mark.parametrize("dtype,scalar,expected", [
    (F16, 0.5, F16), (BF16, 3, BF16), (BF16, 2.0, BF16), (F32, 1e30, F32),
    (I32, 1, I32), (I32, 2.5, F32), (I64, 0.5, F32), (B, 1, I64), (B, 1.5, F32), (B, True, B),
    (F16, np.float64(2.0), F16), (F16, np.float32(2.0), F16), (I32, np.int64(3), I32),
])
def test_scalars_are_weak(dtype, scalar, expected):
    assert (_sample(dtype) * scalar).dtype == expected
    assert (scalar * _sample(dtype)).dtype == expected
    assert mp.result_type(_sample(dtype), scalar) == expected


def test_python_numbers_beside_one_dtype_promote_as_the_general_rule():
    """Dispatch decides Python ints and floats beside tensors of one dtype (``x * 2.0``, ``t != -100``) without
    result_type, for speed: every such case must come out as the general rule's (the same dtype, the same scalar,
    or the same error)."""
    from mixprec.ops import dispatch, registry
    op = registry.get("mul")

    def outcome(promote, args):
        try:
            out = promote(op, args)
        except Exception as exc:  # noqa: BLE001 (the error itself is compared)
            return type(exc)
        return [(type(a), a.dtype, a.item() if isinstance(a, np.generic) else None) if not isinstance(a, mp.Tensor)
                else (mp.Tensor, a.dtype, None) for a in out]

    cases = itertools.product(ALL_DTYPES + [mp.complex64], (2, -3, 0, 0.5, -1e-8, 1e30, 2 ** 40, True, 1j))
    with np.errstate(over="ignore"):  # (1e30 overflows float16 to inf, either way)
        for dtype, scalar in cases:
            for args in ((_sample(dtype), scalar), (scalar, _sample(dtype)), (_sample(dtype, ()), scalar)):
                assert outcome(dispatch._promote, args) == outcome(dispatch._promote_mixed, args), (dtype, scalar)
            if not (dtype in (I32, I64) and scalar == 2 ** 40):
                assert (_sample(dtype) * scalar).dtype == mp.result_type(_sample(dtype), scalar), (dtype, scalar)


def test_zero_dim_tensors_only_matter_in_a_higher_category():
    assert (mp.ones(2, dtype=F16) * mp.tensor(2.0)).dtype == F16
    assert (mp.ones(2, dtype=I32) * mp.tensor(2.0)).dtype == F32
    assert (mp.ones(2, dtype=I32) * mp.tensor(2.0, dtype=F64)).dtype == F64
    assert (mp.tensor(1.0, dtype=F16) * mp.tensor(1.0, dtype=BF16)).dtype == F32
    assert (mp.ones(2, dtype=mp.bool) + mp.tensor(2, dtype=I32)).dtype == I32


@pytest.mark.parametrize("spec,expected", [
    ("float16", F16), ("half", F16), (np.float16, F16), (np.dtype("float16"), F16), (mp.float16, F16),
    ("bfloat16", BF16), (ml_dtypes.bfloat16, BF16), (mp.bfloat16, BF16),
    ("float32", F32), ("float", F32), (np.float32, F32), ("float64", F64), ("double", F64),
    ("int32", I32), ("int", I32), (np.int64, I64), ("long", I64), ("bool", B), (np.bool_, B), (bool, B),
])
def test_dtype_likes_are_accepted_everywhere(spec, expected):
    assert dt.as_dtype(spec) == expected
    assert mp.zeros(2, dtype=spec).dtype == expected
    assert mp.ones(1, dtype=spec).dtype == expected
    assert mp.full((2,), 1, dtype=spec).dtype == expected
    assert mp.tensor([1, 0], dtype=spec).dtype == expected
    if expected != B:
        assert mp.arange(3, dtype=spec).dtype == expected
    assert mp.ones(2).to(spec).dtype == expected
    assert mp.zeros_like(mp.ones(2), dtype=spec).dtype == expected
    if dt.is_floating(expected):
        assert mp.randn(2, dtype=spec).dtype == expected
        assert mp.ones(3).sum(dtype=spec).dtype == expected
        assert mp.ones(3).softmax(0, dtype=spec).dtype == expected


@pytest.mark.parametrize("spec", ["complex256", np.clongdouble, "uint16", np.uint32, "float8", object, "bogus"])
def test_unsupported_dtype_is_named(spec):
    name = spec if isinstance(spec, str) else getattr(spec, "__name__", str(spec))
    with pytest.raises(TypeError, match=r"unsupported dtype .*" + name + r".*mixprec supports"):
        mp.zeros(2, dtype=spec)
    with pytest.raises(TypeError, match="(unsupported|supported) dtype"):
        mp.ones(2).to(spec)


def test_unsupported_array_dtypes_are_named():
    with pytest.raises(TypeError, match="unsupported dtype.*uint16"):
        mp.tensor(np.ones(2, dtype=np.uint16))
    with pytest.raises(TypeError, match="unsupported dtype.*uint16"):
        mp.from_numpy(np.ones(2, dtype=np.uint16))
    with pytest.raises(TypeError, match="unsupported dtype.*complex256"):
        mp.ones(2) + np.ones(2, dtype=np.clongdouble)


# ------------------------------------------------------------------ creation
def test_tensor_keeps_array_dtype_and_copies():
    for d in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.int32, np.int64, np.bool_):
        a = np.zeros(3, dtype=d)
        t = mp.tensor(a)
        assert t.dtype == np.dtype(d)
        assert not np.shares_memory(t._array, a)


def test_python_values_get_torch_default_dtypes():
    assert mp.tensor(1.5).dtype == F32
    assert mp.tensor([1.5, 2]).dtype == F32
    assert mp.tensor([[1, 2], [3, 4]]).dtype == I64
    assert mp.tensor([True, False]).dtype == B
    assert mp.tensor(np.float64(1.5)).dtype == F64  # a NumPy scalar is an array value: it keeps its dtype
    assert mp.tensor([mp.tensor(1.0), mp.tensor(2.0)]).tolist() == [1.0, 2.0]


def test_tensor_rejects_ragged_and_non_numeric_data():
    with pytest.raises(TypeError, match="ragged"):
        mp.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="unsupported dtype"):
        mp.tensor("abc")


def test_creation_functions():
    assert mp.zeros(2, 3).shape == (2, 3) and mp.zeros((2, 3)).shape == (2, 3)
    assert mp.zeros(2).dtype == F32 and mp.zeros(2).numpy().tolist() == [0, 0]
    assert mp.ones(2, dtype=I32).numpy().tolist() == [1, 1]
    assert mp.full((2, 2), 7).dtype == I64 and mp.full((2,), 7.0).dtype == F32 and mp.full(3, True).dtype == B
    assert mp.full((2,), 2.5, dtype=F16).numpy().tolist() == [2.5, 2.5]
    assert mp.empty(2, 3).shape == (2, 3) and mp.empty(1, dtype=BF16).dtype == BF16
    assert mp.arange(5).tolist() == [0, 1, 2, 3, 4] and mp.arange(5).dtype == I64
    assert mp.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75] and mp.arange(0, 1, 0.5).dtype == F32
    np.testing.assert_allclose(mp.linspace(0, 1, 5).numpy(), [0, 0.25, 0.5, 0.75, 1])
    np.testing.assert_array_equal(mp.eye(2, 3).numpy(), np.eye(2, 3))
    x = mp.ones(2, 3, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None and x.grad_fn is None


def test_like_functions_copy_shape_dtype_device():
    x = mp.ones(2, 3, dtype=F16)
    for fn in (mp.zeros_like, mp.ones_like, mp.empty_like, mp.rand_like, mp.randn_like):
        y = fn(x)
        assert (y.shape, y.dtype, y.device) == (x.shape, F16, x.device)
    assert mp.zeros_like(x).numpy().tolist() == [[0, 0, 0]] * 2
    assert mp.ones_like(x, dtype=F32).dtype == F32
    y = mp.full_like(x, 7)
    assert y.dtype == F16 and y.numpy().tolist() == [[7, 7, 7]] * 2
    assert mp.zeros_like(x, requires_grad=True).requires_grad


def test_bad_sizes_and_requires_grad_on_integers():
    with pytest.raises(ValueError, match="non-negative integers"):
        mp.zeros(-1)
    with pytest.raises(ValueError, match="non-negative integers"):
        mp.ones(2.5)
    with pytest.raises(RuntimeError, match="only floating-point"):
        mp.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="only floating-point"):
        mp.ones(2, dtype=I64).requires_grad_()
    with pytest.raises(TypeError, match="floating dtype"):
        mp.rand(2, dtype=I64)
    with pytest.raises(TypeError, match="bool is not supported"):
        mp.arange(3, dtype=mp.bool)
    with pytest.raises(TypeError, match="'gpu' is neither a device"):
        mp.ones(2).to("gpu")


def test_from_numpy_and_as_tensor_share_memory():
    a = np.arange(4.0)
    t = mp.from_numpy(a)
    a[0] = 42.0
    assert t[0].item() == 42.0 and t.dtype == F64
    t._array[1] = -1.0
    assert a[1] == -1.0
    assert np.shares_memory(mp.as_tensor(a)._array, a)
    assert mp.as_tensor(t) is t
    with pytest.raises(TypeError, match="numpy.ndarray"):
        mp.from_numpy([1, 2])


def test_manual_seed_makes_draws_reproducible():
    mp.manual_seed(123)
    a = (mp.rand(5), mp.randn(3, dtype=F64), mp.randint(0, 10, (4,)), mp.randperm(6))
    mp.manual_seed(123)
    b = (mp.rand(5), mp.randn(3, dtype=F64), mp.randint(0, 10, (4,)), mp.randperm(6))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    mp.manual_seed(124)
    assert not np.array_equal(mp.rand(5).numpy(), a[0].numpy())
    r = mp.rand(1000)
    assert 0 <= r.numpy().min() and r.numpy().max() < 1
    assert mp.randint(3, (50,)).numpy().max() < 3
    assert sorted(mp.randperm(6).tolist()) == list(range(6))


def test_random_draws_round_to_the_requested_dtype():
    mp.manual_seed(5)
    a = mp.randn(8)
    mp.manual_seed(5)
    b = mp.randn(8, dtype=F16)
    np.testing.assert_array_equal(b.numpy(), a.numpy().astype(np.float16))


# ------------------------------------------------------------------ metadata and conversions
def test_metadata():
    x = mp.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.dim() == 3 and x.numel() == 24
    assert x.size() == (2, 3, 4) and x.size(1) == 3 and len(x) == 2
    assert x.dtype == F32 and x.dtype == np.float32
    assert x.device == mp.Device("cpu") and x.device == "cpu" and str(x.device) == "cpu" and not x.is_cuda
    assert x.is_floating_point() and not mp.tensor([1]).is_floating_point()
    with pytest.raises(TypeError, match="0-d"):
        len(mp.tensor(1.0))


def test_numpy_item_tolist():
    x = mp.tensor([[1.5, 2.0]])
    arr = x.numpy()
    assert isinstance(arr, np.ndarray) and np.shares_memory(arr, x._array)
    assert mp.tensor([2.5]).item() == 2.5 and isinstance(mp.tensor([2.5]).item(), float)
    assert mp.tensor(3).item() == 3 and isinstance(mp.tensor(3).item(), int)
    assert mp.tensor([True]).item() is True
    assert mp.tensor(1.5, dtype=BF16).item() == 1.5 and isinstance(mp.tensor(1.5, dtype=BF16).item(), float)
    assert mp.ones(2, dtype=BF16).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="one element"):
        x.item()
    assert float(mp.tensor([2.5])) == 2.5 and int(mp.tensor(3)) == 3
    assert bool(mp.tensor(1.0)) and not bool(mp.tensor(0.0))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(mp.ones(2))
    assert [10, 20, 30][mp.tensor(1)] == 20
    with pytest.raises(TypeError, match="integer"):
        [1, 2][mp.tensor(1.0)]


def test_to_and_dtype_shortcuts():
    x = mp.tensor([1.25, -2.5], requires_grad=True)
    assert x.to(F32) is x and x.to("cpu") is x
    assert x.to(F32, copy=True) is not x
    for method, d in [("half", F16), ("float", F32), ("double", F64), ("bfloat16", BF16), ("long", I64),
                      ("int", I32), ("bool", B)]:
        y = getattr(x, method)()
        assert y.dtype == d
        if dt.is_floating(d):
            np.testing.assert_array_equal(y.numpy().astype(np.float64), [1.25, -2.5])
    assert x.to("cpu", "float16").dtype == F16
    assert x.to(dtype=np.float16).dtype == F16
    assert x.to(mp.zeros(1, dtype=BF16)).dtype == BF16
    assert x.cpu() is x and x.type() == "float32" and x.type("float16").dtype == F16
    # casts are differentiable and the gradient comes back in the source dtype
    (x.half() * 2).sum().backward()
    assert x.grad.dtype == F32 and x.grad.tolist() == [2.0, 2.0]


def test_cuda_without_gpu_raises_device_unavailable():
    if mp.is_cuda_available():
        pytest.skip("a GPU is available")
    with pytest.raises(mp.DeviceUnavailableError, match="cuda"):
        mp.ones(2).cuda()
    with pytest.raises(mp.DeviceUnavailableError):
        mp.ones(2).to("cuda:0")


def test_detach_shares_data_and_version():
    x = mp.ones(3, requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert np.shares_memory(d._array, y._array)
    d.add_(1)
    assert y.tolist() == [3.0, 3.0, 3.0] and y._version == d._version == 1


def test_data_is_a_tensor_on_the_same_memory_outside_autograd():
    p = mp.ones(3, requires_grad=True)
    y = p * 2
    d = y.data
    assert isinstance(d, mp.Tensor) and d.grad_fn is None and not d.requires_grad and d.is_leaf
    p.data.mul_(2)  # the classic parameter update through .data: no autograd error, the leaf changes
    p.data.copy_(mp.full((3,), 5.0))
    assert p.tolist() == [5.0, 5.0, 5.0] and p.requires_grad and p._version == 0  # its own version counter
    d.zero_()
    assert y.tolist() == [0.0, 0.0, 0.0] and y._version == 0


def test_assigning_data_follows_torchs_rules():
    p = mp.ones(3, requires_grad=True)
    q = mp.zeros(2, 2)
    p.data = q  # any shape: p now uses q's memory, and stays the same leaf
    q.fill_(7.0)
    assert p.shape == (2, 2) and p.tolist() == [[7.0, 7.0], [7.0, 7.0]] and p.requires_grad and p.is_leaf
    p.data = mp.zeros(2, dtype=mp.float16)
    assert p.dtype == mp.float16
    with pytest.raises(TypeError, match="must be set to a Tensor, got list"):
        p.data = [1.0]
    with pytest.raises(RuntimeError, match="requires grad must hold floating point or complex data, got int64"):
        p.data = mp.zeros(3, dtype=mp.int64)
    assert p.dtype == mp.float16  # a refused assignment leaves the tensor as it was
    i = mp.ones(3, dtype=mp.int64)
    i.data = mp.full((3,), 0.5)  # without requires_grad any dtype goes, as in torch
    assert i.dtype == mp.float32


def test_data_matches_torch():
    torch = pytest.importorskip("torch")
    for lib in (mp, torch):
        a = lib.ones(3)
        d = a.data
        d.mul_(2)
        if lib is mp:
            mine = (a.tolist(), a._version, d._version)
        else:
            assert mine == (a.tolist(), a._version, d._version)


def test_grad_setter_validates():
    x = mp.ones(3, requires_grad=True)
    x.grad = mp.full((3,), 2.0)
    assert x.grad.tolist() == [2.0] * 3
    x.grad = None
    assert x.grad is None
    with pytest.raises(TypeError, match="Tensor or None"):
        x.grad = np.ones(3)
    with pytest.raises(RuntimeError, match=r"shape \(2,\).*shape \(3,\)"):
        x.grad = mp.ones(2)
    with pytest.raises(RuntimeError, match="dtype float16.*float32"):
        x.grad = mp.ones(3, dtype=F16)


def test_backward_and_is_leaf():
    x = mp.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    assert not y.is_leaf and y.grad_fn is not None and y.requires_grad
    with pytest.raises(RuntimeError, match="scalar outputs"):
        y.backward()
    y.backward(mp.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [2.0, 40.0]
    with pytest.raises(RuntimeError, match=r"gradient has shape \(3,\)"):
        (x * x).backward(mp.ones(3))


def test_retain_grad_and_hooks():
    x = mp.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.tolist()))
    y.register_hook(lambda g: g * 10)  # a hook's return value replaces the gradient
    y.sum().backward()
    assert y.grad.tolist() == [10.0, 10.0]
    assert x.grad.tolist() == [30.0, 30.0] and seen == [[30.0, 30.0]]
    handle.remove()
    (x * 1).sum().backward()
    assert len(seen) == 1
    with pytest.raises(RuntimeError, match="does not require grad"):
        mp.ones(2).register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="does not require grad"):
        mp.ones(2).retain_grad()


def test_non_leaf_grad_is_not_kept_without_retain_grad():
    x = mp.ones(2, requires_grad=True)
    y = x * 2
    y.sum().backward()
    assert y.grad is None and x.grad is not None


def test_operators():
    a, b = mp.tensor([1.0, 2.0, 4.0]), mp.tensor([2.0, 2.0, 2.0])
    assert (a + b).tolist() == [3, 4, 6] and (a - b).tolist() == [-1, 0, 2]
    assert (a * b).tolist() == [2, 4, 8] and (a / b).tolist() == [0.5, 1, 2]
    assert (a ** b).tolist() == [1, 4, 16] and (-a).tolist() == [-1, -2, -4]
    assert (1 + a).tolist() == [2, 3, 5] and (1 - a).tolist() == [0, -1, -3]
    assert (2 * a).tolist() == [2, 4, 8] and (4 / a).tolist() == [4, 2, 1] and (2 ** a).tolist() == [2, 4, 16]
    assert (a @ b).item() == 14.0
    m = mp.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert (m @ m).tolist() == [[7, 10], [15, 22]]
    assert (np.ones(3) + mp.ones(3)).tolist() == [2, 2, 2]  # ndarray on the left defers to Tensor
    assert ((a > 1.5) & (a < 3)).tolist() == [False, True, False]
    assert ((a < 1.5) | (a > 3)).tolist() == [True, False, True]
    assert (~(a > 1.5)).tolist() == [True, False, False]


def test_comparisons():
    a = mp.tensor([1.0, 2.0, 3.0])
    assert (a == 2).tolist() == [False, True, False] and (a != 2).tolist() == [True, False, True]
    assert (a < 2).tolist() == [True, False, False] and (a <= 2).tolist() == [True, True, False]
    assert (a > 2).tolist() == [False, False, True] and (a >= 2).tolist() == [False, True, True]
    assert (a == mp.tensor([1.0, 0.0, 3.0])).tolist() == [True, False, True]
    assert (mp.tensor([1, 2]) == mp.tensor([1.0, 2.5])).tolist() == [True, False]  # promoted first


def test_indexing_and_setitem():
    x = mp.arange(12).reshape(3, 4)
    assert x[1].tolist() == [4, 5, 6, 7] and x[-1, -1].item() == 11
    assert x[:, 1].tolist() == [1, 5, 9] and x[1:, ::2].tolist() == [[4, 6], [8, 10]]
    assert x[None].shape == (1, 3, 4) and x[..., 0].tolist() == [0, 4, 8]
    assert x[[0, 2]].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert x[mp.tensor([2, 0]), mp.tensor([1, 3])].tolist() == [9, 3]
    assert x[x > 9].tolist() == [10, 11]
    assert [row.tolist() for row in mp.arange(4).reshape(2, 2)] == [[0, 1], [2, 3]]
    with pytest.raises(IndexError, match=r"shape \(3, 4\)"):
        x[3]
    y = mp.zeros(2, 3)
    y[0] = mp.tensor([1, 2, 3])
    y[1, 1:] = 7
    y[y == 0] = -1.0
    assert y.tolist() == [[1, 2, 3], [-1, 7, 7]] and y._version == 3
    with pytest.raises(RuntimeError, match=r"shape \(4,\).*shape \(2, 3\)"):
        y[0] = mp.ones(4)


def test_inplace_updates():
    x = mp.zeros(2, 3)
    x.copy_(mp.tensor([1.0, 2.0, 3.0]))  # broadcast
    assert x.tolist() == [[1, 2, 3], [1, 2, 3]]
    x.add_(1).mul_(2).sub_(mp.ones(3), alpha=2).div_(2)
    assert x.tolist() == [[1, 2, 3], [1, 2, 3]]
    x.copy_(mp.tensor([[1, 2, 3], [4, 5, 6]]))  # int source, cast to float32
    assert x.dtype == F32 and x.tolist() == [[1, 2, 3], [4, 5, 6]]
    x.clamp_(2, 5).fill_(3).zero_()
    assert x.tolist() == [[0, 0, 0], [0, 0, 0]]
    with pytest.raises(RuntimeError, match=r"copy_: a value of shape \(4,\)"):
        x.copy_(mp.ones(4))
    w = mp.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="in-place.*no_grad"):
        w.add_(1)
    with mp.no_grad():
        w.add_(1)
    assert w.tolist() == [2.0, 2.0]


def test_repr():
    assert repr(mp.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(mp.tensor([1, 2])) == "tensor([1, 2])"
    assert "dtype=bfloat16" in repr(mp.ones(2, dtype=BF16))
    assert "requires_grad=True" in repr(mp.ones(1, requires_grad=True))
    assert "grad_fn=<mulBackward>" in repr(mp.ones(1, requires_grad=True) * 2)


def test_tensor_methods_exist_for_the_op_set():
    x = mp.ones(2, 3)
    for name in ["add", "sub", "mul", "div", "neg", "pow", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt",
                 "reciprocal", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "softplus", "maximum",
                 "minimum", "clamp", "sum", "mean", "prod", "amax", "amin", "var", "cumsum", "matmul", "mm",
                 "bmm", "mv", "dot", "addmm", "baddbmm", "reshape", "view", "transpose", "permute", "squeeze",
                 "unsqueeze", "expand", "flatten", "split", "scatter_add", "softmax", "log_softmax"]:
        assert callable(getattr(x, name)), name


@pytest.mark.parametrize("dtype", [mp.float32, mp.float16, mp.int64, mp.complex64])
def test_builtin_abs_is_the_abs_op(dtype):
    values = np.array([-2.5, 0.0, 3.0, -0.0]) if dtype != mp.complex64 else np.array([3 - 4j, -1j, 0j, 2])
    t = mp.tensor(values, dtype=dtype)
    got = abs(t)
    assert got.dtype == t.abs().dtype and np.array_equal(got.numpy(), t.abs().numpy())
    assert np.array_equal(got.numpy(), np.abs(values).astype(got.numpy().dtype))
    x = mp.tensor([-1.0, 2.0], requires_grad=True)
    abs(x).sum().backward()
    assert x.grad.tolist() == [-1.0, 1.0]
    with pytest.raises(TypeError, match="abs: bool inputs are not supported"):
        abs(mp.tensor([True, False]))


@pytest.mark.parametrize("args, kwargs", [
    (("cpu",), {"non_blocking": True}),
    (("float16", True, True), {}),
    (("cpu", "float16", True, False), {}),
    (("float32", False, True), {}),
    (("float32",), {"copy": True, "non_blocking": True}),
    (("tensor", True, True), {}),
])
def test_to_takes_non_blocking_and_copy_as_torchs(torch, args, kwargs):
    """x.to(device, non_blocking=True) and to(dtype, non_blocking, copy) positionally: dtype and copying as torch."""
    x, tx = mp.ones(2), torch.ones(2)
    other, tother = mp.zeros(1, dtype=mp.float16), torch.zeros(1, dtype=torch.float16)
    conv = {"float16": (mp.float16, torch.float16), "float32": (mp.float32, torch.float32), "tensor": (other, tother)}
    y = x.to(*(conv.get(a, (a,))[0] if isinstance(a, str) else a for a in args), **kwargs)
    ty = tx.to(*(conv.get(a, (a, a))[1] if isinstance(a, str) else a for a in args), **kwargs)
    assert str(y.dtype) == str(ty.dtype).removeprefix("torch.")
    assert (y is x) == (ty is tx)


def test_to_refuses_flags_where_torch_does(torch):
    for bad in (("cpu", True), (mp.float16, False, True, True)):
        with pytest.raises(TypeError, match=r"to\(\): .*non_blocking and copy"):
            mp.ones(2).to(*bad)
    with pytest.raises(TypeError):
        torch.ones(2).to("cpu", True)
