// core/allocator.cpp -- tracking, caching allocator (see allocator.h).
#include "core/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/check.h"

#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define RAZOR_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define RAZOR_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define RAZOR_POISON(p, n) ((void)(p), (void)(n))
#define RAZOR_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace razor {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kSmall = 4096;   // up to here, classes are the multiples of 64 bytes
constexpr size_t kMapThreshold = size_t{1} << 18;   // 256 KiB: classes from here on are mapped by us

// Giving a block back must give it back. Blocks of kMapThreshold bytes and more (every activation of a CIFAR ResNet
// at batch 128) are mapped with mmap and unmapped with munmap, so an evicted block, or one freed while the cache is
// full, leaves the resident set at once. Through malloc it might not: glibc raises its mmap threshold to the size
// of each mapped block freed (up to 32 MiB), so the next blocks of that size come from its heap, where a free in the
// middle stays resident. Smaller blocks come from aligned_alloc (a few KiB each; kernel round trips would cost more).
// MAP_POPULATE: a tensor is written whole right after it is allocated, so its pages are faulted in by one call instead
// of one fault per 4 KiB page (reading torchvision's 98 MiB resnet50 .pth: system time 0.67 -> 0.45 s per read).
void* os_alloc(size_t cls) {
    if (cls < kMapThreshold) return std::aligned_alloc(kAlignment, cls);
    void* p = mmap(nullptr, cls, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;   // page-aligned, so 64-byte aligned
}
void os_free(void* ptr, size_t cls) {
    if (!ptr) return;
    if (cls < kMapThreshold) std::free(ptr);
    else munmap(ptr, cls);
}

// The block size serving a request: a multiple of 64 up to 4 KiB, then 8 classes per power of two.
size_t size_class(size_t bytes) {
    size_t b = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    if (b <= kSmall) return b;
    const size_t step = std::bit_floor(b) / 8;   // >= 512, so classes stay multiples of 64
    return (b + step - 1) / step * step;
}

// All state under one mutex: tensors are allocated outside parallel loops, a few hundred times a step.
struct FreeList {
    std::vector<void*> blocks;
    uint64_t last_used = 0;   // State::tick when a block of this class was last taken or returned
};

struct State {
    std::mutex mutex;
    std::unordered_map<size_t, FreeList> free_blocks;   // size class -> cached blocks
    std::unordered_map<void*, size_t> larger;   // live blocks serving a smaller class -> their own class
    int64_t live = 0, peak = 0, max_live = 0;           // max_live: never reset (the automatic cap)
    int64_t allocations = 0, os_allocations = 0, cached = 0, os_bytes = 0;
    int64_t limit = -1;                                 // set_cache_limit; < 0: os_budget() bounds os_bytes
    uint64_t tick = 0;
    std::unordered_map<size_t, int64_t> ghosts;          // size class -> blocks evicted, not yet asked for again
    int64_t regret = 0;                                  // bytes os_budget() grew by: evicted blocks asked for again
};

// Never destroyed: tensors held by other static objects may be freed after this file's statics would be.
State& state() {
    static State* s = new State;
    return *s;
}

int64_t read_status_kib(const char* key) {
    std::ifstream status("/proc/self/status");
    std::string word;
    while (status >> word) {
        if (word == key) {
            int64_t kib = 0;
            status >> kib;
            return kib * 1024;
        }
    }
    return 0;
}

// Takes a cached block for class cls: of that class, else of the nearest larger class up to twice cls. Null when
// none is cached. Without the borrowing, VR-PGE's sampled subnetworks (new sizes every step, while the cache sits at
// its cap with blocks of other classes) took 374 blocks from the OS in 3 resnet32x2 iterations; with it, 196.
// Under s.mutex.
void* take_cached(State& s, size_t cls) {
    for (size_t c = cls; c <= 2 * cls; c = size_class(c + 1)) {
        auto it = s.free_blocks.find(c);
        if (it == s.free_blocks.end() || it->second.blocks.empty()) continue;
        void* ptr = it->second.blocks.back();
        it->second.blocks.pop_back();
        it->second.last_used = ++s.tick;
        s.cached -= static_cast<int64_t>(c);
        RAZOR_UNPOISON(ptr, c);
        if (c != cls) s.larger.emplace(ptr, c);
        return ptr;
    }
    return nullptr;
}
// The default bound on what the allocator holds from the OS (live blocks at their class size plus the cache): 3/2
// of the largest live set seen, raised by what evictions were seen to cost, up to 3x. A cache bounded by its own
// size instead (it was twice the largest live set) let the process hold up to three times the live peak: measured
// at 224 px, 286-619 MiB of cached blocks on top of 400-970 MiB live (resnet50, mobilenet_v2), more than the whole
// Back Razor tape. But no fixed factor fits every model: with 3/2, resnet20 b128 under Back Razor goes to the OS 5
// times a step (5/4: 342 times, 303 ms against 147), while mobilenet_v2 at 224 px, whose step asks for many more
// distinct sizes, went 270 times a step at 3/2 and 210 at 2x (2.4 s against 1.2 s at 3x). So the allocator
// remembers the classes it evicted (`ghosts`), and when it has to go to the OS for one of them, the eviction was a
// mistake: the budget grows by that block (`regret`). A repeating training step thus settles at the smallest budget
// under which it no longer evicts what it needs again, and a model that needs little cache holds little.
int64_t os_budget(const State& s, int64_t max_live) {
    return std::min(3 * max_live, max_live + max_live / 2 + s.regret);
}

// Moves the blocks of the least recently used classes (other than `keep`) out of the cache into `evicted` until
// `over()` is false or nothing else is cached. Under s.mutex.
template <class Over>
void evict_until(State& s, size_t keep, Over over, std::vector<std::pair<void*, size_t>>& evicted) {
    while (over()) {
        FreeList* oldest = nullptr;
        size_t oldest_cls = 0;
        for (auto& [c, list] : s.free_blocks)
            if (c != keep && !list.blocks.empty() && (!oldest || list.last_used < oldest->last_used))
                oldest = &list, oldest_cls = c;
        if (!oldest) break;
        evicted.emplace_back(oldest->blocks.back(), oldest_cls);
        oldest->blocks.pop_back();
        ++s.ghosts[oldest_cls];
        s.cached -= static_cast<int64_t>(oldest_cls);
        s.os_bytes -= static_cast<int64_t>(oldest_cls);
    }
}

void release(std::vector<std::pair<void*, size_t>>& evicted) {
    for (auto [block, c] : evicted) {
        RAZOR_UNPOISON(block, c);
        os_free(block, c);
    }
}

}  // namespace

