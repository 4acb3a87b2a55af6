#!/usr/bin/env python3
"""Everything GPU-related, in chunks that each fit a short lease, written up as one markdown report.

    PYTHONPATH=. python tools/gpu_check.py                        # every chunk -> docs/benchmarks-gpu.md
    PYTHONPATH=. python tools/gpu_check.py --chunk smoke          # a few minutes: does the CUDA path work?
    PYTHONPATH=. python tools/gpu_check.py --chunk tests --shard 2/4
    PYTHONPATH=. python tools/gpu_check.py --chunk benchmarks --quick
    PYTHONPATH=. python tools/gpu_check.py --resume --budget 480  # what is left, in 8 minutes at most
    PYTHONPATH=. python tools/gpu_check.py --dry-run              # what it would run; works without a GPU

Run it from a working tree on a machine with CuPy and a GPU; it needs no
network. Three chunks, each a list of steps run as subprocesses with a time
limit:

1. smoke: tools/gpu_smoke.py (import, one matmul, an AMP step against the
   CPU), the kernel parity suite (each CUDA kernel against its NumPy twin),
   the main job, examples/train_digits.py --device cuda, for 2 epochs, and 40
   steps of FP8 training (examples/train_gpt.py --fp8 delayed);
2. tests: every test marked gpu apart from the parity files, split into
   --shard K/N (N shards of the collected test ids; 1/1 by default), with
   pytest-xdist workers and a per-test time limit where those plugins are
   installed;
3. benchmarks: unscale, AMP step, opt levels O0-O3, graphed vs eager step,
   fused optimizers.

Everything goes to the output folder (--out-dir, default .gpu-check/): each
step's output streams into its own .log file as it runs, a pytest step also
writes a JUnit file, and after every step state.json (the results so far) and
the report are written anew, so a call that is cut off still leaves what it
finished. Runs with the same output folder add up: --resume skips the steps
state.json already holds, and the report (report.md there, and --out, default
docs/benchmarks-gpu.md) covers them all. --budget SECONDS starts no step with
under a minute left and cuts each step's limit to what is left.

Exit status: 0 when every test ran passed, 1 when some failed or a step did not
finish, 2 when there is no usable GPU (the report then says why), 0 for --dry-run.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks-gpu.md"
DEFAULT_OUT_DIR = ROOT / ".gpu-check"
CHUNKS = ("smoke", "tests", "benchmarks")
# the CUDA kernels against their NumPy twins
PARITY_PATTERNS = ("test_unscale_gpu.py", "test_optim_fused_gpu.py", "test_kernels*.py")
MIN_STEP_SECONDS = 60.0  # under --budget, no step starts with less than this left
PER_TEST_SECONDS = 300   # pytest-timeout's limit for one test, where the plugin is installed


def parity_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for pattern in PARITY_PATTERNS for p in (ROOT / "tests").glob(pattern))


@dataclass
class Step:
    """One thing to run: a pytest session ("tests"), a check or benchmark script ("benchmark")."""
    name: str
    kind: str
    command: list
    timeout: float
    chunk: str = ""
    shard: tuple | None = None      # tests: (K, N), run the K-th of N parts of the test ids the command collects


@dataclass
class Result:
    step: Step
    status: str                     # "ok", "failed", "timeout", "error", "not run"
    seconds: float = 0.0
    output: str = ""                # the end of the step's output (the whole of it is in its log file)
    counts: dict = field(default_factory=dict)   # tests: passed/failed/errors/skipped
    failures: list = field(default_factory=list)  # tests: (test id, first line of the message)


def _shard(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)/(\d+)", text)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise argparse.ArgumentTypeError(f"--shard wants K/N with 1 <= K <= N (like 2/4), got {text!r}")
    return int(match[1]), int(match[2])


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="run the GPU checks, tests and benchmarks in chunks; one report")
    ap.add_argument("--chunk", choices=(*CHUNKS, "all"), default="all", help="which chunk to run (default all)")
    ap.add_argument("--shard", type=_shard, default=(1, 1), metavar="K/N",
                    help="the tests chunk runs the K-th of N equal parts of the gpu tests (default 1/1)")
    ap.add_argument("--workers", default="auto",
                    help="pytest-xdist workers for the tests ('auto', a number, or 0 for none; default auto, "
                         "used only where pytest-xdist is installed)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help=f"report path (default {DEFAULT_OUT.relative_to(ROOT)})")
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR,
                    help="logs, JUnit files, state.json and report.md (default .gpu-check/)")
    ap.add_argument("--resume", action="store_true", help="skip the steps the output folder's state.json holds")
    ap.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                    help="wall-clock seconds for this whole call: no step starts with under a minute left")
    ap.add_argument("--quick", action="store_true", help="smaller benchmark sizes (minutes, not tens of minutes)")
    ap.add_argument("--no-torch", action="store_true", help="benchmarks skip their torch comparisons")
    ap.add_argument("--test-timeout", type=float, default=1800.0, help="seconds allowed to each pytest run")
    ap.add_argument("--bench-timeout", type=float, default=900.0, help="seconds allowed to each benchmark")
    ap.add_argument("--dry-run", action="store_true", help="list the steps and write a report without running them")
    args = ap.parse_args(argv)
    if args.test_timeout <= 0 or args.bench_timeout <= 0 or (args.budget is not None and args.budget <= 0):
        ap.error("timeouts and the budget must be positive")
    if args.shard != (1, 1) and args.chunk not in ("tests", "all"):
        ap.error("--shard applies to the tests chunk")
    return args


def has_plugin(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def plan(args) -> list[Step]:
    """The steps this run would take, in order."""
    py = sys.executable
    chunks = CHUNKS if args.chunk == "all" else (args.chunk,)
    steps = []
    if "smoke" in chunks:
        main_job = ["examples/train_digits.py", "--device", "cuda", "--epochs", "2", "--no-fp32",
                    "--out", str(args.out_dir / "train_digits.png")]
        steps += [Step("smoke: import, matmul, AMP step", "benchmark", [py, "tools/gpu_smoke.py"], 300, "smoke"),
                  Step("kernel parity suite", "tests", [py, "-m", "pytest", "-q", *parity_files()],
                       args.test_timeout, "smoke"),
                  Step("main job (train_digits, 2 epochs)", "benchmark", [py, *main_job], 300, "smoke"),
                  Step("FP8 training (train_gpt --fp8 delayed, 40 steps)", "benchmark",
                       [py, "examples/train_gpt.py", "--device", "cuda", "--fp8", "delayed", "--steps", "40",
                        "--out", str(args.out_dir / "train_gpt_fp8.png")], 300, "smoke")]
    if "tests" in chunks:
        k, n = args.shard
        extra = []
        if args.workers not in ("0", 0) and has_plugin("xdist"):
            extra += ["-n", str(args.workers)]
        if has_plugin("pytest_timeout"):
            extra += [f"--timeout={PER_TEST_SECONDS}"]
        name = "gpu-marked tests" + (f" (shard {k}/{n})" if n > 1 else "")
        ignore = [f"--ignore={f}" for f in parity_files()]
        command = [py, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", *ignore, *extra, "tests"]
        steps.append(Step(name, "tests", command, args.test_timeout, "tests", (k, n) if n > 1 else None))
    if "benchmarks" in chunks:
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
        steps += [Step(name, "benchmark", [py, *cmd], args.bench_timeout, "benchmarks") for name, cmd in benches]
    return steps



def environment() -> dict:
    """Versions and device, each read defensively: a missing piece is reported, not fatal."""
    import numpy
    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "python": platform.python_version(), "numpy": numpy.__version__, "host": platform.node()}
    env["commit"] = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain", "--untracked-files=no"):
        env["commit"] += " (with uncommitted changes)"
    from mixprec import backend
    from mixprec.backend import availability
    from mixprec.backend.bfloat16 import cuda_bfloat16_unsupported_reason
    env["gpu_reason"] = availability.cuda_unavailable_reason()
    cp = backend.cupy_module()
    env["cupy"] = cp.__version__ if cp is not None else "not installed"
    if env["gpu_reason"] is None:
        import mixprec as mp
        rt = cp.cuda.runtime
        env["cuda_runtime"] = availability.cuda_version_text(rt.runtimeGetVersion())
        env["driver"] = availability.cuda_version_text(rt.driverGetVersion())
        env["devices"] = [f"cuda:{i}: {mp.cuda.get_device_name(i)} (compute capability "
                          f"{'.'.join(map(str, mp.cuda.get_device_capability(i)))}, "
                          f"{mp.cuda.get_device_properties(i).total_memory / 2 ** 30:.1f} GiB)"
                          for i in range(mp.cuda.device_count())]
        env["bf16"] = cuda_bfloat16_unsupported_reason() or "supported"
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


def _child_env() -> dict:
    """The environment of every step: the working tree first on PYTHONPATH, output unbuffered, no progress
    bars (they would fill the logs)."""
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                PYTHONUNBUFFERED="1", TQDM_DISABLE="1")


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


def slug(name: str) -> str:
    """A file name for a step: letters, digits and dashes."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def select_shard(command: list, shard: tuple, timeout: float) -> tuple[list, str]:
    """The pytest command narrowed to shard (K, N): the test ids the command collects, sorted, every N-th from
    the K-th, so N runs with K = 1..N run each test once. Returns (command, what the collection printed)."""
    k, n = shard
    collect = [c for i, c in enumerate(command) if c not in ("-n",) and not (i and command[i - 1] == "-n")
               and not str(c).startswith("--timeout=")]
    proc = subprocess.run([*collect, "--collect-only"], cwd=ROOT, env=_child_env(), capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode not in (0, 5):
        raise RuntimeError(f"collecting the tests failed (exit {proc.returncode}):\n{_tail(proc.stdout + proc.stderr)}")
    ids = sorted(line.strip() for line in proc.stdout.splitlines() if "::" in line)
    narrowed = [c for c in command if c != "tests"] + ids[k - 1::n]
    return narrowed, f"shard {k}/{n}: {len(ids[k - 1::n])} of {len(ids)} tests\n"


def run_step(step: Step, out_dir: Path | None = None) -> Result:
    """Run one step as a subprocess (PYTHONPATH = the working tree), its output streaming into
    out_dir/<step>.log (a temporary folder when out_dir is None); never raises."""
    if out_dir is None:
        out_dir = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    log, junit = out_dir / f"{slug(step.name)}.log", None
    command, preamble = list(step.command), ""
    start = time.perf_counter()
    with open(log, "w") as sink:
        try:
            if step.shard is not None:
                command, preamble = select_shard(command, step.shard, step.timeout)
            if step.kind == "tests":
                junit = out_dir / f"{slug(step.name)}.xml"
                junit.unlink(missing_ok=True)
                command.append(f"--junitxml={junit}")
            sink.write(preamble)
            sink.flush()
            left = step.timeout - (time.perf_counter() - start)
            proc = subprocess.run(command, cwd=ROOT, env=_child_env(), stdout=sink, stderr=subprocess.STDOUT,
                                  timeout=max(left, 1.0))
            status = "ok" if proc.returncode == 0 else "failed"
            if step.kind == "tests" and proc.returncode == 5:
                status = "ok"  # pytest: nothing collected
        except subprocess.TimeoutExpired:
            status = "timeout"
        except (OSError, RuntimeError) as exc:
            sink.write(f"could not start: {exc}\n")
            status = "error"
    result = Result(step, status, time.perf_counter() - start, log.read_text(errors="replace"))
    if junit is not None and junit.exists():
        try:
            if junit.stat().st_size:
                result.counts, result.failures = parse_junit(junit)
        except (OSError, ET.ParseError) as exc:
            result.output += f"\n(could not read the test results: {exc})"
    return result


def load_state(out_dir: Path) -> tuple[dict, list]:
    """(environment, results) saved by earlier runs with this output folder; nothing when there were none."""
    path = out_dir / "state.json"
    if not path.exists():
        return {}, []
    data = json.loads(path.read_text())
    results = [Result(Step(**r["step"]), r["status"], r["seconds"], r["output"], r["counts"],
                      [tuple(f) for f in r["failures"]]) for r in data["results"]]
    for r in results:
        r.step.shard = tuple(r.step.shard) if r.step.shard else None
    return data["env"], results


def save_state(out_dir: Path, env: dict, results: list) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = [dict(asdict(r), output=_tail(r.output)) for r in results]
    tmp = out_dir / "state.json.tmp"
    tmp.write_text(json.dumps({"env": env, "results": kept}, indent=1))
    tmp.replace(out_dir / "state.json")


def render(env: dict, results: list[Result], dry_run: bool = False) -> str:
    """The markdown report."""
    lines = ["# GPU check", "",
             "Written by `tools/gpu_check.py` from a working tree; every figure below is from the run(s) listed, "
             "and ratios compare runs in the same process.", "",
             "## Machine", "", "| | |", "|---|---|"]
    rows = [("date", env.get("date")), ("commit", env.get("commit")), ("host", env.get("host")),
            ("device(s)", "<br>".join(env.get("devices", [])) or None), ("NVIDIA driver (CUDA)", env.get("driver")),
            ("CUDA runtime (CuPy's)", env.get("cuda_runtime")), ("CuPy", env.get("cupy")), ("NumPy", env.get("numpy")),
            ("Python", env.get("python")), ("torch", env.get("torch")), ("bfloat16 on CUDA", env.get("bf16"))]
    lines += [f"| {k} | {v} |" for k, v in rows if v]
    lines.append("")
    if env.get("runs"):
        lines += ["Commands run (each `PYTHONPATH=. python tools/gpu_check.py ...`, same output folder):", ""]
        lines += [f"- {run}" for run in env["runs"]]
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
            if r.status not in ("ok", "not run") and not (r.status == "failed" and r.failures):
                lines += [f"{r.step.name} ended with status {r.status}; its last output:", "", "```",
                          _tail(r.output), "```", ""]
    if benches:
        lines += ["## Checks and benchmarks", "", "| step | status | seconds | command |", "|---|---|--:|---|"]
        for r in benches:
            lines.append(f"| {r.step.name} | {r.status} | {r.seconds:.0f} | `{_shown(r.step.command)}` |")
        lines.append("")
        for r in benches:
            if r.status == "not run":
                continue
            lines += [f"### {r.step.name} ({r.status})", "", "```", _tail(r.output) or "(no output)", "```", ""]
    return "\n".join(lines)


def _shown(command) -> str:
    """A command as a reader would type it (python for the interpreter path, paths relative to the tree)."""
    parts = ["python" if i == 0 else str(part) for i, part in enumerate(command)]
    return " ".join(p.replace(str(ROOT) + os.sep, "") for p in parts)


def _tail(text: str, lines: int = 60) -> str:
    """The last lines of an output, each as a terminal shows it (a progress bar's carriage returns redraw it)."""
    kept = [line.rsplit("\r", 1)[-1] for line in text.strip().split("\n")]
    return "\n".join((["..."] if len(kept) > lines else []) + kept[-lines:])


def merge(earlier: list, result: Result) -> list:
    """earlier's results with result in place of any with the same step name, in chunk order."""
    kept = [r for r in earlier if r.step.name != result.step.name] + [result]
    order = {c: i for i, c in enumerate(CHUNKS)}
    return sorted(kept, key=lambda r: order.get(r.step.chunk, len(CHUNKS)))


def still_to_run(steps: list, results: list) -> list:
    """The steps of ``steps`` that ``results`` do not cover, for --resume. Tests run earlier in shards of N
    cover the unsharded tests step once every shard is there; while some are missing, the missing shards
    (of that N) take the unsharded step's place."""
    done = {r.step.name for r in results}
    shards = {r.step.shard for r in results if r.step.chunk == "tests" and r.step.shard}
    left = []
    for step in steps:
        if step.name in done:
            continue
        if step.chunk == "tests" and step.shard is None and shards:
            n = max(n for _, n in shards)
            missing = [k for k in range(1, n + 1) if (k, n) not in shards]
            left += [Step(f"{step.name} (shard {k}/{n})", "tests", step.command, step.timeout, "tests", (k, n))
                     for k in missing]
            continue
        left.append(step)
    return left


def write_report(args, env: dict, results: list, dry_run: bool = False) -> None:
    text = render(env, results, dry_run=dry_run)
    for path in (args.out, args.out_dir / "report.md"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    env = environment()
    steps = plan(args)
    if args.dry_run or env["gpu_reason"] is not None:
        print("\n".join(f"would run: {s.name}: {_shown(s.command)}" for s in steps))
        if env["gpu_reason"] is not None:
            print(f"no GPU: {env['gpu_reason']}")
        text = render(env, [Result(s, "not run") for s in steps], dry_run=args.dry_run)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"report: {args.out}")
        return 0 if args.dry_run else 2
    earlier_env, results = load_state(args.out_dir)
    command = " ".join(argv if argv is not None else sys.argv[1:])
    env["runs"] = earlier_env.get("runs", []) + [f"{env['date']}: `{command}`"]
    if args.resume:
        left = still_to_run(steps, results)
        for step in steps:
            if step.name in {r.step.name for r in results}:
                print(f"done before: {step.name}", flush=True)
        steps = left
    unfinished = []
    for step in steps:
        if args.budget is not None:
            left = args.budget - (time.perf_counter() - started)
            if left < MIN_STEP_SECONDS:
                print(f"not started (budget spent): {step.name}", flush=True)
                unfinished.append(step.name)
                continue
            step.timeout = min(step.timeout, left - 15)
        print(f"running {step.name}: {_shown(step.command)}", flush=True)
        result = run_step(step, args.out_dir)
        counts = ", ".join(f"{v} {k}" for k, v in result.counts.items() if v)
        print(f"  -> {result.status} in {result.seconds:.0f} s" + (f" ({counts})" if counts else ""), flush=True)
        results = merge(results, result)
        save_state(args.out_dir, env, results)
        write_report(args, env, results)
    save_state(args.out_dir, env, results)
    write_report(args, env, results)
    print(f"report: {args.out} (and {args.out_dir / 'report.md'})")
    if unfinished:
        print(f"left for a later call (--resume): {', '.join(unfinished)}")
    failed = unfinished or any(r.status != "ok" or r.counts.get("failed") or r.counts.get("errors") for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
