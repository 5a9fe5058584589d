// core/allocator.cpp -- tracking, caching allocator (see allocator.h).
#include "core/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
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
constexpr size_t kSmall = 4096;                      // up to here, classes are the multiples of 64 bytes
// 64 KiB: from here on, blocks are carved from segments. With 256 KiB, VR-PGE's sampled subnetworks (new sizes at
// every resample) kept evicting and re-allocating blocks of 64-256 KiB, which glibc maps and unmaps itself: resnet32x2
// keep 0.5, resampled every 50 steps, took 328 blocks from the OS in an interval, 9x the page faults and 1.12x the
// time of the size-class allocator before it; with 64 KiB, 341 ms a step against its 342.
constexpr size_t kLarge = size_t{1} << 16;
constexpr size_t kPage = 4096;                       // large blocks are whole pages
// Segments are mapped in multiples of 1 MiB. Where free space ends up decides how much of it later requests can
// use, so the unit moves the process peak: mobilenet_v2 at 224 px, batch 32, --razor 0.9 int8 held 797 MiB with
// 2 MiB, 693 MiB with 256 KiB, 649 MiB with 1 MiB (resnet20: 89-90 MiB for all three).
constexpr size_t kSegmentUnit = size_t{1} << 20;

// ---- small blocks (< 64 KiB): size classes over aligned_alloc ------------------------------------------------
// A few KiB to a few hundred KiB each (biases, BatchNorm statistics, bitmaps of small layers): kernel round trips
// would cost more than they save, and they are a small part of any step's memory.

// The block size serving a small request: a multiple of 64 up to 4 KiB, then 8 classes per power of two.
size_t size_class(size_t bytes) {
    size_t b = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    if (b <= kSmall) return b;
    const size_t step = std::bit_floor(b) / 8;   // >= 512, so classes stay multiples of 64
    return (b + step - 1) / step * step;
}

struct FreeList {
    std::vector<void*> blocks;
    uint64_t last_used = 0;   // State::tick when a block of this class was last taken or returned
};

// ---- large blocks (>= 64 KiB): best fit in segments, split and coalesced -------------------------------------
// Every activation, gradient and saved tensor of a real model is here. A segment is one mmap'd run of memory (at
// least 1 MiB); a request takes the smallest free block that fits, in any segment, and leaves the rest of it free;
// a freed block merges with free neighbours. So the memory a step frees serves whatever the step asks for next,
// of any size: with one free list per size class instead, a Back Razor step (compressed sizes in the forward,
// dense transient sizes in the backward) kept cached blocks of sizes nobody was asking for, and its process peak
// ran 50 MiB above a 69 MiB tensor peak on resnet20 (docs/ops.md has the figures).
struct Segment;
struct Block {
    char* addr = nullptr;
    size_t size = 0;
    bool free = false;
    Block* prev = nullptr;   // neighbours in the same segment, by address
    Block* next = nullptr;
    Segment* segment = nullptr;
};
struct Segment {
    char* base = nullptr;
    size_t size = 0;
    uint64_t last_used = 0;   // State::tick when it last became wholly free
};
struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const {
        return a->size != b->size ? a->size < b->size : a->addr < b->addr;
    }
};

