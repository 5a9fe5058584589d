// core/bitmask.h -- a packed 1-bit-per-element mask.
//
// Layout: bit i lives in word i / 64 at position i % 64 (LSB-first within 64-bit words). Used for ReLU and
// dropout masks on the tape, and as the bitmap half of Back Razor's pruned tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "core/allocator.h"

namespace razor {

// std::allocator that counts its bytes in the tracking allocator, so saved masks and compressed tape buffers
// show up in razor's memory figures like tensor storage does.
template <class T>
struct TrackedAllocator {
    using value_type = T;
    TrackedAllocator() = default;
    template <class U>
    TrackedAllocator(const TrackedAllocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(tracked_alloc(n * sizeof(T))); }
    void deallocate(T* p, size_t n) { tracked_free(p, n * sizeof(T)); }
    friend bool operator==(const TrackedAllocator&, const TrackedAllocator&) { return true; }
};
template <class T>
using tracked_vector = std::vector<T, TrackedAllocator<T>>;

class BitMask {
public:
    BitMask() = default;
    explicit BitMask(int64_t n) : n_(n), words_(static_cast<size_t>((n + 63) / 64), 0) {}

    int64_t size() const { return n_; }
    int64_t nbytes() const { return static_cast<int64_t>(words_.size()) * 8; }
    bool get(int64_t i) const { return (words_[i >> 6] >> (i & 63)) & 1u; }
    void set(int64_t i) { words_[i >> 6] |= uint64_t{1} << (i & 63); }
    uint64_t* words() { return words_.data(); }
    const uint64_t* words() const { return words_.data(); }
    int64_t num_words() const { return static_cast<int64_t>(words_.size()); }
    int64_t count() const;   // number of set bits

    // Packs (values[i] > 0) for i < n. Parallel over 64-element words.
    static BitMask from_positive(const float* values, int64_t n);

private:
    int64_t n_ = 0;
    tracked_vector<uint64_t> words_;
};

}  // namespace razor
