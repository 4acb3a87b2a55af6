"""mp.library: the torch.library document's examples run as written after torch -> mp, each beside torch's own
run of the same example on the CPU (results and gradients compared), and the custom ops they make behave as
registry ops (dispatch, autocast rules, observers, mp.ops.<ns>.<op>).

No `from __future__ import annotations` here: custom_op reads the type hints of functions defined inside
the tests (lib.Tensor), which string annotations would hide."""

import typing

import numpy as np
import pytest

import mixprec as mp
from mixprec import Tensor
from mixprec import library as L
from mixprec.ops import autocast as _autocast
from mixprec.ops import registry

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def fresh_registry():
    """Every custom op and library a test makes goes when it ends (torch's too: its Library objects are
    destroyed, its custom ops are replaced by the next definition of the same name)."""
    before = dict(registry._REGISTRY)
    rules = dict(_autocast.REGISTERED)
    namespaces = set(L._DEF_NAMESPACES)
    yield
    for name in [n for n in registry._REGISTRY if n not in before]:
        registry.unregister(name)
    _autocast.REGISTERED.clear()
    _autocast.REGISTERED.update(rules)
    L._DEF_NAMESPACES.clear()
    L._DEF_NAMESPACES.update(namespaces)


def same(t, m, **kw):
    """Assert a torch tensor and an mp tensor hold the same values (and dtype)."""
    assert str(t.dtype).replace("torch.", "") == str(m.dtype), (t.dtype, m.dtype)
    np.testing.assert_allclose(t.detach().numpy(), m.detach().numpy(), **kw)


# opcheck's tests but torch's compile one (torch.compile takes most of a minute to warm up; mixprec's version of it
# is checked by itself below)
FAST = ("test_schema", "test_autograd_registration", "test_faketensor")


def pair(*shape, requires_grad=False, seed=0):
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return (torch.tensor(data, requires_grad=requires_grad),
            mp.tensor(data, requires_grad=requires_grad))


# ---------------------------------------------------------------- custom_op: the document's examples
def test_custom_op_examples_match_torch():
    results = {}
    for lib in (torch, mp):
        @lib.library.custom_op("mylib::numpy_sin", mutates_args=())
        def numpy_sin(x: lib.Tensor) -> lib.Tensor:
            x_np = x.cpu().numpy()
            y_np = np.sin(x_np)
            return lib.from_numpy(y_np).to(device=x.device)

        x = lib.tensor(np.linspace(-2, 2, 5, dtype=np.float32))
        y = numpy_sin(x)
        assert lib.allclose(y, x.sin())

        # Example of a custom op that only works for one device type.
        @lib.library.custom_op("mylib::numpy_sin_cpu", mutates_args=(), device_types="cpu")
        def numpy_sin_cpu(x: lib.Tensor) -> lib.Tensor:
            x_np = x.numpy()
            y_np = np.sin(x_np)
            return lib.from_numpy(y_np)

        y2 = numpy_sin_cpu(x)
        assert lib.allclose(y2, x.sin())

        # Example of a custom op that mutates an input
        @lib.library.custom_op("mylib::numpy_sin_inplace", mutates_args={"x"}, device_types="cpu")
        def numpy_sin_inplace(x: lib.Tensor) -> None:
            x_np = x.numpy()
            np.sin(x_np, out=x_np)

        z = x.clone()
        expected = z.sin()
        version = z._version
        assert numpy_sin_inplace(z) is None
        assert lib.allclose(z, expected)
        bumps = z._version - version

        # Example of a factory function
        @lib.library.custom_op("mylib::bar", mutates_args={}, device_types="cpu")
        def bar(device: lib.device) -> lib.Tensor:
            return lib.ones(3)

        results[lib] = (y, y2, z, bumps, bar("cpu"))
    t, m = results[torch], results[mp]
    for a, b in zip(t[:3], m[:3]):
        same(a, b)
    assert t[3] == m[3] == 1  # the op bumped the mutated tensor's version once
    same(t[4], m[4])


