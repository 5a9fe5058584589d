// tests/core/test_allocator.cpp -- the caching allocator: reuse by size class, exact accounting, empty_cache.
// (A whole training step that allocates nothing from the OS after warm-up: tests/models/test_models.cpp.)
#include <cmath>

#include "support/gradcheck.h"

using namespace razor;

TEST_CASE("allocator: a freed block is reused for the same size class; live and peak bytes stay exact") {
    empty_cache();
    const MemoryStats before = memory_stats();
    reset_peak_memory();
    void* first = nullptr;
    {
        Tensor a = Tensor::empty({100'000});   // 400,000 bytes
        first = a.f32();
        CHECK(memory_stats().live_bytes - before.live_bytes == 400'000);
    }
    const MemoryStats freed = memory_stats();
    CHECK(freed.live_bytes == before.live_bytes);
    CHECK(freed.cached_bytes >= 400'000);
    {
        Tensor b = Tensor::empty({99'000});    // 396,000 bytes: the same size class (8 classes per power of two)
        CHECK(b.f32() == first);
        CHECK(memory_stats().os_allocations == freed.os_allocations);
        CHECK(memory_stats().allocations == freed.allocations + 1);
        CHECK(memory_stats().live_bytes - before.live_bytes == 396'000);   // what the tensor asked for, not the block
        CHECK(memory_stats().cached_bytes == freed.cached_bytes - 425'984);   // the class: 13 * 2^15 bytes
        Tensor c = Tensor::empty({200'000});   // another class: from the OS
        CHECK(memory_stats().os_allocations == freed.os_allocations + 1);
    }
    CHECK(memory_stats().peak_bytes - before.live_bytes == 396'000 + 800'000);
    CHECK(memory_stats().live_bytes == before.live_bytes);
}

TEST_CASE("allocator: an empty class borrows a cached block of a larger class (up to 2x), which returns to its own") {
    empty_cache();
    void* big = nullptr;
    { Tensor a = Tensor::empty({150'000}); big = a.f32(); }   // 600,000 bytes: class 655,360 (10 * 2^16)
    const MemoryStats cached = memory_stats();
    {
        Tensor b = Tensor::empty({110'000});   // 440,000 bytes: class 458,752 (14 * 2^15), empty; 655,360 <= 2 x 458,752
        CHECK(b.f32() == big);
        CHECK(memory_stats().os_allocations == cached.os_allocations);
        CHECK(memory_stats().cached_bytes == cached.cached_bytes - 655'360);
        Tensor c = Tensor::empty({60'000});    // 240,000 bytes: no cached block within 2x -> the OS
        CHECK(memory_stats().os_allocations == cached.os_allocations + 1);
    }
    CHECK(memory_stats().cached_bytes == cached.cached_bytes + 245'760);   // the big block back at its class, + c's
    Tensor d = Tensor::empty({150'000});   // its own class again
    CHECK(d.f32() == big);
    CHECK(memory_stats().os_allocations == cached.os_allocations + 1);
}

TEST_CASE("allocator: empty_cache returns every cached block; os_bytes = live blocks + cache") {
    { Tensor a = Tensor::empty({50'000}), b = Tensor::empty({3, 7}); }
    CHECK(memory_stats().cached_bytes > 0);
    const int64_t held = memory_stats().os_bytes;
    empty_cache();
    const MemoryStats s = memory_stats();
    CHECK(s.cached_bytes == 0);
    CHECK(s.os_bytes < held);
    CHECK(s.os_bytes >= s.live_bytes);   // live blocks at their class size (>= what was asked)
    Tensor t = Tensor::zeros({1000});   // a block after empty_cache comes from the OS and works as before
    CHECK(memory_stats().os_allocations == s.os_allocations + 1);
    CHECK(t.to_vector() == std::vector<float>(1000, 0.f));
}

TEST_CASE("allocator: a full cache gives back the least recently used class, not the block just freed") {
    // Sizes that change between steps (VR-PGE's subnetworks) must not leave the cache full of stale blocks while
    // every new size goes to the OS and back.
    empty_cache();
    set_cache_limit(1'000'000);
    { Tensor stale = Tensor::empty({150'000}); }   // 600,000 bytes: class 655,360, cached
    CHECK(memory_stats().cached_bytes == 655'360);
    const MemoryStats start = memory_stats();
    for (int step = 0; step < 3; ++step) {
        Tensor now = Tensor::empty({180'000});   // 720,000 bytes: class 720,896; the stale block is too small
        // freeing it must evict the stale class (655,360 + 720,896 > the limit) and keep this one
    }
    CHECK(memory_stats().os_allocations == start.os_allocations + 1);   // only the first step's request
    CHECK(memory_stats().cached_bytes == 720'896);
    CHECK(memory_stats().os_bytes == start.os_bytes - 655'360 + 720'896);
    { Tensor too_big = Tensor::empty({300'000}); }   // 1.2 MB: above the limit, straight back to the OS
    CHECK(memory_stats().cached_bytes == 720'896);
    set_cache_limit(-1);
    empty_cache();
}

TEST_CASE("allocator: what it holds from the OS stays within its cap over a stream of new size classes, and the cache still serves") {
    // A cache bounded only by its own size let the process hold live blocks plus up to twice the live peak in stale
    // classes (286-619 MiB at 224 px). Freeing blocks of ever new size classes must not grow what the process holds.
    // Tensors other tests keep alive (live0) count in os_bytes; the blocks below stay within the headroom
    // highest - live0, so they never raise the highest live set and the budget stays fixed.
    empty_cache();
    { Tensor peak = Tensor::empty({4 << 20}); }   // 16 MiB: the highest live set is at least live0 + this
    const int64_t live0 = memory_stats().live_bytes;
    const int64_t highest = memory_stats().highest_live_bytes;
    // The hard cap (3x): 3/2 plus the learnt margin. The ASan+UBSan build, in the sanitizer stage's test order, held
    // up to 2x here (59.8 MB for a 29.9 MB highest live set; not understood yet), the Release build within 3/2.
    const int64_t budget = 3 * highest;
    const double headroom = static_cast<double>(highest - live0);
    const auto bytes_of = [&](int i) { return static_cast<int64_t>(headroom / 16.0 * std::exp2(i / 8.0)) / 4 * 4; };
    int64_t freed_in_total = 0;
    for (int i = 0; i < 28; ++i) {   // 28 size classes from headroom/16 up to ~0.7 x headroom
        { Tensor t = Tensor::empty({bytes_of(i) / 4}); }
        freed_in_total += bytes_of(i);
        CHECK(memory_stats().os_bytes <= budget);
    }
    CHECK(freed_in_total > highest + highest / 2);   // the sequence would have exceeded 3/2 without any bound
    CHECK(memory_stats().highest_live_bytes == highest);
    const MemoryStats held = memory_stats();
    CHECK(held.cached_bytes > static_cast<int64_t>(headroom / 2));   // the most recently freed classes stay cached...
    { Tensor again = Tensor::empty({bytes_of(27) / 4}); }
    CHECK(memory_stats().os_allocations == held.os_allocations);   // ...and serve the next request of their class
    empty_cache();
}

TEST_CASE("allocator: a step that keeps asking for evicted blocks raises the budget until it stops going to the OS") {
    // Three sizes more than 2x apart (no block serves another's request) that fit the cache together only above
    // 3/2 of the highest live set: LRU eviction alone would go to the OS once every round, forever.
    empty_cache();
    { Tensor peak = Tensor::empty({4 << 20}); }
    const int64_t highest = memory_stats().highest_live_bytes;
    const auto round = [&] {
        for (double f : {0.2, 0.45, 0.95}) { Tensor t = Tensor::empty({static_cast<int64_t>(f * highest) / 4}); }
    };
    round(), round(), round();   // learn
    const int64_t learnt = memory_stats().os_allocations;
    for (int i = 0; i < 5; ++i) round();
    CHECK(memory_stats().os_allocations == learnt);
    CHECK(memory_stats().os_bytes > highest + highest / 2);   // the budget grew past 3/2...
    CHECK(memory_stats().os_bytes <= 3 * highest);            // ...and stays within its cap
    empty_cache();
}
