#!/usr/bin/env python3
"""Everything GPU-related in one command, written up as one markdown report.

    PYTHONPATH=. python tools/gpu_check.py                    # tests + parity + benchmarks -> docs/benchmarks-gpu.md
    PYTHONPATH=. python tools/gpu_check.py --quick            # smaller benchmark sizes
    PYTHONPATH=. python tools/gpu_check.py --skip-benchmarks --out /tmp/gpu.md
    PYTHONPATH=. python tools/gpu_check.py --dry-run          # what it would run; works without a GPU

Run it from a working tree on a machine with CuPy and a GPU; it needs no
network. It runs, each as its own subprocess with a time limit:

1. every test marked gpu (pytest -m gpu), apart from the kernel parity files;
2. the kernel parity suite (the CUDA kernels against their NumPy twins);
3. the benchmarks: benchmarks/unscale.py (unscale GB/s vs copy bandwidth and vs
   torch's _amp_foreach_non_finite_check_and_unscale_), benchmarks/amp_step.py
   (AMP vs float32 vs torch AMP), benchmarks/opt_levels.py (O0-O3),
   benchmarks/graphs.py (graphed vs eager step) and benchmarks/optimizers.py (fused vs
   per-tensor optimizer steps, launches per step, vs torch's fused Adam).

Then it writes one report: device, driver, CUDA, CuPy, NumPy and torch
versions, pass/fail counts with the failing tests, and each benchmark's
output. A step that fails or times out is reported and the others still run.
Exit status: 0 when every test passed, 1 when some failed, 2 when there is no
usable GPU (the report then says why), 0 for --dry-run.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks-gpu.md"
# the CUDA kernels against their NumPy twins
PARITY_PATTERNS = ("test_unscale_gpu.py", "test_optim_fused_gpu.py", "test_kernels*.py")


def parity_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for pattern in PARITY_PATTERNS for p in (ROOT / "tests").glob(pattern))


@dataclass
class Step:
    """One thing to run: a pytest session ("tests") or a benchmark script ("benchmark")."""
    name: str
    kind: str
    command: list
    timeout: float


@dataclass
class Result:
    step: Step
    status: str                     # "ok", "failed", "timeout", "error", "not run"
    seconds: float = 0.0
    output: str = ""
    counts: dict = field(default_factory=dict)   # tests: passed/failed/errors/skipped
    failures: list = field(default_factory=list)  # tests: (test id, first line of the message)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="run every GPU test and benchmark, write one markdown report")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help=f"report path (default {DEFAULT_OUT.relative_to(ROOT)})")
    ap.add_argument("--quick", action="store_true", help="smaller benchmark sizes (minutes, not tens of minutes)")
    ap.add_argument("--skip-tests", action="store_true", help="no gpu tests and no parity suite")
    ap.add_argument("--skip-benchmarks", action="store_true")
    ap.add_argument("--no-torch", action="store_true", help="benchmarks skip their torch comparisons")
    ap.add_argument("--test-timeout", type=float, default=1800.0, help="seconds allowed to each pytest run")
    ap.add_argument("--bench-timeout", type=float, default=900.0, help="seconds allowed to each benchmark")
    ap.add_argument("--dry-run", action="store_true", help="list the steps and write a report without running them")
    args = ap.parse_args(argv)
    if args.test_timeout <= 0 or args.bench_timeout <= 0:
        ap.error("timeouts must be positive")
    return args


def plan(args) -> list[Step]:
    """The steps this run would take, in order."""
    py = sys.executable
    steps = []
    if not args.skip_tests:
        parity = parity_files()
        ignore = [f"--ignore={f}" for f in parity]
        steps.append(Step("gpu-marked tests", "tests", [py, "-m", "pytest", "-m", "gpu", "-q", *ignore, "tests"],
                          args.test_timeout))
        steps.append(Step("kernel parity suite", "tests", [py, "-m", "pytest", "-q", *parity], args.test_timeout))
    if not args.skip_benchmarks:
        quick = args.quick
        no_torch = ["--no-torch"] if args.no_torch else []
        benches = [
            ("unscale", ["benchmarks/unscale.py", "--repeat", "5" if quick else "20", *no_torch]),
            ("AMP step", ["benchmarks/amp_step.py", *(["--width", "1024", "--steps", "5"] if quick else []),
                          *no_torch]),
            ("opt levels O0-O3", ["benchmarks/opt_levels.py", "--device", "cuda",
                                  *(["--width", "512", "--batch", "256", "--steps", "5"] if quick else [])]),
            ("graphed vs eager step", ["benchmarks/graphs.py", *(["--steps", "20"] if quick else [])]),
            ("fused optimizers", ["benchmarks/optimizers.py", "--device", "cuda",
                                  *(["--repeat", "2"] if quick else ["--number", "20"]), *no_torch]),
        ]
        steps += [Step(name, "benchmark", [py, *cmd], args.bench_timeout) for name, cmd in benches]
    return steps


def environment() -> dict:
    """Versions and device, each read defensively: a missing piece is reported, not fatal."""
    import numpy
    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "python": platform.python_version(), "numpy": numpy.__version__, "host": platform.node()}
    env["commit"] = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain"):
        env["commit"] += " (with uncommitted changes)"
    from mixprec import backend
    env["gpu_reason"] = backend.cuda_unavailable_reason()
    cp = backend.cupy_module()
    env["cupy"] = cp.__version__ if cp is not None else "not installed"
    if env["gpu_reason"] is None:
        import mixprec as mp
        rt = cp.cuda.runtime
        env["cuda_runtime"] = backend.cuda_version_text(rt.runtimeGetVersion())
        env["driver"] = backend.cuda_version_text(rt.driverGetVersion())
        env["devices"] = [f"cuda:{i}: {mp.cuda.get_device_name(i)} (compute capability "
                          f"{'.'.join(map(str, mp.cuda.get_device_capability(i)))}, "
                          f"{mp.cuda.get_device_properties(i).total_memory / 2 ** 30:.1f} GiB)"
                          for i in range(mp.cuda.device_count())]
        env["bf16"] = backend.cuda_bfloat16_unsupported_reason() or "supported"
    try:
        import torch
        env["torch"] = torch.__version__ + (" with CUDA " + str(torch.version.cuda) if torch.cuda.is_available()
                                            else " (no CUDA: torch comparisons skipped)")
    except ImportError:
        env["torch"] = "not installed (torch comparisons skipped)"
    return env


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parse_junit(path: Path) -> tuple[dict, list]:
    """(counts, failures) from a pytest JUnit XML file."""
    root = ET.parse(path).getroot()
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures = []
    for case in root.iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "errors"
                message = (child.get("message") or child.text or "").strip().splitlines()
                failures.append((test_id, message[0][:200] if message else ""))
            elif child.tag == "skipped":
                outcome = "skipped"
        counts[outcome] += 1
    return counts, failures


def run_step(step: Step) -> Result:
    """Run one step as a subprocess (PYTHONPATH = the working tree); never raises."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = list(step.command)
    junit = None
    if step.kind == "tests":
        junit = Path(tempfile.mkstemp(suffix=".xml")[1])
        command.append(f"--junitxml={junit}")
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=step.timeout)
        output, status = proc.stdout + proc.stderr, "ok" if proc.returncode == 0 else "failed"
        if step.kind == "tests" and proc.returncode == 5:
            status = "ok"  # pytest: nothing collected
    except subprocess.TimeoutExpired as exc:
        output = _text(exc.stdout) + _text(exc.stderr)
        status = "timeout"
    except OSError as exc:
        output, status = f"could not start: {exc}", "error"
    result = Result(step, status, time.perf_counter() - start, output)
    if junit is not None:
        try:
            if junit.stat().st_size:
                result.counts, result.failures = parse_junit(junit)
        except (OSError, ET.ParseError) as exc:
            result.output += f"\n(could not read the test results: {exc})"
        finally:
            junit.unlink(missing_ok=True)
    return result


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def render(env: dict, results: list[Result], dry_run: bool = False) -> str:
    """The markdown report."""
    lines = ["# GPU check", "",
             "Written by `tools/gpu_check.py` (run from a working tree: `PYTHONPATH=. python tools/gpu_check.py`). "
             "Every figure below is this run's; ratios compare runs in the same process.", "",
             "## Machine", "", "| | |", "|---|---|"]
    rows = [("date", env.get("date")), ("commit", env.get("commit")), ("host", env.get("host")),
            ("device(s)", "<br>".join(env.get("devices", [])) or None), ("NVIDIA driver (CUDA)", env.get("driver")),
            ("CUDA runtime (CuPy's)", env.get("cuda_runtime")), ("CuPy", env.get("cupy")), ("NumPy", env.get("numpy")),
            ("Python", env.get("python")), ("torch", env.get("torch")), ("bfloat16 on CUDA", env.get("bf16"))]
    lines += [f"| {k} | {v} |" for k, v in rows if v]
    lines.append("")
    if env.get("gpu_reason"):
        lines += [f"**No GPU was used: {env['gpu_reason']}.** Nothing below ran on a GPU.", ""]
    if dry_run:
        lines += ["**Dry run**: the steps were listed, not run.", ""]
    tests = [r for r in results if r.step.kind == "tests"]
    benches = [r for r in results if r.step.kind == "benchmark"]
    if tests:
        lines += ["## Tests", "", "| run | status | passed | failed | errors | skipped | seconds |",
                  "|---|---|--:|--:|--:|--:|--:|"]
        for r in tests:
            c = r.counts
            lines.append(f"| {r.step.name} | {r.status} | {c.get('passed', '-')} | {c.get('failed', '-')} | "
                         f"{c.get('errors', '-')} | {c.get('skipped', '-')} | {r.seconds:.0f} |")
        lines.append("")
        for r in tests:
            if r.failures:
                lines += [f"Failing in {r.step.name}:", ""]
                lines += [f"- `{test_id}`: {message}" for test_id, message in r.failures]
                lines.append("")
            elif r.status not in ("ok", "not run"):
                lines += [f"{r.step.name} ended with status {r.status}; its last output:", "", "```",
                          _tail(r.output), "```", ""]
    if benches:
        lines += ["## Benchmarks", "", "| benchmark | status | seconds | command |", "|---|---|--:|---|"]
        for r in benches:
            lines.append(f"| {r.step.name} | {r.status} | {r.seconds:.0f} | `{_shown(r.step.command)}` |")
        lines.append("")
        for r in benches:
            if r.status == "not run":
                continue
            lines += [f"### {r.step.name} ({r.status})", "", "```", _tail(r.output) or "(no output)", "```", ""]
    return "\n".join(lines)