def test_register_autograd_examples_match_torch():
    grads = {}
    for lib in (torch, mp):
        @lib.library.custom_op("mylib::numpy_sin", mutates_args=())
        def numpy_sin(x: lib.Tensor) -> lib.Tensor:
            x_np = x.cpu().numpy()
            y_np = np.sin(x_np)
            return lib.from_numpy(y_np).to(device=x.device)

        def setup_context(ctx, inputs, output) -> lib.Tensor:
            x, = inputs
            ctx.save_for_backward(x)

        def backward(ctx, grad):
            x, = ctx.saved_tensors
            return grad * x.cos()

        lib.library.register_autograd("mylib::numpy_sin", backward, setup_context=setup_context)

        x = pair(4, requires_grad=True)[lib is mp]
        y = numpy_sin(x)
        (grad_x,) = lib.autograd.grad(y, x, lib.ones_like(y))
        assert lib.allclose(grad_x, x.cos())

        # Example with a keyword-only arg
        @lib.library.custom_op("mylib::numpy_mul", mutates_args=())
        def numpy_mul(x: lib.Tensor, *, val: float) -> lib.Tensor:
            x_np = x.cpu().numpy()
            y_np = x_np * val
            return lib.from_numpy(y_np).to(device=x.device)

        def setup_context(ctx, inputs, keyword_only_inputs, output) -> lib.Tensor:
            ctx.val = keyword_only_inputs["val"]

        def backward(ctx, grad):
            return grad * ctx.val

        lib.library.register_autograd("mylib::numpy_mul", backward, setup_context=setup_context)

        x2 = pair(3, requires_grad=True, seed=1)[lib is mp]
        y2 = numpy_mul(x2, val=3.14)
        (grad_x2,) = lib.autograd.grad(y2, x2, lib.ones_like(y2))
        assert lib.allclose(grad_x2, lib.full_like(x2, 3.14))
        grads[lib] = (y, grad_x, y2, grad_x2)
    for a, b in zip(grads[torch], grads[mp]):
        same(a, b, rtol=1e-6)


def test_opcheck_example_numpy_mul_matches_torch():
    outcomes = {}
    for lib in (torch, mp):
        @lib.library.custom_op("mylib::numpy_mul", mutates_args=())
        def numpy_mul(x: lib.Tensor, y: float) -> lib.Tensor:
            x_np = x.numpy(force=True)
            z_np = x_np * y
            return lib.from_numpy(z_np).to(x.device)

        @numpy_mul.register_fake
        def _(x, y):
            return lib.empty_like(x)

        def setup_context(ctx, inputs, output):
            y, = inputs
            ctx.y = y

        def backward(ctx, grad):
            return grad * ctx.y, None

        numpy_mul.register_autograd(backward, setup_context=setup_context)

        sample_inputs = [
            (lib.randn(3), 3.14),
            (lib.randn(1, 10, requires_grad=True), 1.234),
        ]
        outcome = [lib.library.opcheck(numpy_mul, sample_inputs[0], test_utils=FAST)]
        # as written, setup_context unpacks two inputs into one name: where it runs (inputs that require
        # grad), torch's opcheck fails, and so does mixprec's
        with pytest.raises(Exception, match=r"test_schema failed with too many values to unpack \(expected 1\)"):
            lib.library.opcheck(numpy_mul, sample_inputs[1], test_utils=FAST)

        def setup_context(ctx, inputs, output):
            _, y = inputs
            ctx.y = y

        numpy_mul.register_autograd(backward, setup_context=setup_context)
        outcome.append(lib.library.opcheck(numpy_mul, sample_inputs[1], test_utils=FAST))
        if lib is mp and mp.cuda.is_available():
            lib.library.opcheck(numpy_mul, (lib.randn(64, 64, device="cuda", requires_grad=True), 90.18))
        outcomes[lib] = outcome
    assert outcomes[mp] == outcomes[torch]
    assert all(v == "SUCCESS" for r in outcomes[mp] for v in r.values())
    assert mp.library.opcheck(numpy_mul, sample_inputs[1])["test_aot_dispatch_dynamic"] == "SUCCESS"


