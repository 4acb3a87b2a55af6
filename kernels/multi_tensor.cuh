// multi_tensor.cuh: how a block of a multi-tensor launch finds its work.
//
// One launch processes many tensors: their elements are cut into chunks of
// chunk_size, one block per chunk. The host describes the launch in a chunk table,
// one int64 device array (built by mixprec/amp/_layout.py chunk_table; the CHUNK_*
// positions come from the generated amp_layout.h):
//     [CHUNK_N_TENSORS, CHUNK_N_BLOCKS, CHUNK_CHUNK_SIZE, CHUNK_N_LISTS]   header
//     pointers of list 0 (one per tensor), pointers of list 1, ...         n_lists x T
//     element count of each tensor                                         T
//     tensor of each block, chunk of each block within its tensor          B, B
// A kernel reads several lists (unscale: source and destination; a fused
// optimizer: parameter, gradient, moments) at the same chunk of each tensor.
// The host keeps the table on the device and reuses it while the tensors keep
// their addresses, so a steady loop copies nothing host-to-device and a CUDA
// graph can capture the launch.
#pragma once
#include "amp_layout.h"

struct ChunkWork {
    long long tensor;  // which tensor of the lists
    long long start;   // first element of the chunk within it
    long long n;       // elements in the chunk: chunk_size, fewer in a tensor's last chunk
};

__device__ __forceinline__ ChunkWork chunk_work(const long long* table) {
    const long long n_tensors = table[CHUNK_N_TENSORS];
    const long long n_blocks = table[CHUNK_N_BLOCKS];
    const long long chunk_size = table[CHUNK_CHUNK_SIZE];
    const long long* sizes = table + CHUNK_HEADER_SIZE + table[CHUNK_N_LISTS] * n_tensors;
    ChunkWork w;
    w.tensor = sizes[n_tensors + blockIdx.x];
    w.start = sizes[n_tensors + n_blocks + blockIdx.x] * chunk_size;
    const long long left = sizes[w.tensor] - w.start;
    w.n = left < chunk_size ? left : chunk_size;
    return w;
}

// Tensor `tensor`'s entry in pointer list `list` (for a per-tensor value, such as a step count).
template <typename T>
__device__ __forceinline__ T* list_entry(const long long* table, int list, long long tensor) {
    return reinterpret_cast<T*>(table[CHUNK_HEADER_SIZE + list * table[CHUNK_N_TENSORS] + tensor]);
}

// The chunk's first element in pointer list `list`.
template <typename T>
__device__ __forceinline__ T* chunk_pointer(const long long* table, int list, const ChunkWork& w) {
    return list_entry<T>(table, list, w.tensor) + w.start;
}
