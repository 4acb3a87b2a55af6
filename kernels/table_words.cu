// table_words.cu: a device table written without a host-to-device copy.
//
// mixprec's chunk tables and argument blocks (mixprec/amp/_layout.py) are built on
// the host and read by the kernels from device memory. They reach the device as the
// parameters of this kernel: a launch's parameters travel with the launch itself, so
// no cudaMemcpy is issued, the host waits for nothing, and a CUDA graph capture
// records the write with the launch. Each launch carries TABLE_WORDS words (2 KiB,
// under CUDA's 4 KiB parameter limit); a longer table takes several launches.
#include "amp_layout.h"

struct TableWords {
    long long word[TABLE_WORDS];
};

extern "C" __global__ void write_table_words(long long* table, long long count, TableWords words) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        table[i] = words.word[i];
    }
}