def test_register_kernel_and_set_kernel_enabled_match_torch():
    seen = {}
    for lib in (torch, mp):
        # Create a custom op that works on cpu
        @lib.library.custom_op("mylib::numpy_sin", mutates_args=(), device_types="cpu")
        def numpy_sin(x: lib.Tensor) -> lib.Tensor:
            x_np = x.numpy()
            y_np = np.sin(x_np)
            return lib.from_numpy(y_np)

        # Add implementations for the cuda device
        @lib.library.register_kernel("mylib::numpy_sin", "cuda")
        def _(x):
            x_np = x.cpu().numpy()
            y_np = np.sin(x_np)
            return lib.from_numpy(y_np).to(device=x.device)

        x_cpu = pair(3)[lib is mp]
        assert lib.allclose(numpy_sin(x_cpu), x_cpu.sin())
        if lib is mp and mp.cuda.is_available():
            x_cuda = x_cpu.cuda()
            assert lib.allclose(numpy_sin(x_cuda), x_cuda.sin())

        inp = lib.randn(1)

        @lib.library.custom_op("mylib::f", mutates_args=())
        def f(x: lib.Tensor) -> lib.Tensor:
            return lib.zeros(1)

        first = f(inp)  # the default kernel

        @f.register_kernel("cpu")
        def _(x):
            return lib.ones(1)

        second = f(inp)  # the CPU kernel
        with f.set_kernel_enabled("cpu", enabled=False):
            third = f(inp)  # the default again
        seen[lib] = (first, second, third, f(inp))
    for a, b in zip(seen[torch], seen[mp]):
        same(a, b)


def test_register_autocast_example_on_the_cpu_matches_torch():
    dtypes = {}
    for lib in (torch, mp):
        @lib.library.custom_op("mylib::my_sin", mutates_args=())
        def my_sin(x: lib.Tensor) -> lib.Tensor:
            return lib.sin(x)

        lib.library.register_autocast("mylib::my_sin", "cpu", lib.float16)
        x = lib.randn(3, dtype=lib.float32)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = lib.ops.mylib.my_sin(x)
            z = my_sin(x.double())  # float64 is never cast
        dtypes[lib] = (str(y.dtype), str(z.dtype))
    assert dtypes[mp] == tuple(d.replace("torch.", "") for d in dtypes[torch]) == ("float16", "float64")


def test_a_custom_op_without_an_autocast_rule_runs_its_ops_under_autocast_as_torch():
    dtypes = {}
    for lib in (torch, mp):
        @lib.library.custom_op("mylib::my_mm", mutates_args=())
        def my_mm(a: lib.Tensor, b: lib.Tensor) -> lib.Tensor:
            return lib.mm(a, b)

        a, b = lib.randn(2, 2), lib.randn(2, 2)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            dtypes[lib] = str(my_mm(a, b).dtype).replace("torch.", "")
    assert dtypes[mp] == dtypes[torch] == "bfloat16"


def test_autocast_casts_of_a_custom_op_are_differentiable():
    @mp.library.custom_op("mylib::scale", mutates_args=())
    def scale(x: Tensor) -> Tensor:
        return x * 2

    scale.register_autograd(lambda ctx, g: g * 2)
    scale.register_autocast("cpu", mp.bfloat16)
    x = mp.randn(3, requires_grad=True)
    with mp.autocast("cpu"):
        y = scale(x)
    assert y.dtype == mp.bfloat16
    y.sum().backward()
    assert x.grad.dtype == mp.float32 and np.allclose(x.grad.numpy(), 2)


