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
    assert args.chunk == "all" and args.shard == (1, 1) and args.out_dir == ROOT / ".gpu-check"
    assert gpu_check.parse_args(["--chunk", "tests", "--shard", "3/4"]).shard == (3, 4)
    for bad in (["--bench-timeout", "0"], ["--budget", "-1"], ["--frobnicate"], ["--shard", "5/4"],
                ["--shard", "0/2"], ["--shard", "two"], ["--chunk", "smoke", "--shard", "1/2"]):
        with pytest.raises(SystemExit):
            gpu_check.parse_args(bad)


def test_the_plan_has_three_chunks_and_runs_each_test_once():
    steps = gpu_check.plan(gpu_check.parse_args([]))
    assert [s.chunk for s in steps] == ["smoke"] * 4 + ["tests"] + ["benchmarks"] * 5
    assert [s.name for s in steps[5:]] == ["unscale", "AMP step", "opt levels O0-O3", "graphed vs eager step",
                                           "fused optimizers"]
    smoke, parity, main_job, fp8_job, gpu_run = (s.command for s in steps[:5])
    assert smoke[1] == "tools/gpu_smoke.py" and "--device" in main_job and "cuda" in main_job
    assert fp8_job[1] == "examples/train_gpt.py" and "--fp8" in fp8_job and "cuda" in fp8_job
    assert "-m" in gpu_run and "gpu" in gpu_run
    parity_files = gpu_check.parity_files()
    assert "tests/test_unscale_gpu.py" in parity_files
    for f in parity_files:  # each test runs once: parity files only in the parity run
        assert f"--ignore={f}" in gpu_run and f in parity
    for s in steps:
        script = next(c for c in s.command[1:] if c.endswith(".py") or c == "pytest")
        assert script == "pytest" or (ROOT / script).exists(), s.command
    quick = gpu_check.plan(gpu_check.parse_args(["--quick", "--chunk", "benchmarks", "--no-torch"]))
    assert [s.kind for s in quick] == ["benchmark"] * 5
    assert "--no-torch" in quick[0].command and "--width" in quick[1].command
    shard = gpu_check.plan(gpu_check.parse_args(["--chunk", "tests", "--shard", "2/3"]))
    assert [(s.name, s.shard) for s in shard] == [("gpu-marked tests (shard 2/3)", (2, 3))]


def test_shards_split_the_collected_tests_without_overlap(tmp_path, monkeypatch):
    folder = ROOT / "tests"
    names = [f"test_{i}" for i in range(7)]
    (tmp_path / "test_many.py").write_text("".join(f"def {n}():\n    pass\n" for n in names))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "4", "--timeout=5",
               str(tmp_path / "test_many.py")]
    parts = []
    for k in (1, 2, 3):
        narrowed, said = gpu_check.select_shard(command, (k, 3), 120)
        assert said.startswith(f"shard {k}/3:") and narrowed[:len(command)] == command
        parts.append([c.split("::")[1] for c in narrowed[len(command):]])
    assert sorted(sum(parts, [])) == sorted(names) and [len(p) for p in parts] == [3, 2, 2]
    assert folder.exists()


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
    failing = gpu_check.run_step(gpu_check.Step("bad", "benchmark", [py, "-c", "import sys; sys.exit('boom')"], 60),
                                 tmp_path)
    assert failing.status == "failed" and "boom" in failing.output
    hanging = gpu_check.run_step(gpu_check.Step("slow", "benchmark", [
        py, "-c", "import time; print('started', flush=True); time.sleep(30)"], 2), tmp_path)
    assert hanging.status == "timeout" and hanging.seconds < 10
    assert "started" in (tmp_path / "slow.log").read_text()  # what it printed before it was stopped is kept
    missing = gpu_check.run_step(gpu_check.Step("gone", "benchmark", [str(tmp_path / "no-such-program")], 5))
    assert missing.status == "error" and "could not start" in missing.output


