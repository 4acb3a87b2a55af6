"""Every code citation in the docs points at something that exists.

docs/internals.md walks through mixprec citing functions by dotted name
(`mixprec.ops.dispatch.dispatch`); every page cites files by path. A renamed
function or a moved file makes this fail, so the guided tour cannot go stale.
"""
from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

from mixprec.ops import registry

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
DOTTED = re.compile(r"`(mixprec(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")
PATH = re.compile(r"`((?:mixprec|kernels|examples|benchmarks|tools|tests|docs)/[A-Za-z0-9_./-]+\.(?:py|cu|cuh|md))`")


def _resolve(dotted):
    """Import the longest module prefix of ``dotted``, then follow the remaining names as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


def _citations(pattern):
    return [pytest.param(page, m, id=f"{page.name}:{m}") for page in PAGES
            for m in sorted(set(pattern.findall(page.read_text())))]


def test_the_tour_cites_code():
    assert len(DOTTED.findall((ROOT / "docs" / "internals.md").read_text())) >= 25


@pytest.mark.parametrize("page,name", _citations(DOTTED))
def test_cited_name_exists(page, name):
    try:
        _resolve(name)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"{page.name} cites `{name}`, which does not exist ({exc})")


@pytest.mark.parametrize("page,path", _citations(PATH))
def test_cited_file_exists(page, path):
    assert (ROOT / path).exists(), f"{page.name} cites `{path}`, which does not exist"


# The public API's docstrings open with a short example; each runs, and prints what it shows.
EXAMPLES = ["mixprec.autocast", "mixprec.GradScaler", "mixprec.amp.inspect", "mixprec.amp.initialize",
            "mixprec.library.custom_op"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_docstring_example_runs(name):
    obj = _resolve(name)
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(obj, name) if t.examples]
    assert tests, f"{name}'s docstring has no >>> example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    before = set(registry._REGISTRY)
    try:
        for test in tests:
            runner.run(test)
    finally:  # an example that defines an op (custom_op's) leaves the registry as it found it
        for op_name in set(registry._REGISTRY) - before:
            registry.unregister(op_name)
    assert runner.failures == 0, f"{name}'s docstring example failed (doctest's report is above)"
