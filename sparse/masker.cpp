// sparse/masker.cpp -- per-sample bracket/histogram select + compress-pack (masker.h: the rule and the design).
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() through masked operations, which -Wmaybe-uninitialized
// reports at every use (a known false positive). Set before any include so it also covers the intrinsic headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "sparse/masker.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>

#include "core/check.h"
#include "sparse/fp16.h"

// Kernel families (core/isa.h): the AVX-512 loops below are compiled when the build's baseline has AVX-512; the AVX2
// kernels live in masker_avx2.cpp with their own target flags, so every x86-64 build has them; the portable loops
// here are the generic family and the tests' oracle. kernels_for() picks one per call from the requested family.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define RAZOR_MASKER_AVX512 1
#include <immintrin.h>
#endif
#if defined(RAZOR_X86_KERNELS)
#include "sparse/masker_avx2.h"
#endif

namespace razor::sparse {

namespace {

// The fallback bracket is an exponent bucket: the 8 exponent bits of the key (bits 30..23).
constexpr int kExponentShift = 23;
constexpr int kTables = 8;          // interleaved exponent histograms: element i counts in table i % 8
constexpr int64_t kFewKeys = 48;    // below this many candidates, nth_element finishes the job

std::atomic<int64_t> g_tensors{0}, g_samples{0};

inline uint32_t key_of(float v) { return magnitude_key(std::bit_cast<uint32_t>(v)); }

#if RAZOR_MASKER_AVX512
inline __mmask16 valid_lanes(int64_t remaining) {
    return remaining >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << remaining) - 1);
}
inline __mmask16 low_lanes(int count) { return static_cast<__mmask16>((1u << count) - 1); }
#endif

enum class Kernels { Portable, Avx2, Avx512 };

// The masker's kernels for a requested family: AVX-512 where it is compiled in, else AVX2 on x86-64 (a family the
// CPU runs was asked for: isa <= active_isa() by the callers' contract), else the portable loops.
Kernels kernels_for(Isa isa) {
#if RAZOR_MASKER_AVX512
    if (isa == Isa::Avx512) return Kernels::Avx512;
#endif
#if defined(RAZOR_X86_KERNELS)
    if (isa >= Isa::Avx2) return Kernels::Avx2;
#endif
    (void)isa;
    return Kernels::Portable;
}

// One pass over a sample: counts the keys above `hi` and writes the keys in [lo, hi] to `out` (in index order).
// Returns the number written; `out` must have room for n. Requires lo <= hi (both callers' brackets are).
//
// AVX-512: whole 16-lane chunks run unmasked. The count above hi accumulates per lane in a vector (a masked add,
// no mask-to-register move on the loop's critical path), and the compressed candidates are stored as a whole
// vector: `m` never exceeds the elements read so far, so [m, m + 16) stays inside out[0, n) while i + 16 <= n
// (the lanes past the count are overwritten by the next chunk or never read). The last partial chunk is masked.
// Counters live in registers: a counter whose address escapes is kept in memory, and its load-add-store was a
// 5-cycle chain per chunk (5.8 GB/s per core, against 33 GB/s the core can read).
int64_t bracket_pass(const float* x, int64_t n, uint32_t lo, uint32_t hi, uint32_t* out, int64_t& above,
                     Kernels kernels) {
    RAZOR_CHECK(lo <= hi) << "masker: empty bracket [" << lo << ", " << hi << "]";
    int64_t m = 0, gt = 0;
    int64_t i = 0;
#if RAZOR_MASKER_AVX512
    if (kernels == Kernels::Avx512) {
        const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), one = _mm512_set1_epi32(1);
        const __m512i vlo = _mm512_set1_epi32(static_cast<int>(lo)), vhi = _mm512_set1_epi32(static_cast<int>(hi));
        const __m512i span = _mm512_set1_epi32(static_cast<int>(hi - lo));   // lo <= key <= hi  <=>  key - lo <= span
        __m512i over = _mm512_setzero_si512();                               // per-lane count of keys > hi
        for (; i + 16 <= n; i += 16) {
            const __m512i key = _mm512_and_si512(_mm512_loadu_si512(x + i), abs_mask);
            over = _mm512_mask_add_epi32(over, _mm512_cmpgt_epu32_mask(key, vhi), over, one);
            const __mmask16 hit = _mm512_cmple_epu32_mask(_mm512_sub_epi32(key, vlo), span);
            _mm512_storeu_si512(out + m, _mm512_maskz_compress_epi32(hit, key));
            m += std::popcount(static_cast<unsigned>(hit));
        }
        if (i < n) {
            const __mmask16 valid = valid_lanes(n - i);
            const __m512i key = _mm512_and_si512(_mm512_maskz_loadu_epi32(valid, x + i), abs_mask);
            over = _mm512_mask_add_epi32(over, _mm512_mask_cmpgt_epu32_mask(valid, key, vhi), over, one);
            const __mmask16 hit = _mm512_mask_cmple_epu32_mask(valid, _mm512_sub_epi32(key, vlo), span);
            const int cnt = std::popcount(static_cast<unsigned>(hit));
            _mm512_mask_storeu_epi32(out + m, low_lanes(cnt), _mm512_maskz_compress_epi32(hit, key));
            m += cnt;
        }
        // widen before summing: each lane's count fits 32 bits, the sum of 16 of them may not
        above = _mm512_reduce_add_epi64(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(over, 0))) +
                _mm512_reduce_add_epi64(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(over, 1)));
        return m;
    }