def test_a_pytest_step_counts_its_tests(tmp_path):
    (tmp_path / "test_tiny.py").write_text("def test_pass():\n    pass\n\ndef test_fail():\n    assert 1 == 2\n")
    step = gpu_check.Step("tiny", "tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                            str(tmp_path / "test_tiny.py")], 120)
    result = gpu_check.run_step(step, tmp_path / "out")
    assert result.status == "failed" and result.counts["passed"] == 1 and result.counts["failed"] == 1
    assert result.failures[0][0].endswith("test_fail")
    log = (tmp_path / "out" / "tiny.log").read_text()
    assert (tmp_path / "out" / "tiny.xml").exists() and "1 failed, 1 passed" in log


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
    assert "Dry run" in text and "| unscale | not run |" in text and "| gpu-marked tests | not run |" in text
    if not CUDA_OK:
        assert "No GPU was used" in text and "no GPU:" in capsys.readouterr().out


@pytest.mark.skipif(CUDA_OK, reason="checks the behaviour without a usable GPU")
def test_without_a_gpu_nothing_runs_and_the_exit_status_says_so(tmp_path):
    out = tmp_path / "report.md"
    assert gpu_check.main(["--out", str(out)]) == 2
    assert "Nothing below ran on a GPU" in out.read_text()


def test_runs_add_up_in_the_state_file_and_resume_skips_what_is_done(tmp_path, monkeypatch):
    """Three calls with one output folder: a step each, the report after each covers all, --resume skips."""
    ran = []

    def fake_run_step(step, out_dir):
        ran.append(step.name)
        return gpu_check.Result(step, "ok", 1.0, f"{step.name} output",
                                {"passed": 3, "failed": 0, "errors": 0, "skipped": 0} if step.kind == "tests" else {})
    monkeypatch.setattr(gpu_check, "environment", lambda: _env())
    monkeypatch.setattr(gpu_check, "run_step", fake_run_step)
    out, folder = tmp_path / "report.md", tmp_path / "state"
    common = ["--out", str(out), "--out-dir", str(folder)]
    assert gpu_check.main(["--chunk", "tests", "--shard", "1/2", *common]) == 0
    assert gpu_check.main(["--chunk", "tests", "--shard", "2/2", *common]) == 0
    assert ran == ["gpu-marked tests (shard 1/2)", "gpu-marked tests (shard 2/2)"]
    text = out.read_text()
    assert "| gpu-marked tests (shard 1/2) | ok | 3 |" in text and "| gpu-marked tests (shard 2/2) | ok | 3 |" in text
    assert text == (folder / "report.md").read_text() and text.count("--chunk tests --shard") == 2
    ran.clear()
    assert gpu_check.main(["--chunk", "all", "--resume", "--quick", *common]) == 0
    assert not any(name.startswith("gpu-marked tests") for name in ran) and len(ran) == 9
    env, results = gpu_check.load_state(folder)
    assert len(results) == 11 and [r.step.chunk for r in results][:4] == ["smoke"] * 4


def test_resuming_runs_the_missing_shards():
    S, R = gpu_check.Step, gpu_check.Result
    steps = gpu_check.plan(gpu_check.parse_args(["--chunk", "tests"]))
    earlier = [R(S("gpu-marked tests (shard 2/4)", "tests", ["py"], 1, "tests", (2, 4)), "ok")]
    left = gpu_check.still_to_run(steps, earlier)
    assert [(s.name, s.shard) for s in left] == [(f"gpu-marked tests (shard {k}/4)", (k, 4)) for k in (1, 3, 4)]
    assert left[0].command == steps[0].command
    every = [R(S(f"t{k}", "tests", ["py"], 1, "tests", (k, 2)), "ok") for k in (1, 2)]
    assert gpu_check.still_to_run(steps, every) == []


def test_a_budget_leaves_steps_for_a_later_call(tmp_path, monkeypatch):
    clock = iter(range(0, 10_000, 100))  # each reading of the clock is 100 s later
    monkeypatch.setattr(gpu_check.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(gpu_check, "environment", lambda: _env())
    monkeypatch.setattr(gpu_check, "run_step", lambda step, out_dir: gpu_check.Result(step, "ok", 1.0, ""))
    folder = tmp_path / "state"
    status = gpu_check.main(["--chunk", "benchmarks", "--budget", "250", "--out", str(tmp_path / "r.md"),
                             "--out-dir", str(folder)])
    assert status == 1  # not everything ran
    env, results = gpu_check.load_state(folder)
    assert [r.step.name for r in results] == ["unscale"]


def test_the_report_shows_a_progress_bar_as_a_terminal_would():
    assert gpu_check._tail("step 1/3\rstep 2/3\rstep 3/3\ndone") == "step 3/3\ndone"
    assert gpu_check._tail("\n".join(str(i) for i in range(100)), lines=2) == "...\n98\n99"
