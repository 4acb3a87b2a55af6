"""Graph nodes: what an op leaves behind for backward."""
from __future__ import annotations

import weakref


class Node:
    """The ``grad_fn`` of a tensor: the op that made it, its inputs, and what backward needs.

    The node doubles as the ``ctx`` an op's forward and backward share, so an op
    can stash anything on it (``ctx.mask = ...``). Inputs are kept as Tensors so
    a backward written with Tensor ops can itself be differentiated; their
    version counters are remembered to catch in-place edits before backward.
    """

    user_backward = False  # True for custom Functions (their gradients may alias user tensors)

    def __init__(self, op, args):
        self.op = op
        self.args = args
        self.edge_list = None
        self.versions = [a._vc[0] if hasattr(a, "_vc") else None for a in args]
        self.freed = False
        self.trace = None

    @property
    def name(self):
        return self.op.name

    def finish(self, out):
        """Link the node to its output (weakly: the output owns the node, not the reverse)."""
        self.out_ref = weakref.ref(out)
        self.out_data = out.data
        self.out_vc = out._vc
        self.out_version = out._vc[0]
        self.out_meta = (out.data.shape, out.data.dtype)
        out.grad_fn = self
        out.requires_grad = True

    # ---- what backward reads ----
    @property
    def inputs(self):
        """The op's positional args as forward saw them (Tensors), checked for in-place edits."""
        self._check_alive()
        for a, v in zip(self.args, self.versions):
            if v is not None and a._version != v:
                raise RuntimeError(
                    f"one of the tensors needed for the gradient of {self.name} has been modified by an "
                    f"in-place operation (version {a._version}, expected {v}); use an out-of-place op instead")
        return self.args

    @property
    def output(self):
        """The op's output as a Tensor attached to this node (safe to differentiate through)."""
        self._check_alive()
        if self.out_vc[0] != self.out_version:
            raise RuntimeError(
                f"the output of {self.name}, which its backward needs, has been modified by an in-place "
                f"operation (version {self.out_vc[0]}, expected {self.out_version}); use an out-of-place op instead")
        from ..tensor import Tensor
        out = self.out_ref()
        if out is not None:
            return out
        return Tensor._wrap(self.out_data, None, grad_fn=self)

    def _check_alive(self):
        if self.freed:
            raise RuntimeError(
                f"trying to backward through the graph a second time (through {self.name}): its saved "
                "tensors were freed after the first backward; pass retain_graph=True to the first "
                "backward() or autograd.grad() call if you need to backward twice")

    def release(self):
        """Drop saved tensors once backward has used them (retain_graph=False)."""
        self.freed = True
        self.out_data = None
        self.__dict__.update({k: None for k in list(self.__dict__) if k not in _KEEP})

    def edges(self):
        """Each input tensor that wants a gradient, else None, one per input (lists flattened); cached."""
        if self.edge_list is not None:
            return self.edge_list
        from ..tensor import Tensor
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


_KEEP = {"op", "freed", "trace", "out_ref", "out_meta", "versions"}
