"""The cast policy of every op against the reference tables, and the resolver against the rules.

The tables are parsed from the reference kept in the repository (tests/autocast-op-reference.md,
torch.amp's autocast op lists; tools/op_coverage.py reads it, $MIXPREC_AUTOCAST_REFERENCE
overrides where). Every mixprec op that an entry names — by its own name, an alias, or
tools/op_coverage.NAME_MAP — must carry exactly that policy on that device type, and every
other op none; the coverage figure recorded in docs/autocast.md may only grow.
``mp.amp.resolve_dtypes`` — the function the dispatch hook itself
uses — is checked exhaustively against the eligibility and policy rules for every op's
policy on both device types, so the CUDA table is fully tested without a GPU.
"""
from __future__ import annotations

import importlib.util
import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mixprec as mp
from mixprec.__main__ import REGENERATE, main as cli_main, policy_table
from mixprec.amp import CastPolicy
from mixprec.ops import policies, registry

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("op_coverage", ROOT / "tools" / "op_coverage.py")
op_coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(op_coverage)

LP, FP32, PROMOTE, BANNED = (CastPolicy.LOWER_PRECISION_FP, CastPolicy.FP32, CastPolicy.PROMOTE,
                             CastPolicy.BANNED)
REFERENCE = op_coverage.load_reference()

# mixprec's own ops (tests elsewhere may register ops of their own while this module is collected)
OPS = sorted({op for op in registry._REGISTRY.values() if op.forward.__module__.startswith("mixprec.")},
             key=lambda op: op.name)


def _names(op):
    return [n for n, o in registry._REGISTRY.items() if o is op]


def _reference():
    if REFERENCE is None:
        pytest.fail(f"the autocast reference is not at {op_coverage.reference_path()} (it is "
                    f"tests/autocast-op-reference.md unless ${op_coverage.REFERENCE_ENV} names another file)")
    return REFERENCE


# ----------------------------------------------------------------- the tables, from the reference
@pytest.mark.parametrize("device_type", ["cuda", "cpu"])
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_registered_policy_equals_reference(op, device_type):
    expected = op_coverage.expected_policies(_reference())[device_type].get(op)
    expected = CastPolicy(expected) if expected is not None else None
    assert op.policy[device_type] == expected, (
        f"{op.name} has policy {op.policy[device_type]} on {device_type}, the reference gives {expected}"
        + (" (no entry names it: if torch lists it under another name, add that name to NAME_MAP in "
           "tools/op_coverage.py)" if expected is None else ""))
    assert mp.amp.op_policy(op.name, device_type) == expected


def test_name_map_entries_are_reference_names_of_registered_ops():
    reference = _reference()
    for name, targets in op_coverage.NAME_MAP.items():
        assert any(name in table for table in reference.values()), f"NAME_MAP: {name!r} is not a reference entry"
        assert name not in registry._REGISTRY, f"NAME_MAP: {name!r} is an op name already; drop the entry"
        for target in targets:
            assert target in registry._REGISTRY, f"NAME_MAP: {name!r} -> {target!r}, which is not a registered op"


def test_ops_beyond_the_reference_text_are_not_in_it():
    reference = _reference()
    for device, name in op_coverage.TORCH_BEYOND_REFERENCE:
        assert name not in reference[device], f"{name} is on the {device} list now: drop it from TORCH_BEYOND_REFERENCE"


_TEST_LIST_POLICIES = {"torch_fp16": "lower_precision_fp", "nn_fp16": "lower_precision_fp",
                       "linalg_fp16": "lower_precision_fp", "methods_fp16": "lower_precision_fp",
                       "torch_fp32": "fp32", "nn_fp32": "fp32", "methods_fp32": "fp32",
                       "torch_need_autocast_promote": "promote", "banned": "banned"}


def _torch_cuda_test_lists(torch):
    """{op name: policy} from torch's own CUDA autocast test lists (the AutocastTestLists class of
    torch/testing/_internal/autocast_test_lists.py), read as text: importing it needs torch's test deps."""
    path = Path(torch.__file__).parent / "testing" / "_internal" / "autocast_test_lists.py"
    text = path.read_text().split("class AutocastCPUTestLists")[0]
    found, policy = {}, None
    for line in text.splitlines():
        heading = re.match(r"\s+self\.(\w+) = \[", line)
        if heading:
            policy = _TEST_LIST_POLICIES.get(heading.group(1))
        for name in re.findall(r'\("(\w+)"', line) if policy else ():
            found.setdefault(name, policy)
    return found


