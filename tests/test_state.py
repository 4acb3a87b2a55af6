"""Who writes what: this thread's state (mixprec/_state.py) and a tensor's autograd history.

Both are read from the source, so a new writer anywhere in the package fails here:
- each field of ``PER_THREAD``'s groups is assigned only in the module ``_state.OWNERS`` names;
- a tensor's history (grad_fn, requires_grad, output_nr, tangent, view relation) is assigned only
  in mixprec/autograd/graph.py, apart from the two constructors in mixprec/tensor.py that make a
  tensor (a leaf, or an op's result given its node).
"""
from __future__ import annotations

import ast
import functools
import threading
from pathlib import Path

import pytest

from mixprec import _state

PACKAGE = Path(_state.__file__).resolve().parent
SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "strict_cupy" not in p.parts)  # (the stand-in models CuPy)
HISTORY = {"_grad_fn", "_requires_grad", "output_nr", "_fw", "_view", "_accumulate_into"}


def _module(path):
    return path.relative_to(PACKAGE).as_posix()


def _accessors(tree):
    """Functions of a module whose whole body returns one group of PER_THREAD ({name: group}), and _state.modes."""
    found = {"modes": "modes"}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            body = [s for s in node.body if not isinstance(s, ast.Expr)]  # (a docstring)
            if len(body) == 1 and isinstance(body[0], ast.Return) and _group_of(body[0].value, {}, {}):
                found[node.name] = _group_of(body[0].value, {}, {})
    return found


def _group_of(expr, names, accessors):
    """The group ``expr`` evaluates to: PER_THREAD.<group>, an accessor's call, or a name bound to one."""
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "PER_THREAD":
        return expr.attr if expr.attr in _state.OWNERS else None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        return accessors.get(expr.func.id)
    if isinstance(expr, ast.Name):
        return names.get(expr.id)
    return None


def _targets(node):
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for t in targets:
        yield from (t.elts if isinstance(t, ast.Tuple) else (t,))


@functools.lru_cache(maxsize=None)
def state_writes():
    """(module, group, field, line) of every assignment to a field of a PER_THREAD group in the package."""
    writes = []
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        accessors = _accessors(tree)
        scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope in scopes:
            names = {}
            for node in ast.walk(scope):
                if isinstance(node, ast.Assign):
                    for t, v in zip(node.targets, [node.value] * len(node.targets)):
                        if isinstance(t, ast.Name) and _group_of(v, names, accessors):
                            names[t.id] = _group_of(v, names, accessors)
                        elif isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple):
                            for tt, vv in zip(t.elts, v.elts):
                                if isinstance(tt, ast.Name) and _group_of(vv, names, accessors):
                                    names[tt.id] = _group_of(vv, names, accessors)
            for node in ast.walk(scope):
                if not isinstance(node, (ast.Assign, ast.AugAssign)):
                    continue
                for t in _targets(node):
                    if isinstance(t, ast.Attribute):
                        group = _group_of(t.value, names, accessors)
                        if group is not None and t.attr in _state.OWNERS[group]:
                            writes.append((_module(path), group, t.attr, node.lineno))
    return sorted(set(writes))


def test_each_state_field_is_written_only_by_its_owner():
    wrong = [f"{module}:{line} writes {group}.{field} (owner: {_state.OWNERS[group][field]})"
             for module, group, field, line in state_writes() if module != _state.OWNERS[group][field]]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("group,field", [(g, f) for g, fields in _state.OWNERS.items() for f in fields])
def test_every_state_field_has_a_writer_the_check_sees(group, field):
    """The check above is only as good as what it finds: each field's owner writes it somewhere it can see."""
    assert any(g == group and f == field for _, g, f, _ in state_writes()), f"no write of {group}.{field} found"


def test_the_state_table_lists_every_field():
    thread = _state.PER_THREAD
    for group, fields in _state.OWNERS.items():
        obj = getattr(thread, group)
        declared = set(getattr(type(obj), "__slots__", ())) | {k for k in vars(type(obj)) if not k.startswith("_")}
        assert declared == set(fields), f"{group}: fields {sorted(declared)}, table {sorted(fields)}"


def test_per_thread_state_has_one_home():
    homes = [_module(p) for p in SOURCES for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.ClassDef) and any(ast.unparse(b) == "threading.local" for b in n.bases)]
    assert homes == ["_state.py"]


def test_each_thread_starts_from_the_defaults():
    seen = {}

    def look():
        seen["runs"], seen["hooks"] = _state.PER_THREAD.engine.runs, _state.PER_THREAD.saving.hooks
        seen["grad"] = _state.modes().grad

    _state.PER_THREAD.saving.hooks = (("pack", "unpack"),)
    try:
        worker = threading.Thread(target=look)
        worker.start()
        worker.join()
    finally:
        _state.PER_THREAD.saving.hooks = ()
    assert seen == {"runs": (), "hooks": (), "grad": True}


@functools.lru_cache(maxsize=None)
def history_writes():
    """(module, innermost function, attribute) of every assignment to a tensor's history field."""
    writes = []

    class Visitor(ast.NodeVisitor):
        def __init__(self, module):
            self.module, self.where = module, ["<module>"]

        def visit_FunctionDef(self, node):
            self.where.append(node.name)
            self.generic_visit(node)
            self.where.pop()

        def visit_Assign(self, node):
            for t in _targets(node):
                if isinstance(t, ast.Attribute) and t.attr in HISTORY:
                    writes.append((self.module, self.where[-1], t.attr))
            self.generic_visit(node)

        visit_AugAssign = visit_Assign
    for path in SOURCES:
        Visitor(_module(path)).visit(ast.parse(path.read_text()))
    return tuple(writes)


def test_only_the_graph_module_writes_a_tensors_history():
    constructors = {("tensor.py", "_init"), ("tensor.py", "_wrap")}
    wrong = sorted({f"{module} ({where}) writes {attr}" for module, where, attr in history_writes()
                    if module != "autograd/graph.py" and (module, where) not in constructors})
    assert not wrong, "\n".join(wrong)
    assert {attr for module, _, attr in history_writes() if module == "autograd/graph.py"} == HISTORY
