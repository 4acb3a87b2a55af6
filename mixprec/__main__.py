"""Command line: ``python -m mixprec ops --device cuda`` prints the autocast policy table.

``python -m mixprec ops --markdown > docs/autocast-table.md`` writes the table of
mixprec/ops/policies.py as that page (tests/test_policy_tables.py checks it is current).
"""
from __future__ import annotations

import argparse
import sys
import textwrap

from .amp import autocast_mode as _am
from .ops import policies as _policies, registry as _reg

_ORDER = ("lower_precision_fp", "fp32", "promote", "banned")
_MEANING = {
    "lower_precision_fp": "cast to the region's dtype ({dtype} unless autocast(dtype=...) says otherwise)",
    "fp32": "cast to float32",
    "promote": "cast to the widest floating input (the region's dtype only if every input has it)",
    "banned": "raises inside an enabled region",
}


def policy_table(device_type, show_all=False, width=100) -> str:
    """The autocast policy of every registered op on device_type, grouped by policy."""
    _am._check_device_type(device_type, "ops")
    groups: dict[str, list[str]] = {}
    untouched = []
    for op in sorted(set(_reg._REGISTRY.values()), key=lambda o: o.name):
        names = [n for n, o in _reg._REGISTRY.items() if o is op]
        label = op.name + (f" ({', '.join(n for n in sorted(names) if n != op.name)})" if len(names) > 1 else "")
        policy = _am.op_policy(op.name, device_type)
        if policy is None:
            untouched.append(label)
        else:
            groups.setdefault(policy.value, []).append(label)
    dtype = _am.DEFAULT_DTYPES[device_type].name
    lines = [f"autocast policies on device type {device_type!r} (default region dtype {dtype})", ""]
    for key in _ORDER:
        ops = groups.get(key, [])
        lines.append(f"{key} — {_MEANING[key].format(dtype=dtype)}: {len(ops)} op" + "s" * (len(ops) != 1))
        lines.extend(_wrap(ops, width) or ["    (none)"])
        lines.append("")
    if show_all:
        lines.append(f"no policy — run in their input dtypes: {len(untouched)} ops")
        lines.extend(_wrap(untouched, width))
    else:
        lines.append(f"{len(untouched)} other ops have no policy and run in their input dtypes (--all lists them).")
    return "\n".join(lines)


def markdown_table(width=100) -> str:
    """docs/autocast-table.md: the table of mixprec/ops/policies.py, both device types, in Markdown."""
    lines = ["# The autocast policy table", "",
             f"Generated from `mixprec/ops/policies.py` by `{REGENERATE}`;",
             "change the table there, not here.", "",
             "What `mp.autocast` does with each built-in op's float16, bfloat16 and float32 inputs, per device",
             "type ([autocast.md](autocast.md) has the rules). An op on no list runs in the dtypes it is given.",
             "Names in parentheses are aliases of the op before them.", ""]
    for device in _am.DEVICE_TYPES:
        dtype = _am.DEFAULT_DTYPES[device].name
        lines += [f"## {device.upper()} (default region dtype {dtype})", ""]
        for key in _ORDER:
            labels = [_markdown_label(name) for name in sorted(_policies.TABLE[device][key])]
            lines += [f"**{key}**, {_MEANING[key].format(dtype=dtype)}: {len(labels)} op" + "s" * (len(labels) != 1),
                      ""]
            lines += (_wrap(labels, width, indent="") or ["(none)"]) + [""]
    return "\n".join(lines).rstrip("\n")


REGENERATE = "python -m mixprec ops --markdown > docs/autocast-table.md"


def _markdown_label(name):
    """`name`, then its op's aliases in parentheses: `matmul` (`__matmul__`)."""
    op = _reg.get(name)
    aliases = sorted(n for n, o in _reg._REGISTRY.items() if o is op and n != name)
    return f"`{name}`" + (" (" + ", ".join(f"`{a}`" for a in aliases) + ")" if aliases else "")


def _wrap(labels, width, indent="    "):
    """The labels, comma-separated and wrapped, never breaking inside one ("matmul (__matmul__)")."""
    text = ", ".join(label.replace(" ", "\0") for label in labels)
    return [line.replace("\0", " ") for line in textwrap.wrap(text, width=width, initial_indent=indent,
                                                                 subsequent_indent=indent)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mixprec", description="mixprec command line tools")
    sub = parser.add_subparsers(dest="command", required=True)
    ops = sub.add_parser("ops", help="print the autocast policy of every registered op")
    ops.add_argument("--device", choices=_am.DEVICE_TYPES, default="cuda",
                     help="device type whose policy table to print (default: cuda)")
    ops.add_argument("--all", action="store_true", help="also list the ops without a policy")
    ops.add_argument("--markdown", action="store_true",
                     help="print docs/autocast-table.md: mixprec/ops/policies.py's table, both device types")
    args = parser.parse_args(argv)
    if args.command == "ops":
        print(markdown_table() if args.markdown else policy_table(args.device, show_all=args.all))
    return 0


if __name__ == "__main__":
    sys.exit(main())