#endif
#if defined(RAZOR_X86_KERNELS)
    if (kernels == Kernels::Avx2) {   // the whole 8-lane chunks; the tail below
        i = n & ~int64_t{7};
        int64_t gt_chunks = 0;        // its own counter: gt's address must not escape (see above)
        m = detail::bracket_pass_avx2(x, i, lo, hi, out, gt_chunks);
        gt = gt_chunks;
    }
#else
    (void)kernels;
#endif
    for (; i < n; ++i) {
        const uint32_t key = key_of(x[i]);
        gt += key > hi;
        out[m] = key;
        m += key >= lo && key <= hi;
    }
    above = gt;
    return m;
}

// The bracket from a full histogram of the exponent byte of every key (256 buckets): the bucket holding the c-th
// largest key. Eight interleaved tables, because runs of one exponent (zeros after a ReLU, one dominant scale)
// would otherwise serialise on a single counter.
void exponent_bracket(const float* x, int64_t n, int64_t c, uint32_t& lo, uint32_t& hi, int64_t& above) {
    uint32_t hist[kTables][256] = {};
    int64_t i = 0;
    for (; i + kTables <= n; i += kTables)
        for (int t = 0; t < kTables; ++t) ++hist[t][key_of(x[i + t]) >> kExponentShift];
    for (; i < n; ++i) ++hist[0][key_of(x[i]) >> kExponentShift];
    above = 0;
    int bucket = 255;
    for (; bucket > 0; --bucket) {
        int64_t h = 0;
        for (int t = 0; t < kTables; ++t) h += hist[t][bucket];
        if (above + h >= c) break;
        above += h;
    }
    lo = static_cast<uint32_t>(bucket) << kExponentShift;
    hi = lo | ((1u << kExponentShift) - 1);
    // Zeros share exponent 0 with the subnormals; they are never worth refining (if the non-zero subnormals cannot
    // supply the rank, the threshold is 0 -- see select_threshold).
    if (bucket == 0) lo = 1;
}

