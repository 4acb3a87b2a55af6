"""torch's own op database (OpInfo) run through mixprec: every entry mixprec implements, its first samples.

For each entry of torch's op_db that applies (a CPU dtype mixprec has) and that mixprec implements,
tools/opinfo_coverage.py converts each sample value for value and compares: structure, dtypes and
shapes always, forward values in float32 at torch.testing's tolerance, and the vector-Jacobian product
in float64. An entry passes every sample, or its failure is listed there: DEVIATIONS (deliberate,
reasoned differences) or KNOWN_FAILURES (defects, with their cause; an entry listed there that passes
fails this test, so the table only shrinks). The samples are capped here to fit CI's time; the tool
runs them all (``PYTHONPATH=. python tools/opinfo_coverage.py``).
"""
from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

_spec = importlib.util.spec_from_file_location(
    "opinfo_coverage", Path(__file__).resolve().parent.parent / "tools" / "opinfo_coverage.py")
oc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oc)

FORWARD_SAMPLES, GRAD_SAMPLES = 4, 3  # per entry: the first samples (torch seeded), in float32 and float64
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    OP_DB = oc.load_op_db()
ENTRIES = [op for op in OP_DB if oc.applies(op) and oc.mixprec_callable(op) is not None]


def _failures(report, check):
    return "\n".join(f"  sample {i} {s[:100]}: " + "; ".join(p) for i, s, p in report[check][:3])


@pytest.mark.filterwarnings("ignore")  # the samples exercise deprecated overloads, on both sides
@pytest.mark.parametrize("op", ENTRIES, ids=oc.entry_id)
def test_opinfo_samples_match_torch(op):
    key = oc.entry_id(op)
    listed = {c: oc.known(key, c) for c in ("forward", "grad")}
    if any(listed.values()):  # every sample until the first failure, so that a fix is seen
        report = oc.check_entry(op, torch, first_failure=True)
    else:
        report = oc.check_entry(op, torch, FORWARD_SAMPLES, GRAD_SAMPLES)
    unexpected = [c for c in ("forward", "grad") if report[c] and not listed[c]]
    assert not unexpected, f"{key}: " + "\n".join(f"{c}:\n{_failures(report, c)}" for c in unexpected)
    whole = key in oc.KNOWN_FAILURES  # listed for the entry: one of its checks failing is enough
    failed = bool(report["forward"] or report["grad"])
    fixed = [c for c in ("forward", "grad") if listed[c] and not report[c] and not (whole and failed)]
    assert not fixed, f"{key}: KNOWN_FAILURES lists it ({sorted(set(listed.values()) - {None})}), but every " \
                      f"sample of {fixed} passes: drop the line"
    if any(listed.values()):
        pytest.xfail("; ".join(sorted(set(listed.values()) - {None})))


def test_the_tables_name_op_db_entries():
    """A DEVIATIONS, SAMPLE_DEVIATIONS, KNOWN_FAILURES or ADAPTERS key that names no entry is stale."""
    ids = {oc.entry_id(op) for op in OP_DB} | {op.name for op in OP_DB}
    keys = [k if isinstance(k, str) else k[0] for table in (oc.DEVIATIONS, oc.KNOWN_FAILURES)
            for k in table] + list(oc.SAMPLE_DEVIATIONS) + list(oc.ADAPTERS)
    assert [k for k in keys if k not in ids] == []
    checks = [k[1] for table in (oc.DEVIATIONS, oc.KNOWN_FAILURES) for k in table if not isinstance(k, str)]
    assert set(checks) <= {"forward", "grad"}


def test_the_comparison_sees_a_wrong_value_a_wrong_dtype_and_a_wrong_shape():
    """The check is not vacuous: a mixprec result that differs from torch's is reported."""
    import mixprec as mp
    want = torch.tensor([1.0, 2.0])
    assert oc.compare(mp.tensor([1.0, 2.0]), want, torch) == []
    assert "values differ" in oc.compare(mp.tensor([1.0, 2.001]), want, torch)[0]
    assert "dtype float64" in oc.compare(mp.tensor([1.0, 2.0], dtype=mp.float64), want, torch)[0]
    assert "shape (1, 2)" in oc.compare(mp.tensor([[1.0, 2.0]]), want, torch)[0]
    assert "tuple of 2" in oc.compare(mp.tensor([1.0, 2.0]), (want, want), torch)[0]
