"""mixprec's random generator: the draws that make tensors, the seed, and the state for checkpoints that resume
bit for bit.

Every random draw in mixprec (rand, randn, randint, randperm, init, dropout)
comes from one host-side NumPy generator, so its state is the whole story on
every device. The state is a plain dict of ints and strings, which mp.save
stores as it stores any other checkpoint value.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .backend import curand, devices
from .tensor import Tensor, _finish
from .creation import _made_like, _resolve, _shape

def _fresh_seed() -> int:
    return int(np.random.SeedSequence().entropy % 2 ** 63)  # from the OS's entropy


_initial = _fresh_seed()
_rng_state = {"np": np.random.default_rng(_initial), "seed": _initial}


def manual_seed(seed: int):
    """Seed every generator mixprec draws from (NumPy's and, with a GPU, CuPy's)."""
    _rng_state["np"] = np.random.default_rng(seed)
    _rng_state["seed"] = seed
    curand.manual_seed(seed)


def seed() -> int:
    """Seed the generator with a non-deterministic number (from the OS) and return it, as torch.seed."""
    s = _fresh_seed()
    manual_seed(s)
    return s


def initial_seed() -> int:
    """The seed the generator was last seeded with (by manual_seed or seed; else the one it started from)."""
    return _rng_state["seed"]


def _random(kind, size, dtype, device, requires_grad):
    dtype, device = _resolve(dtype, device)
    if not _dt.is_floating(dtype):
        raise TypeError(f"{kind} needs a floating dtype, got {dtype.name}")
    size = _shape(size)
    # Draw in float32 or float64 on the host generator so a seed gives the same
    # numbers on every device, then round to the requested dtype.
    gen = _rng_state["np"]
    draw_dtype = np.float64 if dtype == _dt.float64 else np.float32
    arr = gen.random(size, dtype=draw_dtype) if kind == "rand" else gen.standard_normal(size, dtype=draw_dtype)
    with devices.on_device(device):
        arr = devices.to_device(arr, device).astype(dtype, copy=False)
    return _finish(arr, device, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uniform samples in [0, 1)."""
    return _random("rand", size, dtype, device, requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Standard normal samples."""
    return _random("randn", size, dtype, device, requires_grad)


def randint(low, high=None, size=(), dtype=None, device=None) -> Tensor:
    """Integers drawn uniformly from [low, high); randint(high, size) as in torch."""
    if isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    dtype, device = _resolve(dtype, device, _dt.int64)
    arr = _rng_state["np"].integers(low, high, size=size, dtype=np.int64)
    return _finish(devices.to_device(arr, device).astype(dtype, copy=False), device, False)


def randperm(n, device=None) -> Tensor:
    _, device = _resolve(None, device)
    return _finish(devices.to_device(_rng_state["np"].permutation(n), device), device, False)


rand_like, randn_like = map(_made_like, (rand, randn))



_BIT_GENERATORS = {"PCG64": np.random.PCG64, "PCG64DXSM": np.random.PCG64DXSM, "MT19937": np.random.MT19937,
                   "Philox": np.random.Philox, "SFC64": np.random.SFC64}


def get_rng_state() -> dict:
    """A copy of the generator's state (pass it to set_rng_state to replay the same draws)."""
    return _rng_state["np"].bit_generator.state


def set_rng_state(state: dict) -> None:
    """Restore a state returned by get_rng_state."""
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in _BIT_GENERATORS:
        raise ValueError(f"set_rng_state: expected a dict from mp.random.get_rng_state() naming one of "
                         f"{sorted(_BIT_GENERATORS)} as 'bit_generator', got {state!r:.80}")
    bit_gen = _BIT_GENERATORS[name]()
    try:
        bit_gen.state = state
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"set_rng_state: the state is malformed ({exc})") from None
    _rng_state["np"] = np.random.Generator(bit_gen)
