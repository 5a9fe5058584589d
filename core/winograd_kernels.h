// core/winograd_kernels.h -- what winograd.cpp and the Winograd kernel families (winograd_avx2.cpp,
// winograd_avx512.cpp) share: the blocking of the tiles and the families' entry points. docs: docs/ops.md
// "conv2d: Winograd F(2x2, 3x3)". Internal to core/; callers use winograd.h.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/winograd.h"

namespace razor::detail {

// Internal linkage on purpose: each kernel file compiles its own copy of these with its own target flags, so no
// AVX-encoded copy can be the one the linker keeps for baseline code.
namespace {

// V and M of one band of tile rows together stay under this many floats (512 KB, half of a Zen 4's L2), so the
// transforms' output is still in cache when the GEMMs read it.
constexpr int64_t kWinogradBandFloats = 128 * 1024;

// Floats between consecutive matrices of V and M beyond their size (one cache line; see winograd_avx512.cpp).
constexpr int64_t kWinogradSkew = 16;

// Tile rows per band for an image of th x tw tiles: as many as fit kWinogradBandFloats, but at least 64 tiles (the
// GEMMs' N; at 8 tiles, 512 channels at 16x16 ran 4x slower than at 64).
inline int64_t winograd_band_rows(int64_t C, int64_t OC, int64_t th, int64_t tw) {
    const int64_t fit = kWinogradBandFloats / (16 * (C + OC) * tw), wide = (64 + tw - 1) / tw;
    return std::clamp<int64_t>(std::max(fit, wide), 1, th);
}

// Maps of at most 16 tiles (8x8 and smaller) take the tiles of several images into one set of GEMMs; larger maps go
// one image at a time, in bands of tile rows.
inline bool winograd_small_map(int64_t H, int64_t W) { return (H / 2) * (W / 2) <= 16; }

// Floats per row of the AVX2 kernels' zero-padded input strip: padded columns 0 .. W + 1 (image columns -1 .. W),
// rounded up so that 8 tiles' loads (padded columns 2 j0 .. 2 j0 + 17) stay inside.
inline int64_t winograd_strip_width(int64_t W) { return 16 * ((W / 2 + 7) / 8) + 2; }

}  // namespace

// The families' kernels, with the contracts of winograd_conv3x3 and winograd_filter_grad (winograd.h). Call only
// where isa_supported() has the family (winograd.cpp does).
void winograd_conv3x3_avx512(const float* u, int64_t OC, int64_t C, const float* x, int64_t H, int64_t W, int64_t nb,
                             const float* bias, float* y, float* scratch);
void winograd_filter_grad_avx512(int64_t OC, int64_t C, const float* x, const float* gy, int64_t H, int64_t W,
                                 int64_t nb, bool accumulate, float* du, float* scratch);
void winograd_conv3x3_avx2(const float* u, int64_t OC, int64_t C, const float* x, int64_t H, int64_t W, int64_t nb,
                           const float* bias, float* y, float* scratch);
void winograd_filter_grad_avx2(int64_t OC, int64_t C, const float* x, const float* gy, int64_t H, int64_t W,
                               int64_t nb, bool accumulate, float* du, float* scratch);

}  // namespace razor::detail
