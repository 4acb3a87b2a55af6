"""CUDA graphs: record a sequence of GPU work once, replay it with one launch.

Built on CuPy's stream capture (``cupy.cuda.Stream.begin_capture`` /
``end_capture`` giving a ``cupy.cuda.Graph``). While a stream captures, kernels
are recorded instead of run, with the addresses of the arrays they touch.
Replaying runs the same kernels on the same addresses, so:

- inputs are fed by copying into the tensors used at capture (static inputs),
  and outputs are read from the tensors captured (overwritten by each replay);
- the memory allocated during capture must stay reserved for the graph: it
  comes from a private CuPy memory pool that nothing outside the capture
  allocates from (torch's graph pools). Graphs may share a pool
  (``pool=other.pool()`` or ``graph_pool_handle()``) when they are replayed
  in the order they were captured;
- nothing inside may make the host wait for the GPU (reading a value,
  copying to the host): CUDA refuses it during capture. Kernels that CuPy
  compiles on first use should be compiled before, by running the code once
  (warm-up), as torch recommends too.
"""
from __future__ import annotations

from ..backend import availability, capture, device_checks
from . import memory as _memory
from ._runtime import Stream, current_stream, device_index, stream as _stream_context
from .. import autograd
from ..tensor import Tensor
from ..creation import empty_like, ones_like
from ..autograd import Function
from ..amp import autocast_mode
from ..nn import Module

_CAPTURE_MODES = ("global", "thread_local", "relaxed")


class GraphPool:
    """A private CuPy memory pool for CUDA graphs (torch's opaque pool handle); share it via ``pool=``."""

    def __init__(self):
        cp = availability.require_cuda("mp.cuda.graph_pool_handle")
        self.cupy_pool = cp.cuda.MemoryPool()
        _memory._GRAPH_POOLS.add(self)

    def __repr__(self):
        return f"<mp.cuda.GraphPool {self.cupy_pool.total_bytes()} bytes reserved>"


def graph_pool_handle() -> GraphPool:
    """A new pool that several graphs can share (pass it as ``pool=``)."""
    return GraphPool()


class CUDAGraph:
    """One captured CUDA graph (torch.cuda.CUDAGraph): capture_begin/capture_end, then replay().

    Most code uses the ``mp.cuda.graph(g)`` context, which captures on a side
    stream; capture_begin itself captures the current stream, which must not
    be the legacy default stream (CUDA cannot capture it).
    """

    def __init__(self):
        self._cp = availability.require_cuda("mp.cuda.CUDAGraph")
        self._graph = None
        self._pool = None
        self._capturing = None  # (cupy stream, allocator context) during capture

    def capture_begin(self, pool: GraphPool | None = None, capture_error_mode: str = "relaxed") -> None:
        """Start recording the current stream's work; allocations go to ``pool`` (a new private one if None).

        capture_error_mode is CUDA's: "relaxed" (the default, and CuPy's) lets
        the memory pool call cudaMalloc while capturing; "global" and
        "thread_local" also forbid that, so the pool must already hold the memory.
        """
        if capture_error_mode not in _CAPTURE_MODES:
            raise ValueError(f"capture_begin: capture_error_mode must be one of {_CAPTURE_MODES}, "
                             f"got {capture_error_mode!r}")
        if pool is not None and not isinstance(pool, GraphPool):
            raise TypeError(f"capture_begin: pool must come from graph_pool_handle() or CUDAGraph.pool(), "
                            f"got {type(pool).__name__}")
        if self._capturing is not None or capture.is_capturing():
            raise RuntimeError("capture_begin: a capture is already under way in this thread; end it first")
        if self._graph is not None:
            raise RuntimeError("capture_begin: this graph already holds a capture; call reset() first")
        cp = self._cp
        cupy_stream = cp.cuda.get_current_stream()
        if cupy_stream.ptr == 0:
            raise RuntimeError("capture_begin: the current stream is the legacy default stream, which CUDA cannot "
                               "capture; use `with mp.cuda.graph(g):` (it captures on a side stream) or "
                               "`with mp.cuda.stream(mp.cuda.Stream()):`")
        index = cp.cuda.runtime.getDevice()
        device_checks.flags(index)  # made now: made inside, its zeroing would be replayed
        self._pool = pool if pool is not None else GraphPool()
        allocator = cp.cuda.using_allocator(self._pool.cupy_pool.malloc)
        allocator.__enter__()
        mode = {"global": cp.cuda.runtime.streamCaptureModeGlobal,
                "thread_local": cp.cuda.runtime.streamCaptureModeThreadLocal,
                "relaxed": cp.cuda.runtime.streamCaptureModeRelaxed}[capture_error_mode]
        try:
            cupy_stream.begin_capture(mode)
        except BaseException:
            allocator.__exit__(None, None, None)
            raise
        self._capturing = (cupy_stream, allocator)
        capture.set_capturing(True)

    def capture_end(self) -> None:
        """Stop recording and instantiate the graph (ready to replay)."""
        if self._capturing is None:
            raise RuntimeError("capture_end: capture_begin was not called")
        cupy_stream, allocator = self._capturing
        self._capturing = None
        try:
            self._graph = cupy_stream.end_capture()
        finally:
            capture.set_capturing(False)
            allocator.__exit__(None, None, None)

    def _abort(self) -> None:
        """End a capture that failed, leaving the graph empty (the error that stopped it is what matters)."""
        try:
            self.capture_end()
        except Exception:
            pass
        self._graph = None

    def replay(self) -> None:
        """Run the captured work again, on the current stream."""
        if self._graph is None:
            raise RuntimeError("replay: nothing captured (use capture_begin/capture_end or mp.cuda.graph)")
        self._graph.launch(stream=self._cp.cuda.get_current_stream())

    def reset(self) -> None:
        """Drop the captured graph and this graph's hold on its pool (outputs still alive keep their memory)."""
        if self._capturing is not None:
            raise RuntimeError("reset: a capture is under way; call capture_end first")
        self._graph = None
        self._pool = None

    def pool(self) -> GraphPool:
        """This graph's memory pool, to share with graphs captured after it (``pool=g.pool()``)."""
        if self._pool is None:
            raise RuntimeError("pool: this graph has no pool yet (capture it first)")
        return self._pool


