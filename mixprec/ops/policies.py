"""The autocast policy table: what ``mp.autocast`` does with each built-in op's floating inputs, per device type.

This table follows torch 2.13's autocast tables. One list per policy, as torch.amp's autocast
op reference has them (its lists are kept as data in tests/autocast-op-reference.md, and
tests/test_policy_tables.py checks this table against them), plus the ops torch 2.13's CUDA
autocast also handles beyond that documented list — marked "beyond the documented list" below,
listed in TORCH_BEYOND_REFERENCE in tools/op_coverage.py and checked against torch's own
registrations and autocast test lists:

    lower_precision_fp   cast to the region's float16/bfloat16
    fp32                 cast to float32
    promote              cast to the widest floating input (the region's dtype only if every one has it)
    banned               raise inside an enabled region

An op on none of a device type's lists is not autocast there: it runs in the dtypes it is given.

Entries are mixprec op names; an op's aliases share its entry (``matmul`` covers ``__matmul__``).
A comment says where torch lists an op under another name, or where an entry is mixprec's own.
``register()`` gives each op the policies of its name here (mixprec/ops/registry.py);
mixprec/ops/__init__.py runs :func:`check` once every op is registered, so an entry that names no
op fails at import. Ops you register yourself get a rule from ``mp.amp.register_autocast``.
docs/autocast-table.md is generated from this table: ``python -m mixprec ops --markdown``.
"""
from __future__ import annotations

POLICIES = ("lower_precision_fp", "fp32", "promote", "banned")