// All state under one mutex: tensors are allocated outside parallel loops, a few hundred times a step.
struct State {
    std::mutex mutex;
    std::unordered_map<size_t, FreeList> free_small;    // size class -> cached small blocks
    std::unordered_map<void*, size_t> larger;           // live small blocks serving a smaller class -> their class
    std::set<Block*, BySizeThenAddress> free_large;     // free blocks in segments
    std::unordered_map<void*, Block*> live_large;       // live large blocks by address
    int64_t live = 0, peak = 0, max_live = 0;           // max_live: never reset (the budget's base)
    int64_t allocations = 0, os_allocations = 0, cached = 0, os_bytes = 0;
    uint64_t tick = 0;
    std::unordered_map<size_t, int64_t> ghosts;          // small class -> blocks given back, not yet asked for again
    int64_t ghost_segment_bytes = 0;                     // segment bytes given back, not yet needed again
    int64_t regret = 0;                                  // bytes os_budget() grew by: given back, then needed again
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

// The bound on what the allocator holds from the OS (live blocks, the cache, segments' free space): 5/4 of the
// largest live set seen, raised by what giving memory back was seen to cost, up to 3x. No fixed factor fits every
// step: one that asks for many distinct sizes needs more slack before it stops going to the OS. So the allocator
// remembers what it gave back (`ghosts`, `ghost_segment_bytes`), and when it has to go to the OS for such memory
// again, giving it back was a mistake: the budget grows by that much (`regret`). A repeating training step thus
// settles at the smallest budget under which it no longer gives back what it needs again.
int64_t os_budget(const State& s, int64_t max_live) {
    return std::min(3 * max_live, max_live + max_live / 4 + s.regret);
}

// What is given back once the lock is released: (address, bytes, small?).
struct Release {
    void* ptr;
    size_t bytes;
    bool small;
};

// Gives back, least recently used first, cached small classes (other than `keep`) and wholly free segments until
// `over()` is false or nothing is left to give. Under s.mutex.
template <class Over>
void evict_until(State& s, size_t keep, Over over, std::vector<Release>& out) {
    while (over()) {
        FreeList* oldest_list = nullptr;
        size_t oldest_cls = 0;
        uint64_t oldest = std::numeric_limits<uint64_t>::max();
        for (auto& [c, list] : s.free_small)
            if (c != keep && !list.blocks.empty() && list.last_used < oldest)
                oldest_list = &list, oldest_cls = c, oldest = list.last_used;
        Block* whole = nullptr;   // a free block that spans its segment
        for (Block* b : s.free_large)
            if (!b->prev && !b->next && b->segment->last_used < oldest)
                whole = b, oldest = b->segment->last_used, oldest_list = nullptr;
        if (whole) {
            s.free_large.erase(whole);
            const auto bytes = static_cast<int64_t>(whole->segment->size);
            s.cached -= bytes, s.os_bytes -= bytes, s.ghost_segment_bytes += bytes;
            RAZOR_UNPOISON(whole->addr, whole->size);
            out.push_back({whole->segment->base, whole->segment->size, false});
            delete whole->segment;
            delete whole;
        } else if (oldest_list) {
            out.push_back({oldest_list->blocks.back(), oldest_cls, true});
            oldest_list->blocks.pop_back();
            ++s.ghosts[oldest_cls];
            s.cached -= static_cast<int64_t>(oldest_cls);
            s.os_bytes -= static_cast<int64_t>(oldest_cls);
            RAZOR_UNPOISON(out.back().ptr, oldest_cls);
        } else {
            break;
        }
    }
}

void give_back(const std::vector<Release>& released) {
    for (const Release& r : released) {
        if (r.small) std::free(r.ptr);
        else munmap(r.ptr, r.bytes);
    }
}

// MAP_POPULATE: a tensor is written whole right after it is allocated, so its pages are faulted in by one call
// instead of one fault per 4 KiB page (reading torchvision's 98 MiB resnet50 .pth: system time 0.67 -> 0.45 s).
// Segments are our own mappings, not malloc's: a segment given back leaves the resident set at once, where glibc
// may keep freed memory in its heap.
char* map_segment(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<char*>(p);   // page-aligned, so 64-byte aligned
}

// Takes `size` bytes from the front of free block b (removed from the free set by the caller): the rest, if any,
// stays free. Under s.mutex.
void* carve(State& s, Block* b, size_t size) {
    if (b->size > size) {
        auto* rest = new Block{b->addr + size, b->size - size, true, b, b->next, b->segment};
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
        s.free_large.insert(rest);
    }
    b->free = false;
    s.live_large.emplace(b->addr, b);
    s.cached -= static_cast<int64_t>(size);
    RAZOR_UNPOISON(b->addr, size);
    return b->addr;
}

// Returns a live large block to its segment, merged with free neighbours. Under s.mutex.
void free_large_block(State& s, Block* b) {
    s.cached += static_cast<int64_t>(b->size);
    RAZOR_POISON(b->addr, b->size);
    b->free = true;
    for (Block* n : {b->prev, b->next}) {
        if (!n || !n->free) continue;
        s.free_large.erase(n);
        Block* lo = n == b->prev ? n : b;
        Block* hi = lo == n ? b : n;
        lo->size += hi->size;
        lo->next = hi->next;
        if (hi->next) hi->next->prev = lo;
        if (hi == b) b = lo;
        delete hi;
    }
    if (!b->prev && !b->next) b->segment->last_used = ++s.tick;
    s.free_large.insert(b);
}

void* alloc_small(State& s, size_t bytes, std::vector<Release>& released) {
    const size_t cls = size_class(bytes);
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        // A cached block of this class, else of the nearest larger class up to twice it.
        for (size_t c = cls; c <= 2 * cls && c < kLarge; c = size_class(c + 1)) {
            auto it = s.free_small.find(c);
            if (it == s.free_small.end() || it->second.blocks.empty()) continue;
            void* ptr = it->second.blocks.back();
            it->second.blocks.pop_back();
            it->second.last_used = ++s.tick;
            s.cached -= static_cast<int64_t>(c);
            RAZOR_UNPOISON(ptr, c);
            if (c != cls) s.larger.emplace(ptr, c);
            return ptr;
        }
        if (auto ghost = s.ghosts.find(cls); ghost != s.ghosts.end() && ghost->second > 0)
            --ghost->second, s.regret += static_cast<int64_t>(cls);   // a block given back was needed after all
        const int64_t budget = os_budget(s, std::max(s.max_live, s.live + static_cast<int64_t>(bytes)));
        evict_until(s, 0, [&] { return s.os_bytes + static_cast<int64_t>(cls) > budget; }, released);
        s.os_bytes += static_cast<int64_t>(cls);
        ++s.os_allocations;
    }
    return std::aligned_alloc(kAlignment, cls);
}