_side_streams: dict[int, Stream] = {}


class graph:
    """``with mp.cuda.graph(g):`` captures the block into CUDAGraph ``g`` (torch.cuda.graph).

    pool: share memory with another graph (graph_pool_handle() or g.pool()).
    stream: the stream to capture on; by default a side stream kept per device.
    The block runs nothing: the GPU work it would do is recorded, to be run by
    g.replay(). If the block raises, the capture is abandoned and the error
    goes through.
    """

    def __init__(self, cuda_graph: CUDAGraph, pool: GraphPool | None = None, stream: Stream | None = None,
                 capture_error_mode: str = "relaxed"):
        if not isinstance(cuda_graph, CUDAGraph):
            raise TypeError(f"mp.cuda.graph expects an mp.cuda.CUDAGraph, got {type(cuda_graph).__name__}")
        index = device_index(None, "graph")
        if stream is None:
            stream = _side_streams.get(index) or _side_streams.setdefault(index, Stream(index))
        self.cuda_graph, self.pool, self.capture_error_mode = cuda_graph, pool, capture_error_mode
        self._stream_context = _stream_context(stream)
        self.stream = stream

    def __enter__(self):
        self.stream.wait_stream(current_stream())  # capture after what was queued before (torch syncs)
        self._stream_context.__enter__()
        try:
            self.cuda_graph.capture_begin(self.pool, self.capture_error_mode)
        except BaseException:
            self._stream_context.__exit__(None, None, None)
            raise
        return self.cuda_graph

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.cuda_graph.capture_end()
            else:
                self.cuda_graph._abort()
                if hasattr(exc, "add_note"):
                    exc.add_note("(raised while capturing a CUDA graph: the capture was abandoned; inside a capture "
                                 "nothing may make the host wait for the GPU, and random draws are refused)")
        finally:
            self._stream_context.__exit__(exc_type, exc, tb)
        return False


