// sparse/masker_avx2.cpp -- the masker's AVX2+FMA kernels (see masker_avx2.h; the rule and design: masker.h).
//
// AVX2 has no compress store (AVX-512's vpcompressd). Instead one vpermd moves the lanes an 8-bit mask selects to
// the front, in index order, with its indices from a 256-entry table, and all 8 lanes are stored: the destination
// needs 8 lanes of room past what is kept, which the bracket pass has (out holds n keys and m <= i) and the pack
// gets from a per-word stage.
#include "sparse/masker_avx2.h"

#include <immintrin.h>

#include <array>
#include <bit>
#include <cstring>

namespace razor::sparse::detail {

namespace {

// Entry m: the positions of m's set bits, ascending, a byte each (2 KiB).
constexpr std::array<uint64_t, 256> kCompressIndex = [] {
    std::array<uint64_t, 256> table{};
    for (unsigned m = 0; m < 256; ++m)
        for (unsigned b = 0, k = 0; b < 8; ++b)
            if (m >> b & 1u) table[m] |= uint64_t{b} << (8 * k++);
    return table;
}();

__m256i compress_index(unsigned mask) {
    return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kCompressIndex[mask])));
}

// Lane bits of key > bound, for keys and bounds in [0, 2^31) (|x|'s bits), where the signed compare is the unsigned one.
unsigned greater_bits(__m256i key, __m256i bound) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(key, bound))));
}

__m256i keys_of(__m256 v) { return _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7FFFFFFF)); }

// One 64-element word: its keep bits, and its kept values compressed to stage[0, count) (stage holds 72 floats).
uint64_t select_word(const float* x, __m256i thr, int64_t& ties_left, float* stage, int64_t& count) {
    uint64_t word = 0;
    int64_t cnt = 0;
    for (int j = 0; j < 64; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + j);
        const __m256i key = keys_of(v);
        unsigned keep = greater_bits(key, thr);
        if (ties_left > 0) {   // the lowest-index ties, while the sample still has ties to keep
            auto eq = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(key, thr))));
            for (; eq && ties_left > 0; eq &= eq - 1, --ties_left) keep |= eq & -eq;
        }
        _mm256_storeu_ps(stage + cnt, _mm256_permutevar8x32_ps(v, compress_index(keep)));
        cnt += std::popcount(keep);
        word |= uint64_t{keep} << j;
    }
    count = cnt;
    return word;
}

// Whole words: each word's kept values go to a stage, then to values as fp32, or as IEEE half (F16C, round to
// nearest even; the stage's lanes past the kept count are converted too and never copied out).
template <class V>
int64_t pack_words(const float* x, int64_t words, uint32_t threshold, int64_t& ties_left, uint64_t* bits, V* values) {
    const __m256i thr = _mm256_set1_epi32(static_cast<int>(threshold));
    alignas(32) float stage[64 + 8];
    alignas(16) uint16_t halves[64 + 8];
    int64_t out = 0;
    for (int64_t w = 0; w < words; ++w) {
        int64_t cnt = 0;
        bits[w] = select_word(x + w * 64, thr, ties_left, stage, cnt);
        const void* kept = stage;
        if constexpr (sizeof(V) == 2) {
            for (int64_t j = 0; j < cnt; j += 8)
                _mm_store_si128(reinterpret_cast<__m128i*>(halves + j),
                                _mm256_cvtps_ph(_mm256_load_ps(stage + j), _MM_FROUND_TO_NEAREST_INT));
            kept = halves;
        }
        // A word with nothing kept copies nothing: values may be null when the whole sample keeps nothing.
        if (cnt > 0) std::memcpy(values + out, kept, static_cast<size_t>(cnt) * sizeof(V));
        out += cnt;
    }
    return out;
}

}  // namespace

int64_t bracket_pass_avx2(const float* x, int64_t n, uint32_t lo, uint32_t hi, uint32_t* out, int64_t& above) {
    const __m256i vlo = _mm256_set1_epi32(static_cast<int>(lo)), vhi = _mm256_set1_epi32(static_cast<int>(hi));
    int64_t m = 0, gt = 0;
    for (int64_t i = 0; i < n; i += 8) {
        const __m256i key = keys_of(_mm256_loadu_ps(x + i));
        const unsigned over = greater_bits(key, vhi), under = greater_bits(vlo, key);
        const unsigned hit = ~(over | under) & 0xFFu;
        gt += std::popcount(over);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + m), _mm256_permutevar8x32_epi32(key, compress_index(hit)));
        m += std::popcount(hit);
    }
    above += gt;
    return m;
}

int64_t pack_words_avx2(const float* x, int64_t words, uint32_t threshold, int64_t& ties_left, uint64_t* bits,
                        float* values) {
    return pack_words(x, words, threshold, ties_left, bits, values);
}

int64_t pack_words_avx2(const float* x, int64_t words, uint32_t threshold, int64_t& ties_left, uint64_t* bits,
                        uint16_t* values) {
    return pack_words(x, words, threshold, ties_left, bits, values);
}

}  // namespace razor::sparse::detail
