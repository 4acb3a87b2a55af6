"""mp.cuda: torch.cuda's names over CuPy, for ported code and for measuring and tuning on a GPU.

- devices: is_available, device_count, current_device, set_device, device(...),
  get_device_name/properties/capability, synchronize, is_bf16_supported;
- streams and events: Stream, current_stream, default_stream, stream(s), Event;
- memory (CuPy's pools): memory_allocated, max_memory_allocated, memory_reserved,
  max_memory_reserved, reset_peak_memory_stats, empty_cache, memory_stats, memory_summary;
- RNG: manual_seed, manual_seed_all, get_rng_state, set_rng_state (mixprec's one generator);
- CUDA graphs: CUDAGraph, graph(g), graph_pool_handle, make_graphed_callables;
- mp.cuda.nvtx (ranges for Nsight Systems) and mp.cuda.amp (torch.cuda.amp's names).

Without a usable GPU, is_available() is False, device_count() is 0 and every
other function raises mp.DeviceUnavailableError saying why. See docs/cuda.md.
"""
from ..backend.availability import device_count, is_cuda_available as is_available  # noqa: F401
from ._runtime import (DeviceProperties, Event, Stream, current_device, current_stream, default_stream,  # noqa: F401
                       device, get_device_capability, get_device_name, get_device_properties, is_bf16_supported,
                       set_device, stream, synchronize)
from .memory import (empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated,  # noqa: F401
                     memory_reserved, memory_stats, memory_summary, reset_peak_memory_stats)
from .random import (get_rng_state, get_rng_state_all, manual_seed, manual_seed_all, set_rng_state,  # noqa: F401
                     set_rng_state_all)
from .graphs import CUDAGraph, GraphPool, graph, graph_pool_handle, make_graphed_callables  # noqa: F401
from . import amp, nvtx  # noqa: F401