def test_register_autocast_on_a_builtin_lasts_as_long_as_its_library():
    lib = mp.library.Library("aten", "IMPL")
    x = mp.randn(3)
    mp.library.register_autocast("aten::sin", "cpu", mp.float16, lib=lib)
    with mp.autocast("cpu"):
        assert mp.sin(x).dtype == mp.float16
        assert mp.ops.aten.sin(x).dtype == mp.float16
    lib._destroy()
    with mp.autocast("cpu"):
        assert mp.sin(x).dtype == mp.float32


def test_register_fake_example_with_fake_tensor_mode_matches_torch():
    from torch._subclasses.fake_tensor import FakeTensorMode
    shapes = {}
    for lib, mode in ((torch, FakeTensorMode), (mp, mp.library.FakeTensorMode)):
        # Example 1: an operator without data-dependent output shape
        @lib.library.custom_op("mylib::custom_linear", mutates_args=())
        def custom_linear(x: lib.Tensor, weight: lib.Tensor, bias: lib.Tensor) -> lib.Tensor:
            raise NotImplementedError("Implementation goes here")

        @lib.library.register_fake("mylib::custom_linear")
        def _(x, weight, bias):
            assert x.dim() == 2
            assert weight.dim() == 2
            assert bias.dim() == 1
            assert x.shape[1] == weight.shape[1]
            assert weight.shape[0] == bias.shape[0]
            assert x.device == weight.device

            return (x @ weight.t()) + bias

        with mode():
            x = lib.randn(2, 3)
            w = lib.randn(3, 3)
            b = lib.randn(3)
            y = lib.ops.mylib.custom_linear(x, w, b)

        assert y.shape == (2, 3)
        shapes[lib] = (tuple(y.shape), str(y.dtype).replace("torch.", ""))
        with pytest.raises(NotImplementedError, match="Implementation goes here"):
            custom_linear(lib.randn(2, 3), lib.randn(3, 3), lib.randn(3))  # outside the mode: the kernel
    assert shapes[mp] == shapes[torch]


def test_a_fake_tensor_carries_metadata_and_no_data():
    x = mp.randn(1000, 1000)
    f = mp.library.fake_tensor(x)
    assert (f.shape, f.dtype, f.device) == (x.shape, x.dtype, x.device)
    assert f._array.strides == (0, 0) and f._array.base.nbytes == 4
    assert mp.library.fake_tensor(f) is f


# ---------------------------------------------------------------- mutating ops and opcheck
def test_a_mutating_op_bumps_versions_and_passes_opcheck_as_in_torch():
    out = {}
    for lib in (torch, mp):
        @lib.library.custom_op("mylib::add_one_", mutates_args=("x",))
        def add_one_(x: lib.Tensor, y: lib.Tensor) -> None:
            x.add_(y)

        @add_one_.register_fake
        def _(x, y):
            return None

        a, b = lib.zeros(3), lib.ones(3)
        v = a._version
        add_one_(a, b)
        add_one_(a, y=b)
        out[lib] = (a, a._version - v >= 2, lib.library.opcheck(add_one_, (lib.zeros(2), lib.ones(2)), test_utils=FAST))
        with pytest.raises(RuntimeError, match="non-functional operator"):
            add_one_.register_autograd(lambda ctx, g: g)
    same(out[torch][0], out[mp][0])
    assert out[torch][1:] == out[mp][1:]


