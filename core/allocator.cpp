// core/allocator.cpp -- tracking allocator (see allocator.h).
#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/check.h"

namespace razor {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_allocations{0};

constexpr size_t kAlignment = 64;

void raise_peak(int64_t live) {
    int64_t peak = g_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
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
}  // namespace

void* tracked_alloc(size_t bytes) {
    // aligned_alloc needs a size that is a multiple of the alignment; round up (the slack is not counted).
    size_t padded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (padded == 0) padded = kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, padded);
    if (!ptr)
        throw Error(fmt("out of memory: could not allocate ", bytes, " bytes for a tensor (", bytes >> 20,
                        " MiB live already ", g_live.load() >> 20,
                        " MiB); hint: lower --batch or use a razor save policy"));
    int64_t live = g_live.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) + bytes;
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    raise_peak(live);
    return ptr;
}

void tracked_free(void* ptr, size_t bytes) {
    if (!ptr) return;
    std::free(ptr);
    g_live.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

MemoryStats memory_stats() {
    return {g_live.load(), g_peak.load(), g_allocations.load()};
}

void reset_peak_memory() { g_peak.store(g_live.load()); }

int64_t peak_rss_bytes() { return read_status_kib("VmHWM:"); }
int64_t current_rss_bytes() { return read_status_kib("VmRSS:"); }

}  // namespace razor
