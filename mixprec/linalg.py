"""``mp.linalg``: torch.linalg's functions. The ops (and their derivatives) are in mixprec/ops/linalg_lu_cholesky.py,
linalg_qr_eig_svd.py, linalg_norms_products.py and linalg_lu_ldl.py.

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
           "slogdet", "pinv", "lstsq", "matrix_rank", "matrix_norm", "cond", "tensorinv", "tensorsolve", "vecdot",
           "vector_norm", "norm", "matrix_power", "multi_dot", "cross", "diagonal", "vander", "matrix_exp", "lu",
           "lu_factor_ex", "solve_ex", "ldl_factor", "ldl_factor_ex", "ldl_solve"]

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
vector_norm = _public(_get("linalg_vector_norm"))
norm = _public(_get("linalg_norm"))
matrix_power = _public(_get("linalg_matrix_power"))
multi_dot = _public(_get("linalg_multi_dot"))
cross = _public(_get("linalg_cross"))
diagonal = _public(_get("linalg_diagonal"))
vander = _public(_get("linalg_vander"))
matrix_exp = _public(_get("linalg_matrix_exp"))
lu = _public(_get("linalg_lu"))
lu_factor_ex = _public(_get("linalg_lu_factor_ex"))
solve_ex = _public(_get("linalg_solve_ex"))
ldl_factor = _public(_get("linalg_ldl_factor"))
ldl_factor_ex = _public(_get("linalg_ldl_factor_ex"))
ldl_solve = _public(_get("linalg_ldl_solve"))