def test_a_mutated_tensor_saved_for_backward_is_caught():
    @mp.library.custom_op("mylib::zero_", mutates_args=("x",))
    def zero_(x: Tensor) -> None:
        x._array[...] = 0

    w = mp.randn(3, requires_grad=True)
    h = w * 1.0
    y = (h * h).sum()
    zero_(h)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_opcheck_finds_what_torch_finds():
    found = {}
    for lib in (torch, mp):
        @lib.library.custom_op("mylib::liar", mutates_args=())
        def liar(x: lib.Tensor) -> lib.Tensor:
            x.add_(1)
            return x.clone()

        @lib.library.custom_op("mylib::bad_fake", mutates_args=())
        def bad_fake(x: lib.Tensor) -> lib.Tensor:
            return x.clone()
        bad_fake.register_fake(lambda x: x.new_zeros(5) if lib is torch else lib.zeros(5))

        @lib.library.custom_op("mylib::aliasing_fake", mutates_args=())
        def aliasing_fake(x: lib.Tensor) -> lib.Tensor:
            return x.clone()
        aliasing_fake.register_fake(lambda x: x)

        @lib.library.custom_op("mylib::no_fake", mutates_args=())
        def no_fake(x: lib.Tensor) -> lib.Tensor:
            return x.clone()

        x = lib.zeros(3)
        liar_result = lib.library.opcheck(liar, (x,), test_utils="test_schema", raise_exception=False)
        assert x.sum().item() == 0  # opcheck ran on a copy
        found[lib] = [
            {k: type(v).__name__ for k, v in liar_result.items()},
            {k: type(v).__name__ for k, v in lib.library.opcheck(
                bad_fake, (lib.zeros(3),), test_utils="test_faketensor", raise_exception=False).items()},
            {k: v if v == "SUCCESS" else "failed" for k, v in lib.library.opcheck(
                aliasing_fake, (lib.zeros(3),), test_utils="test_faketensor", raise_exception=False).items()},
            {k: v if v == "SUCCESS" else "failed" for k, v in lib.library.opcheck(
                no_fake, (lib.zeros(3),), test_utils=("test_schema", "test_faketensor"),
                raise_exception=False).items()},
            lib.library.opcheck(no_fake, (lib.zeros(3, requires_grad=True),),  # no formula, but custom_op's
                                test_utils="test_autograd_registration"),   # autograd kernel is registered
        ]
        with pytest.raises(Exception, match="test_schema failed with Argument x is not defined as mutable") as err:
            lib.library.opcheck(liar, (lib.zeros(3),))
        assert type(err.value).__name__ == "OpCheckError"
        with pytest.raises(ValueError, match="expected test_utils to be subset"):
            lib.library.opcheck(liar, (lib.zeros(3),), test_utils=("foo",))
    assert found[mp] == found[torch]
    assert found[mp][1] == {"test_faketensor": "MetadataMismatchError"}


def test_opcheck_gradcheck_catches_a_wrong_backward():
    @mp.library.custom_op("mylib::twice", mutates_args=())
    def twice(x: Tensor) -> Tensor:
        return x * 2

    twice.register_fake(lambda x: mp.empty_like(x))
    twice.register_autograd(lambda ctx, g: g * 3)  # wrong: d(2x)/dx is 2
    result = mp.library.opcheck(twice, (mp.randn(3, requires_grad=True),), raise_exception=False)
    assert result["test_schema"] == result["test_faketensor"] == "SUCCESS"
    assert type(result["test_aot_dispatch_dynamic"]).__name__ == "GradcheckError"


def test_opcheck_on_builtins():
    x = mp.randn(3, requires_grad=True)
    assert all(v == "SUCCESS" for v in mp.library.opcheck(mp.ops.aten.sin, (x,)).values())
    assert all(v == "SUCCESS" for v in mp.library.opcheck("aten::mul", (x, x)).values())


