"""The core stays small enough to read in an afternoon: its files may not grow past a fixed number of lines.

The core is the concepts a reader of docs/internals.md meets: the Tensor, the autograd graph and
its engine (modes, forward mode, custom Functions, in-place writes and views), the op registry and
dispatch with its observers and per-thread state, autocast's step and opmath, and amp's autocast,
GradScaler, opt levels and kernels. The op modules, nn, optim and the tools are outside it.
"""
from __future__ import annotations

from pathlib import Path

import mixprec

PACKAGE = Path(mixprec.__file__).resolve().parent
CORE = (
    "tensor.py", "_state.py", "observers.py",
    "autograd/graph.py", "autograd/engine.py", "autograd/grad_mode.py", "autograd/forward_ad.py",
    "autograd/function.py",
    "ops/registry.py", "ops/dispatch.py", "ops/autocast.py", "ops/opmath.py", "ops/inplace.py",
    "amp/autocast_mode.py", "amp/grad_scaler.py", "amp/opt_levels.py", "amp/_kernels.py",
)
BUDGET = 5682  # lines, all told; it may go down, never up


def test_the_core_fits_its_line_budget():
    lines = {name: len((PACKAGE / name).read_text().splitlines()) for name in CORE}
    total = sum(lines.values())
    listing = "\n".join(f"{n:6d} {name}" for name, n in sorted(lines.items(), key=lambda item: -item[1]))
    assert total <= BUDGET, f"the core has {total} lines, over its budget of {BUDGET}:\n{listing}"
