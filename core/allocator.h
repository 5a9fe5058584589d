// core/allocator.h -- the tracking, caching allocator behind every tensor's storage.
//
// razor's memory claims are made from these counters: live bytes and the peak of live bytes over all tensor
// storage (activations, parameters, gradients, optimizer state, saved tensors). Eigen's internal GEMM packing
// buffers and std::vector temporaries are not tensors and are not counted here; they show up in the process
// peak RSS, which razor reports separately (peak_rss_bytes()).
//
// Caching (the activation arena): a freed buffer is not returned to the OS but kept on a free list of its size
// class, and the next request of that class takes it back. A training step asks for the same sizes every step, so
// after the first (warm-up) step it allocates nothing from the OS: no page faults, no kernel clearing of fresh
// pages (docs/bench-ops.md has the perf stat figures). Size classes: multiples of 64 bytes up to 4 KiB, then 8
// classes per power of two (a block is at most 12.5 % larger than asked). A request whose class has no cached block
// takes one of the nearest larger class up to twice the size, which goes back to its own class when freed, so
// steps whose sizes change (VR-PGE's sampled subnetworks) still reuse the cache. What the allocator holds from the OS
// (live blocks at their class size plus the cache) stays at most 3/2 of the highest live_bytes seen, plus what
// evictions were seen to cost, up to 3x: a block freed while that budget is spent, and the cached blocks of the
// least recently used classes when a new block needs room, go back to the OS (blocks of 256 KiB and more are
// mmap'd, so they leave the resident set at once); when a class evicted that way is asked for again, the budget
// grows by that block, so a repeating step settles at the least cache under which it stops going to the OS.
// set_cache_limit bounds the cache alone instead; empty_cache() releases it all, as torch.cuda.empty_cache does for
// PyTorch's caching allocator.
//
// Accounting is unchanged by the cache: live_bytes and peak_bytes count the bytes tensors asked for, whether the
// block came from the OS or the cache; cached blocks are not live. os_allocations counts the requests that went
// to the OS, os_bytes what the allocator holds from it (live blocks at their class size, plus the cache).
//
// Buffers are 64-byte aligned (one cache line, one AVX-512 vector). In AddressSanitizer builds a cached block is
// poisoned, so a use after free is still reported.
#pragma once

#include <cstddef>
#include <cstdint>

namespace razor {

struct MemoryStats {
    int64_t live_bytes = 0;       // bytes of tensor storage alive now
    int64_t peak_bytes = 0;       // highest live_bytes since the last reset_peak_memory()
    int64_t allocations = 0;      // number of storage allocations so far, from the cache or the OS
    int64_t os_allocations = 0;   // of those, the ones the cache could not serve (for "no OS allocation after
                                  // warm-up" checks)
    int64_t cached_bytes = 0;     // bytes in freed blocks kept for reuse
    int64_t os_bytes = 0;         // bytes held from the OS: live blocks (at their size class) + cached_bytes
    int64_t highest_live_bytes = 0;   // highest live_bytes since start (never reset): os_bytes stays within 3/2 to 3x of it
};

void* tracked_alloc(size_t bytes);          // throws razor::Error on failure, naming the size
void tracked_free(void* ptr, size_t bytes);

MemoryStats memory_stats();
void reset_peak_memory();                   // peak := live, e.g. at the start of each training step

// Returns every cached block to the OS (live blocks are untouched) and forgets what the budget learnt.
void empty_cache();

// The most bytes the cache may hold; a negative value restores the default (the allocator holds at most 3/2 of the
// highest live_bytes seen from the OS, more as evictions prove costly, up to 3x).
// Blocks already cached beyond a lower limit go back to the OS as later frees make room.
void set_cache_limit(int64_t bytes);

// Peak resident set size of the whole process (VmHWM), in bytes; 0 where /proc is unavailable.
int64_t peak_rss_bytes();
// Current resident set size (VmRSS), in bytes.
int64_t current_rss_bytes();

}  // namespace razor
