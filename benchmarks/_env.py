"""What every benchmark prints first: the versions and the machine its figures come from."""
import platform

import numpy as np

import mixprec as mp


def describe(torch=None):
    """Two lines: mixprec, NumPy and torch versions (torch None: no ratio column); Python and the processor."""
    versions = f"mixprec {mp.__version__}, numpy {np.__version__}" + (
        f", torch {torch.__version__}" if torch is not None else ", torch not installed (no ratio column)")
    machine = f"python {platform.python_version()} on {platform.machine()}, {platform.processor() or platform.system()}"
    return versions + "\n" + machine
