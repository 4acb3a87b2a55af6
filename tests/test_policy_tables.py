"""The cast policy of every op against the reference tables, and the resolver against the rules.

The tables below restate the reference (torch.amp's autocast op lists) as data,
independently of the op definitions. Every registered op named there must carry
exactly that policy on that device type, every other op none; and
``mp.amp.resolve_dtypes`` — the function the dispatch hook itself uses — is
checked exhaustively against the eligibility and policy rules for both device
types, so the CUDA table is fully tested without a GPU.
"""
from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

import mixprec as mp
from mixprec.__main__ import main as cli_main, policy_table
from mixprec.amp import CastPolicy
from mixprec.ops import registry

LP, FP32, PROMOTE, BANNED = (CastPolicy.LOWER_PRECISION_FP, CastPolicy.FP32, CastPolicy.PROMOTE,
                             CastPolicy.BANNED)

CUDA_TABLE = {
    LP: """__matmul__ addbmm addmm addmv addr baddbmm bmm chain_matmul multi_dot conv1d conv2d conv3d
           conv_transpose1d conv_transpose2d conv_transpose3d GRUCell linear LSTMCell matmul mm mv prelu RNNCell""",
    FP32: """__pow__ __rdiv__ __rpow__ __rtruediv__ acos asin binary_cross_entropy_with_logits cosh
             cosine_embedding_loss cdist cosine_similarity cross_entropy cumprod cumsum dist erfinv exp expm1
             group_norm hinge_embedding_loss kl_div l1_loss layer_norm log log_softmax log10 log1p log2
             margin_ranking_loss mse_loss multilabel_margin_loss multi_margin_loss nll_loss norm normalize pdist
             poisson_nll_loss pow prod reciprocal rsqrt sinh smooth_l1_loss soft_margin_loss softmax softmin
             softplus sum renorm tan triplet_margin_loss""",
    PROMOTE: "addcdiv addcmul atan2 bilinear cross dot grid_sample index_put scatter_add tensordot",
    BANNED: "binary_cross_entropy",
}
CPU_TABLE = {
    LP: """conv1d conv2d conv3d bmm mm linalg_vecdot baddbmm addmm addbmm linear matmul _convolution conv_tbc
           mkldnn_rnn_layer conv_transpose1d conv_transpose2d conv_transpose3d prelu scaled_dot_product_attention
           _native_multi_head_attention""",
    FP32: """avg_pool3d binary_cross_entropy grid_sampler grid_sampler_2d grid_sampler_3d polar prod quantile
             nanquantile stft cdist trace view_as_complex cholesky cholesky_inverse cholesky_solve inverse lu_solve
             orgqr ormqr pinverse max_pool3d max_unpool2d max_unpool3d adaptive_avg_pool3d reflection_pad1d
             reflection_pad2d replication_pad1d replication_pad2d replication_pad3d mse_loss cosine_embedding_loss
             nll_loss nll_loss2d hinge_embedding_loss poisson_nll_loss cross_entropy_loss l1_loss huber_loss
             margin_ranking_loss soft_margin_loss triplet_margin_loss multi_margin_loss ctc_loss kl_div
             multilabel_margin_loss binary_cross_entropy_with_logits fft_fft fft_ifft fft_fft2 fft_ifft2 fft_fftn
             fft_ifftn fft_rfft fft_irfft fft_rfft2 fft_irfft2 fft_rfftn fft_irfftn fft_hfft fft_ihfft linalg_cond
             linalg_matrix_rank linalg_solve linalg_cholesky linalg_svdvals linalg_eigvals linalg_eigvalsh
             linalg_inv linalg_householder_product linalg_tensorinv linalg_tensorsolve geqrf qr svd
             triangular_solve fractional_max_pool2d fractional_max_pool3d adaptive_max_pool3d linalg_qr
             linalg_cholesky_ex linalg_svd linalg_eig linalg_eigh linalg_lstsq linalg_inv_ex""",
    PROMOTE: "cat stack index_copy",
}
TABLES = {dev: {name: pol for pol, names in table.items() for name in names.split()}
          for dev, table in (("cuda", CUDA_TABLE), ("cpu", CPU_TABLE))}
# "a @ b is matmul on every device": the operator follows matmul where the table names only matmul.
TABLES["cpu"]["__matmul__"] = LP

# mixprec's own ops (tests elsewhere may register ops of their own while this module is collected)
OPS = sorted({op for op in registry._REGISTRY.values() if op.forward.__module__.startswith("mixprec.")},
             key=lambda op: op.name)


def _names(op):
    return [n for n, o in registry._REGISTRY.items() if o is op]


def _table_policy(op, device_type):
    """The policy the reference gives op (through any of its names), or None; conflicting names fail."""
    listed = {TABLES[device_type][n] for n in _names(op) if n in TABLES[device_type]}
    assert len(listed) <= 1, f"{op.name}: its names have different reference policies {listed}"
    return listed.pop() if listed else None


# ----------------------------------------------------------------- the tables
@pytest.mark.parametrize("device_type", ["cuda", "cpu"])
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_registered_policy_equals_reference(op, device_type):
    assert op.policy[device_type] == _table_policy(op, device_type)
    assert mp.amp.op_policy(op.name, device_type) == _table_policy(op, device_type)


def test_at_least_40_reference_ops_are_registered():
    listed = set(TABLES["cuda"]) | set(TABLES["cpu"])
    registered = {n for n in registry._REGISTRY if n in listed}
    assert len(registered) >= 40, sorted(registered)


def test_ops_a_small_model_uses_are_all_registered():
    needed = """conv1d conv2d layer_norm group_norm cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss kl_div
                binary_cross_entropy binary_cross_entropy_with_logits cosine_similarity log log2 log10 exp expm1
                log1p sinh cosh tan acos asin erfinv norm cumsum addcmul addcdiv atan2 dot tensordot""".split()
    assert [n for n in needed if n not in registry._REGISTRY] == []


def test_cpu_name_of_cross_entropy_is_visible():
    assert mp.amp.op_policy("cross_entropy_loss", "cpu") is FP32
    assert mp.amp.op_policy("cross_entropy", "cpu") is FP32
    assert mp.nn.functional.cross_entropy is not None and mp.cross_entropy_loss is not None


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
        policy = _table_policy(op, device_type)
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
