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
// Segments start on a 2 MiB boundary and ask for transparent huge pages: free space is given back in whole huge
// pages, and taking it again costs one fault per 2 MiB. This VM measured 3.5 ms per MiB faulting 4 KiB pages in,
// against 0.06 ms per MiB for huge pages (a 256 MiB touch after MADV_DONTNEED).
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
// Segments from this size on check that they got huge pages; where fewer than half of one's bytes did, giving pages
// back is turned off for the rest of the run (refaulting them would cost 4 KiB faults).
constexpr size_t kHugeCheckBytes = size_t{8} << 20;
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
    // [released_lo, released_hi): the whole huge pages inside this free block whose memory went back to the OS
    // (MADV_DONTNEED); still mapped, so taking them again faults fresh pages in. Empty when nothing was released.
    char* released_lo = nullptr;
    char* released_hi = nullptr;
    uint64_t last_freed = 0;   // State::tick when this block last became free
    Block* prev = nullptr;     // neighbours in the same segment, by address
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

// Whether the kernel backs madvise(MADV_HUGEPAGE) regions with huge pages. Without them, taking released memory
// again costs a 4 KiB page fault each, 60x the huge-page cost above: resident free space is then kept, not given back.
bool transparent_huge_pages() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    std::getline(f, line);
    return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
}

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
    int64_t released = 0;                                // free bytes in segments whose pages went back to the OS
    int64_t refaulted = 0;                               // released bytes taken again, since start (page faults)
    int64_t peak_resident = 0;                           // highest resident(s) since the last reset_peak_memory()
    bool release_pages = transparent_huge_pages();       // whether free space is given back at all (see below)
};

// Never destroyed: tensors held by other static objects may be freed after this file's statics would be.
State& state() {
    static State* s = new State;
    return *s;
}

int64_t read_proc_kib(const char* path, const char* key) {
    std::ifstream status(path);
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

// The process's anonymous memory backed by huge pages, in bytes.
int64_t anon_huge_page_bytes() { return read_proc_kib("/proc/self/smaps_rollup", "AnonHugePages:"); }

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
            s.released -= whole->released_hi - whole->released_lo;
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

// The bound on what the allocator keeps resident (live blocks and the free space not given back): 1/16 above the
// largest live set seen. At the step's peak almost everything it holds is live, so free space in segments is what
// separates the process peak from the tensor peak. Free space arises where a request fits none of the free blocks:
// mobilenet_v2 at 224 px, batch 32, asked for 147 MiB while 140 MiB lay free in pieces, and the new segment raised
// the process peak by all of it. Giving that free space's pages back keeps the peak near the live set (there:
// 574 -> 460 MiB with --razor 0.9 int8 --freeze-bn), at the cost of faulting pages in again when it is reused
// (with trainable BN, about 0.56 GiB a step: some 35 ms of page clearing, and 60-110 ms of a 0.9-1 s step in
// wall-clock on the 2-core VM; docs/ops.md "Free space goes back in huge pages").
int64_t resident_budget(int64_t max_live) { return max_live + max_live / 16; }
int64_t resident(const State& s) { return s.os_bytes - s.released; }

// The whole huge pages inside [addr, addr + size): [lo, hi), empty (lo >= hi) if none.
std::pair<char*, char*> whole_huge_pages(char* addr, size_t size) {
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(addr) + kHugePage - 1) & ~(kHugePage - 1);
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(addr) + size) & ~(kHugePage - 1);
    return {reinterpret_cast<char*>(lo), reinterpret_cast<char*>(std::max(lo, hi))};
}

// While the resident set is over `budget`, gives back the pages of free blocks, the one freed longest ago first.
// Only whole huge pages go back, so that memory taken again faults in whole huge pages. Under s.mutex.
void release_until(State& s, int64_t budget) {
    if (!s.release_pages) return;
    while (resident(s) > budget) {
        Block* oldest = nullptr;
        for (Block* b : s.free_large) {
            const auto [lo, hi] = whole_huge_pages(b->addr, b->size);
            if (b->released_lo == b->released_hi && lo < hi && (!oldest || b->last_freed < oldest->last_freed))
                oldest = b;
        }
        if (!oldest) return;
        const auto [lo, hi] = whole_huge_pages(oldest->addr, oldest->size);
        RAZOR_UNPOISON(lo, hi - lo);
        madvise(lo, static_cast<size_t>(hi - lo), MADV_DONTNEED);
        RAZOR_POISON(lo, hi - lo);
        oldest->released_lo = lo, oldest->released_hi = hi;
        s.released += hi - lo;
    }
}

void give_back(const std::vector<Release>& released) {
    for (const Release& r : released) {
        if (r.small) std::free(r.ptr);
        else munmap(r.ptr, r.bytes);
    }
}

// Populated at once: a tensor is written whole right after it is allocated, so its pages are faulted in by one call
// instead of one fault per page (reading torchvision's 98 MiB resnet50 .pth: system time 0.67 -> 0.45 s).
// Segments are our own mappings, not malloc's: a segment given back leaves the resident set at once, where glibc
// may keep freed memory in its heap. The mapping is over-allocated by one huge page and trimmed so that it starts
// on a huge-page boundary.
char* map_segment(size_t bytes) {
    const size_t padded = bytes + kHugePage;
    void* p = mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    char* raw = static_cast<char*>(p);
    char* base = whole_huge_pages(raw, padded).first;   // page-aligned, so 64-byte aligned
    if (base > raw) munmap(raw, static_cast<size_t>(base - raw));
    if (raw + padded > base + bytes) munmap(base + bytes, static_cast<size_t>(raw + padded - (base + bytes)));
    madvise(base, bytes, MADV_HUGEPAGE);   // fails harmlessly where the kernel has no THP
#ifdef MADV_POPULATE_WRITE
    if (madvise(base, bytes, MADV_POPULATE_WRITE) == 0) return base;
#endif
    for (size_t i = 0; i < bytes; i += kPage) base[i] = 0;   // kernels before 5.14
    return base;
}

