"""Random numbers drawn on the GPU by cuRAND, seeded from mixprec's one generator on the host."""
from __future__ import annotations

import numpy as np

from .. import backend
from .availability import is_cuda_available
from .capture import is_capturing

_philox: dict[int, object] = {}  # device index -> its cuRAND Philox generator


def uniform_on_device(shape, dev, seed: int):
    """float32 samples in [0, 1) made on the GPU by cuRAND's Philox generator, started from ``seed``.

    For dropout: drawing a mask on the host and copying it over would make the
    host wait for the GPU at every call. mixprec's one generator (on the host)
    supplies ``seed``, so its state still determines every draw. A graph
    replays the same seed at every replay, so capturing a random draw is refused.
    """
    if is_capturing():
        raise RuntimeError("a random draw (dropout) cannot be captured in a CUDA graph: mixprec's generator lives "
                           "on the host, so every replay would reuse one mask; capture the model in eval mode or "
                           "without dropout")
    cupy = backend._cupy
    with cupy.cuda.Device(dev.index):
        state = _philox.get(dev.index)
        if state is None:
            state = _philox[dev.index] = cupy.random.RandomState(
                seed, method=cupy.cuda.curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)
        else:
            state.seed(seed)  # host-side: sets the generator's seed and offset, launches nothing
        return state.random_sample(shape, dtype=np.float32)


def manual_seed(seed: int):
    """Seed CuPy's own generator too (mp.manual_seed), when a GPU can be used."""
    if backend._cupy is not None and is_cuda_available():
        backend._cupy.random.seed(seed)
