#!/usr/bin/env python3
"""Compile every mixprec CUDA kernel with NVRTC, with no GPU and no CUDA toolkit.

CI runs this (see .ci/run) after `pip install nvidia-cuda-nvrtc-cu12`: each source
in kernels/ is compiled for the oldest target the NVRTC takes (sm_70 before
CUDA 13, which dropped it; sm_75 from 13 on), sm_80 and sm_90 with exactly the
options and C++ name expressions that mixprec.amp._kernels hands to CuPy on a
GPU, and every name expression must resolve to a kernel. Any error or warning
fails the run (exit status 1).

    python tools/compile_kernels.py                 # all sources, sm_70 (sm_75 on CUDA 13+) sm_80 sm_90
    python tools/compile_kernels.py --arch sm_86 --ptx-dir /tmp/ptx

NVRTC is loaded with ctypes from the nvidia-cuda-nvrtc-cu12 wheel, from
$NVRTC_LIBRARY, or from the system library path. The kernels include no CUDA
header (see kernels/amp_common.cuh), so NVRTC alone is enough.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import glob
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout: use its mixprec
    sys.path.insert(0, str(ROOT))

from mixprec.amp import _kernels  # noqa: E402



def default_archs(nvrtc_version: tuple[int, int]) -> tuple[str, ...]:
    """The targets compiled by default: the oldest this NVRTC takes (CUDA 13 dropped sm_70), sm_80, sm_90."""
    return ("sm_70" if nvrtc_version < (13, 0) else "sm_75", "sm_80", "sm_90")


# NVRTC 12.9 notes that sm_70 is deprecated: a fact about the target, not the code.
_TARGET_NOTICE = "are deprecated and may be removed in a future release"


class NvrtcError(RuntimeError):
    """NVRTC could not be loaded, or a compile failed (the log is in the message)."""


def find_nvrtc() -> str | None:
    """Path of libnvrtc: $NVRTC_LIBRARY, the pip wheel, or the system's; None if there is none."""
    env = os.environ.get("NVRTC_LIBRARY")
    if env:
        return env
    try:
        import nvidia  # namespace package of NVIDIA's pip wheels
        for base in nvidia.__path__:
            hits = sorted(p for p in glob.glob(os.path.join(base, "*", "lib", "libnvrtc.so*"))
                          if ".alt." not in p and "builtins" not in p)
            if hits:
                return hits[0]
    except ImportError:
        pass
    return ctypes.util.find_library("nvrtc")


class Nvrtc:
    """The few NVRTC entry points a compile check needs, through ctypes."""

    def __init__(self, path: str | None = None):
        path = path or find_nvrtc()
        if not path:
            raise NvrtcError("libnvrtc not found: pip install nvidia-cuda-nvrtc-cu12, or set NVRTC_LIBRARY")
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as exc:
            raise NvrtcError(f"cannot load {path}: {exc}") from None
        self.path = path
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return major.value, minor.value

    def _check(self, status: int, what: str, log: str = ""):
        if status != 0:
            msg = self.lib.nvrtcGetErrorString(status).decode()
            raise NvrtcError(f"{what} failed: {msg}" + (f"\n{log}" if log else ""))

    def compile(self, source: str, name: str, options, name_expressions=()):
        """Compile; returns (log, {name expression: lowered name}, ptx text or None, cubin bytes or None)."""
        prog = ctypes.c_void_p()
        self._check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
                    "nvrtcCreateProgram")
        try:
            for expr in name_expressions:
                self._check(self.lib.nvrtcAddNameExpression(prog, expr.encode()), f"nvrtcAddNameExpression({expr})")
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            status = self.lib.nvrtcCompileProgram(prog, len(options), opts)
            size = ctypes.c_size_t()
            self._check(self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
            buf = ctypes.create_string_buffer(size.value)
            self._check(self.lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            log = buf.value.decode(errors="replace").strip()
            self._check(status, f"compiling {name}", log)
            lowered = {}
            for expr in name_expressions:
                out = ctypes.c_char_p()
                self._check(self.lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(out)),
                            f"nvrtcGetLoweredName({expr})")
                lowered[expr] = out.value.decode()
            return log, lowered, self._get(prog, "PTX", text=True), self._get(prog, "CUBIN", text=False)
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _get(self, prog, kind, text):
        size = ctypes.c_size_t()
        if getattr(self.lib, f"nvrtcGet{kind}Size")(prog, ctypes.byref(size)) != 0 or size.value == 0:
            return None  # e.g. no CUBIN for a compute_XX (virtual) target
        buf = ctypes.create_string_buffer(size.value)
        if getattr(self.lib, f"nvrtcGet{kind}")(prog, buf) != 0:
            return None
        return buf.raw[:size.value].rstrip(b"\0").decode() if text else buf.raw[:size.value]


def compile_kernel(nvrtc: Nvrtc, filename: str, arch: str):
    """Compile one kernel source for one architecture exactly as CuPy will; raise NvrtcError on any problem."""
    options = tuple(_kernels.OPTIONS) + tuple(_kernels.CUPY_APPENDED_OPTIONS) + (f"--gpu-architecture={arch}",)
    exprs = _kernels.MODULES[filename]
    log, lowered, ptx, cubin = nvrtc.compile(_kernels.load_source(filename), filename, options, exprs)
    warnings = [line for line in log.splitlines() if "warning" in line.lower() and not _TARGET_NOTICE in line]
    if warnings:
        raise NvrtcError(f"{filename} ({arch}) compiled with warnings:\n{log}")
    missing = [e for e in exprs if not lowered.get(e)]
    if missing:
        raise NvrtcError(f"{filename} ({arch}): no kernel for {missing}")
    return lowered, ptx, cubin


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", action="append",
                    help="target, e.g. sm_80 (repeatable; default sm_70 or, with NVRTC 13+, sm_75; sm_80; sm_90)")
    ap.add_argument("--ptx-dir", help="also write each PTX here, to read what the compiler made")
    args = ap.parse_args(argv)
    try:
        nvrtc = Nvrtc()
        major, minor = nvrtc.version()
    except NvrtcError as exc:
        print(f"compile_kernels: {exc}", file=sys.stderr)
        return 1
    print(f"NVRTC {major}.{minor} ({nvrtc.path})")
    failures = 0
    for arch in args.arch or default_archs((major, minor)):
        for filename in _kernels.MODULES:
            try:
                lowered, ptx, cubin = compile_kernel(nvrtc, filename, arch)
            except NvrtcError as exc:
                failures += 1
                print(f"FAIL {arch} {filename}\n{exc}", file=sys.stderr)
                continue
            size = len(cubin) if cubin else len(ptx or "")
            print(f"ok   {arch} {filename}: {len(lowered)} kernel(s), {size} bytes")
            if args.ptx_dir and ptx:
                os.makedirs(args.ptx_dir, exist_ok=True)
                Path(args.ptx_dir, f"{Path(filename).stem}.{arch}.ptx").write_text(ptx)
    if failures:
        print(f"compile_kernels: {failures} compile(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