// Takes `size` bytes from the front of free block b (removed from the free set by the caller): the rest, if any,
// stays free. Under s.mutex.
void* carve(State& s, Block* b, size_t size) {
    if (b->released_hi > b->released_lo) {   // the taken part's released pages fault in again; the rest keeps its own
        char* rest_lo = std::max(b->released_lo, b->addr + size);
        const int64_t kept = b->released_hi > rest_lo ? b->released_hi - rest_lo : 0;
        const int64_t taken = (b->released_hi - b->released_lo) - kept;
        s.released -= taken, s.refaulted += taken;
        b->released_lo = kept ? rest_lo : nullptr, b->released_hi = kept ? b->released_hi : nullptr;
    }
    if (b->size > size) {
        auto* rest = new Block{b->addr + size, b->size - size, true, b->released_lo, b->released_hi, b->last_freed,
                               b, b->next, b->segment};
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
        s.free_large.insert(rest);
    }
    b->free = false;
    b->released_lo = b->released_hi = nullptr;
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
    b->last_freed = ++s.tick;
    for (Block* n : {b->prev, b->next}) {
        if (!n || !n->free) continue;
        s.free_large.erase(n);
        Block* lo = n == b->prev ? n : b;
        Block* hi = lo == n ? b : n;
        // One released range per block: the merged block keeps the larger; the other's pages stay given back but
        // are counted resident again (an overestimate, so the budget errs towards giving back more).
        Block* keep = hi->released_hi - hi->released_lo > lo->released_hi - lo->released_lo ? hi : lo;
        Block* drop = keep == hi ? lo : hi;
        s.released -= drop->released_hi - drop->released_lo;
        lo->released_lo = keep->released_lo, lo->released_hi = keep->released_hi;
        lo->last_freed = s.tick;
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
    // Whether the kernel delivers huge pages is checked on real segments (a few per run): THP can be enabled and
    // still fall back to 4 KiB pages, e.g. when physical memory is too fragmented for 2 MiB pages.
    bool check_huge = false;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        Block probe{nullptr, size};
        if (auto it = s.free_large.lower_bound(&probe); it != s.free_large.end()) {
            Block* b = *it;
            s.free_large.erase(it);
            void* ptr = carve(s, b, size);
            release_until(s, resident_budget(std::max(s.max_live, s.live + static_cast<int64_t>(bytes))));
            return ptr;
        }
        segment_bytes = (size + kSegmentUnit - 1) / kSegmentUnit * kSegmentUnit;
        const auto seg = static_cast<int64_t>(segment_bytes);
        if (s.ghost_segment_bytes > 0) {   // memory given back was needed after all
            const int64_t again = std::min(s.ghost_segment_bytes, seg);
            s.ghost_segment_bytes -= again, s.regret += again;
        }
        const int64_t budget = os_budget(s, std::max(s.max_live, s.live + static_cast<int64_t>(bytes)));
        evict_until(s, 0, [&] { return s.os_bytes + seg > budget; }, released);
        release_until(s, resident_budget(std::max(s.max_live, s.live + static_cast<int64_t>(bytes))) - seg);
        s.os_bytes += seg, s.cached += seg;
        ++s.os_allocations;
        check_huge = s.release_pages && segment_bytes >= kHugeCheckBytes;
    }
    give_back(released);
    released.clear();
    const int64_t huge_before = check_huge ? anon_huge_page_bytes() : 0;
    char* base = map_segment(segment_bytes);
    const int64_t huge_gained = check_huge && base ? anon_huge_page_bytes() - huge_before : 0;
    std::lock_guard<std::mutex> lock(s.mutex);
    if (check_huge && base && huge_gained < static_cast<int64_t>(segment_bytes / 2)) s.release_pages = false;
    if (!base) {
        s.os_bytes -= static_cast<int64_t>(segment_bytes), s.cached -= static_cast<int64_t>(segment_bytes);
        return nullptr;
    }
    auto* segment = new Segment{base, segment_bytes, ++s.tick};
    auto* b = new Block{base, segment_bytes, true, nullptr, nullptr, s.tick, nullptr, nullptr, segment};
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
    s.peak_resident = std::max(s.peak_resident, resident(s));
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
        release_until(s, resident_budget(s.max_live));
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
    return {s.live,      s.peak,     s.allocations, s.os_allocations, s.cached, s.os_bytes,
            s.max_live,  s.released, s.refaulted,   s.peak_resident,    s.release_pages};
}

void reset_peak_memory() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.peak = s.live;
    s.peak_resident = resident(s);
}

int64_t peak_rss_bytes() { return read_proc_kib("/proc/self/status", "VmHWM:"); }
int64_t current_rss_bytes() { return read_proc_kib("/proc/self/status", "VmRSS:"); }

}  // namespace razor