def test_ops_beyond_the_reference_text_follow_torch():
    """The entries of TORCH_BEYOND_REFERENCE are what torch 2.13 does: on the CPU run side by side; on CUDA
    each has an autocast kernel registered in torch's dispatcher and the policy of torch's own CUDA test lists
    (scaled_dot_product_attention, in none of them, the CPU's lower_precision_fp)."""
    torch = pytest.importorskip("torch")
    args = (torch.randn(4, 3, dtype=torch.bfloat16), torch.randn(4, 3, dtype=torch.bfloat16))
    calls = {"smooth_l1_loss": lambda: torch.nn.functional.smooth_l1_loss(*args)}
    test_lists = _torch_cuda_test_lists(torch)
    for (device, name), policy in op_coverage.TORCH_BEYOND_REFERENCE.items():
        assert mp.amp.op_policy(name, device) == CastPolicy(policy), name
        if device == "cuda":
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "AutocastCUDA"), name
            assert test_lists.get(name, "lower_precision_fp") == policy, name
            if name not in test_lists:
                assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "AutocastCPU")
                assert mp.amp.op_policy(name, "cpu") is CastPolicy.LOWER_PRECISION_FP
            continue
        assert policy == "fp32", "only CPU float32 entries are run here"
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert calls[name]().dtype == torch.float32, name
        with mp.autocast("cpu", dtype=mp.bfloat16):
            assert getattr(mp.nn.functional, name)(*(mp.tensor(a.float().numpy()) for a in args)).dtype == mp.float32


def test_torchs_cuda_test_lists_agree_with_the_table_where_both_name_an_op():
    """Every op torch's CUDA autocast test lists name and mixprec has by that name carries that policy here."""
    torch = pytest.importorskip("torch")
    disagree = {name: (policy, mp.amp.op_policy(name, "cuda"))
                for name, policy in _torch_cuda_test_lists(torch).items()
                if name in registry._REGISTRY and mp.amp.op_policy(name, "cuda") != CastPolicy(policy)}
    assert not disagree, f"torch's CUDA test lists vs mixprec's table (op: (torch, mixprec)): {disagree}"


def test_reference_is_parsed_completely():
    """Spot checks of the parse against the reference's text: first/last names of lists, the fft group, notes."""
    cuda, cpu = _reference()["cuda"], _reference()["cpu"]
    assert cuda["__matmul__"] == cuda["RNNCell"] == "lower_precision_fp"
    assert cuda["__pow__"] == cuda["triplet_margin_loss"] == "fp32"
    assert cuda["addcdiv"] == cuda["tensordot"] == "promote" and cuda["binary_cross_entropy"] == "banned"
    assert cpu["conv1d"] == cpu["_native_multi_head_attention"] == "lower_precision_fp"
    assert cpu["avg_pool3d"] == cpu["linalg_inv_ex"] == cpu["fft_fft"] == cpu["fft_ihfft"] == "fp32"
    assert {n for n, p in cpu.items() if p == "promote"} == {"cat", "stack", "index_copy"}
    assert "cross_entropy" not in cpu and "binary_cross_entropy" in cpu  # the closing note is not a list


def test_reference_parser_rules():
    text = ("# title\n\n## Policies\n- lower precision: ignored prose\n\n## CUDA\nlower precision (x):\n`a`, b\n\n"
            "float32: fft_* (fft, ifft), c\n(a note: d, e)\n\n## CPU (one list)\npromote to widest input type:\n"
            "cat\n\n## Other facts\n- not: lists\n")
    assert op_coverage.parse_reference(text) == {
        "cuda": {"a": "lower_precision_fp", "b": "lower_precision_fp", "fft_fft": "fp32", "fft_ifft": "fp32",
                 "c": "fp32"},
        "cpu": {"cat": "promote"}}
    with pytest.raises(ValueError, match="unknown list heading 'float64'"):
        op_coverage.parse_reference(text.replace("float32:", "float64:"))
    with pytest.raises(ValueError, match="not an op name"):
        op_coverage.parse_reference(text.replace("`a`, b", "a b"))
    with pytest.raises(ValueError, match="no op lists found for device type 'cpu'"):
        op_coverage.parse_reference(text.split("## CPU")[0])


