"""Per-device seeding and RNG state, as torch.cuda names them, for mixprec's one generator.

torch keeps one generator per GPU besides the CPU's. mixprec has one
generator, on the host, for every device: creation functions (rand, randn,
randint, randperm, init) draw on it and copy to the device, so one seed gives
the same numbers on the CPU and on every GPU, and ``mp.random.get_rng_state()``
is the whole state a checkpoint needs. Dropout on a GPU draws its mask there
(cuRAND) from a seed taken from this same generator.

So these functions check that the device exists and act on that one
generator: ``mp.cuda.manual_seed(s)`` is ``mp.manual_seed(s)`` (which also
seeds CuPy's own generator, for user code calling ``cupy.random``), and every
device reports the same state. Seeding "only the GPU" cannot exist here.
"""
from __future__ import annotations

from .. import random as _random
from ._runtime import device_index
from ..random import manual_seed as _seed
from ..backend.availability import device_count


def manual_seed(seed: int) -> None:
    """Seed mixprec's generator (the one every device draws from)."""
    device_index(None, "manual_seed")
    _seed(seed)


def seed() -> int:
    """Seed mixprec's generator with a non-deterministic number (mp.seed: one generator for all devices)."""
    device_index(None, "seed")
    return _random.seed()


def seed_all() -> int:
    """The same as seed: there is one generator for all devices."""
    device_index(None, "seed_all")
    return _random.seed()


def initial_seed() -> int:
    """The seed mixprec's generator was last seeded with (mp.initial_seed)."""
    device_index(None, "initial_seed")
    return _random.initial_seed()


def manual_seed_all(seed: int) -> None:
    """The same as manual_seed: there is one generator for all devices."""
    device_index(None, "manual_seed_all")
    _seed(seed)


def get_rng_state(device="cuda") -> dict:
    """The generator's state (the same dict for every device; mp.random.get_rng_state's)."""
    device_index(device, "get_rng_state")
    return _random.get_rng_state()


def set_rng_state(new_state: dict, device="cuda") -> None:
    device_index(device, "set_rng_state")
    _random.set_rng_state(new_state)


def get_rng_state_all() -> list:
    device_index(None, "get_rng_state_all")
    return [_random.get_rng_state() for _ in range(device_count())]


def set_rng_state_all(new_states) -> None:
    """Restore from get_rng_state_all's list (its entries are equal; the first is used)."""
    device_index(None, "set_rng_state_all")
    new_states = list(new_states)
    if not new_states:
        raise ValueError("set_rng_state_all: expected the list get_rng_state_all returned, got an empty one")
    _random.set_rng_state(new_states[0])
