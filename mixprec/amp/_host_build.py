"""mixprec's CUDA kernels built for the host: their own CUDA C++ source, compiled by a C++ compiler.

The source is exactly the text CuPy compiles (mixprec.amp._kernels.load_source,
generated layout header included), compiled by a C++ compiler ($CXX, g++,
clang++ or c++) with ``-DMIXPREC_HOST_EMULATION`` and ``kernels/host_emulation.cuh``
(which plays the CUDA built-ins the kernels use: thread and block indices, the
PTX arithmetic, the bit casts) into a shared library with one extern "C"
launcher per kernel name expression, loaded with ctypes. A launcher takes
cuLaunchKernel's parameter convention (one pointer per argument, to its value)
and runs every block and thread in turn.

Two users: tools/host_kernels.py (the kernels against their NumPy twins, bit
for bit) and the strict CuPy stand-in's RawModule (mixprec.strict_cupy), which
runs the GPU path on the CPU. Inside :func:`run_on_host` the CPU paths that would
run a kernel's NumPy twin run such a build instead. What this proves and what it cannot:
docs/grad-scaler.md ("What the host build proves").
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent
# The kernels' CUDA sources: a source checkout keeps them in the top-level kernels/, an install in mixprec/kernels/.
SOURCE_DIR = next((d for d in (_PKG / "kernels", _PKG.parent / "kernels") if (d / "amp_common.cuh").exists()),
                  _PKG.parent / "kernels")

# IEEE arithmetic as the device does it: no contraction into fused multiply-adds, no fast-math (which would
# also flush subnormals), no aliasing assumptions about the kernels' reinterpret_casts.
FLAGS = ("-std=c++14", "-O2", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-fno-strict-aliasing",
         "-Wall", "-Wno-unknown-pragmas", "-Werror", "-DMIXPREC_HOST_EMULATION")


class HostBuildUnavailable(RuntimeError):
    """No C++ compiler here, or one without _Float16 (GCC >= 12, Clang >= 15 have it)."""


def find_compiler() -> str:
    for name in (os.environ.get("CXX"), "g++", "clang++", "c++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise HostBuildUnavailable("no C++ compiler found (set CXX, or install g++)")


def symbol(expression: str) -> str:
    """The extern "C" launcher of one kernel name expression."""
    return "mixprec_launch_" + hashlib.sha1(expression.encode()).hexdigest()[:12]


def translation_unit(code: str, name_expressions) -> str:
    """The kernel source as CuPy gets it, plus one extern "C" launcher per name expression."""
    launchers = [f'extern "C" void {symbol(e)}(unsigned int grid, unsigned int block, void** args) '
                 f'{{ host_launch(grid, block, &{e}, args); }}' for e in name_expressions]
    return "\n".join([code, "// host launchers (mixprec.amp._host_build)", *launchers, ""])


def _emulation_header() -> Path:
    return SOURCE_DIR / "host_emulation.cuh"


def build(units: dict, out_dir) -> Path:
    """Compile ``units`` (name -> C++ text from translation_unit) into one shared library in out_dir."""
    cxx = find_compiler()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    probe = out_dir / "float16_probe.cpp"
    probe.write_text("int main() { _Float16 h = (_Float16)1.5f; return (float)h == 1.5f ? 0 : 1; }\n")
    if subprocess.run([cxx, "-std=c++14", "-fsyntax-only", str(probe)], capture_output=True).returncode != 0:
        raise HostBuildUnavailable(f"{cxx} has no _Float16 (needed for the float16 conversions; GCC >= 12 or "
                                   "Clang >= 15 have it)")
    sources = []
    for name, text in units.items():
        path = out_dir / (Path(name).stem + ".cpp")
        path.write_text(text)
        sources.append(str(path))
    library = out_dir / "host_kernels.so"
    command = [cxx, *FLAGS, "-include", str(_emulation_header()), "-shared", "-o", str(library), *sources]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"building the kernels for the host failed:\n{' '.join(command)}\n{done.stderr}")
    return library


# ---------------------------------------------------------------- the host build in place of the NumPy twins
_host_runner = None


def host_runner():
    """The runner NumPy arrays go through instead of the NumPy twins (see run_on_host), or None: the twins."""
    return _host_runner


@contextlib.contextmanager
def run_on_host(runner):
    """Within the block, run the kernels' own code on NumPy arrays through runner (tools/host_kernels.HostRunner,
    the kernels built for the host) wherever mixprec would run a kernel's NumPy twin: unscale, the scale
    update and the fused optimizers. Tests use it to run whole AMP steps, and to replay captured ones, on the
    CPU."""
    global _host_runner
    previous, _host_runner = _host_runner, runner
    try:
        yield runner
    finally:
        _host_runner = previous
