"""``mp.linalg``: torch.linalg's functions. The ops (and their derivatives) are in mixprec/ops/linalg_lu_cholesky.py
and mixprec/ops/linalg_qr_eig_svd.py.

    import mixprec as mp
    L = mp.linalg.cholesky(A)                  # A = L L^T
    x = mp.linalg.solve(A, b)                  # A x = b, batched, differentiable
    U, S, Vh = mp.linalg.svd(A, full_matrices=False)

Torch's top-level names for the same ops (mp.inverse, mp.cholesky, mp.qr, mp.svd,
mp.det, mp.pinverse, mp.triangular_solve, mp.lu_solve, ...) are plain mp.<name>.
"""
from .ops.linalg_lu_cholesky import LinAlgError  # noqa: F401
from .ops.registry import get as _get
from .ops.registry import public as _public

__all__ = ["LinAlgError", "inv", "inv_ex", "solve", "solve_triangular", "lu_factor", "lu_solve", "cholesky",
           "cholesky_ex", "qr", "householder_product", "eigh", "eigvalsh", "eig", "eigvals", "svd", "svdvals", "det",
           "slogdet", "pinv", "lstsq", "matrix_rank", "matrix_norm", "cond", "tensorinv", "tensorsolve", "vecdot"]

inv = _public(_get("linalg_inv"))
inv_ex = _public(_get("linalg_inv_ex"))
solve = _public(_get("linalg_solve"))
solve_triangular = _public(_get("linalg_solve_triangular"))
lu_factor = _public(_get("linalg_lu_factor"))
lu_solve = _public(_get("linalg_lu_solve"))
cholesky = _public(_get("linalg_cholesky"))
cholesky_ex = _public(_get("linalg_cholesky_ex"))
qr = _public(_get("linalg_qr"))
householder_product = _public(_get("linalg_householder_product"))
eigh = _public(_get("linalg_eigh"))
eigvalsh = _public(_get("linalg_eigvalsh"))
eig = _public(_get("linalg_eig"))
eigvals = _public(_get("linalg_eigvals"))
svd = _public(_get("linalg_svd"))
svdvals = _public(_get("linalg_svdvals"))
det = _public(_get("linalg_det"))
slogdet = _public(_get("linalg_slogdet"))
pinv = _public(_get("linalg_pinv"))
lstsq = _public(_get("linalg_lstsq"))
matrix_rank = _public(_get("linalg_matrix_rank"))
matrix_norm = _public(_get("linalg_matrix_norm"))
cond = _public(_get("linalg_cond"))
tensorinv = _public(_get("linalg_tensorinv"))
tensorsolve = _public(_get("linalg_tensorsolve"))
vecdot = _public(_get("linalg_vecdot"))