# ---------------------------------------------------------------- errors
def test_misuse_raises_torch_exception_types():
    def fn(x: Tensor, y: float) -> Tensor:
        return x * y

    for lib, T in ((torch, torch.Tensor), (mp, Tensor)):
        def typed(x: T, y: float) -> T:
            return x * y
        with pytest.raises(TypeError, match="mutates_args"):
            lib.library.custom_op("mylib::f", typed)
        with pytest.raises(ValueError):
            lib.library.custom_op("no_namespace", typed, mutates_args=())
        with pytest.raises(RuntimeError):
            lib.library.custom_op("my lib::f", typed, mutates_args=())
        with pytest.raises(RuntimeError, match="tpu"):
            lib.library.custom_op("mylib::f", typed, mutates_args=(), device_types="tpu")
        with pytest.raises(ValueError, match="'z'.* in mutates_args were not found"):
            lib.library.custom_op("mylib::f", typed, mutates_args=["z"])
        with pytest.raises(ValueError, match="mutates set"):
            lib.library.custom_op("mylib::f", typed, mutates_args=("x",), schema="(Tensor x, float y) -> Tensor")
        op = lib.library.custom_op("mylib::f", typed, mutates_args=())
        with pytest.raises(RuntimeError, match="Expected a value of type 'Tensor' for argument 'x'"):
            op(3.0, 1.0)
        with pytest.raises(RuntimeError):
            op(lib.zeros(2), 1.0, 2.0)
        with pytest.raises(RuntimeError, match="tpu"):
            op.register_kernel("tpu")(typed)
        with pytest.raises(ValueError, match="does not support autocast"):
            lib.library.register_autocast("mylib::f", "meta", lib.float16)
        with pytest.raises(AttributeError):
            lib.library.register_autograd("mylib::nope", lambda ctx, g: g)
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="no autograd formula was registered"):
            op(x, 2.0).sum().backward()  # no register_autograd: backward through it fails
        op.register_autograd(lambda ctx, g: g)  # one gradient for two positional inputs
        with pytest.raises(RuntimeError, match="incorrect number of gradients|expected 2"):
            op(x, 2.0).sum().backward()

        @lib.library.custom_op("mylib::alias", mutates_args=())
        def alias(x: T) -> T:
            return x
        with pytest.raises(RuntimeError, match="may not alias any inputs"):
            alias(lib.zeros(2))


def test_library_define_and_impl_match_torch():
    results = {}
    for lib in (torch, mp):
        my_lib = lib.library.Library("mylib_def", "DEF")
        try:
            assert my_lib.define("scaled(Tensor self, float alpha=2.0) -> Tensor") in ("scaled", "mylib_def::scaled")
            my_lib.impl("scaled", lambda self, alpha=2.0: self * alpha, "CompositeImplicitAutograd")
            my_lib.define("plus(Tensor a, Tensor b) -> Tensor")
            my_lib.impl("plus", lambda a, b: a + b, "CPU")
            with pytest.raises(RuntimeError):
                lib.library.Library("mylib_def", "DEF")  # one DEF library per namespace
            with pytest.raises(RuntimeError):
                my_lib.define("plus(Tensor a, Tensor b) -> Tensor")  # defined twice
            x = pair(3, requires_grad=True)[lib is mp]
            y = lib.ops.mylib_def.scaled(x)
            (g,) = lib.autograd.grad(y.sum(), x)  # through the composite's own ops
            z = lib.ops.mylib_def.plus(x.detach(), x.detach())
            checks = lib.library.opcheck(lib.ops.mylib_def.plus, (x, x), raise_exception=False)
            results[lib] = (y, g, z, checks["test_autograd_registration"] == "SUCCESS")
        finally:
            my_lib._destroy()
    for a, b in zip(results[torch][:3], results[mp][:3]):
        same(a, b)
    assert results[torch][3] is results[mp][3] is False  # a CPU kernel alone is no autograd registration
    with pytest.raises(AttributeError):
        mp.ops.mylib_def.plus  # destroyed with its library


# ---------------------------------------------------------------- infer_schema
def test_infer_schema_matches_torch():
    def build(T, dev):
        def f1(x: T, y: float, *, val: int = 3, s: str = "a", b: bool = True) -> T: ...
        def f2(x: T, ys: typing.List[T], o: typing.Optional[T] = None, n: typing.Optional[int] = None,
               sizes: typing.Sequence[int] = None) -> typing.Tuple[T, T]: ...
        def f3(x: T) -> None: ...
        def f4(x: T, d: dev) -> float: ...
        def f5(x: T) -> typing.List[T]: ...
        def f6(x: T) -> tuple[T, int]: ...
        def f7(x: T) -> tuple[T]: ...
        return [(f1, {}), (f2, ("x", "ys")), (f3, "unknown"), (f4, ()), (f5, ()), (f6, ()), (f7, ())]
    for (t_fn, mutates), (m_fn, _) in zip(build(torch.Tensor, torch.device), build(Tensor, mp.device)):
        assert mp.library.infer_schema(m_fn, mutates_args=mutates) == \
            torch.library.infer_schema(t_fn, mutates_args=mutates)
        assert mp.library.infer_schema(m_fn, mutates_args=mutates, op_name="foo") == \
            torch.library.infer_schema(t_fn, mutates_args=mutates, op_name="foo")


