// sparse/masker.h -- Back Razor's masker: per-sample top-k by magnitude, selected and packed in one fused pass.
//
// reference: the BackRazor_Neurips22 masker (per-sample k-th value of |x|, keep |x| >= it), with razor's exact-count
// tie rule. docs: docs/back-razor.md "The masker".
//
// Dimension letters: a tensor x of shape (B, ...) is viewed as (B, n_s): B samples (dimension 0), n_s elements per
// sample (everything else). Selection is per sample, over the whole sample, never per row or channel.
//
// Rule (r = the fraction DROPPED, as the reference's "prune ratio"):
//   k   = floor(clip(n_s * r, 1, n_s))    in double, as the reference (its k-th smallest is the threshold)
//   c   = n_s - k + 1                     elements kept per sample: the c largest |x|         (keep_count)
//   ties at the boundary magnitude: the lowest flat (row-major) indices win, so exactly c are selected;
//   zeros (+0 and -0) are never stored: a sample keeps min(c, nnz) values. Its reconstruction is exact anyway.
// So r = 0 keeps every non-zero (lossless), r = 1 keeps one element (the largest |x|; never an empty sample).
//
// Differences from the reference masker (TieMode::Reference reproduces it, for comparisons only):
//   * the reference keeps every element with |x| >= threshold: ties can push the count above c, and a sample with
//     >= k zeros has threshold 0 and keeps EVERYTHING (bitmap + dense values: worse than not pruning). razor
//     keeps exactly c and never stores zeros, so zero-heavy (post-ReLU, dropout) samples shrink instead of grow.
//   * On data without ties at the threshold and without zeros among the kept (the generic fp32 case) the two
//     modes select the same set (tests/sparse/test_masker.cpp checks this).
//
// Magnitudes are compared as keys: key = the fp32 bit pattern with the sign cleared, read as uint32. For
// non-negative floats that order is the numeric order; NaN ranks above inf above every finite value (a NaN is
// kept and propagates, deterministically). Debug builds check that the input is finite.
//
// The kernel (select_threshold + pack_sample) works on one sample at a time, in cache:
//   1. bracket: one SIMD pass counts the keys above [lo, hi] and compress-stores the keys inside it; the bracket
//      is the previous sample's threshold times / divided by (1 + spread), spread adapting between 4% and 100%.
//      If the c-th largest key is not inside (checked from the counts), a histogram of the exponent byte
//      (256 buckets) over the sample gives the bucket holding it instead;
//   2. refine: the candidates (typically 5-15% of the sample) are histogrammed on (key - lo) >> s (<= 2048 bins)
//      and compacted to the bin holding the rank, until a few dozen remain; nth_element picks the exact threshold
//      key T; g = #keys > T, and q = c - g ties at T are kept (q = 0 when T = 0: zeros are not stored);
//   3. pack: one walk in row-major order sets a bit for every key > T and for the first q keys == T, and appends
//      the value to the sample's segment (compress-store: AVX-512 when the build's baseline has it, AVX2 from
//      masker_avx2.cpp on any x86-64 build, else portable).
// No sort, no byte mask, no temporaries the size of the tensor. Results do not depend on thread count, chunking,
// or the kernel family: `isa` picks one (the active family by default, core/isa.h), and Isa::Generic's portable
// scalar loops are bit-identical to the others and tested against them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/isa.h"

namespace razor::sparse {

enum class TieMode : uint8_t {
    Razor,       // exactly c per sample, lowest index wins among equal magnitudes, zeros never stored (default)
    Reference,   // keep every |x| >= threshold (the reference; may keep more than c, and everything at threshold 0)
};
const char* tie_mode_name(TieMode mode);   // "razor", "reference"

// k = floor(clip(n_s * r, 1, n_s)) computed in double: the rank (1-based, ascending) of the threshold magnitude.
int64_t prune_rank(int64_t n_s, double ratio);
// c = n_s - k + 1: how many of a sample's n_s elements are selected (before zeros are dropped). n_s = 0 gives 0.
int64_t keep_count(int64_t n_s, double ratio);

// The magnitude key of a float: |x| as an order-preserving uint32.
inline uint32_t magnitude_key(uint32_t float_bits) { return float_bits & 0x7FFFFFFFu; }

// The outcome of selection on one sample: keep every element whose key > key, plus the first `ties` elements (in
// row-major order) whose key == key.
struct SampleThreshold {
    uint32_t key = 0;       // the c-th largest magnitude key (the reference's threshold)
    int64_t greater = 0;    // elements with key > threshold
    int64_t ties = 0;       // elements with key == threshold that are kept (lowest indices first)
    int64_t kept() const { return greater + ties; }
};

// Per-thread state of select_threshold, reused across the samples of one tensor: the candidate buffer (n_s keys)
// and the previous sample's threshold, which brackets the next search (a speed hint only: results never depend
// on it).
struct MaskerScratch {
    std::vector<uint32_t> keys;
    uint32_t hint = 0;       // the previous threshold key (0: none)
    float spread = 0.25f;    // bracket [hint / (1 + spread), hint * (1 + spread)]; adapts to hits and misses
    int64_t hint_hits = 0, hint_misses = 0;   // statistics (tests, benchmarks)
};

// Finds the threshold of one sample x (n elements) that keeps c of them (1 <= c <= n), under `mode`.
// `isa`: a family the process runs (isa_supported).
SampleThreshold select_threshold(const float* x, int64_t n, int64_t c, TieMode mode, MaskerScratch& scratch,
                                 Isa isa = active_isa());

// Packs one sample under threshold t: writes its ceil(n / 64) bitmap words (LSB-first; bit set = value kept) and
// its t.kept() kept values, converted to fp32 (pack_sample_f32) or fp16 bits (pack_sample_f16), in row-major
// order. `values` must hold t.kept() entries; nothing beyond is written. Returns t.kept().
int64_t pack_sample_f32(const float* x, int64_t n, const SampleThreshold& t, uint64_t* bits, float* values,
                        Isa isa = active_isa());
int64_t pack_sample_f16(const float* x, int64_t n, const SampleThreshold& t, uint64_t* bits, uint16_t* values,
                        Isa isa = active_isa());

// The kernels select/pack run for family isa: "AVX-512" (when the build's baseline has it), "AVX2" or "portable
// scalar".
const char* masker_kernels(Isa isa = active_isa());

// Process-wide counters, for tests and the banner: how many tensors / samples went through the masker.
struct MaskerCounters {
    int64_t tensors = 0;
    int64_t samples = 0;
};
MaskerCounters masker_counters();
void count_masker_call(int64_t samples);   // called once per packed tensor by the codecs

}  // namespace razor::sparse