void* alloc_large(State& s, size_t bytes, std::vector<Release>& released) {
    const size_t size = (bytes + kPage - 1) / kPage * kPage;
    size_t segment_bytes = 0;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        Block probe{nullptr, size};
        if (auto it = s.free_large.lower_bound(&probe); it != s.free_large.end()) {
            Block* b = *it;
            s.free_large.erase(it);
            return carve(s, b, size);
        }
        segment_bytes = (size + kSegmentUnit - 1) / kSegmentUnit * kSegmentUnit;
        const auto seg = static_cast<int64_t>(segment_bytes);
        if (s.ghost_segment_bytes > 0) {   // memory given back was needed after all
            const int64_t again = std::min(s.ghost_segment_bytes, seg);
            s.ghost_segment_bytes -= again, s.regret += again;
        }
        const int64_t budget = os_budget(s, std::max(s.max_live, s.live + static_cast<int64_t>(bytes)));
        evict_until(s, 0, [&] { return s.os_bytes + seg > budget; }, released);
        s.os_bytes += seg, s.cached += seg;
        ++s.os_allocations;
    }
    give_back(released);
    released.clear();
    char* base = map_segment(segment_bytes);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!base) {
        s.os_bytes -= static_cast<int64_t>(segment_bytes), s.cached -= static_cast<int64_t>(segment_bytes);
        return nullptr;
    }
    auto* segment = new Segment{base, segment_bytes, ++s.tick};
    auto* b = new Block{base, segment_bytes, true, nullptr, nullptr, segment};
    return carve(s, b, size);
}

}  // namespace

void* tracked_alloc(size_t bytes) {
    State& s = state();
    std::vector<Release> released;   // given back after the lock is released
    void* ptr = bytes >= kLarge ? alloc_large(s, bytes, released) : alloc_small(s, bytes, released);
    give_back(released);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!ptr) {
        if (bytes < kLarge) s.os_bytes -= static_cast<int64_t>(size_class(bytes));
        throw Error(fmt("out of memory: could not allocate ", bytes, " bytes for a tensor (", bytes >> 20,
                        " MiB; live already ", s.live >> 20, " MiB, cached ", s.cached >> 20,
                        " MiB); hint: lower --batch or use a razor save policy"));
    }
    s.live += static_cast<int64_t>(bytes);
    s.peak = std::max(s.peak, s.live);
    s.max_live = std::max(s.max_live, s.live);
    ++s.allocations;
    return ptr;
}

void tracked_free(void* ptr, size_t bytes) {
    if (!ptr) return;
    State& s = state();
    std::vector<Release> released;   // given back after the lock is released
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.live -= static_cast<int64_t>(bytes);
        if (bytes >= kLarge) {
            auto it = s.live_large.find(ptr);
            RAZOR_CHECK(it != s.live_large.end()) << "tracked_free: " << ptr << " is not a live tensor block";
            Block* b = it->second;
            s.live_large.erase(it);
            free_large_block(s, b);
        } else {
            size_t cls = size_class(bytes);
            if (!s.larger.empty())
                if (auto it = s.larger.find(ptr); it != s.larger.end()) cls = it->second, s.larger.erase(it);
            FreeList& list = s.free_small[cls];
            list.blocks.push_back(ptr);
            list.last_used = ++s.tick;
            s.cached += static_cast<int64_t>(cls);
            RAZOR_POISON(ptr, cls);
        }
        // The least recently used memory goes back first: sizes in use change (a smaller last batch, eval, VR-PGE's
        // sampled subnetworks every step), and memory just freed is likelier to be asked for again than stale
        // memory (keeping the stale ones cost a VR-PGE compact pass 12 % of its time in the kernel's page clearing).
        evict_until(s, 0, [&] { return s.os_bytes > os_budget(s, s.max_live); }, released);
    }
    give_back(released);
}

void empty_cache() {
    State& s = state();
    std::vector<Release> released;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        evict_until(s, 0, [] { return true; }, released);
        s.ghosts.clear(), s.ghost_segment_bytes = 0, s.regret = 0;   // a fresh start: the budget is learnt again
    }
    give_back(released);
}

MemoryStats memory_stats() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return {s.live, s.peak, s.allocations, s.os_allocations, s.cached, s.os_bytes, s.max_live};
}

void reset_peak_memory() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.peak = s.live;
}

int64_t peak_rss_bytes() { return read_status_kib("VmHWM:"); }
int64_t current_rss_bytes() { return read_status_kib("VmRSS:"); }

}  // namespace razor
