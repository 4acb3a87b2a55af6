#!/usr/bin/env python3
"""Build mixprec's CUDA kernels for the host and run them on NumPy arrays: the kernels' code, no GPU.

    python tools/host_kernels.py        # build, then check each kernel against its NumPy twin once

The sources are exactly the text CuPy compiles (mixprec.amp._kernels.load_source,
generated layout header included), built by mixprec.amp._host_build (a C++
compiler, -DMIXPREC_HOST_EMULATION and kernels/host_emulation.cuh) into one shared
library, loaded with ctypes. ``HostRunner`` has the interface of
mixprec.amp._kernels.CudaRunner, so the launcher's own Python (chunk tables, runs of
non-overlapping arrays, UpdateArgs blocks, the table cache) runs unchanged on the
emulated kernels. tests/test_kernels_host.py checks them bit for bit against the
NumPy reference; docs/grad-scaler.md says what that proves and what only a GPU can.
"""
from __future__ import annotations

import ctypes
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout: use its mixprec
    sys.path.insert(0, str(ROOT))

from mixprec.amp import _host_build, _kernels  # noqa: E402
from mixprec.amp._host_build import HostBuildUnavailable, symbol  # noqa: E402,F401  (tests catch the error)


def build(out_dir) -> Path:
    """Compile every kernel source into one shared library in out_dir; returns its path."""
    units = {filename: _host_build.translation_unit(_kernels.load_source(filename), expressions)
             for filename, expressions in _kernels.MODULES.items()}
    return _host_build.build(units, out_dir)


class HostRunner:
    """mixprec.amp._kernels' runner interface on the host-built kernels and NumPy arrays.

    ``capturing_now`` acts out a CUDA graph capture for the table cache, and
    ``launches`` records every launch (kernel and argument addresses) the way a
    captured graph keeps them, so ``replay`` can run one again later.
    """
    xp = np

    def __init__(self, library, capacity: int = 64):
        self.lib = ctypes.CDLL(str(library))
        self.tables = _kernels.DeviceTables(capacity)
        self.capturing_now = False
        self.launches = []

    def device_id(self, array) -> int:
        return 0

    def pointer(self, array) -> int:
        return array.__array_interface__["data"][0]

    def upload(self, host, device_id):
        return np.array(host, dtype=np.int64, copy=True)  # "device" memory of its own, owned by the cache

    def capturing(self, device_id) -> bool:
        return self.capturing_now

    def launch(self, filename, name, device_id, grid, block, args):
        record = (name, grid, block, tuple(self.pointer(a) for a in args))
        self.launches.append(record)
        self.replay(record)

    def replay(self, record):
        name, grid, block, pointers = record
        fn = getattr(self.lib, symbol(name))
        fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)]
        fn.restype = None
        values = (ctypes.c_void_p * len(pointers))(*pointers)  # each argument's value: the pointer itself
        size = ctypes.sizeof(ctypes.c_void_p)
        params = (ctypes.c_void_p * len(pointers))(*[ctypes.addressof(values) + i * size
                                                       for i in range(len(pointers))])
        fn(grid, block, params)


def main() -> int:
    from mixprec import dtypes
    from mixprec.amp import _reference
    from mixprec.amp import _layout
    from mixprec.amp._layout import AdamRule, ScaleRule, SGDRule, UpdateScaleArgs
    try:
        with tempfile.TemporaryDirectory() as tmp:
            runner = HostRunner(build(tmp))
            rng = np.random.default_rng(0)
            failures = 0
            for src, dst in _kernels.UNSCALE_PAIRS:
                dtype_in, dtype_out = getattr(dtypes, src), getattr(dtypes, dst)
                x = (rng.standard_normal(70_001) * 1e3).astype(np.float32).astype(dtype_in)
                x[-1] = np.inf
                got = np.empty(x.shape, dtype_out)
                want = np.empty(x.shape, dtype_out)
                flags = np.zeros(1, np.float32), np.zeros(1, np.float32)
                inv = np.array([1 / 1024], np.float32)
                _kernels.unscale([(x, got)], flags[0], inv, runner)
                _reference.unscale([(x, want)], flags[1], inv)
                ok = got.tobytes() == want.tobytes() and flags[0].tobytes() == flags[1].tobytes()
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} unscale {src} -> {dst}")
            states = [dict(scale=np.array([2.0 ** 16], np.float32), growth_tracker=np.zeros(1, np.int32),
                           found_inf=np.zeros(1, np.float32)) for _ in range(2)]
            rule = ScaleRule(growth_interval=2)
            for step in range(50):
                for state in states:
                    state["found_inf"][0] = float(step % 7 == 3)
                _kernels.update_scale(UpdateScaleArgs(rule=rule, **states[0]), runner)
                _reference.update_scale(UpdateScaleArgs(rule=rule, **states[1]))
            ok = all(states[0][k].tobytes() == states[1][k].tobytes() for k in states[0])
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} update_scale over 50 steps")
            rules = {"ADAM": AdamRule(1e-3, 0.9, 0.999, 1e-8, 0.01, True, False, True),
                     "SGD": SGDRule(0.1, 0.9, 0.0, 0.01, True, False, False)}
            for kind, rule in rules.items():
                sizes = (3, 70_001)
                lists = {name: [(rng.standard_normal(n) * 0.1).astype(np.float32) for n in sizes]
                         for name in _layout.LISTS[kind]}
                lists["WEIGHT_COPY"] = [None] * len(sizes)
                if kind == "ADAM":
                    lists["EXP_AVG_SQ"] = [np.abs(a) for a in lists["EXP_AVG_SQ"]]
                    lists["MAX_EXP_AVG_SQ"] = [np.abs(a) for a in lists["MAX_EXP_AVG_SQ"]]
                    lists["STEP"] = [np.array([4], np.int64) for _ in sizes]
                twin = {name: [None if a is None else a.copy() for a in arrays] for name, arrays in lists.items()}
                scale, found = np.array([256.0], np.float32), np.zeros(1, np.float32)
                _kernels.optimizer_step(kind, lists, rule, scale, found, runner)
                _reference.optimizer_step(kind, twin, rule, scale, found)
                ok = all(a is None or a.tobytes() == b.tobytes() for name in lists
                         for a, b in zip(lists[name], twin[name]))
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} fused {kind.lower()} step")
            from mixprec.amp.fp8 import scaling as fp8
            x = (rng.standard_normal((67, 96)) * np.exp2(rng.integers(-30, 14, (67, 96)))).astype(np.float32)
            x[3, 5] = np.nan
            calls = {"cast_to_fp8": lambda: fp8.cast_to_fp8(x, np.array([0.5], np.float32), "float8_e4m3fn"),
                     "quantize_rowwise": lambda: fp8.quantize_rowwise(x, "float8_e5m2"),
                     "quantize_mxfp8": lambda: fp8.quantize_mxfp8(x)}
            for name, call in calls.items():
                want = call()
                with _host_build.run_on_host(runner):
                    got = call()
                ok = all(a.tobytes() == b.tobytes() for a, b in zip(got, want))
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} fp8 {name}")
            return 1 if failures else 0
    except HostBuildUnavailable as exc:
        print(f"host_kernels: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
