// tests/sparse/test_fp16.cpp -- fp16 storage conversions: known values, every half, and the portable path equal
// to F16C bit for bit.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sparse/fp16.h"

using namespace razor::sparse;

namespace {
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
}  // namespace

TEST_CASE("fp16: known conversions (round to nearest even, overflow, subnormals)") {
    CHECK(float_to_half_bits(1.f) == 0x3C00);
    CHECK(float_to_half_bits(-2.f) == 0xC000);
    CHECK(float_to_half_bits(0.f) == 0x0000);
    CHECK(float_to_half_bits(-0.f) == 0x8000);
    CHECK(float_to_half_bits(65504.f) == 0x7BFF);                 // largest half
    CHECK(float_to_half_bits(65519.99f) == 0x7BFF);               // below the rounding midpoint to inf
    CHECK(float_to_half_bits(65520.f) == 0x7C00);                 // the midpoint ties to even: inf
    CHECK(float_to_half_bits(1e6f) == 0x7C00);
    CHECK(float_to_half_bits(-std::numeric_limits<float>::infinity()) == 0xFC00);
    CHECK(float_to_half_bits(std::ldexp(1.f, -24)) == 0x0001);    // smallest subnormal
    CHECK(float_to_half_bits(std::ldexp(1.f, -25)) == 0x0000);    // half of it: tie to even -> 0
    CHECK(float_to_half_bits(std::ldexp(1.5f, -25)) == 0x0001);   // above the tie -> 1
    CHECK(float_to_half_bits(std::ldexp(3.f, -25)) == 0x0002);    // 1.5 units: tie -> even (2)
    CHECK(float_to_half_bits(std::ldexp(1.f, -14)) == 0x0400);    // smallest normal
    CHECK(float_to_half_bits(1.f + std::ldexp(1.f, -11)) == 0x3C00);       // tie between 1 and 1+2^-10 -> even
    CHECK(float_to_half_bits(1.f + std::ldexp(3.f, -11)) == 0x3C02);       // tie between odd/even -> even (up)
    CHECK(float_to_half_bits(1.f + std::ldexp(1.f, -11) + std::ldexp(1.f, -20)) == 0x3C01);   // above the tie
    CHECK(std::isnan(half_bits_to_float(float_to_half_bits(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(half_bits_to_float(0x0001) == std::ldexp(1.f, -24));
    CHECK(half_bits_to_float(0x03FF) == std::ldexp(1023.f, -24));
    CHECK(half_bits_to_float(0x7BFF) == 65504.f);
    CHECK(std::isinf(half_bits_to_float(0x7C00)));
}

TEST_CASE("fp16: every half widens exactly and narrows back to itself") {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = half_bits_to_float(static_cast<uint16_t>(h));
        const bool nan = ((h >> 10) & 0x1F) == 0x1F && (h & 0x3FF) != 0;
        if (nan) {
            REQUIRE(std::isnan(f));
            REQUIRE((float_to_half_bits(f) & 0x7E00) == 0x7E00);   // quiet NaN
        } else {
            REQUIRE(float_to_half_bits(f) == h);
        }
    }
}

TEST_CASE("fp16: the bulk converters (F16C when built with it) equal the portable path bit for bit") {
    // Every half, widened both ways.
    std::vector<uint16_t> halves(65536);
    for (uint32_t h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
    std::vector<float> fast(65536), portable(65536);
    halves_to_floats(halves.data(), fast.data(), 65536, false);
    halves_to_floats(halves.data(), portable.data(), 65536, true);
    for (size_t i = 0; i < halves.size(); ++i)
        REQUIRE(std::bit_cast<uint32_t>(fast[i]) == std::bit_cast<uint32_t>(portable[i]));

    // A sweep of float bit patterns (every 4099th, so all exponents and rounding cases) plus the boundaries.
    std::vector<float> floats;
    for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) floats.push_back(from_bits(static_cast<uint32_t>(b)));
    for (uint32_t b : {0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x47800000u, 0x33000000u, 0x33000001u,
                       0x387FE000u, 0x387FF000u, 0x38800000u, 0x7F800001u, 0xFFC00001u})
        floats.push_back(from_bits(b));
    std::vector<uint16_t> h_fast(floats.size()), h_portable(floats.size());
    floats_to_halves(floats.data(), h_fast.data(), static_cast<int64_t>(floats.size()), false);
    floats_to_halves(floats.data(), h_portable.data(), static_cast<int64_t>(floats.size()), true);
    int64_t mismatches = 0;
    for (size_t i = 0; i < floats.size(); ++i) mismatches += h_fast[i] != h_portable[i];
    CHECK(mismatches == 0);
    MESSAGE("fp16 bulk path: " << std::string(f16c_enabled() ? "F16C" : "portable") << ", " << floats.size() << " floats");
}
