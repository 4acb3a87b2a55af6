#!/usr/bin/env python3
"""Whether two checkouts compute the same bits: every op case's outputs, gradients and tangents, compared.

    python tools/same_numbers.py OTHER_CHECKOUT      # e.g. a worktree of the commit before a refactor

For every case of tests/op_cases (this checkout's tables, run against each checkout's
mixprec in its own process) it records, in float64, float32, float16 and bfloat16: the
outputs, the gradients of a random weighting of them (autograd.grad), and in float64 the
second-order gradients (cases marked second_order) and the forward-mode tangents along a
random direction. Then it compares the two runs bit for bit and lists what differs.
Cases one checkout cannot run (an op the other lacks) are listed apart. Exit status 1
when anything differs.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def record(path):
    """Run every case with the mixprec on sys.path; save what it computes to ``path`` (an .npz)."""
    import warnings

    import mixprec as mp
    from mixprec.autograd import forward_ad
    sys.path.insert(0, str(ROOT / "tests"))
    from op_cases import CASES
    warnings.filterwarnings("ignore")

    def floating(x):
        return isinstance(x, mp.Tensor) and x.dtype.kind in "fc"

    def listed(result):
        return [o for o in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(o, mp.Tensor)]
    found = {}
    for case in CASES:
        for dtype in (mp.float64, mp.float32, mp.float16, mp.bfloat16):
            key = f"{case.id}|{dtype}"
            rng = np.random.default_rng(zlib.crc32(key.encode()))
            try:
                inputs = case.tensors(case.inputs(), dtype=dtype, requires_grad=True)
                outs = listed(case.fn(*inputs))
                for i, o in enumerate(outs):
                    found[f"{key}|out{i}"] = o.detach().numpy()
                flowing = [o for o in outs if floating(o) and o.requires_grad]
                xs = [x for x in inputs if floating(x) and x.requires_grad]
                if flowing and xs:
                    loss = sum((o * mp.tensor(rng.standard_normal(o.shape), dtype=o.dtype)).sum() for o in flowing)
                    grads = mp.autograd.grad(loss, xs, allow_unused=True, create_graph=dtype == mp.float64)
                    found.update((f"{key}|grad{i}", g.detach().numpy()) for i, g in enumerate(grads) if g is not None)
                    if dtype == mp.float64 and case.second_order:
                        total = sum((g * g).sum() for g in grads if g is not None and g.requires_grad)
                        if isinstance(total, mp.Tensor):
                            again = mp.autograd.grad(total, xs, allow_unused=True)
                            found.update((f"{key}|second{i}", g.numpy()) for i, g in enumerate(again) if g is not None)
                if dtype == mp.float64 and xs:
                    with forward_ad.dual_level():
                        duals = [forward_ad.make_dual(x.detach(), mp.tensor(rng.standard_normal(x.shape),
                                                                            dtype=x.dtype))
                                 if floating(x) and x.requires_grad else x for x in inputs]
                        for i, o in enumerate(listed(case.fn(*duals))):
                            tangent = forward_ad.unpack_dual(o).tangent if floating(o) else None
                            if tangent is not None:
                                found[f"{key}|tangent{i}"] = tangent.numpy()
            except Exception as exc:  # (recorded: the other checkout may fail the same way)
                found[f"{key}|error"] = np.array(f"{type(exc).__name__}: {exc}"[:200])
    np.savez_compressed(path, **found)


def same_bits(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc" or a.dtype.names is None and a.dtype.kind == "V":
        return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    return np.array_equal(a, b)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", nargs="?", help="the other checkout (its directory, holding mixprec/)")
    ap.add_argument("--record", metavar="NPZ", help=argparse.SUPPRESS)  # (what each checkout's process runs)
    args = ap.parse_args(argv)
    if args.record:
        record(args.record)
        return 0
    if not args.other:
        ap.error("name the other checkout")
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for name, tree in (("this", ROOT), ("other", Path(args.other).resolve())):
            runs[name] = Path(tmp) / f"{name}.npz"
            env = dict(os.environ, PYTHONPATH=str(tree))
            subprocess.run([sys.executable, __file__, "--record", str(runs[name])], env=env, check=True, cwd=tmp)
        this, other = np.load(runs["this"]), np.load(runs["other"])
        common = sorted(set(this.files) & set(other.files))
        differ = [k for k in common if not same_bits(this[k], other[k])]
        for label, only in (("only here", set(this.files) - set(other.files)),
                            ("only there", set(other.files) - set(this.files))):
            if only:
                print(f"{label} ({len(only)}): " + ", ".join(sorted(only)[:12]) + (" ..." if len(only) > 12 else ""))
        print(f"{len(common)} arrays compared bit for bit (outputs, gradients, second-order gradients, tangents); "
              f"{len(differ)} differ")
        for k in differ[:40]:
            print(f"  {k}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
