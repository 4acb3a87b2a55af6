"""tools/gpu_check.py on the CPU: arguments, the plan, running steps, JUnit parsing, the report, a dry run."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from conftest import CUDA_OK

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
gpu_check = sys.modules.setdefault("gpu_check", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(gpu_check)


def test_arguments_and_defaults():
    args = gpu_check.parse_args([])
    assert args.out == ROOT / "docs" / "benchmarks-gpu.md" and not args.quick and not args.dry_run
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--bench-timeout", "0"])
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--frobnicate"])


def test_the_plan_partitions_tests_and_lists_every_benchmark():
    steps = gpu_check.plan(gpu_check.parse_args([]))
    names = [s.name for s in steps]
    assert names == ["gpu-marked tests", "kernel parity suite", "unscale", "AMP step", "opt levels O0-O3",
                     "graphed vs eager step", "fused optimizers"]
    gpu_run, parity = steps[0].command, steps[1].command
    assert "-m" in gpu_run and "gpu" in gpu_run
    parity_files = gpu_check.parity_files()
    assert "tests/test_unscale_gpu.py" in parity_files
    for f in parity_files:  # each test runs once: parity files only in the parity run
        assert f"--ignore={f}" in gpu_run and f in parity
    for s in steps[2:]:
        assert (ROOT / s.command[1]).exists(), s.command  # every benchmark script is there
    quick = gpu_check.plan(gpu_check.parse_args(["--quick", "--skip-tests", "--no-torch"]))
    assert [s.kind for s in quick] == ["benchmark"] * 5
    assert "--no-torch" in quick[0].command and "--width" in quick[1].command
    assert gpu_check.plan(gpu_check.parse_args(["--skip-tests", "--skip-benchmarks"])) == []


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
  <testcase classname="tests.test_a" name="test_ok" time="0.1"/>
  <testcase classname="tests.test_a" name="test_bad" time="0.1">
    <failure message="assert 1 == 2&#10;more">tb</failure></testcase>
  <testcase classname="tests.test_b" name="test_err" time="0.1"><error message="fixture broke">tb</error></testcase>
  <testcase classname="tests.test_b" name="test_skip" time="0.0"><skipped message="no gpu"/></testcase>
</testsuite></testsuites>"""


def test_junit_counts_and_failures(tmp_path):
    path = tmp_path / "r.xml"
    path.write_text(JUNIT)
    counts, failures = gpu_check.parse_junit(path)
    assert counts == {"passed": 1, "failed": 1, "errors": 1, "skipped": 1}
    assert failures == [("tests.test_a::test_bad", "assert 1 == 2"), ("tests.test_b::test_err", "fixture broke")]


def test_steps_that_fail_or_hang_are_reported_not_fatal(tmp_path):
    py = sys.executable
    failing = gpu_check.run_step(gpu_check.Step("bad", "benchmark", [py, "-c", "import sys; sys.exit('boom')"], 60))
    assert failing.status == "failed" and "boom" in failing.output
    hanging = gpu_check.run_step(gpu_check.Step("slow", "benchmark", [py, "-c", "import time; time.sleep(30)"], 0.5))
    assert hanging.status == "timeout" and hanging.seconds < 10
    missing = gpu_check.run_step(gpu_check.Step("gone", "benchmark", [str(tmp_path / "no-such-program")], 5))
    assert missing.status == "error" and "could not start" in missing.output


def test_a_pytest_step_counts_its_tests(tmp_path):
    (tmp_path / "test_tiny.py").write_text("def test_pass():\n    pass\n\ndef test_fail():\n    assert 1 == 2\n")
    step = gpu_check.Step("tiny", "tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                            str(tmp_path / "test_tiny.py")], 120)
    result = gpu_check.run_step(step)
    assert result.status == "failed" and result.counts["passed"] == 1 and result.counts["failed"] == 1
    assert result.failures[0][0].endswith("test_fail")


def _env(**extra):
    env = {"date": "2026-01-01 00:00 UTC", "commit": "abc1234", "host": "box", "python": "3.11.7",
           "numpy": "2.4.6", "cupy": "14.2.0", "cuda_runtime": "12.9", "driver": "13.0",
           "devices": ["cuda:0: NVIDIA H100 (compute capability 9.0, 79.1 GiB)"], "bf16": "supported",
           "torch": "2.13.0 with CUDA 12.9", "gpu_reason": None}
    env.update(extra)
    return env


def test_report_from_results():
    S, R = gpu_check.Step, gpu_check.Result
    results = [
        R(S("gpu-marked tests", "tests", ["py", "-m", "pytest"], 1), "failed", 61.2, "",
          {"passed": 790, "failed": 2, "errors": 0, "skipped": 5}, [("tests/x.py::test_y", "assert 0")]),
        R(S("kernel parity suite", "tests", ["py", "-m", "pytest"], 1), "ok", 9.0, "",
          {"passed": 40, "failed": 0, "errors": 0, "skipped": 0}),
        R(S("unscale", "benchmark", ["py", "benchmarks/unscale.py"], 1), "ok", 30.0, "kernel 2900 GB/s, 91% of copy"),
        R(S("graphed vs eager step", "benchmark", ["py", "benchmarks/graphs.py"], 1), "timeout", 900.0, ""),
    ]
    text = gpu_check.render(_env(), results)
    for expected in ("NVIDIA H100", "| CuPy | 14.2.0 |", "| NVIDIA driver (CUDA) | 13.0 |", "| 790 | 2 | 0 | 5 |",
                     "`tests/x.py::test_y`: assert 0", "kernel 2900 GB/s, 91% of copy",
                     "| graphed vs eager step | timeout |", "`python benchmarks/unscale.py`"):
        assert expected in text, expected
    assert "No GPU was used" not in text


def test_dry_run_without_a_gpu_writes_a_report_saying_so(tmp_path, capsys):
    out = tmp_path / "report.md"
    assert gpu_check.main(["--dry-run", "--out", str(out)]) == 0
    text = out.read_text()
    assert "Dry run" in text and "| unscale | not run |" in text
    if not CUDA_OK:
        assert "No GPU was used" in text and "no GPU:" in capsys.readouterr().out


@pytest.mark.skipif(CUDA_OK, reason="checks the behaviour without a usable GPU")
def test_without_a_gpu_nothing_runs_and_the_exit_status_says_so(tmp_path):
    out = tmp_path / "report.md"
    assert gpu_check.main(["--out", str(out)]) == 2
    assert "Nothing below ran on a GPU" in out.read_text()
