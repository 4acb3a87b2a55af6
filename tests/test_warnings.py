"""Expected low-precision overflow is silent inside mixprec, and only there."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

OVERFLOW = """
import mixprec as mp
x = mp.tensor([60000.0, 1.0], dtype=mp.float16, requires_grad=True)
y = (x * x).exp()                 # float16 overflow to inf
z = (y - y).sum() + (y * 0).mean()  # inf - inf and inf * 0: NaN through the reductions
z.backward()
assert not bool(x.grad.isfinite().all())
"""


def _run(code):
    return subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_inf_and_nan_inside_mixprec_ops_raise_no_runtime_warning():
    proc = _run(OVERFLOW)
    assert proc.returncode == 0, proc.stderr


def test_user_numpy_code_still_warns():
    proc = _run("import mixprec, numpy as np\nnp.float16(60000) * np.float16(60000)")
    assert proc.returncode != 0 and "RuntimeWarning" in proc.stderr
