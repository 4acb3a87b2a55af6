"""mp.cuda: torch.cuda's names over CuPy, for ported code and for measuring and tuning on a GPU.

- devices: is_available, device_count, current_device, set_device, device(...),
  get_device_name/properties/capability, synchronize, is_bf16_supported;
- streams and events: Stream, current_stream, default_stream, stream(s), Event;
- streams, torch's other names: StreamContext, ExternalStream, set_stream, is_current_stream_capturing;
- memory (CuPy's pools): memory_allocated, max_memory_allocated, memory_reserved,
  max_memory_reserved, reset_peak_memory_stats (reset_max_memory_allocated, deprecated), empty_cache,
  memory_stats, memory_summary, mem_get_info, memory_snapshot, set_per_process_memory_fraction,
  OutOfMemoryError; mp.cuda.memory._record_memory_history/_snapshot/_dump_snapshot;
- RNG: manual_seed(_all), seed(_all), initial_seed, get_rng_state, set_rng_state (mixprec's one generator);
- CUDA graphs: CUDAGraph, graph(g), graph_pool_handle, make_graphed_callables;
- mp.cuda.nvtx (ranges for Nsight Systems) and mp.cuda.amp (torch.cuda.amp's names).

Without a usable GPU, is_available() is False, device_count() is 0 and every
other function raises mp.DeviceUnavailableError saying why. See docs/cuda.md.
"""
from ..backend.availability import device_count, is_cuda_available as is_available  # noqa: F401
from ._runtime import (DeviceProperties, Event, ExternalStream, Stream, StreamContext, current_device,  # noqa: F401
                       current_stream, default_stream, device, get_device_capability, get_device_name,
                       get_device_properties, is_bf16_supported, is_current_stream_capturing, set_device, set_stream,
                       stream, synchronize)
from .memory import (OutOfMemoryError, empty_cache, max_memory_allocated, max_memory_reserved,  # noqa: F401
                     mem_get_info, memory_allocated, memory_reserved, memory_snapshot, memory_stats, memory_summary,
                     reset_max_memory_allocated, reset_peak_memory_stats, set_per_process_memory_fraction)
from .random import (get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all, seed,  # noqa: F401
                     seed_all, set_rng_state, set_rng_state_all)
from .graphs import CUDAGraph, GraphPool, graph, graph_pool_handle, make_graphed_callables  # noqa: F401
from . import amp, nvtx  # noqa: F401