def test_infer_schema_refuses_what_torch_refuses():
    def build(T):
        def no_hint(x) -> T: ...
        def no_return(x: T): ...
        def bad_type(x: dict) -> T: ...
        def varargs(x: T, *args: T) -> T: ...
        return no_hint, no_return, bad_type, varargs
    messages = ("Parameter x must have a type annotation", "No return type annotation",
                "Parameter x has unsupported type", "varargs")
    for t_fn, m_fn, message in zip(build(torch.Tensor), build(Tensor), messages):
        with pytest.raises(ValueError, match=message):
            torch.library.infer_schema(t_fn, mutates_args=())
        with pytest.raises(ValueError, match=message):
            mp.library.infer_schema(m_fn, mutates_args=())


# ---------------------------------------------------------------- a registry op like a built-in
def test_a_custom_op_is_a_registry_op():
    @mp.library.custom_op("mylib::double_it", mutates_args=())
    def double_it(x: Tensor) -> Tensor:
        return x * 2

    assert mp.ops.get("mylib::double_it") is double_it is mp.ops.mylib.double_it is mp.ops.mylib.double_it.default
    assert "mylib::double_it" in mp.ops.names()
    assert mp.ops.aten.sin is mp.ops.get("sin")
    assert callable(mp.ops.register)  # the package's own names are untouched
    with pytest.raises(AttributeError):
        mp.ops.mylib.nope
    with pytest.raises(AttributeError):
        mp.ops.no_such_namespace
    x = mp.randn(3)
    with mp.amp.trace() as tr:
        double_it(x)
    assert [r.name for r in tr.records if r.depth == 0] == ["mylib::double_it"]
    with mp.profiler.profile() as prof:
        double_it(x)
    assert "mylib::double_it" in [e.key for e in prof.key_averages()]
    double_it.register_autocast("cpu", mp.bfloat16)
    with mp.amp.trace() as tr, mp.autocast("cpu"):
        y = double_it(x)
    top = [r for r in tr.records if r.name == "mylib::double_it"][0]
    assert top.policy == mp.bfloat16 and y.dtype == mp.bfloat16
    with mp.amp.inspect() as insp, mp.autocast("cpu"):
        double_it(x)
    rec = [r for r in insp.report().ops if r.name == "mylib::double_it"][0]
    assert rec.stats is not None  # its float32 shadow ran, as a built-in's does
    double_it.register_autograd(lambda ctx, g: g * 2)
    w = mp.randn(3, requires_grad=True)
    seen = []
    y = double_it(w)
    y.register_hook(lambda g: seen.append(g.shape) or g * 10)  # a tensor hook on its output changes its gradient
    y.sum().backward()
    assert seen == [(3,)] and np.allclose(w.grad.numpy(), 20)


def test_defining_a_name_again_replaces_the_op_as_in_torch():
    outs = {}
    for lib in (torch, mp):
        for k in (1, 2):
            @lib.library.custom_op("mylib::k", mutates_args=())
            def k_op(x: lib.Tensor) -> lib.Tensor:
                return x * k
        outs[lib] = lib.ops.mylib.k(lib.ones(2))
    same(outs[torch], outs[mp])


def test_the_docs_example_runs(capsys):
    from pathlib import Path
    page = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/library.md", "exec"), {})
    assert "'test_schema': 'SUCCESS'" in capsys.readouterr().out