// Portable pack of one bitmap word (len <= 64 elements): sets `word`, writes the kept values to stage[0, count)
// without branching on the (unpredictable) keep decision, and returns count. Ties at the threshold are rare, so
// that branch is cheap.
inline int64_t stage_word(const float* x, int64_t len, uint32_t threshold, int64_t& ties_left, float* stage,
                          uint64_t& word) {
    uint64_t bits = 0;
    int64_t cnt = 0;
    for (int64_t j = 0; j < len; ++j) {
        const float v = x[j];
        const uint32_t key = key_of(v);
        bool keep = key > threshold;
        if (key == threshold && ties_left > 0) keep = true, --ties_left;
        stage[cnt] = v;
        cnt += keep;
        bits |= static_cast<uint64_t>(keep) << j;
    }
    word = bits;
    return cnt;
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

const char* masker_kernels(Isa isa) {
    switch (kernels_for(isa)) {
        case Kernels::Avx512: return "AVX-512";
        case Kernels::Avx2: return "AVX2";
        case Kernels::Portable: break;
    }
    return "portable scalar";
}

SampleThreshold select_threshold(const float* x, int64_t n, int64_t c, TieMode mode, MaskerScratch& scratch,
                                 Isa isa) {
    const Kernels kernels = kernels_for(isa);
    RAZOR_CHECK(c >= 1 && c <= n) << "masker: keep count " << c << " for a sample of " << n << " elements";
    if (static_cast<int64_t>(scratch.keys.size()) < n) scratch.keys.resize(static_cast<size_t>(n));
    uint32_t* keys = scratch.keys.data();

    // 1. A bracket [lo, hi] of keys that must contain the c-th largest: `above` keys lie above it, and the m
    //    candidates inside it are collected. First try the previous sample's threshold times/divided by
    //    (1 + spread) (samples of one tensor have similar scales; a single SIMD pass), and check it:
    //    above < c <= above + m. Otherwise, or with no
    //    previous sample, take the exponent bucket from a full histogram. Either way the result is exact; the
    //    hint only saves time.
    uint32_t lo = 0, hi = 0;
    int64_t above = 0, m = 0;
    bool found = false;
    if (scratch.hint != 0) {
        const float t = std::bit_cast<float>(scratch.hint);
        lo = std::max<uint32_t>(1, key_of(t / (1.f + scratch.spread)));
        hi = key_of(t * (1.f + scratch.spread));
        m = bracket_pass(x, n, lo, hi, keys, above, kernels);
        found = above < c && c <= above + m;
        ++(found ? scratch.hint_hits : scratch.hint_misses);
        // Narrow the bracket while it keeps hitting (fewer candidates to refine), widen it after a miss.
        scratch.spread = found ? std::max(0.04f, scratch.spread * 0.75f) : std::min(1.f, scratch.spread * 2.f);
    }
    if (!found) {
        exponent_bracket(x, n, c, lo, hi, above);
        int64_t above_hi = 0;
        m = bracket_pass(x, n, lo, hi, keys, above_hi, kernels);
    }
    int64_t need = c - above;   // rank, from the top, of the threshold among the m candidates

    // 2. Refine: histogram the candidates on (key - lo) >> s, at most 2048 bins, keep the bin holding rank `need`,
    //    compact in place; until few candidates remain for nth_element (or one key value: s = 0).
    uint32_t threshold = 0;
    if (need > m) {   // only from bucket 0: fewer non-zero candidates than needed, so the threshold is +0
        above += m;
        m = 0;
    } else {
        uint32_t bins[2048];
        while (m > kFewKeys && hi > lo) {
            const int bin_bits = std::clamp(static_cast<int>(std::bit_width(static_cast<uint64_t>(m))), 4, 11);
            const int span_bits = static_cast<int>(std::bit_width(hi - lo));
            const int s = std::max(0, span_bits - bin_bits);
            const uint32_t nbins = ((hi - lo) >> s) + 1;
            std::fill(bins, bins + nbins, 0u);
            for (int64_t j = 0; j < m; ++j) ++bins[(keys[j] - lo) >> s];
            int64_t cum = 0;
            uint32_t bin = nbins - 1;
            for (;; --bin) {
                if (cum + bins[bin] >= need) break;
                cum += bins[bin];
            }
            above += cum, need -= cum;
            int64_t kept = 0;
            for (int64_t j = 0; j < m; ++j) {
                keys[kept] = keys[j];
                kept += ((keys[j] - lo) >> s) == bin;
            }
            m = kept;
            const uint32_t new_lo = lo + (bin << s);
            hi = std::min<uint64_t>(hi, uint64_t{new_lo} + ((uint64_t{1} << s) - 1));
            lo = new_lo;
        }
        std::nth_element(keys, keys + (m - need), keys + m);
        threshold = keys[m - need];
    }
    int64_t greater = above, equal = 0;
    for (int64_t j = 0; j < m; ++j) {
        greater += keys[j] > threshold;
        equal += keys[j] == threshold;
    }
    scratch.hint = threshold;

    SampleThreshold t;
    t.key = threshold;
    t.greater = greater;
    if (mode == TieMode::Razor) {
        t.ties = threshold == 0 ? 0 : c - greater;   // exactly c; zeros are never stored
    } else if (threshold != 0) {
        t.ties = equal;                              // |x| >= thr: every tie
    } else {
        t.ties = n - greater;                        // thr = 0: the reference keeps every element, zeros included
    }
    return t;
}

#if RAZOR_MASKER_AVX512
// The lanes of one 16-float chunk that stay: |x| above the threshold key, plus the lowest-index ties while the
// sample still has ties to keep (shared by the f32 and f16 packers).
static inline __mmask16 keep_lanes(__m512 v, __mmask16 valid, __m512i abs_mask, __m512i thr, int64_t& ties_left) {
    const __m512i key = _mm512_and_si512(_mm512_castps_si512(v), abs_mask);
    __mmask16 keep = _mm512_mask_cmpgt_epu32_mask(valid, key, thr);
    if (ties_left > 0) {
        unsigned eq = _mm512_mask_cmpeq_epu32_mask(valid, key, thr);
        for (; eq && ties_left > 0; eq &= eq - 1, --ties_left) keep |= static_cast<__mmask16>(eq & -eq);
    }
    return keep;
}
#endif

// The one select-and-pack loop behind both value formats. `store_chunk(dst, keep, v, cnt)` writes the `cnt` kept
// lanes of a 16-float AVX-512 chunk at dst; `store_value(x)` converts one kept value on the portable path.
template <class V, class StoreChunk, class StoreValue>
int64_t pack_sample(const float* x, int64_t n, const SampleThreshold& t, uint64_t* bits, V* values, Isa isa,
                    StoreChunk store_chunk, StoreValue store_value) {
    const uint32_t threshold = t.key;
    const Kernels kernels = kernels_for(isa);
    int64_t ties_left = t.ties, out = 0, w = 0;
    const int64_t words = (n + 63) / 64;
#if RAZOR_MASKER_AVX512
    if (kernels == Kernels::Avx512) {
        const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), thr = _mm512_set1_epi32(static_cast<int>(threshold));
        // A whole word: four unmasked chunks, no per-chunk bounds. (The tie check stays: the threshold element
        // itself is usually a tie to keep, so ties_left is 1 until the walk passes it, half of every sample.)
        for (; w < words; ++w) {
            uint64_t word = 0;
            if ((w + 1) * 64 <= n) {
                for (int j = 0; j < 64; j += 16) {
                    const __m512 v = _mm512_loadu_ps(x + w * 64 + j);
                    const __mmask16 keep = keep_lanes(v, __mmask16(0xFFFF), abs_mask, thr, ties_left);
                    const int cnt = std::popcount(static_cast<unsigned>(keep));
                    store_chunk(values + out, keep, v, cnt);
                    out += cnt;
                    word |= static_cast<uint64_t>(keep) << j;
                }
                bits[w] = word;
                continue;
            }
            for (int64_t j = 0; j < 64 && w * 64 + j < n; j += 16) {
                const int64_t base = w * 64 + j;
                const __mmask16 valid = valid_lanes(n - base);
                const __m512 v = _mm512_maskz_loadu_ps(valid, x + base);
                const __mmask16 keep = keep_lanes(v, valid, abs_mask, thr, ties_left);
                const int cnt = std::popcount(static_cast<unsigned>(keep));
                store_chunk(values + out, keep, v, cnt);
                out += cnt;
                word |= static_cast<uint64_t>(keep) << j;
            }
            bits[w] = word;
        }
        return out;
    }
#else
    (void)store_chunk;
#endif
#if defined(RAZOR_X86_KERNELS)
    if (kernels == Kernels::Avx2) {   // the whole words; a last partial word below
        w = n / 64;
        out = detail::pack_words_avx2(x, w, threshold, ties_left, bits, values);
    }
#else
    (void)kernels;
#endif
    float stage[64];   // one word's kept values, written branch-free, then copied: nothing beyond `values` is touched
    for (; w < words; ++w) {
        const int64_t cnt = stage_word(x + w * 64, std::min<int64_t>(64, n - w * 64), threshold, ties_left, stage,
                                       bits[w]);
        for (int64_t j = 0; j < cnt; ++j) values[out + j] = store_value(stage[j]);
        out += cnt;
    }
    return out;
}

