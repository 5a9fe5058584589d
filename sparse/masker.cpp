// sparse/masker.cpp -- per-sample histogram select + compress-pack (see masker.h for the rule and the design).
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() through masked operations, which -Wmaybe-uninitialized
// reports at every use (a known false positive). Set before any include so it also covers the intrinsic headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "sparse/masker.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cmath>

#include "core/check.h"
#include "sparse/fp16.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define RAZOR_MASKER_AVX512 1
#include <immintrin.h>
#endif

namespace razor::sparse {

namespace {

constexpr int kBucketShift = 20;                   // key bits 30..20 (exponent + 3 mantissa bits) pick a bucket
constexpr int kBuckets = 1 << (31 - kBucketShift);  // 2048

std::atomic<int64_t> g_tensors{0}, g_samples{0};

inline uint32_t key_of(float v) { return magnitude_key(std::bit_cast<uint32_t>(v)); }

#if RAZOR_MASKER_AVX512
inline __mmask16 valid_lanes(int64_t remaining) {
    return remaining >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << remaining) - 1);
}
inline __mmask16 low_lanes(int count) { return static_cast<__mmask16>((1u << count) - 1); }
#endif

// Appends to `out` the keys of x whose bucket is `bucket`; returns how many (== the bucket's histogram count).
int64_t collect_bucket(const float* x, int64_t n, uint32_t bucket, uint32_t* out, bool portable) {
    int64_t m = 0;
    int64_t i = 0;
#if RAZOR_MASKER_AVX512
    if (!portable) {
        const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), want = _mm512_set1_epi32(static_cast<int>(bucket));
        for (; i < n; i += 16) {
            const __mmask16 valid = valid_lanes(n - i);
            const __m512i key = _mm512_and_si512(_mm512_maskz_loadu_epi32(valid, x + i), abs_mask);
            const __mmask16 hit = _mm512_mask_cmpeq_epu32_mask(valid, _mm512_srli_epi32(key, kBucketShift), want);
            const int cnt = std::popcount(static_cast<unsigned>(hit));
            _mm512_mask_storeu_epi32(out + m, low_lanes(cnt), _mm512_maskz_compress_epi32(hit, key));
            m += cnt;
        }
        return m;
    }
#endif
    for (; i < n; ++i) {
        const uint32_t key = key_of(x[i]);
        if ((key >> kBucketShift) == bucket) out[m++] = key;
    }
    return m;
}

}  // namespace

const char* tie_mode_name(TieMode mode) { return mode == TieMode::Razor ? "razor" : "reference"; }

int64_t prune_rank(int64_t n_s, double ratio) {
    if (n_s <= 0) return 0;
    // The reference computes int(clip(n_s * r, 1, n_s)) in float64 (fp32 could move k by one on large samples).
    const double k = std::clamp(static_cast<double>(n_s) * ratio, 1.0, static_cast<double>(n_s));
    return static_cast<int64_t>(std::floor(k));
}

int64_t keep_count(int64_t n_s, double ratio) { return n_s <= 0 ? 0 : n_s - prune_rank(n_s, ratio) + 1; }

bool masker_simd_enabled() {
#if RAZOR_MASKER_AVX512
    return true;
#else
    return false;
#endif
}

SampleThreshold select_threshold(const float* x, int64_t n, int64_t c, TieMode mode, MaskerScratch& scratch,
                                 bool portable) {
    RAZOR_CHECK(c >= 1 && c <= n) << "masker: keep count " << c << " for a sample of " << n << " elements";
    // 1. Histogram of the top key bits. Two interleaved tables so that runs of equal buckets (common: one exponent
    //    dominates) do not serialise on one counter.
    uint32_t hist[2][kBuckets] = {};
    int64_t i = 0;
    for (; i + 1 < n; i += 2) {
        ++hist[0][key_of(x[i]) >> kBucketShift];
        ++hist[1][key_of(x[i + 1]) >> kBucketShift];
    }
    if (i < n) ++hist[0][key_of(x[i]) >> kBucketShift];

    // 2. From the largest bucket down, find the one holding the c-th largest key.
    int64_t above = 0;   // keys in buckets above `bucket`: all > any key in it
    int bucket = kBuckets - 1;
    for (; bucket > 0; --bucket) {
        const int64_t h = int64_t{hist[0][bucket]} + hist[1][bucket];
        if (above + h >= c) break;
        above += h;
    }
    const int64_t in_bucket = int64_t{hist[0][bucket]} + hist[1][bucket];

    // 3. The exact threshold inside that bucket: the (c - above)-th largest of its keys.
    if (static_cast<int64_t>(scratch.keys.size()) < in_bucket) scratch.keys.resize(static_cast<size_t>(in_bucket));
    uint32_t* keys = scratch.keys.data();
    const int64_t m = collect_bucket(x, n, static_cast<uint32_t>(bucket), keys, portable);
    assert(m == in_bucket);
    const int64_t need = c - above;   // 1 <= need <= m
    std::nth_element(keys, keys + (m - need), keys + m);
    const uint32_t threshold = keys[m - need];
    int64_t greater = above, equal = 0;
    for (int64_t j = 0; j < m; ++j) {
        greater += keys[j] > threshold;
        equal += keys[j] == threshold;
    }

    SampleThreshold t;
    t.key = threshold;
    t.greater = greater;
    if (mode == TieMode::Reference) t.ties = equal;        // |x| >= thr: every tie, zeros included when thr = 0
    else t.ties = threshold == 0 ? 0 : c - greater;         // exactly c; zeros are never stored
    return t;
}

