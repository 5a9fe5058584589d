// sparse/gelu_code.h -- GELU's saved input as a 4-bit code of GELU's derivative (a razor extension, labelled).
//
// reference: Few-Bit Backward (Novikov et al., ICML 2023): for an elementwise activation keep only a few-bit code of
// its derivative. docs: docs/back-razor.md "GELU input" (spec §5.1: the dense fp16 GELU input is 57% of a block's
// stored bytes at r = 0.9 and "the obvious next target ... an extension, and must be labelled as one").
//
// GELU's backward needs only d(x) = Phi(x) + x phi(x) at each position, never x itself. d takes values in
// [d_min, d_max] = [-0.12890, 1.12890] (minimum at x = -sqrt 2, maximum at x = +sqrt 2) and is increasing between
// them. The code of x is the nearest of 16 equally spaced levels L_j = d_min + j (d_max - d_min) / 15 to d(x):
// 4 bits per element, two per byte (element 2i in the low nibble, 2i + 1 in the high one).
//
// unpack() returns, for code j, the x~_j in [-sqrt 2, sqrt 2] with d(x~_j) = L_j, so GELU's ordinary backward
// would compute g * d(x~_j) = g * L_j (it calls multiply_by_codebook instead, which gives the same values): the derivative it uses is within (d_max - d_min) / 30 = 0.0419 of the exact one,
// plus 0.0016 from the coding table's resolution (tested). The unpacked values are NOT x: only GELU's backward may
// consume them, which is why RazorSavePolicy applies this codec to the gelu op's input only (GeluSave::Derivative4).
//
// Coding: x is looked up in a table of 8192 cells over [-8, 8) (cell 1/512 wide, each holding the code of its
// centre); below -8 the code of d = 0, from 8 on the code of d = 1 (the limits, within 1e-14 there); NaN codes as
// the lowest cell. Stored bytes: ceil(n / 2) (8x smaller than fp32, 4x smaller than the reference's fp16).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/saved.h"

namespace razor::sparse {

class GeluDerivativeCode final : public SavedTensor {
public:
    static std::unique_ptr<GeluDerivativeCode> pack(const Tensor& x);

    Tensor unpack() const override;   // x~ (see above): GELU's derivative at it is the coded level
    // out = g * f(x~_code) with f evaluated at the 16 representatives only (GELU's backward passes its derivative,
    // so out = g * L_code): no unpacked tensor and no per-element exp, the same values as f over unpack().
    bool multiply_by_codebook(float (*f)(float), const float* g, float* out) const override;
    int64_t stored_bytes() const override { return static_cast<int64_t>(storage_->bytes); }
    std::string format() const override { return "gelu-d4"; }
    const Storage* shared_storage() const override { return storage_.get(); }

    const uint8_t* codes() const { return static_cast<const uint8_t*>(storage_->data); }   // (ceil(n / 2))
    static float level(int code);            // L_j, the derivative value code j stands for
    static float representative(int code);   // x~_j
    static int code_of(float x);             // the code pack() gives x
    static constexpr float kMaxError = 0.0419f + 0.0016f;   // |L_code(x) - d(x)| bound (tested)

private:
    GeluDerivativeCode(Shape shape, std::shared_ptr<Storage> storage)
        : SavedTensor(std::move(shape), DType::F32), storage_(std::move(storage)) {}
    std::shared_ptr<Storage> storage_;
};

}  // namespace razor::sparse
