// core/float16.h -- widening the 16-bit float formats to fp32: IEEE binary16 ("half") and bfloat16.
//
// reference: torch.Tensor.float() on float16 / bfloat16 tensors (both exact: every such value is a float).
// docs: docs/models.md "Checkpoint formats" (the readers of .safetensors and .pth files convert with these);
// sparse/fp16.h has the rounding direction (fp32 -> fp16) for the tape's value codecs.
#pragma once

#include <bit>
#include <cstdint>

namespace razor {

// fp16 bits -> fp32, exact (every half is a float). Bit-identical to F16C's _cvtsh_ss (NaNs are quietened).
constexpr float half_bits_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x03FFu;
    if (e == 0) {
        if (m == 0) return std::bit_cast<float>(sign);
        // subnormal: m * 2^-24, renormalised. m has its top set bit at position p (0..9): value = 1.f * 2^(p-24).
        const int p = 31 - std::countl_zero(m);
        const uint32_t mant = (m << (23 - p)) & 0x007FFFFFu;
        return std::bit_cast<float>(sign | (static_cast<uint32_t>(p + 103) << 23) | mant);
    }
    if (e == 31) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13) | (m ? 0x00400000u : 0u));
    return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

// bfloat16 bits -> fp32, exact: bfloat16 is the top half of a float's bits.
constexpr float bfloat16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace razor
