// core/bitmask.cpp -- packed 1-bit masks (see bitmask.h).
#include "core/bitmask.h"

#include <bit>

namespace razor {

int64_t BitMask::count() const {
    int64_t total = 0;
    for (uint64_t w : words_) total += std::popcount(w);
    return total;
}

BitMask BitMask::from_positive(const float* values, int64_t n) {
    BitMask mask(n);
    uint64_t* words = mask.words();
    const int64_t num_words = mask.num_words();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t w = 0; w < num_words; ++w) {
        const int64_t begin = w * 64;
        const int64_t end = begin + 64 < n ? begin + 64 : n;
        uint64_t word = 0;
        for (int64_t i = begin; i < end; ++i) word |= uint64_t{values[i] > 0.f} << (i - begin);
        words[w] = word;
    }
    return mask;
}

}  // namespace razor
