"""Hostile variants test_fault_campaign.py finds failing when torch judges them, not fixed yet.

Each line is a defect of an op added with the OpInfo breadth work (or a deviation still to be decided, such as
as_strided_scatter's gradient, where torch's is not the derivative of its forward): fix it, then drop its line.
test_hostile_inputs leaves these out only where torch is installed, and fails when one of them no longer fails,
so the table can only shrink. The text is what the campaign reported.
"""

OPEN = {
    ('bucketize', 'nan-in-input1'):
        'silent wrong value: output 0: 0 at (0,), expected 1 (2 of 4 differ)',
    ('corrcoef', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(3, 3); torch RuntimeError (forward): cov(): bool dtype is not supported for...',
    ('cov', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(3, 3); torch RuntimeError (forward): cov(): bool dtype is not supported for...',
    ('cov-1d', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(); torch RuntimeError (forward): cov(): bool dtype is not supported for input',
    ('cov-weights', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 2); torch RuntimeError (forward): cov(): bool dtype is not supported for...',
    ('cov-weights', 'bool-input2'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 2); torch RuntimeError (forward): cov(): expected aweights to have float...',
    ('cov-weights', 'empty-last-dims'):
        "computes what torch refuses (a silent coercion?): mixprec gives float64(2, 2); torch RuntimeError (forward): cov(): weights sum to zero, can't be n...",
    ('cov-weights', 'int64-input2'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 2); torch RuntimeError (forward): cov(): expected aweights to have float...',
    ('cov-weights', 'nan-in-input2'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 2); torch RuntimeError (forward): cov(): aweights cannot be negative',
    ('cumulative-trapezoid', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 4), float32(1, 5); torch RuntimeError (forward): cumulative_trapezoid: r...',
    ('gradient', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(4, 5), float32(4, 5); torch RuntimeError (forward): Subtraction, the `-` op...',
    ('gradient-coordinates', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(2, 5), float32(2, 5); torch RuntimeError (forward): Subtraction, the `-` op...',
    ('gradient-coordinates', 'bool-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 5), float64(2, 5); torch RuntimeError (forward): Negation, the `-` opera...',
    ('gradient-coordinates', 'float32-input0'):
        'output 0 has dtype float32, torch gives float64',
    ('gradient-coordinates', 'int64-input0'):
        'output 0 has dtype float32, torch gives float64',
    ('gradient-coordinates', 'int64-input1'):
        'silent wrong value: output 0: 1.8579383647761083 at (0, 1), expected 1.8579383847905435 (6 of 10 differ)',
    ('gradient-spacing-order2', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(5, 3); torch RuntimeError (forward): Subtraction, the `-` operator, with tw...',
    ('hfft2', 'empty-first-dims'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(0, 4, 4); torch RuntimeError (forward): MKL FFT error: Intel oneMKL DFTI ER...',
    ('histogram', '-inf-in-input1'):
        'silent wrong value: output 2: nan at (1,), expected -0.0 (2 of 3 differ)',
    ('histogram', 'bool-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(5,), float64(6,), float64(3,), float64(4,); torch RuntimeError (forward): t...',
    ('histogram', 'float32-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(5,), float32(6,), float32(3,), float32(4,); torch RuntimeError (forward): t...',
    ('histogram', 'float32-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(5,), float64(6,), float64(3,), float64(4,); torch RuntimeError (forward): t...',
    ('histogram', 'inf-in-input1'):
        'silent wrong value: output 2: nan at (1,), expected 0.0 (2 of 3 differ)',
    ('histogram', 'int64-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(5,), float64(6,), float64(3,), float64(4,); torch RuntimeError (forward): t...',
    ('histogram-edges', 'bool-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3,); torch RuntimeError (forward): torch.histogramdd: input tensor and bins...',
    ('histogram-edges', 'float32-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(3,); torch RuntimeError (forward): torch.histogramdd: input tensor and bins...',
    ('histogram-edges', 'float32-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3,); torch RuntimeError (forward): torch.histogramdd: input tensor and bins...',
    ('histogram-edges', 'int64-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3,); torch RuntimeError (forward): torch.histogramdd: input tensor and bins...',
    ('histogramdd', '-inf-in-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3, 2), float64(4,), float64(3,), float64(2, 2), float64(3,), float64(3,); t...',
    ('histogramdd', 'bool-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3, 2), float64(4,), float64(3,), float64(2, 2), float64(3,), float64(3,); t...',
    ('histogramdd', 'float32-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(3, 2), float32(4,), float32(3,), float32(2, 2), float32(3,), float32(3,); t...',
    ('histogramdd', 'float32-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3, 2), float64(4,), float64(3,), float64(2, 2), float64(3,), float64(3,); t...',
    ('histogramdd', 'inf-in-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3, 2), float64(4,), float64(3,), float64(2, 2), float64(3,), float64(3,); t...',
    ('histogramdd', 'int64-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3, 2), float64(4,), float64(3,), float64(2, 2), float64(3,), float64(3,); t...',
    ('histogramdd', 'nan-in-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3, 2), float64(4,), float64(3,), float64(2, 2), float64(3,), float64(3,); t...',
    ('ihfft2', 'empty-first-dims'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(0, 4, 4, 2); torch RuntimeError (forward): MKL FFT error: Intel oneMKL DFTI...',
    ('inner', 'empty-last-dims'):
        'refuses an empty input that torch handles: mixprec RuntimeError (forward): reshape: shape (-1, 0) is invalid for an input of shape (2, 3, 0) (0 ele...',
    ('istft', 'empty-last-dims'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(0,); torch RuntimeError (forward): istft(CPUComplexDoubleType[5, 0], n_fft=...',
    ('kthvalue', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives bool(3,), int64(3,); torch NotImplementedError (forward): "kthvalue_cpu" not implem...',
    ('kthvalue-dim0-keepdim', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives bool(1, 3), int64(1, 3); torch NotImplementedError (forward): "kthvalue_cpu" not im...',
    ('ldl_factor-batched', '-inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('ldl_factor-batched', 'empty-first-dims'):
        'output 1 has dtype int64, torch gives int32',
    ('ldl_factor-batched', 'float32-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('ldl_factor-batched', 'inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('ldl_factor_ex-indefinite', '-inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('ldl_factor_ex-indefinite', 'float32-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('ldl_factor_ex-indefinite', 'inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('ldl_factor_ex-indefinite', 'nan-in-input0'):
        'silent wrong value: output 0: -1.0 at (2, 0), expected nan (7 of 16 differ)',
    ('ldl_solve', 'bool-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 4, 3); torch RuntimeError (forward): Expected b and A to have the same d...',
    ('ldl_solve', 'float32-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 4, 3); torch RuntimeError (forward): Expected b and A to have the same d...',
    ('ldl_solve', 'float32-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 4, 3); torch RuntimeError (forward): Expected b and A to have the same d...',
    ('ldl_solve', 'int64-input1'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2, 4, 3); torch RuntimeError (forward): Expected b and A to have the same d...',
    ('linalg_lu-square-batched', 'empty-first-dims'):
        '3 outputs, the oracle has 0',
    ('linalg_lu-square-batched', 'empty-last-dims'):
        'silent wrong value: output 0: shape (2, 4, 4), expected (2, 0, 0) (vs the NumPy reference)',
    ('linalg_lu-tall', 'empty-last-dims'):
        'silent wrong value: output 0: shape (5, 5), expected (0, 0) (vs the NumPy reference)',
    ('linalg_lu-wide', 'empty-last-dims'):
        'silent wrong value: output 0: shape (3, 3), expected (0, 0) (vs the NumPy reference)',
    ('logdet-negative', 'empty-last-dims'):
        "backward fails where torch's works: LinAlgError (backward): linalg_inv: the diagonal element 1 of its LU factorization is zero: the input matrix is...",
    ('lu_factor_ex-tall', '-inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('lu_factor_ex-tall', 'empty-first-dims'):
        'output 1 has dtype int64, torch gives int32',
    ('lu_factor_ex-tall', 'empty-last-dims'):
        'output 1 has dtype int64, torch gives int32',
    ('lu_factor_ex-tall', 'float32-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('lu_factor_ex-tall', 'inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('lu_factor_ex-tall', 'nan-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('median', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives bool(), bool(3,), int64(3,); torch NotImplementedError (forward): "median_cpu" not...',
    ('median-nan', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives bool(3,), int64(3,); torch NotImplementedError (forward): "median_out" not implemen...',
    ('median-ties', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives bool(); torch NotImplementedError (forward): "median_cpu" not implemented for \'Bool\'',
    ('nanmedian', '-inf-in-input0'):
        'silent wrong value: output 2: 0.25 at (), expected 0.75 (1 of 1 differ) (vs the NumPy reference)',
    ('nanmedian', 'empty-first-dims'):
        'silent wrong value: output 2: nan at (), expected 0.75 (1 of 1 differ) (vs the NumPy reference)',
    ('nanmedian-dim0', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives bool(1, 2), int64(1, 2); torch NotImplementedError (forward): "median_out" not impl...',
    ('norm-nuc-keepdim', '-inf-in-input0'):
        "backward fails where torch's works: LinAlgError (backward): linalg_svd: the input holds inf or NaN values; the algorithm cannot converge on them",
    ('norm-nuc-keepdim', 'inf-in-input0'):
        "backward fails where torch's works: LinAlgError (backward): linalg_svd: the input holds inf or NaN values; the algorithm cannot converge on them",
    ('searchsorted', 'nan-in-input0'):
        'silent wrong value: output 0: 0 at (0, 0), expected 1 (2 of 4 differ)',
    ('solve_ex', '-inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('solve_ex', '-inf-in-input1'):
        'output 1 has dtype int64, torch gives int32',
    ('solve_ex', 'empty-first-dims'):
        'output 1 has dtype int64, torch gives int32',
    ('solve_ex', 'inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('solve_ex', 'inf-in-input1'):
        'output 1 has dtype int64, torch gives int32',
    ('solve_ex', 'nan-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('solve_ex', 'nan-in-input1'):
        'output 1 has dtype int64, torch gives int32',
    ('tensordot-size-1-broadcasts', 'empty-last-dims'):
        'refuses an empty input that torch handles: mixprec RuntimeError (forward): reshape: shape (-1, 0) is invalid for an input of shape (0, 0, 3) (0 ele...',
    ('topk', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives bool(3, 3), int64(3, 3); torch RuntimeError (forward): topk does not support bool d...',
    ('topk', 'int64-input0'):
        'silent wrong value: output 1: 2 at (0, 1), expected 5 (4 of 9 differ)',
    ('topk-smallest-dim0', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives bool(2, 2), int64(2, 2); torch RuntimeError (forward): topk does not support bool d...',
    ('torch-lu-infos', '-inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('torch-lu-infos', 'empty-first-dims'):
        'output 1 has dtype int64, torch gives int32',
    ('torch-lu-infos', 'empty-last-dims'):
        'output 1 has dtype int64, torch gives int32',
    ('torch-lu-infos', 'float32-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('torch-lu-infos', 'inf-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('torch-lu-infos', 'nan-in-input0'):
        'output 1 has dtype int64, torch gives int32',
    ('trapezoid', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float32(3,), float32(5,); torch RuntimeError (forward): trapezoid: received a bool...',
    ('trapezoid-x', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(2,); torch RuntimeError (forward): trapezoid: received a bool input for `x`...',
    ('trapz', 'bool-input0'):
        'computes what torch refuses (a silent coercion?): mixprec gives float64(3,), float32(4,); torch RuntimeError (forward): trapezoid: received a bool...',
    ('trapz', 'empty-first-dim-of-input0'):
        'refuses an empty input that torch handles: mixprec RuntimeError (forward): mul: shapes (3, 3) and (0, 3) cannot be broadcast together (each dimensi...',
    ('unique-consecutive-dim', 'empty-first-dims'):
        'computes what torch refuses (a silent coercion?): mixprec gives int64(0, 1); torch RuntimeError (forward): There are 0 sized dimensions, and they a...',
    ('unique-dim', 'empty-last-dims'):
        'computes what torch refuses (a silent coercion?): mixprec gives int64(1, 0), int64(3,), int64(1,); torch RuntimeError (forward): There are 0 sized...',
}