void* tracked_alloc(size_t bytes) {
    const size_t cls = size_class(bytes);
    State& s = state();
    void* ptr = nullptr;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        ptr = take_cached(s, cls);
    }
    const bool from_os = ptr == nullptr;
    std::vector<std::pair<void*, size_t>> evicted;   // freed after the lock is released
    if (from_os) {   // make room first: a new block must not take the process past the budget
        std::lock_guard<std::mutex> lock(s.mutex);
        if (auto ghost = s.ghosts.find(cls); ghost != s.ghosts.end() && ghost->second > 0)
            --ghost->second, s.regret += static_cast<int64_t>(cls);   // an evicted block was needed after all
        const int64_t budget = s.limit >= 0 ? std::numeric_limits<int64_t>::max()
                                            : os_budget(s, std::max(s.max_live, s.live + static_cast<int64_t>(bytes)));
        evict_until(s, 0, [&] { return s.os_bytes + static_cast<int64_t>(cls) > budget; }, evicted);
    }
    release(evicted);
    if (from_os) ptr = os_alloc(cls);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!ptr)
        throw Error(fmt("out of memory: could not allocate ", bytes, " bytes for a tensor (", bytes >> 20,
                        " MiB; live already ", s.live >> 20, " MiB, cached ", s.cached >> 20,
                        " MiB); hint: lower --batch or use a razor save policy"));
    s.live += static_cast<int64_t>(bytes);
    s.peak = std::max(s.peak, s.live);
    s.max_live = std::max(s.max_live, s.live);
    ++s.allocations;
    if (from_os) ++s.os_allocations, s.os_bytes += static_cast<int64_t>(cls);
    return ptr;
}

void tracked_free(void* ptr, size_t bytes) {
    if (!ptr) return;
    size_t cls = size_class(bytes);
    State& s = state();
    std::vector<std::pair<void*, size_t>> evicted;   // freed after the lock is released
    size_t own_cls = 0;                              // ptr's class, when ptr goes back to the OS
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (!s.larger.empty())
            if (auto it = s.larger.find(ptr); it != s.larger.end()) cls = it->second, s.larger.erase(it);
        s.live -= static_cast<int64_t>(bytes);
        // Default (no set_cache_limit): the block stays cached while the allocator holds no more than os_budget()
        // from the OS, the blocks of the least recently used classes going back first: sizes in use change (a
        // smaller last batch, eval, VR-PGE's sampled subnetworks every step), and a block just freed is likelier to
        // be asked for again than a stale one (keeping the stale ones cost a VR-PGE compact pass 12 % of its time in
        // the kernel's page clearing). With set_cache_limit(L): the cache alone holds at most L bytes.
        const auto size = static_cast<int64_t>(cls);
        bool keep = false;
        if (s.limit >= 0) {
            if (size <= s.limit) evict_until(s, cls, [&] { return s.cached + size > s.limit; }, evicted);
            keep = s.cached + size <= s.limit;
        } else {   // os_bytes still counts this block
            evict_until(s, cls, [&] { return s.os_bytes > os_budget(s, s.max_live); }, evicted);
            keep = s.os_bytes <= os_budget(s, s.max_live);
        }
        if (keep) {
            FreeList& list = s.free_blocks[cls];
            list.blocks.push_back(ptr);
            list.last_used = ++s.tick;
            s.cached += size;
            RAZOR_POISON(ptr, cls);
            ptr = nullptr;
        } else {
            s.os_bytes -= size;
            own_cls = cls;
            if (s.limit < 0) ++s.ghosts[cls];
        }
    }
    release(evicted);
    os_free(ptr, own_cls);
}

void empty_cache() {
    State& s = state();
    std::unordered_map<size_t, FreeList> blocks;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        blocks.swap(s.free_blocks);
        s.os_bytes -= s.cached;
        s.cached = 0;
        s.ghosts.clear(), s.regret = 0;   // a fresh start: the budget is learnt again
    }
    for (auto& [cls, list] : blocks)
        for (void* p : list.blocks) {
            RAZOR_UNPOISON(p, cls);
            os_free(p, cls);
        }
}

MemoryStats memory_stats() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return {s.live, s.peak, s.allocations, s.os_allocations, s.cached, s.os_bytes, s.max_live};
}

void set_cache_limit(int64_t bytes) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.limit = bytes;
}

void reset_peak_memory() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.peak = s.live;
}

int64_t peak_rss_bytes() { return read_status_kib("VmHWM:"); }
int64_t current_rss_bytes() { return read_status_kib("VmRSS:"); }

}  // namespace razor
