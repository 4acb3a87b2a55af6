"""Graph nodes: what an op leaves behind for backward."""
from __future__ import annotations

import weakref

from ..dtypes import COMPLEX, FLOATING
from ..tensor import Tensor


class Node:
    """The ``grad_fn`` of a tensor: the op that made it, its inputs, and what backward needs.

    The node doubles as the ``ctx`` an op's forward, backward and tangent rule
    share, so an op can stash anything on it (``ctx.mask = ...``). Inputs are kept
    as Tensors so a backward written with Tensor ops can itself be differentiated;
    the version of every input tensor (also inside list arguments, such as index
    tuples) is remembered, so reading ``ctx.inputs`` after an in-place edit fails
    instead of giving a wrong gradient.
    """

    user_backward = False  # True for custom Functions (their gradients may alias user tensors)

    def __init__(self, op, args, kwargs=None):
        self.op = op
        self.args = args
        self.kwargs = kwargs or {}
        self.edge_list = None
        saved = []
        for a in args:
            if isinstance(a, Tensor):
                saved.append((a, a._vc[0]))
            elif isinstance(a, (list, tuple)):
                saved.extend((x, x._vc[0]) for x in a if isinstance(x, Tensor))
        self.saved_versions = saved
        self.freed = False
        self.trace = None

    @property
    def name(self):
        return self.op.name

    def finish(self, out, record=True):
        """Remember the output(s) (weakly: outputs own their node, not the reverse); with ``record``,
        make this node the grad_fn of each floating output."""
        outs = out if isinstance(out, tuple) else (out,)
        self.out_refs = [weakref.ref(o) for o in outs]
        self.saved_outputs = [(o.data, o._vc, o._vc[0]) for o in outs]
        if record:
            for i, o in enumerate(outs):
                if o.data.dtype in _DIFFERENTIABLE:
                    o.grad_fn, o.requires_grad = self, True
                    if i:
                        o.output_nr = i

    # ---- what backward reads ----
    @property
    def inputs(self):
        """The op's positional args as forward saw them (Tensors), checked for in-place edits."""
        self._check_alive()
        for t, v in self.saved_versions:
            if t._vc[0] != v:
                raise RuntimeError(
                    f"one of the tensors needed for the gradient of {self.name} has been modified by an "
                    f"in-place operation (version {t._vc[0]}, expected {v}); use an out-of-place op instead")
        return self.args

    @property
    def output(self):
        """The op's (first) output as a Tensor attached to this node (safe to differentiate through)."""
        return self._output(0)

    @property
    def outputs(self):
        """Every output of a several-output op, as Tensors attached to this node."""
        return tuple(self._output(i) for i in range(len(self.out_refs)))

    def _output(self, i):
        self._check_alive()
        data, vc, version = self.saved_outputs[i]
        if vc[0] != version:
            raise RuntimeError(
                f"the output of {self.name}, which its backward needs, has been modified by an in-place "
                f"operation (version {vc[0]}, expected {version}); use an out-of-place op instead")
        out = self.out_refs[i]()
        if out is not None:
            return out
        out = Tensor._wrap(data, grad_fn=self)
        out.output_nr = i
        return out

    def _check_alive(self):
        if self.freed:
            raise RuntimeError(
                f"trying to backward through the graph a second time (through {self.name}): its saved "
                "tensors were freed after the first backward; pass retain_graph=True to the first "
                "backward() or autograd.grad() call if you need to backward twice")

    def release(self):
        """Drop saved tensors once backward has used them (retain_graph=False)."""
        self.freed = True
        self.__dict__.update({k: None for k in list(self.__dict__) if k not in _KEEP})

    def edges(self):
        """Each input tensor that wants a gradient, else None, one per input (lists flattened); cached."""
        if self.edge_list is not None:
            return self.edge_list
        out = []
        for a in self.args:
            if isinstance(a, Tensor):
                out.append(a if a.requires_grad else None)
            elif isinstance(a, (list, tuple)):
                out.extend((x if isinstance(x, Tensor) and x.requires_grad else None) for x in a)
            else:
                out.append(None)
        self.edge_list = out
        return out

    def __repr__(self):
        return f"<{self.name}Backward>"


_KEEP = {"op", "freed", "trace", "out_refs"}


_DIFFERENTIABLE = frozenset(FLOATING + COMPLEX)
