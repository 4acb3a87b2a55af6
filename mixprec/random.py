"""The state of mixprec's random generator, for checkpoints that resume bit for bit.

Every random draw in mixprec (rand, randn, randint, randperm, init, dropout)
comes from one host-side NumPy generator, so its state is the whole story on
every device. The state is a plain dict of ints and strings, which mp.save
stores as it stores any other checkpoint value.
"""
from __future__ import annotations

import numpy as np

from .tensor import _rng_state

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
