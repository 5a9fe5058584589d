// core/sparse_samples.h -- a per-sample sparse tensor read in place: bitmap of kept elements + their values.
//
// docs: docs/back-razor.md "Sparse weight gradients". The stored form is Back Razor's (sparse/razored_tensor.h);
// this view lets kernels in core/ read it without depending on sparse/ (SavedTensor::sparse_samples hands it out).
//
// The tensor is (samples, sample_numel) along dim 0. Sample b keeps the elements whose bits are set in
// bitmap[b * words_per_sample ...] (element i is bit i % 64 of word i / 64, LSB first; padding bits are 0), and their
// values are values[offsets[b] .. offsets[b + 1]) in element order: fp32, IEEE half bits, or 8-bit codes with
// value = qparams[2b] + qparams[2b + 1] * code.
#pragma once

#include <bit>
#include <cstdint>

namespace razor {

// The kept fraction at or below which conv2d and linear read a pruned x's sparse form for gW instead of expanding it
// (sparse_weight_grad_faster in core/ops/conv2d.h, linear_sparse_weight_grad_faster in core/ops/linear.h). Measured by
// bench/sparse_grad_bench.cpp on ResNet-20, ResNet-50 and ViT shapes (docs/back-razor.md "Sparse weight gradients"):
// at f = 0.1 (Back Razor's r = 0.9) the sparse kernels were 1.01-2.35x faster on every shape they run, at f = 0.2
// 0.76-1.76x.
inline constexpr double kSparseWeightGradMaxKept = 0.15;

struct SparseSamples {
    enum class Values : uint8_t { F32, F16, U8 };
    int64_t samples = 0, sample_numel = 0, words_per_sample = 0;
    const uint64_t* bitmap = nullptr;   // (samples, words_per_sample)
    const int64_t* offsets = nullptr;   // (samples + 1)
    Values values = Values::F32;
    const void* data = nullptr;         // (offsets[samples]) of the type above
    const float* qparams = nullptr;     // (samples, 2) for U8, else null

    int64_t kept(int64_t b) const { return offsets[b + 1] - offsets[b]; }
    int64_t max_kept() const;           // the largest kept(b)
    double kept_fraction() const;       // offsets[samples] / (samples * sample_numel); 0 for an empty tensor
    const uint64_t* sample_bits(int64_t b) const { return bitmap + b * words_per_sample; }
    // Sample b's kept values as fp32, in element order: kept(b) floats into out.
    void decode_values(int64_t b, float* out) const;
};

// f(i) for every set bit i in [begin, end) of bits, in increasing order.
template <class F>
inline void for_each_set_bit(const uint64_t* bits, int64_t begin, int64_t end, const F& f) {
    if (begin >= end) return;
    const int64_t first_word = begin >> 6, last_word = (end - 1) >> 6;
    for (int64_t w = first_word; w <= last_word; ++w) {
        uint64_t word = bits[w];
        if (w == first_word) word &= ~uint64_t{0} << (begin & 63);
        if (w == last_word && (end & 63)) word &= ~uint64_t{0} >> (64 - (end & 63));
        while (word) {
            f((w << 6) + std::countr_zero(word));
            word &= word - 1;
        }
    }
}

}  // namespace razor
