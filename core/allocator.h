// core/allocator.h -- the tracking, caching allocator behind every tensor's storage.
//
// razor's memory claims are made from these counters: live bytes and the peak of live bytes over all tensor
// storage (activations, parameters, gradients, optimizer state, saved tensors). Eigen's internal GEMM packing
// buffers and std::vector temporaries are not tensors and are not counted here; they show up in the process
// peak RSS, which razor reports separately (peak_rss_bytes()).
//
// Caching (the activation arena): a freed buffer is not returned to the OS but kept, and later requests take it
// back. A training step asks for the same sizes every step, so after the first (warm-up) steps it allocates nothing
// from the OS: no page faults, no kernel clearing of fresh pages (docs/bench-ops.md has the perf stat figures).
// - Small blocks (under 64 KiB: biases, statistics, bitmaps of small layers) are cached by size class: multiples of
//   64 bytes up to 4 KiB, then 8 classes per power of two; a request whose class is empty may take a cached block
//   of a larger class up to twice its size.
// - Large blocks (every activation, gradient and saved tensor of a real model) are carved from segments, runs of
//   memory mapped with mmap in multiples of 1 MiB: a request takes the smallest free block that fits (best fit),
//   the rest of that block stays free, and a freed block merges with its free neighbours. Memory the forward frees
//   thus serves whatever size the backward asks for; a cache of size classes kept blocks of sizes nobody was asking
//   for (resnet20 under Back Razor: peak RSS 119 MiB against a 69 MiB tensor peak; now 85-89 MiB).
// What the allocator keeps resident stays within 1/16 above the highest live_bytes seen: where free space in
// segments would exceed that, the pages of the blocks freed longest ago go back to the OS with madvise
// (MADV_DONTNEED), whole 2 MiB huge pages at a time; the blocks stay mapped and free, and taking them again faults
// fresh pages in. Segments ask for transparent huge pages, so that costs one fault per 2 MiB; where the kernel has
// none, free space is kept instead. (A request larger than every free block gets a new segment however much lies
// free in pieces; this is what keeps those pieces from adding to the process peak.)
// What the allocator maps from the OS (live blocks, cached small blocks, segments whole) stays at most 5/4 of the
// highest live_bytes seen, plus what giving memory back was seen to cost, up to 3x: cached small classes and
// wholly free segments, least recently used first, go back to the OS (munmap leaves the resident set at once); when
// memory given back that way has to be mapped again, the budget grows by it, so a repeating step settles at the
// least cache under which it stops going to the OS. empty_cache() gives back all it can, as torch.cuda.empty_cache
// does for PyTorch's caching allocator.
//
// Accounting is unchanged by the cache: live_bytes and peak_bytes count the bytes tensors asked for, whether the
// block came from the OS or the cache; cached blocks are not live. os_allocations counts the requests that went
// to the OS, os_bytes what the allocator holds from it (live blocks at their rounded size, plus the cache).
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
    int64_t cached_bytes = 0;     // bytes in freed blocks kept for reuse (free space in segments included)
    int64_t os_bytes = 0;         // bytes held from the OS: live blocks (at their rounded size) + cached_bytes
    int64_t highest_live_bytes = 0;   // highest live_bytes since start (never reset): the base of the OS budget
    int64_t released_bytes = 0;   // of cached_bytes, the free space whose pages went back to the OS (still mapped)
    int64_t refaulted_bytes = 0;  // released bytes taken again since start: what giving pages back cost in faults
    int64_t peak_resident_bytes = 0;   // highest os_bytes - released_bytes since the last reset_peak_memory(): the
                                       // allocator's share of the process peak (an upper bound)
    bool gives_back_pages = false;     // whether free space's pages go back to the OS: the kernel has transparent
                                       // huge pages, and the segments checked so far got them
};

void* tracked_alloc(size_t bytes);          // throws razor::Error on failure, naming the size
void tracked_free(void* ptr, size_t bytes);

MemoryStats memory_stats();
void reset_peak_memory();   // peak := live and peak resident := resident, e.g. at the start of each training step

// Gives every cached small block and every wholly free segment back to the OS (live blocks, and the free space
// beside them in their segments, stay) and forgets what the budget learnt.
void empty_cache();

// Peak resident set size of the whole process (VmHWM), in bytes; 0 where /proc is unavailable.
int64_t peak_rss_bytes();
// Current resident set size (VmRSS), in bytes.
int64_t current_rss_bytes();

}  // namespace razor
