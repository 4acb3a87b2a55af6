#!/usr/bin/env python3
"""How many entries of the reference autocast op lists mixprec implements, per device type.

    PYTHONPATH=. python tools/op_coverage.py             # the figures
    PYTHONPATH=. python tools/op_coverage.py --missing   # and the entries not implemented yet
    PYTHONPATH=. python tools/op_coverage.py --reference path/to/autocast-op-reference.md

The reference is tests/autocast-op-reference.md (torch's autocast op lists,
restated as data), or the file named by $MIXPREC_AUTOCAST_REFERENCE. It lists,
per device type, torch's op names under each policy. An entry counts as implemented when mixprec has an op of that name
(aliases included: ``cross_entropy_loss``, ``__rdiv__``) or NAME_MAP names the
mixprec op that implements it. tests/test_policy_tables.py derives its tables
from the same parse, and checks that the figure recorded in docs/autocast.md
never shrinks.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_ENV = "MIXPREC_AUTOCAST_REFERENCE"
DEFAULT_REFERENCE = ROOT / "tests" / "autocast-op-reference.md"
DEVICE_SECTIONS = {"CUDA": "cuda", "CPU": "cpu"}  # '## CUDA', '## CPU (bfloat16 by default; ...)'
POLICY_HEADINGS = {  # how each list starts -> mixprec's policy name
    "lower precision": "lower_precision_fp",
    "float32": "fp32",
    "promote to widest input type": "promote",
    "banned inside an enabled region": "banned",
}

# Reference entries that mixprec implements under another name: reference name -> mixprec op.
# Each target must be a registered op; an op with a policy that no entry reaches fails the tests.
NAME_MAP = {
    "nll_loss2d": ("nll_loss",),  # torch's kernel for (N, C, H, W) inputs; mixprec's nll_loss takes (N, C, d1, ...)
    # The CUDA list names the recurrent cells by their modules; the ops behind them (what torch's autocast
    # registers, and its own autocast test lists call) are these:
    "LSTMCell": ("lstm_cell",),
    "GRUCell": ("gru_cell",),
    "RNNCell": ("rnn_tanh_cell", "rnn_relu_cell"),
    "multi_dot": ("linalg_multi_dot",),  # torch.linalg.multi_dot; torch's autocast registers linalg_multi_dot
}

# What torch 2.13 does beyond the reference text: (device type, op) -> policy. The reference's CPU list
# omits smooth_l1_loss, which torch's own CPU autocast test list (nn_fp32) runs in float32. On CUDA, torch
# 2.13 registers autocast kernels for more ops than its documented CUDA list names; their policies are
# the lists of torch's CUDA autocast test lists (torch/testing/_internal/autocast_test_lists.py) that hold
# them, scaled_dot_product_attention's (in none of them) that of torch's registration, as on the CPU.
# tests/test_policy_tables.py checks each against torch.
TORCH_BEYOND_REFERENCE = {
    ("cpu", "smooth_l1_loss"): "fp32",
    ("cuda", "conv_tbc"): "lower_precision_fp",
    ("cuda", "_convolution"): "lower_precision_fp",
    ("cuda", "scaled_dot_product_attention"): "lower_precision_fp",
    ("cuda", "einsum"): "lower_precision_fp",
    ("cuda", "linalg_vecdot"): "lower_precision_fp",
    ("cuda", "rms_norm"): "fp32",
    ("cuda", "logsumexp"): "fp32",
    ("cuda", "vdot"): "promote",
    ("cuda", "grid_sampler"): "promote",
}

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STAR_GROUP = re.compile(r"([A-Za-z0-9_]+)\*\s*\(([^)]*)\)")  # fft_* (fft, ifft) -> fft_fft, fft_ifft


def reference_path() -> Path:
    """Where the reference is looked for ($MIXPREC_AUTOCAST_REFERENCE first)."""
    return Path(os.environ.get(REFERENCE_ENV) or DEFAULT_REFERENCE)


def parse_reference(text: str) -> dict[str, dict[str, str]]:
    """{device type: {op name: policy}} from the reference's '## CUDA' and '## CPU' sections.

    A list is a paragraph "<heading>: name, name, ..." (the names may start on the
    next line, in backticks); a line in parentheses starts a note. A heading or a
    name this parser does not know raises ValueError, so a change of format
    cannot silently empty a table.
    """
    tables: dict[str, dict[str, str]] = {}
    device = None
    for paragraph in re.split(r"\n\s*\n", text):
        lines = paragraph.strip().splitlines()
        if lines and lines[0].startswith("## "):  # a new section: one device type's lists, or something else
            device = DEVICE_SECTIONS.get((lines[0][3:].split() or [""])[0])
            if device is not None:
                tables.setdefault(device, {})
            lines = lines[1:]
        notes = next((i for i, line in enumerate(lines) if line.lstrip().startswith("(")), len(lines))
        paragraph = "\n".join(lines[:notes]).strip()  # a line in parentheses starts a note
        if device is None or not paragraph:
            continue
        heading, sep, names = paragraph.partition(":")
        policy = next((p for h, p in POLICY_HEADINGS.items() if heading.strip().lower().startswith(h)), None)
        if not sep or policy is None:
            raise ValueError(f"autocast reference: unknown list heading {heading.strip()!r} in the {device} section")
        names = _STAR_GROUP.sub(lambda m: ", ".join(m.group(1) + n.strip() for n in m.group(2).split(",")),
                                names.replace("`", ""))
        for name in (n.strip() for n in names.split(",")):
            if not _NAME.match(name):
                raise ValueError(f"autocast reference: {name!r} in the {device} {policy} list is not an op name")
            if tables[device].setdefault(name, policy) != policy:
                raise ValueError(f"autocast reference: {name!r} is listed twice on {device} with different policies")
    for d in DEVICE_SECTIONS.values():
        if not tables.get(d):
            raise ValueError(f"autocast reference: no op lists found for device type {d!r}")
    return tables


def load_reference(path=None) -> dict[str, dict[str, str]] | None:
    """The parsed reference, or None when the file is not there."""
    path = Path(path) if path is not None else reference_path()
    return parse_reference(path.read_text()) if path.is_file() else None


def implementing_ops(name) -> list:
    """The mixprec ops that implement reference entry ``name`` (empty if none does)."""
    from mixprec.ops import registry
    targets = (name,) if name in registry._REGISTRY else NAME_MAP.get(name, ())
    return [registry._REGISTRY[t] for t in targets if t in registry._REGISTRY]


def expected_policies(reference) -> dict[str, dict]:
    """{device type: {op: policy name}} for every mixprec op a reference entry (or TORCH_BEYOND_REFERENCE) names.

    Two entries that reach one op with different policies raise ValueError.
    """
    from mixprec.ops import registry
    expected: dict[str, dict] = {d: {} for d in reference}
    named: dict[tuple, str] = {}
    entries = [(d, n, p) for d, table in reference.items() for n, p in table.items()]
    entries += [(d, n, p) for (d, n), p in TORCH_BEYOND_REFERENCE.items()]
    for device, name, policy in entries:
        ops = implementing_ops(name) if (device, name) not in TORCH_BEYOND_REFERENCE else [registry.get(name)]
        for op in ops:
            if expected[device].setdefault(op, policy) != policy:
                raise ValueError(f"{op.name}: reference entries {named[device, op]!r} and {name!r} give it "
                                 f"different policies on {device}")
            named.setdefault((device, op), name)
    return expected


def coverage(reference) -> dict[str, tuple[list[str], list[str]]]:
    """{device type: (implemented entries, missing entries)}, each sorted."""
    out = {}
    for device, table in reference.items():
        done = sorted(n for n in table if implementing_ops(n))
        out[device] = (done, sorted(set(table) - set(done)))
    return out


def summary(reference) -> str:
    """One line per device type, as docs/autocast.md records it: 'cuda: 70 of 88 entries'."""
    return "\n".join(f"{device}: {len(done)} of {len(done) + len(missing)} entries"
                     for device, (done, missing) in coverage(reference).items())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", help=f"the reference file (default: ${REFERENCE_ENV} or {DEFAULT_REFERENCE})")
    parser.add_argument("--missing", action="store_true", help="also list the entries not implemented yet")
    args = parser.parse_args(argv)
    path = Path(args.reference) if args.reference else reference_path()
    reference = load_reference(path)
    if reference is None:
        print(f"no autocast reference at {path} (set {REFERENCE_ENV} or pass --reference)", file=sys.stderr)
        return 2
    print(f"reference: {path}")
    print(summary(reference))
    if args.missing:
        for device, (_, missing) in coverage(reference).items():
            print(f"\nnot implemented on {device} ({len(missing)}):\n    " + ", ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
