"""mixprec.backend.device_checks: on the CPU a check raises at once (on a GPU it is raised where the host
waits: tests/test_cuda_runtime.py, marked gpu)."""
from __future__ import annotations

import numpy as np
import pytest

from mixprec.backend import device_checks


def test_check_on_the_cpu_is_immediate_and_empty_arrays_pass():
    device_checks.check(np.zeros(0, bool), ValueError, "never")
    device_checks.check(np.array([False, False]), ValueError, "never")
    with pytest.raises(KeyError, match="boom"):
        device_checks.check(np.array([False, True]), KeyError, "boom")
