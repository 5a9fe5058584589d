// tests/core/test_allocator.cpp -- the caching allocator: small blocks by size class, large blocks split from and
// merged back into segments, exact accounting, the budget on what it holds from the OS, empty_cache.
// (A whole training step that allocates nothing from the OS after warm-up: tests/models/test_arena.cpp.)
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "support/gradcheck.h"

using namespace razor;

namespace {
constexpr int64_t kMiB = int64_t{1} << 20;
}

TEST_CASE("allocator: a freed small block is reused for the same size class; live and peak bytes stay exact") {
    empty_cache();
    const MemoryStats before = memory_stats();
    reset_peak_memory();
    void* first = nullptr;
    {
        Tensor a = Tensor::empty({10'000});   // 40,000 bytes: small (< 64 KiB), class 10 * 2^12 = 40,960
        first = a.f32();
        CHECK(memory_stats().live_bytes - before.live_bytes == 40'000);
    }
    const MemoryStats freed = memory_stats();
    CHECK(freed.live_bytes == before.live_bytes);
    CHECK(freed.cached_bytes >= 40'960);
    {
        Tensor b = Tensor::empty({9'900});   // 39,600 bytes: the same class
        CHECK(b.f32() == first);
        CHECK(memory_stats().os_allocations == freed.os_allocations);
        CHECK(memory_stats().allocations == freed.allocations + 1);
        CHECK(memory_stats().live_bytes - before.live_bytes == 39'600);   // what the tensor asked for, not the block
        CHECK(memory_stats().cached_bytes == freed.cached_bytes - 40'960);
    }
    CHECK(memory_stats().peak_bytes - before.live_bytes == 40'000);
    CHECK(memory_stats().live_bytes == before.live_bytes);
}

TEST_CASE("allocator: a freed large block is split for smaller requests and merged back for a larger one") {
    // 48 MiB: larger than any free block another test leaves behind, so the first request maps a segment of its own.
    empty_cache();
    const MemoryStats start = memory_stats();
    char* base = nullptr;
    { Tensor whole = Tensor::empty({12 * kMiB}); base = reinterpret_cast<char*>(whole.f32()); }
    CHECK(memory_stats().os_allocations == start.os_allocations + 1);
    const MemoryStats cached = memory_stats();
    CHECK(cached.cached_bytes - start.cached_bytes == 48 * kMiB);
    {
        // Best fit: both halves come from the freed block, the second right after the first.
        Tensor a = Tensor::empty({6 * kMiB}), b = Tensor::empty({6 * kMiB});
        CHECK(memory_stats().os_allocations == cached.os_allocations);
        CHECK(reinterpret_cast<char*>(a.f32()) == base);
        CHECK(reinterpret_cast<char*>(b.f32()) == base + 24 * kMiB);
        CHECK(memory_stats().cached_bytes == cached.cached_bytes - 48 * kMiB);
        CHECK(memory_stats().os_bytes == cached.os_bytes);
        a.f32()[0] = 1.f, b.f32()[6 * kMiB - 1] = 2.f;   // the whole of each block is usable
    }
    CHECK(memory_stats().cached_bytes == cached.cached_bytes);   // merged back
    {
        Tensor again = Tensor::empty({12 * kMiB});   // the two halves, merged, serve the whole size
        CHECK(reinterpret_cast<char*>(again.f32()) == base);
        CHECK(memory_stats().os_allocations == cached.os_allocations);
    }
    empty_cache();
}

TEST_CASE("allocator: empty_cache gives every wholly free segment and cached class back to the OS") {
    // 64 MiB: larger than any free space another test leaves in a segment, so the block has a segment of its own.
    // Written whole, so that its pages are resident wherever MADV_POPULATE_WRITE is not honoured (qemu-user accepts
    // it and populates nothing).
    { Tensor a = Tensor::full({16 * kMiB}, 1.f), b = Tensor::empty({3, 7}); }
    const MemoryStats held = memory_stats();
    CHECK(held.cached_bytes >= 64 * kMiB);
    const int64_t rss = current_rss_bytes();
    empty_cache();
    const MemoryStats s = memory_stats();
    CHECK(s.os_bytes <= held.os_bytes - 64 * kMiB);
    CHECK(s.cached_bytes <= held.cached_bytes - 64 * kMiB);   // what stays cached: free space in used segments
    CHECK(s.os_bytes - s.cached_bytes >= s.live_bytes);       // live blocks at their rounded size (>= what was asked)
    if (rss > 0) CHECK(current_rss_bytes() <= rss - 48 * kMiB);   // it left the resident set
    Tensor t = Tensor::zeros({1000});   // a block after empty_cache works as before
    CHECK(t.to_vector() == std::vector<float>(1000, 0.f));
}

TEST_CASE("allocator: what it holds from the OS stays within its budget over a stream of new sizes, and the cache still serves") {
    // A cache bounded only by its own size let the process hold live blocks plus up to twice the live peak in stale
    // blocks (286-619 MiB at 224 px). Freeing blocks of ever new sizes must not grow what the process holds.
    // Tensors other tests keep alive (live0) count in os_bytes; the blocks below stay within the headroom
    // highest - live0, so they never raise the highest live set and the budget stays fixed.
    empty_cache();
    { Tensor peak = Tensor::empty({4 << 20}); }   // 16 MiB: the highest live set is at least live0 + this
    const int64_t live0 = memory_stats().live_bytes;
    const int64_t highest = memory_stats().highest_live_bytes;
    const int64_t budget = 3 * highest;   // the hard cap: 5/4 plus what the allocator learnt
    const double headroom = static_cast<double>(highest - live0);
    const auto bytes_of = [&](int i) { return static_cast<int64_t>(headroom / 16.0 * std::exp2(i / 8.0)) / 4 * 4; };
    int64_t freed_in_total = 0;
    for (int i = 0; i < 28; ++i) {   // 28 sizes from headroom/16 up to ~0.7 x headroom, small and large
        { Tensor t = Tensor::empty({bytes_of(i) / 4}); }
        freed_in_total += bytes_of(i);
        CHECK(memory_stats().os_bytes <= budget);
    }
    CHECK(freed_in_total > 3 * highest);   // the sequence would have exceeded the cap without any bound
    CHECK(memory_stats().highest_live_bytes == highest);
    const MemoryStats held = memory_stats();
    CHECK(held.cached_bytes > static_cast<int64_t>(headroom / 2));   // recently freed memory stays cached...
    { Tensor again = Tensor::empty({bytes_of(27) / 4}); }
    CHECK(memory_stats().os_allocations == held.os_allocations);   // ...and serves the next request
    empty_cache();
}

TEST_CASE("allocator: a repeating step that leaves holes settles: after a few rounds it stops going to the OS") {
    // Three blocks live at once, the outer two freed, then a block larger than either hole: the holes cannot serve
    // it, so the first rounds need memory beyond the holes; from then on a round is served from what it freed.
    empty_cache();
    { Tensor peak = Tensor::empty({4 << 20}); }
    const int64_t highest = memory_stats().highest_live_bytes;
    const auto block = [&](double f) { return Tensor::empty({static_cast<int64_t>(f * highest) / 4}); };
    const auto round = [&] {
        Tensor a = block(0.3), b = block(0.3), c = block(0.3);
        a = Tensor(), c = Tensor();
        Tensor d = block(0.55);
    };
    for (int r = 0; r < 4; ++r) round();   // learn
    const int64_t learnt = memory_stats().os_allocations;
    for (int r = 0; r < 6; ++r) round();
    CHECK(memory_stats().os_allocations == learnt);
    CHECK(memory_stats().os_bytes <= 3 * highest);   // within the cap
    empty_cache();
}

TEST_CASE("allocator: free space in pieces that no request fits goes back to the OS, and reused it holds data") {
    // mobilenet_v2 at 224 px asked for 147 MiB with 140 MiB free in pieces: the new segment raised the process peak by
    // all of it. Here: one segment of 4U, three blocks of U carved from it, the middle one freed (holes of U and U),
    // then 1.5U, which fits neither hole: the allocator maps a new segment and, being over 17/16 of the highest live
    // set, gives the holes' pages back.
    empty_cache();
    const int64_t unit = (memory_stats().highest_live_bytes / 4 / (8 * kMiB) + 2) * (8 * kMiB);   // U
    const auto floats = [](int64_t bytes) { return Tensor::empty({bytes / 4}); };
    { Tensor whole = floats(4 * unit); }   // the highest live set is now 4U (at least what it was before)
    Tensor a = floats(unit), b = floats(unit), c = floats(unit);
    a.f32()[0] = 1.f, c.f32()[unit / 4 - 1] = 3.f;
    b = Tensor();
    const int64_t released_before = memory_stats().released_bytes;
    Tensor d = floats(unit + unit / 2);
    const MemoryStats s = memory_stats();
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode;
    std::getline(thp, mode);
    if (mode.find("[never]") != std::string::npos || mode.empty()) CHECK(!s.gives_back_pages);
    if (!s.gives_back_pages) {
        CHECK(s.released_bytes == released_before);   // without huge pages, refaulting costs too much: kept
    } else {
        CHECK(s.released_bytes - released_before >= unit);   // at least one hole's whole huge pages
        CHECK(s.os_bytes - s.released_bytes <= s.highest_live_bytes + s.highest_live_bytes / 16 + 4 * kMiB);
    }
    CHECK(a.f32()[0] == 1.f);   // live blocks beside the released ones are untouched
    CHECK(c.f32()[unit / 4 - 1] == 3.f);
    Tensor e = Tensor::full({unit / 4}, 2.f);   // takes a hole again: released pages fault back in
    if (s.gives_back_pages) CHECK(memory_stats().refaulted_bytes > s.refaulted_bytes);
    const std::vector<float> v = e.to_vector();
    CHECK(std::all_of(v.begin(), v.end(), [](float x) { return x == 2.f; }));
    a = c = d = e = Tensor();
    empty_cache();
}
