"""The docs run: every ```python block of README.md and docs/*.md is executed by pytest, in page order.

Sybil (a maintained library for testing documentation) finds the blocks; this file says how one is run.

- A ```python block runs as written, in one namespace per page. A block that starts with ``>>>`` is a
  doctest: each statement's printed value is compared with the line under it.
- An ```output block right after a ```python block is what that block prints. It is compared with what
  the block printed now, with doctest's rules: ``...`` matches anything (used where the numbers depend on
  the machine, such as timings), and runs of whitespace compare equal.
- A block whose first line is ``# needs a GPU`` runs as written where CUDA is usable; elsewhere it must
  raise mixprec's DeviceUnavailableError, which is what a reader without a GPU meets. A block whose first
  line is ``# needs mpi4py`` runs where mpi4py is installed and is skipped, with that reason, elsewhere.

pytest collects README.md and docs/ because pyproject.toml lists them in testpaths. A block may be run
without the rest of its page (``-k``, or pytest-xdist sending a page's blocks to several workers): the
page's earlier blocks then run first, in the same process.
"""
from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import os
import tempfile
from pathlib import Path

import mixprec as mp
import pytest
from mixprec.ops import autocast, registry
from sybil import Sybil
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parent
NEEDS_GPU, NEEDS_MPI = "# needs a GPU", "# needs mpi4py"
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


class RunAndCapture:
    """Runs a plain ```python block and keeps what it printed for the ```output block after it."""

    def __init__(self):
        self.run = PythonEvaluator()

    def __call__(self, example):
        printed = io.StringIO()
        first_line = example.parsed.lstrip()
        if first_line.startswith(NEEDS_MPI) and importlib.util.find_spec("mpi4py") is None:
            pytest.skip("needs mpi4py: pip install -e '.[distributed]'")
        needs_gpu = first_line.startswith(NEEDS_GPU)
        with contextlib.redirect_stdout(printed):
            if needs_gpu and not mp.is_cuda_available():
                try:
                    self.run(example)
                except mp.DeviceUnavailableError:
                    pass
                else:
                    raise AssertionError("a '# needs a GPU' block ran without a GPU instead of raising "
                                         "DeviceUnavailableError")
            else:
                self.run(example)
        example.namespace["_printed_by_last_block"] = printed.getvalue()


def check_output(example):
    """An ```output block: what the block before it printed, compared as doctest compares."""
    want = example.parsed
    got = example.namespace.pop("_printed_by_last_block", None)
    if got is None:
        raise AssertionError("an ```output block must follow a ```python block")
    if not CHECKER.check_output(want, got, FLAGS):
        return CHECKER.output_difference(doctest.Example("", want), got, FLAGS)
    return None


class PythonBlocks(PythonCodeBlockParser):
    """```python blocks: doctests as doctests, the rest through RunAndCapture."""

    def __init__(self):
        super().__init__(doctest_optionflags=FLAGS)
        self.codeblock_parser = CodeBlockParser("python", RunAndCapture())


def before_a_page(namespace):
    """Each page runs in a folder of its own (its blocks may write files) that sees the repository's examples/
    as a reader at the repository's root does, and the ops it finds registered are remembered."""
    namespace["_folder_before_this_page"] = os.getcwd()
    os.chdir(tempfile.mkdtemp(prefix="mixprec-docs-"))
    os.symlink(ROOT / "examples", "examples")
    namespace["_ops_before_this_page"] = set(registry._REGISTRY)


def after_a_page(namespace):
    """Back to the folder pytest ran in; a page that defines an op (docs/core.md's swish) leaves the
    registry as it found it."""
    os.chdir(namespace["_folder_before_this_page"])
    for name in set(registry._REGISTRY) - namespace["_ops_before_this_page"]:
        op = registry.unregister(name)
        for key in [k for k in autocast.REGISTERED if k[0] is op]:
            del autocast.REGISTERED[key]


pytest_collect_file = Sybil(
    parsers=[PythonBlocks(), CodeBlockParser("output", check_output), SkipParser()],
    patterns=["README.md", "docs/*.md"],
    path=str(ROOT),
    setup=before_a_page,
    teardown=after_a_page,
).pytest()



BLOCKS_RUN: dict = {}  # page -> the first lines of the blocks this process has run on it


@pytest.hookimpl(trylast=True)  # after pytest has set the page up (before_a_page)
def pytest_runtest_setup(item):
    """A block runs after its page's earlier blocks, even when it is run alone (``-k``, or on a pytest-xdist
    worker that was not sent them): the ones this process has not run are run first, quietly."""
    example = getattr(item, "example", None)
    if example is None:
        return
    done = BLOCKS_RUN.setdefault(example.path, set())
    for earlier in example.document.examples():
        if earlier.start >= example.start:
            break
        if earlier.start not in done:
            done.add(earlier.start)
            with contextlib.suppress(Exception, pytest.skip.Exception), contextlib.redirect_stdout(io.StringIO()):
                earlier.evaluate()  # a failing one fails as its own test; this block then shows its own error
    done.add(example.start)
