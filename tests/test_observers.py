"""The dispatch observer mechanism the AMP tools share (mixprec/observers.py): what an observer sees of
op calls, failed calls, backward passes and graph nodes, and what it does not see."""
import pytest

import mixprec as mp
from mixprec import observers
from mixprec.ops import dispatch

F = mp.nn.functional


class Recorder:
    sees_backward = True

    def __init__(self):
        self.entered, self.exited = [], []

    def enter(self, call):
        self.entered.append(call)

    def exit(self, call):
        self.exited.append(call)
        if call.kind == "backward":  # (the node is alive only while the pass runs)
            call.edges_then = [getattr(e[0], "variable", e[0]) if e is not None else None  # leaves for leaves
                               for e in call.node._next_edges]


def test_every_call_is_seen_entering_and_leaving_with_its_parent_and_depth():
    x, w = mp.randn(2, 3), mp.randn(4, 3, requires_grad=True)
    rec = Recorder()
    with observers.observe(rec), mp.autocast("cpu"):
        F.linear(x, w)
    assert rec.entered == [rec.exited[-1]] + rec.exited[:-1]  # the op enters first and leaves last
    top = rec.exited[-1]
    assert (top.name, top.kind, top.depth, top.parent, top.error) == ("linear", "op", 0, None, None)
    casts = rec.exited[:-1]
    assert [c.name for c in casts] == ["_to_copy", "_to_copy"] and all(c.parent is top and c.depth == 1
                                                                        for c in casts)
    assert top.autocast.source == "the autocast op table" and top.out.dtype == mp.bfloat16
    assert not observers.observing()


def test_a_call_that_raises_is_seen_leaving_with_its_error():
    rec = Recorder()
    with observers.observe(rec):
        with pytest.raises(RuntimeError, match="cannot be broadcast"):
            mp.randn(2, 3) + mp.randn(4, 5)
        mp.randn(2) * 2  # the observer's view stays consistent after the failure
    failed, after = rec.exited
    assert failed.name == "add" and isinstance(failed.error, RuntimeError) and failed.out is None
    assert after.name == "mul" and after.error is None and after.depth == 0
    assert observers.current_call() is None


def test_backward_passes_and_nodes_are_calls_the_ops_run_inside():
    x = mp.randn(3, requires_grad=True)
    y = (x * 2).sum()
    rec = Recorder()
    with observers.observe(rec):
        y.backward()
    kinds = [(c.kind, c.name, c.depth) for c in rec.exited if c.kind != "op"]
    assert kinds == [("backward", "sum backward", 1), ("backward", "mul backward", 1),
                     ("backward pass", "backward pass", 0)]
    pass_call = rec.exited[-1]
    assert pass_call.args[0] == [y] and pass_call.op is None
    mul_node = next(c for c in rec.exited if c.name == "mul backward")
    assert mul_node.node.op.name == "mul" and len(mul_node.out) == len(mul_node.edges_then) == 2
    assert mul_node.edges_then[0] is x and mul_node.out[0].numpy().tolist() == [2.0, 2.0, 2.0]
    assert all(c.parent.kind == "backward" for c in rec.exited if c.kind == "op")  # backward's own ops
    assert x.grad.numpy().tolist() == [2.0, 2.0, 2.0]


def test_an_observer_that_does_not_ask_for_backward_sees_only_op_calls():
    class OpsOnly(Recorder):
        sees_backward = False
    x = mp.randn(3, requires_grad=True)
    y = (x * 2).sum()
    rec, both = OpsOnly(), Recorder()
    with observers.observe(rec):
        y.backward(retain_graph=True)
    assert rec.exited and all(c.kind == "op" for c in rec.exited) and rec.exited[0].parent is None
    with observers.observe(rec), observers.observe(both):  # beside one that asks, its ops' parents are nodes
        y.backward()
    assert all(c.kind == "op" for c in rec.exited) and any(c.kind == "backward pass" for c in both.exited)


def test_unobserved_hides_a_tools_own_work():
    rec = Recorder()
    with observers.observe(rec):
        with observers.unobserved():
            mp.randn(2) + 1
            assert not observers.observing()
        assert observers.observing()
        mp.randn(2) - 1
    assert [c.name for c in rec.exited] == ["sub"]


def test_trace_shows_backward_nodes_and_leaves_out_failed_calls():
    x = mp.randn(3, 4, requires_grad=True)
    with mp.amp.trace() as t, mp.autocast("cpu"):
        with pytest.raises(RuntimeError):
            F.linear(x, mp.randn(5, 5))
        loss = F.linear(x, mp.randn(2, 4)).sum()
        loss.backward()
    names = [r.name for r in t.in_call_order()]
    assert names.count("linear") == 1  # the failed call is not recorded
    assert "backward pass" in names and "linear backward" in names
    shown = t.table(inner_ops=False)
    assert "  linear backward" in shown and "backward pass" in shown
    node = next(r for r in t.records if r.name == "linear backward")
    assert node.kind == "backward" and node.input_dtypes == (mp.bfloat16,)
