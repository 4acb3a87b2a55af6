"""Imports go one way: each module of mixprec imports its own layer and the layers below, never above.

    base      _state, dtypes, hooks, _text, backend, strict_cupy (and the host build it shares with the
              kernels, amp/_host_build.py): no autograd, no ops
    core      tensor, the creation functions and random draws that make tensors, the autograd graph,
              engine, grad and forward modes, observers, the autocast step
    ops       the op registry, dispatch and every op; autograd's Function, functional API and gradcheck
    library   everything built on ops: amp, nn, optim, cuda, profiler, serialization, ...

Read from the source, imports inside functions included (an import moved into a function to dodge a
cycle is still a dependency). Imports inside functions are also counted: they may not grow.
"""
from __future__ import annotations

import ast
from pathlib import Path

import mixprec

PACKAGE = Path(mixprec.__file__).resolve().parent
LAYERS = (  # (name, module prefixes), lowest first; the longest matching prefix decides
    ("base", ("mixprec._state", "mixprec.dtypes", "mixprec.hooks", "mixprec._text", "mixprec.backend",
              "mixprec.strict_cupy", "mixprec.amp._host_build")),
    ("core", ("mixprec.tensor", "mixprec.creation", "mixprec.random", "mixprec.autograd.graph",
              "mixprec.autograd.engine", "mixprec.autograd.grad_mode", "mixprec.autograd.forward_ad",
              "mixprec.observers", "mixprec.ops.autocast",
              "mixprec.autograd.allow_mutation")),
    ("ops", ("mixprec.ops", "mixprec.autograd")),
    ("library", ("mixprec", "mixprec.autograd.profiler")),  # (torch.autograd.profiler's names, over mp.profiler)
)
INNER_IMPORT_BUDGET = 21  # imports of mixprec modules inside functions today; lower it as they go


def _modules():
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def layer(module):
    best = max(((len(p), i) for i, (_, prefixes) in enumerate(LAYERS) for p in prefixes
                if module == p or module.startswith(p + ".")), default=None)
    return best[1]


def imports():
    """(importer, imported module, at top level?, line) for every import of a mixprec module."""
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
            else:
                continue
            found.extend((module, name, id(node) in top, node.lineno) for name in names if name in MODULES)
    return found


def test_every_module_has_a_layer():
    assert all(layer(m) is not None for m in MODULES)


def test_imports_go_down_the_layers():
    upward = [f"{importer}:{line} ({LAYERS[layer(importer)][0]}) imports {name} ({LAYERS[layer(name)][0]})"
              for importer, name, _, line in imports() if layer(name) > layer(importer)]
    assert not upward, "\n".join(upward)


def test_imports_inside_functions_do_not_grow():
    inner = {(importer, line) for importer, _, top, line in imports() if not top}  # (import statements)
    assert len(inner) <= INNER_IMPORT_BUDGET, (
        f"{len(inner)} imports of mixprec modules inside functions (budget {INNER_IMPORT_BUDGET}): import at the "
        "top of the module, from a lower layer")