def _shown(command) -> str:
    """A command as a reader would type it (python for the interpreter path)."""
    return " ".join(["python" if i == 0 else str(part) for i, part in enumerate(command)])


def _tail(text: str, lines: int = 60) -> str:
    kept = text.strip().splitlines()
    return "\n".join((["..."] if len(kept) > lines else []) + kept[-lines:])


def main(argv=None) -> int:
    args = parse_args(argv)
    env = environment()
    steps = plan(args)
    if args.dry_run or env["gpu_reason"] is not None:
        results = [Result(s, "not run") for s in steps]
        print("\n".join(f"would run: {s.name}: {_shown(s.command)}" for s in steps))
        if env["gpu_reason"] is not None:
            print(f"no GPU: {env['gpu_reason']}")
    else:
        results = []
        for step in steps:
            print(f"running {step.name}: {_shown(step.command)}", flush=True)
            results.append(run_step(step))
            print(f"  -> {results[-1].status} in {results[-1].seconds:.0f} s", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(env, results, dry_run=args.dry_run))
    print(f"report: {args.out}")
    if args.dry_run:
        return 0
    if env["gpu_reason"] is not None:
        return 2
    failed = any(r.status != "ok" or r.counts.get("failed") or r.counts.get("errors")
                 for r in results if r.step.kind == "tests")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