def test_a_custom_op_runs_the_kernel_of_its_inputs_device_type(device):
    @mp.library.custom_op("mylib::which", mutates_args=(), device_types="cpu")
    def which(x: Tensor) -> Tensor:
        return x + 1

    @which.register_kernel("cuda")
    def _(x):
        return x + 2

    which.register_fake(lambda x: mp.empty_like(x))
    x = mp.zeros(3, device=device)
    y = which(x)
    assert y.device == x.device and y.sum().item() == (3 if device == "cpu" else 6)
    f = mp.library.fake_tensor(x)
    assert (f.shape, f.dtype, f.device) == (x.shape, x.dtype, x.device)
    with mp.library.FakeTensorMode():
        assert which(x).device == x.device
    assert all(v == "SUCCESS" for v in mp.library.opcheck(which, (mp.randn(3, device=device),)).values())


def test_an_op_without_a_kernel_for_the_device_type_raises_as_torch():
    for lib in (torch, mp):
        @lib.library.custom_op("mylib::gpu_only", mutates_args=(), device_types="cuda")
        def gpu_only(x: lib.Tensor) -> lib.Tensor:
            return x.clone()
        with pytest.raises(NotImplementedError, match="Could not run 'mylib::gpu_only' with arguments from the "
                                                      "'CPU' backend"):
            gpu_only(lib.zeros(2))


def test_library_misuse_raises_not_implemented_where_mixprec_has_no_dispatcher():
    lib = mp.library.Library("mylib_misuse", "FRAGMENT")
    try:
        lib.define("f(Tensor x) -> Tensor")
        with pytest.raises(NotImplementedError, match="dispatch key 'AutogradCPU'"):
            lib.impl("f", lambda x: x, "AutogradCPU")
        with pytest.raises(NotImplementedError, match="with_keyset"):
            lib.impl("f", lambda x: x, "CPU", with_keyset=True)
        with pytest.raises(NotImplementedError, match="fallback"):
            lib.fallback(lambda *a: None, "Autocast")
        with pytest.raises(NotImplementedError, match="built-in ops cannot be given new kernels"):
            mp.library.Library("aten", "IMPL").impl("div.Tensor", lambda a, b: a, "CPU")
        with pytest.raises(NotImplementedError, match="no kernel for 'cpu'"):
            mp.ops.mylib_misuse.f(mp.zeros(2))  # defined, never given a kernel
        with pytest.raises(ValueError, match="Unsupported kind"):
            mp.library.Library("mylib_misuse", "DEFINE")
    finally:
        lib._destroy()


def test_define_and_impl_functions_match_torch():
    outs = {}
    for lib in (torch, mp):
        lib.library.define("mylib_fn::twice", "(Tensor x) -> Tensor")

        @lib.library.impl("mylib_fn::twice", "cpu")
        def _(x):
            return x * 2
        outs[lib] = lib.ops.mylib_fn.twice(lib.ones(2))
    same(outs[torch], outs[mp])


def test_a_list_of_tensors_input_gets_a_gradient_per_tensor_as_in_torch():
    grads = {}
    for lib in (torch, mp):
        @lib.library.custom_op("mylib::weighted_cat", mutates_args=())
        def weighted_cat(xs: typing.List[lib.Tensor], *, scale: float) -> lib.Tensor:
            return lib.cat([x * scale for x in xs])

        def setup_context(ctx, inputs, keyword_only_inputs, output):
            ctx.sizes = [x.shape[0] for x in inputs[0]]
            ctx.scale = keyword_only_inputs["scale"]

        def backward(ctx, grad):
            return list((grad * ctx.scale).split(ctx.sizes)),

        weighted_cat.register_autograd(backward, setup_context=setup_context)
        a, b = pair(2, requires_grad=True, seed=3)[lib is mp], pair(3, requires_grad=True, seed=4)[lib is mp]
        y = weighted_cat([a, b], scale=1.5)
        (y * lib.arange(5.0)).sum().backward()
        grads[lib] = (y, a.grad, b.grad)
    for t, m in zip(grads[torch], grads[mp]):
        same(t, m)
