// sparse/fp16.h -- IEEE 754 binary16 ("half") storage conversions for the tape's value codecs.
//
// reference: torch.Tensor.half() / .float() (round-to-nearest-even on the way down, exact on the way up).
// docs: docs/back-razor.md "Value codecs".
//
// Half is a *storage* type in razor: values are rounded to fp16 when the tape packs them and widened back to
// fp32 when backward unpacks them. No arithmetic is ever done in fp16.
//
// Two implementations that agree bit for bit (tests/sparse/test_fp16.cpp checks every half and a sweep of floats):
//   * the F16C instructions (vcvtps2ph / vcvtph2ps), used by the bulk converters when the build targets them
//     (-march=native on any x86 CPU of the last decade);
//   * a portable integer path (float_to_half_bits / half_to_float_bits), used otherwise and as the test oracle.
// Rounding: to nearest, ties to even; overflow (|x| >= 65520) gives +-inf; values below half the smallest
// subnormal (2^-25) flush to +-0; subnormals are produced and read exactly; NaN stays NaN (quietened, top payload
// bits kept), as the hardware does.
#pragma once

#include <bit>
#include <cstdint>

#include "core/float16.h"

namespace razor::sparse {

// fp32 -> fp16 bits, round to nearest even. Portable; bit-identical to F16C's _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT).
constexpr uint16_t float_to_half_bits(float value) {
    const uint32_t x = std::bit_cast<uint32_t>(value);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t abs = x & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u)   // inf stays inf; NaN becomes a quiet NaN with the top 10 payload bits
        return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x0200u | ((abs >> 13) & 0x03FFu) : 0u));
    if (abs >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);   // >= 2^16: overflows to inf
    const uint32_t e = abs >> 23;                                          // biased fp32 exponent
    if (e < 113) {   // below 2^-14: a half subnormal (or zero). Value in units of 2^-24 is m * 2^(e - 126).
        if (abs < 0x33000000u) return sign;                                // < 2^-25: rounds to zero
        const uint32_t m = (abs & 0x007FFFFFu) | 0x00800000u;              // 24-bit significand
        const uint32_t shift = 126 - e;                                    // 14 .. 24
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (q & 1u))) ++q;            // may carry into the smallest normal
        return static_cast<uint16_t>(sign | q);
    }
    // Normal: rebias the exponent (127 -> 15), keep the top 10 mantissa bits, round on the 13 dropped ones. A carry
    // out of the mantissa correctly bumps the exponent, up to inf for values in [65520, 65536).
    uint32_t q = ((e - 112) << 10) | ((abs >> 13) & 0x03FFu);
    const uint32_t rem = abs & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
}

// fp16 bits -> fp32, exact: core/float16.h (the checkpoint readers use it too).
using razor::half_bits_to_float;

// Bulk conversions (F16C when the build has it, else the portable functions above). `portable` forces the
// integer path (tests compare the two).
void floats_to_halves(const float* src, uint16_t* dst, int64_t n, bool portable = false);
void halves_to_floats(const uint16_t* src, float* dst, int64_t n, bool portable = false);

// True when the bulk converters use the F16C instructions in this build.
bool f16c_enabled();

}  // namespace razor::sparse
