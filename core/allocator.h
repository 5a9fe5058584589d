// core/allocator.h -- the tracking allocator behind every tensor's storage.
//
// razor's memory claims are made from these counters: live bytes and the peak of live bytes over all tensor
// storage (activations, parameters, gradients, optimizer state, saved tensors). Eigen's internal GEMM packing
// buffers and std::vector temporaries are not tensors and are not counted here; they show up in the process
// peak RSS, which razor reports separately (peak_rss_bytes()).
//
// Buffers are 64-byte aligned (one cache line, one AVX-512 vector).
#pragma once

#include <cstddef>
#include <cstdint>

namespace razor {

struct MemoryStats {
    int64_t live_bytes = 0;    // bytes of tensor storage alive now
    int64_t peak_bytes = 0;    // highest live_bytes since the last reset_peak_memory()
    int64_t allocations = 0;   // number of storage allocations so far (for "no allocation after warm-up" checks)
};

void* tracked_alloc(size_t bytes);          // throws razor::Error on failure, naming the size
void tracked_free(void* ptr, size_t bytes);

MemoryStats memory_stats();
void reset_peak_memory();                   // peak := live, e.g. at the start of each training step

// Peak resident set size of the whole process (VmHWM), in bytes; 0 where /proc is unavailable.
int64_t peak_rss_bytes();
// Current resident set size (VmRSS), in bytes.
int64_t current_rss_bytes();

}  // namespace razor