# ---------------------------------------------------------------- make_graphed_callables
def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False,
                           pool: GraphPool | None = None):
    """Graphed versions of callables (functions or Modules): forward and backward each replay one CUDA graph.

    torch's semantics, as far as they apply: ``sample_args`` (a tuple of
    tensors per callable) are the static inputs, with the requires_grad they
    will have in use; each callable is warmed up ``num_warmup_iters`` times on
    a side stream, then its forward and the backward of its output with
    respect to its grad-requiring inputs and parameters are captured, sharing
    one memory pool. Calling a graphed callable copies the arguments into the
    static inputs and replays the forward graph; backward through its output
    replays the backward graph and accumulates into the parameters' .grad.

    Differences from torch: the Modules given are left untouched (torch
    replaces their forward); a new callable is returned instead, which runs
    the module eagerly when its training flag differs from capture time.
    Each callable must return one tensor. Inside an autocast region, pass cache_enabled=False to autocast,
    as torch requires: a cached weight cast would be captured once and read stale.
    """

    availability.require_cuda("mp.cuda.make_graphed_callables")
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise ValueError(f"make_graphed_callables: expected one tuple of sample args per callable "
                         f"({len(callables)}), got {sample_args!r:.100}")
    if isinstance(num_warmup_iters, bool) or not isinstance(num_warmup_iters, int) or num_warmup_iters < 1:
        raise ValueError(f"make_graphed_callables: num_warmup_iters must be an int >= 1, got {num_warmup_iters!r}")
    if autocast_mode.is_autocast_enabled("cuda") and autocast_mode.is_autocast_cache_enabled():
        raise RuntimeError("make_graphed_callables inside autocast needs mp.autocast(..., cache_enabled=False): "
                           "a cached weight cast would be captured once and then read stale")
    for i, (fn, args) in enumerate(zip(callables, sample_args)):
        if not callable(fn):
            raise TypeError(f"make_graphed_callables: callable {i} is a {type(fn).__name__}")
        if not isinstance(args, tuple) or not all(isinstance(a, Tensor) and a.is_cuda for a in args):
            raise TypeError(f"make_graphed_callables: sample args {i} must be a tuple of CUDA tensors, "
                            f"got {args!r:.100}")

    params = [tuple(p for p in fn.parameters() if p.requires_grad) if isinstance(fn, Module) else ()
              for fn in callables]
    static_inputs = [tuple(args) + ps for args, ps in zip(sample_args, params)]

    def differentiable(inputs):
        return [t for t in inputs if t.requires_grad]

    def one_output(i, out):
        if not isinstance(out, Tensor):
            raise TypeError(f"make_graphed_callables: callable {i} must return one Tensor, got {type(out).__name__}")
        return out

    # Warm-up on a side stream: compiles kernels and makes lazily created state before anything is captured.
    side = Stream()
    side.wait_stream(current_stream())
    with _stream_context(side):
        for i, (fn, args, inputs) in enumerate(zip(callables, sample_args, static_inputs)):
            for _ in range(num_warmup_iters):
                out = one_output(i, fn(*args))
                if out.requires_grad and differentiable(inputs):
                    autograd.grad(out, differentiable(inputs), grad_outputs=ones_like(out),
                                  allow_unused=allow_unused_input)
    current_stream().wait_stream(side)

    mempool = pool if pool is not None else graph_pool_handle()
    fwd_graphs = [CUDAGraph() for _ in callables]
    bwd_graphs = [CUDAGraph() for _ in callables]
    static_outputs = []
    for i, (fn, args, g) in enumerate(zip(callables, sample_args, fwd_graphs)):
        with graph(g, pool=mempool):
            out = one_output(i, fn(*args))
        static_outputs.append(out)
    static_grad_outputs, static_grad_inputs = [None] * len(callables), [None] * len(callables)
    for i in reversed(range(len(callables))):  # backwards in reverse order, as they will run
        out, inputs = static_outputs[i], static_inputs[i]
        if not (out.requires_grad and differentiable(inputs)):
            continue
        grad_out = empty_like(out)
        with graph(bwd_graphs[i], pool=mempool):
            grads = iter(autograd.grad(out, differentiable(inputs), grad_outputs=grad_out,
                                       allow_unused=allow_unused_input))
        static_grad_outputs[i] = grad_out
        static_grad_inputs[i] = tuple(next(grads) if t.requires_grad else None for t in inputs)

    graphed = [_graphed(fn, len(args), static_inputs[i], static_outputs[i], static_grad_outputs[i],
                        static_grad_inputs[i], fwd_graphs[i], bwd_graphs[i])
               for i, (fn, args) in enumerate(zip(callables, sample_args))]
    return graphed[0] if just_one else tuple(graphed)


def _graphed(fn, n_args, static_inputs, static_output, static_grad_output, static_grad_inputs, fwd_graph, bwd_graph):
    """The callable make_graphed_callables returns for one captured callable."""

    class Graphed(Function):
        @staticmethod
        def forward(ctx, *inputs):
            for static, given in zip(static_inputs[:n_args], inputs):
                if static._array is not given._array:
                    static.copy_(given)
            fwd_graph.replay()
            return static_output.detach()

        @staticmethod
        def backward(ctx, grad):
            if static_grad_output is None:
                return (None,) * len(static_inputs)
            static_grad_output.copy_(grad)
            bwd_graph.replay()
            return tuple(None if g is None else g.detach() for g in static_grad_inputs)

    module_training = fn.training if isinstance(fn, Module) else None

    def graphed_callable(*args):
        if len(args) != n_args:
            raise TypeError(f"graphed callable: captured with {n_args} argument(s), called with {len(args)}")
        if module_training is not None and fn.training != module_training:
            return fn(*args)  # a mode it was not captured in: run it as it is
        for static, given in zip(static_inputs, args):
            if given.shape != static.shape or given.dtype != static.dtype or given.device != static.device:
                raise ValueError(f"graphed callable: argument of shape {tuple(given.shape)}, {given.dtype.name} on "
                                 f"{given.device} differs from the captured {tuple(static.shape)}, "
                                 f"{static.dtype.name} on {static.device}")
        return Graphed.apply(*args, *static_inputs[n_args:])

    graphed_callable.__doc__ = f"CUDA-graphed {getattr(fn, '__name__', type(fn).__name__)} (see make_graphed_callables)"
    graphed_callable.cuda_graphs = (fwd_graph, bwd_graph)
    return graphed_callable