# ----------------------------------------------------------------- the table itself (mixprec/ops/policies.py)
def test_every_table_entry_is_a_registered_op_name():
    policies.check(registry._REGISTRY)  # (importing mixprec.ops runs it too)
    fake = {"cuda": {**policies.CUDA, "fp32": policies.CUDA["fp32"] + ("not_an_op", "__matmul__")},
            "cpu": policies.CPU}
    with pytest.raises(ValueError, match=r"(?s)cuda fp32: 'not_an_op' names no registered op\n.*"
                                         r"cuda fp32: '__matmul__' is an alias of 'matmul'; list the op by its name"):
        policies.check(registry._REGISTRY, fake)


def test_an_op_is_listed_once_per_device_type():
    twice = {"cuda": {**policies.CUDA, "promote": policies.CUDA["promote"] + ("softmax",)}, "cpu": policies.CPU}
    with pytest.raises(ValueError, match=r"'softmax' is listed twice on cuda \(fp32 and promote\)"):
        policies.by_name(twice)


def test_builtin_ops_take_their_policy_from_the_table_alone():
    for op in OPS:
        assert op.policy == {d: None if p is None else CastPolicy(p)
                             for d, p in policies.policies_of(op.name).items()}, op.name
    with pytest.raises(TypeError, match="entry in mixprec/ops/policies.py; give your own op one with "
                                        "mp.amp.register_autocast"):
        registry.register("test_policy_keyword", cpu="fp32")
    assert "test_policy_keyword" not in registry._REGISTRY


def test_docs_autocast_table_is_generated_from_the_table(capsys):
    assert cli_main(["ops", "--markdown"]) == 0  # what REGENERATE runs
    generated = capsys.readouterr().out
    assert generated.startswith("# The autocast policy table\n") and "`matmul` (`__matmul__`)" in generated
    committed = (ROOT / "docs" / "autocast-table.md").read_text()
    assert committed == generated, f"docs/autocast-table.md is out of date: run {REGENERATE}"


# ----------------------------------------------------------------- coverage: the figure only grows
def _recorded_coverage():
    text = (ROOT / "docs" / "autocast.md").read_text()
    found = dict((d, (int(a), int(b))) for d, a, b in re.findall(r"^(cuda|cpu): (\d+) of (\d+) entries$", text, re.M))
    assert set(found) == {"cuda", "cpu"}, "docs/autocast.md must record 'cuda: N of M entries' and 'cpu: ...'"
    return found


def test_coverage_of_the_reference_only_grows():
    reference = _reference()
    for device, (done, missing) in op_coverage.coverage(reference).items():
        recorded, total = _recorded_coverage()[device]
        assert len(done) + len(missing) == total, f"the {device} reference lists changed: update docs/autocast.md"
        assert len(done) >= recorded, (f"{device}: {len(done)} of {total} reference entries implemented, fewer "
                                       f"than the {recorded} docs/autocast.md records; missing now: {missing}")


def test_coverage_tool_prints_the_figures(capsys, tmp_path):
    assert op_coverage.main(["--reference", str(tmp_path / "absent.md")]) == 2
    _reference()
    assert op_coverage.main(["--missing"]) == 0
    out = capsys.readouterr().out
    total = _recorded_coverage()["cuda"][1]
    assert re.search(rf"^cuda: \d+ of {total} entries$", out, re.M) and "not implemented on cpu" in out


def test_ops_a_small_model_uses_are_all_registered():
    needed = """conv1d conv2d layer_norm group_norm cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss kl_div
                binary_cross_entropy binary_cross_entropy_with_logits cosine_similarity log log2 log10 exp expm1
                log1p sinh cosh tan acos asin erfinv norm cumsum addcmul addcdiv atan2 dot tensordot""".split()
    assert [n for n in needed if n not in registry._REGISTRY] == []


def test_cpu_name_of_cross_entropy_is_visible():
    assert mp.amp.op_policy("cross_entropy_loss", "cpu") is FP32
    assert mp.amp.op_policy("cross_entropy", "cpu") is FP32
    assert mp.nn.functional.cross_entropy is not None and mp.cross_entropy_loss is not None