int64_t pack_sample_f32(const float* x, int64_t n, const SampleThreshold& t, uint64_t* bits, float* values,
                        Isa isa) {
    return pack_sample(
        x, n, t, bits, values, isa,
        [](float* dst, [[maybe_unused]] auto keep, [[maybe_unused]] auto v, [[maybe_unused]] int cnt) {
#if RAZOR_MASKER_AVX512
            _mm512_mask_storeu_ps(dst, low_lanes(cnt), _mm512_maskz_compress_ps(keep, v));
#else
            (void)dst;
#endif
        },
        [](float x) { return x; });
}

int64_t pack_sample_f16(const float* x, int64_t n, const SampleThreshold& t, uint64_t* bits, uint16_t* values,
                        Isa isa) {
    return pack_sample(
        x, n, t, bits, values, isa,
        [](uint16_t* dst, [[maybe_unused]] auto keep, [[maybe_unused]] auto v, [[maybe_unused]] int cnt) {
#if RAZOR_MASKER_AVX512
            const __m256i h = _mm512_cvtps_ph(_mm512_maskz_compress_ps(keep, v), _MM_FROUND_TO_NEAREST_INT);
            _mm256_mask_storeu_epi16(dst, low_lanes(cnt), h);
#else
            (void)dst;
#endif
        },
        [](float x) { return float_to_half_bits(x); });
}

MaskerCounters masker_counters() {
    return MaskerCounters{g_tensors.load(std::memory_order_relaxed), g_samples.load(std::memory_order_relaxed)};
}

void count_masker_call(int64_t samples) {
    g_tensors.fetch_add(1, std::memory_order_relaxed);
    g_samples.fetch_add(samples, std::memory_order_relaxed);
}

}  // namespace razor::sparse