CUDA = {
    # CUDA ops that can autocast to float16
    "lower_precision_fp": (
        # matrix products (torch also lists __matmul__: mixprec's alias of matmul)
        "matmul", "mm", "mv", "bmm", "addmm", "addmv", "addr", "addbmm", "baddbmm", "chain_matmul",
        "linalg_multi_dot",  # (torch.linalg.multi_dot: the documented list calls it multi_dot)
        "linear", "prelu",
        "einsum", "linalg_vecdot",  # (beyond the documented list)
        # convolutions
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "_convolution", "conv_tbc",  # (beyond the documented list)
        # attention (beyond the documented list)
        "scaled_dot_product_attention",
        # recurrent cells: torch lists their modules, LSTMCell, GRUCell and RNNCell (tanh or relu)
        "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    ),
    # CUDA ops that autocast to float32
    "fp32": (
        # pointwise (pow covers __pow__, __rtruediv__ covers __rdiv__: their aliases)
        "acos", "asin", "cosh", "sinh", "tan", "erfinv", "exp", "expm1", "log", "log10", "log1p", "log2",
        "reciprocal", "rsqrt", "pow", "__rpow__", "__rtruediv__", "softplus",
        # reductions and distances
        "sum", "prod", "cumsum", "cumprod", "norm", "renorm", "dist", "cdist", "pdist",
        "logsumexp",  # (beyond the documented list)
        # softmax and normalization
        "softmax", "log_softmax", "softmin", "layer_norm", "group_norm", "normalize", "cosine_similarity",
        "rms_norm",  # (beyond the documented list)
        # losses
        "binary_cross_entropy_with_logits", "cosine_embedding_loss", "cross_entropy", "hinge_embedding_loss",
        "kl_div", "l1_loss", "margin_ranking_loss", "mse_loss", "multi_margin_loss", "multilabel_margin_loss",
        "nll_loss", "poisson_nll_loss", "smooth_l1_loss", "soft_margin_loss", "triplet_margin_loss",
    ),
    # CUDA ops that promote to the widest input type
    "promote": (
        "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample", "index_put", "scatter_add",
        "tensordot",
        "grid_sampler", "vdot",  # (beyond the documented list; grid_sample's own policy covers F.grid_sample)
    ),
    # CUDA ops that raise inside an enabled region (binary_cross_entropy_with_logits is the safe one)
    "banned": (
        "binary_cross_entropy",
    ),
}

CPU = {
    # CPU ops that can autocast to bfloat16 (or float16)
    "lower_precision_fp": (
        # matrix products
        "matmul", "mm", "bmm", "addmm", "addbmm", "baddbmm", "linalg_vecdot", "linear", "prelu",
        # convolutions (_convolution is aten's convolution, conv_tbc one in (time, batch, channel) layout)
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "_convolution",
        "conv_tbc",
        # attention
        "scaled_dot_product_attention", "_native_multi_head_attention",
        # recurrent layers: torch lists oneDNN's mkldnn_rnn_layer, an alias of lstm_layer here
        "lstm_layer",
    ),
    # CPU ops that autocast to float32
    "fp32": (
        # pools and padding: the 3-D pools, the fractional and unpooling ones, and the reflect and replicate
        # modes F.pad routes to (torch lists no reflection_pad3d)
        "avg_pool3d", "max_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "fractional_max_pool2d",
        "fractional_max_pool3d", "max_unpool2d", "max_unpool3d",
        "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
        # sampling (torch also lists grid_sampler_2d and grid_sampler_3d: aliases of grid_sampler)
        "grid_sampler",
        # losses (torch lists cross_entropy as cross_entropy_loss, an alias here; nll_loss also covers torch's
        # nll_loss2d; smooth_l1_loss is on none of torch's CPU lists, but torch's CPU autocast runs it in float32)
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_embedding_loss", "cross_entropy",
        "ctc_loss", "hinge_embedding_loss", "huber_loss", "kl_div", "l1_loss", "margin_ranking_loss", "mse_loss",
        "multi_margin_loss", "multilabel_margin_loss", "nll_loss", "poisson_nll_loss", "smooth_l1_loss",
        "soft_margin_loss", "triplet_margin_loss",
        # reductions, statistics and distances
        "prod", "quantile", "nanquantile", "trace", "cdist",
        # complex numbers and spectral ops
        "polar", "view_as_complex", "stft",
        "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn", "fft_rfft", "fft_irfft",
        "fft_rfft2", "fft_irfft2", "fft_rfftn", "fft_irfftn", "fft_hfft", "fft_ihfft",
        # linear algebra (torch also lists cholesky, inverse and orgqr: aliases of linalg_cholesky, linalg_inv
        # and linalg_householder_product)
        "linalg_cholesky", "linalg_cholesky_ex", "cholesky_inverse", "cholesky_solve", "linalg_inv", "linalg_inv_ex",
        "linalg_solve", "lu_solve", "triangular_solve", "linalg_tensorinv", "linalg_tensorsolve", "linalg_lstsq",
        "geqrf", "qr", "linalg_qr", "linalg_householder_product", "ormqr", "svd", "linalg_svd", "linalg_svdvals",
        "pinverse", "linalg_eig", "linalg_eigh", "linalg_eigvals", "linalg_eigvalsh", "linalg_cond",
        "linalg_matrix_rank",
    ),
    # CPU ops that promote to the widest input type
    "promote": (
        "cat", "stack", "index_copy",
    ),
    # no CPU op is banned: binary_cross_entropy runs in float32 there
    "banned": (),
}

TABLE = {"cuda": CUDA, "cpu": CPU}


def by_name(table) -> dict[str, dict[str, str]]:
    """{device type: {op name: policy}} of a table; a name listed twice on one device type raises ValueError."""
    index = {}
    for device, lists in table.items():
        index[device] = {}
        for policy in POLICIES:
            for name in lists[policy]:
                if name in index[device]:
                    raise ValueError(f"autocast policy table: {name!r} is listed twice on {device} "
                                     f"({index[device][name]} and {policy})")
                index[device][name] = policy
    return index


_BY_NAME = by_name(TABLE)


def policies_of(name) -> dict[str, str | None]:
    """{device type: the policy op ``name`` has there, or None}: what register() gives an op."""
    return {device: names.get(name) for device, names in _BY_NAME.items()}


def check(registered, table=TABLE) -> None:
    """Raise ValueError naming every entry of ``table`` that is not a registered op's own name.

    ``registered`` maps each registered name (aliases included) to its op.
    """
    problems = []
    for device, names in by_name(table).items():
        for name, policy in names.items():
            op = registered.get(name)
            if op is None:
                problems.append(f"{device} {policy}: {name!r} names no registered op")
            elif op.name != name:
                problems.append(f"{device} {policy}: {name!r} is an alias of {op.name!r}; list the op by its name")
    if problems:
        raise ValueError("autocast policy table (mixprec/ops/policies.py):\n    " + "\n    ".join(problems))