int64_t pack_sample_f32(const float* x, int64_t n, const SampleThreshold& t, uint64_t* bits, float* values,
                        bool portable) {
    const uint32_t threshold = t.key;
    int64_t ties_left = t.ties, out = 0;
    const int64_t words = (n + 63) / 64;
#if RAZOR_MASKER_AVX512
    if (!portable) {
        const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), thr = _mm512_set1_epi32(static_cast<int>(threshold));
        for (int64_t w = 0; w < words; ++w) {
            uint64_t word = 0;
            for (int64_t j = 0; j < 64 && w * 64 + j < n; j += 16) {
                const int64_t base = w * 64 + j;
                const __mmask16 valid = valid_lanes(n - base);
                const __m512 v = _mm512_maskz_loadu_ps(valid, x + base);
                const __m512i key = _mm512_and_si512(_mm512_castps_si512(v), abs_mask);
                __mmask16 keep = _mm512_mask_cmpgt_epu32_mask(valid, key, thr);
                if (ties_left > 0) {   // the lowest-index ties first
                    unsigned eq = _mm512_mask_cmpeq_epu32_mask(valid, key, thr);
                    for (; eq && ties_left > 0; eq &= eq - 1, --ties_left) keep |= static_cast<__mmask16>(eq & -eq);
                }
                const int cnt = std::popcount(static_cast<unsigned>(keep));
                _mm512_mask_storeu_ps(values + out, low_lanes(cnt), _mm512_maskz_compress_ps(keep, v));
                out += cnt;
                word |= static_cast<uint64_t>(keep) << j;
            }
            bits[w] = word;
        }
        return out;
    }
#endif
    for (int64_t w = 0; w < words; ++w) {
        uint64_t word = 0;
        const int64_t end = std::min<int64_t>(64, n - w * 64);
        for (int64_t j = 0; j < end; ++j) {
            const float v = x[w * 64 + j];
            const uint32_t key = key_of(v);
            bool keep = key > threshold;
            if (key == threshold && ties_left > 0) keep = true, --ties_left;
            if (keep) values[out++] = v;
            word |= static_cast<uint64_t>(keep) << j;
        }
        bits[w] = word;
    }
    return out;
}

int64_t pack_sample_f16(const float* x, int64_t n, const SampleThreshold& t, uint64_t* bits, uint16_t* values,
                        bool portable) {
    const uint32_t threshold = t.key;
    int64_t ties_left = t.ties, out = 0;
    const int64_t words = (n + 63) / 64;
#if RAZOR_MASKER_AVX512
    if (!portable) {
        const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), thr = _mm512_set1_epi32(static_cast<int>(threshold));
        for (int64_t w = 0; w < words; ++w) {
            uint64_t word = 0;
            for (int64_t j = 0; j < 64 && w * 64 + j < n; j += 16) {
                const int64_t base = w * 64 + j;
                const __mmask16 valid = valid_lanes(n - base);
                const __m512 v = _mm512_maskz_loadu_ps(valid, x + base);
                const __m512i key = _mm512_and_si512(_mm512_castps_si512(v), abs_mask);
                __mmask16 keep = _mm512_mask_cmpgt_epu32_mask(valid, key, thr);
                if (ties_left > 0) {
                    unsigned eq = _mm512_mask_cmpeq_epu32_mask(valid, key, thr);
                    for (; eq && ties_left > 0; eq &= eq - 1, --ties_left) keep |= static_cast<__mmask16>(eq & -eq);
                }
                const int cnt = std::popcount(static_cast<unsigned>(keep));
                const __m256i h = _mm512_cvtps_ph(_mm512_maskz_compress_ps(keep, v), _MM_FROUND_TO_NEAREST_INT);
                _mm256_mask_storeu_epi16(values + out, low_lanes(cnt), h);
                out += cnt;
                word |= static_cast<uint64_t>(keep) << j;
            }
            bits[w] = word;
        }
        return out;
    }
#endif
    for (int64_t w = 0; w < words; ++w) {
        uint64_t word = 0;
        const int64_t end = std::min<int64_t>(64, n - w * 64);
        for (int64_t j = 0; j < end; ++j) {
            const float v = x[w * 64 + j];
            const uint32_t key = key_of(v);
            bool keep = key > threshold;
            if (key == threshold && ties_left > 0) keep = true, --ties_left;
            if (keep) values[out++] = float_to_half_bits(v);
            word |= static_cast<uint64_t>(keep) << j;
        }
        bits[w] = word;
    }
    return out;
}

MaskerCounters masker_counters() {
    return MaskerCounters{g_tensors.load(std::memory_order_relaxed), g_samples.load(std::memory_order_relaxed)};
}

void count_masker_call(int64_t samples) {
    g_tensors.fetch_add(1, std::memory_order_relaxed);
    g_samples.fetch_add(samples, std::memory_order_relaxed);
}

}  // namespace razor::sparse
