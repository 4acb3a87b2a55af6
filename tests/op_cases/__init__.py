"""Every op's test cases, one module per module of mixprec/ops; tests/test_ops.py drives them all.

A new op gets its cases in the module named like the file that defines it.
test_ops.test_every_registered_op_has_a_case fails while any registered op is
not exercised by some case, so no op can land untested.
"""
from . import activation, bitwise, conv, elementwise, inplace, losses, math_ops, matmul, nn_layers, norm_ops, reduce, shape
from . import attention, complex_ops, ctc, einsum, fft, linalg_lu_cholesky, linalg_qr_eig_svd, padding, pooling
from . import differences, histograms, quantile, rnn, sampling, searching, sorting, special, statistics
from . import arrange, copies, scatter
from . import binary_math, conversions, pointwise, rounding, value_tests
from . import fft_hermitian_shifts, linalg_lowrank, linalg_lu_ldl, linalg_norms_products
from . import embedding_bag, feature_dropout, interpolate, nn_activations, nn_norms_losses, nn_rearrange
from . import samplers, scaled_mm
from .case import EPS, Case  # noqa: F401

MODULES = (elementwise, bitwise, reduce, shape, matmul, activation, math_ops, conv, norm_ops, nn_layers, losses, inplace,
           attention, einsum, rnn, ctc, complex_ops, fft, linalg_lu_cholesky, linalg_qr_eig_svd, quantile, pooling,
           padding, sampling, special, statistics, sorting, searching, differences, histograms, arrange, scatter,
           copies, rounding, pointwise, binary_math, value_tests, conversions, linalg_norms_products, linalg_lu_ldl,
           fft_hermitian_shifts, linalg_lowrank, nn_activations, feature_dropout, nn_rearrange, nn_norms_losses,
           embedding_bag, interpolate, samplers, scaled_mm)
CASES = [case for module in MODULES for case in module.CASES]