def test_smooth_l1_loss_is_float32_under_both_autocasts():
    """torch runs smooth_l1_loss in float32 under CPU autocast too, not only under CUDA's."""
    a, b = mp.randn(4, 3, dtype=mp.bfloat16), mp.randn(4, 3, dtype=mp.bfloat16)
    with mp.autocast("cpu"):
        assert mp.nn.functional.smooth_l1_loss(a, b).dtype == mp.float32
    assert mp.amp.op_policy("smooth_l1_loss", "cuda") is FP32


def test_op_policy_errors():
    with pytest.raises(KeyError, match="no op named 'not_an_op'"):
        mp.amp.op_policy("not_an_op", "cuda")
    with pytest.raises(ValueError, match="'cuda' or 'cpu'"):
        mp.amp.op_policy("linear", "mps")
    assert mp.amp.op_policy("add", "cuda") is None


# ----------------------------------------------------------------- the resolver, exhaustively
F16, BF16, F32, F64, I64 = mp.float16, mp.bfloat16, mp.float32, mp.float64, mp.int64
ALL_INPUTS = (F16, BF16, F32, F64, I64, mp.bool_, None)
CASTABLE = (F16, BF16, F32)


def expected_dtypes(policy, lower, dtypes):
    """The reference rules written out: only float16/bfloat16/float32 inputs are ever cast."""
    if policy is None:
        return tuple(dtypes)
    if policy is LP:
        target = lower
    elif policy is FP32:
        target = F32
    else:  # promote: the lower dtype only if every castable input already has it, else float32
        castable = [d for d in dtypes if d in CASTABLE]
        target = lower if castable and all(d == lower for d in castable) else F32
    return tuple(target if d in CASTABLE else d for d in dtypes)


COMBOS = [c for n in (1, 2, 3) for c in itertools.product(ALL_INPUTS, repeat=n)]


@pytest.mark.parametrize("device_type", ["cuda", "cpu"])
@pytest.mark.parametrize("lower", [F16, BF16], ids=["float16", "bfloat16"])
def test_resolver_matches_rules_for_every_op_and_dtype_mix(device_type, lower):
    checked = 0
    for op in OPS:
        policy = op.policy[device_type]  # (equal to the reference's: test_registered_policy_equals_reference)
        for combo in COMBOS:
            if policy is BANNED:
                with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
                    mp.amp.resolve_dtypes(op.name, device_type, lower, combo)
                continue
            got = mp.amp.resolve_dtypes(op.name, device_type, lower, combo)
            assert got == expected_dtypes(policy, lower, combo), (op.name, combo)
            checked += 1
    assert checked > 10_000


def test_resolver_never_casts_float64_or_integers():
    for name in ("linear", "softmax", "atan2"):
        got = mp.amp.resolve_dtypes(name, "cuda", F16, [F64, I64, mp.bool_, F32])
        assert got[:3] == (F64, I64, mp.bool_)


def test_resolver_with_autocast_off_changes_nothing():
    assert mp.amp.resolve_dtypes("linear", "cuda", None, [F32, F32]) == (F32, F32)


def test_resolver_accepts_dtype_likes_and_validates():
    import numpy as np
    assert mp.amp.resolve_dtypes("mm", "cpu", "float16", [np.float32, "float32"]) == (F16, F16)
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        mp.amp.resolve_dtypes("mm", "cpu", np.float32, [F32])
    with pytest.raises(ValueError, match="'cuda' or 'cpu'"):
        mp.amp.resolve_dtypes("mm", "xla", F16, [F32])


# ----------------------------------------------------------------- the command line
def test_cli_prints_the_cuda_table(capsys):
    assert cli_main(["ops", "--device", "cuda"]) == 0
    out = capsys.readouterr().out
    banned = out.split("banned")[1]
    assert "binary_cross_entropy" in banned and "float16" in out
    lp_block = out.split("lower_precision_fp")[1].split("fp32")[0]
    for name in ("conv2d", "linear", "matmul (__matmul__)"):
        assert name in lp_block


def test_policy_table_lists_every_policy_op_once():
    text = policy_table("cpu", show_all=True)
    for op in OPS:
        assert text.count(f" {op.name}") + text.count(f"\n    {op.name}") >= 1, op.name
    assert "cross_entropy (cross_entropy_loss)" in text


def test_python_dash_m_mixprec_runs():
    out = subprocess.run([sys.executable, "-m", "mixprec", "ops", "--device", "cpu"], capture_output=True,
                         text=True, check=True).stdout
    assert "autocast policies on device type 'cpu'" in out and "bfloat16" in out
