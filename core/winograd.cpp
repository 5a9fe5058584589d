// core/winograd.cpp -- F(2x2, 3x3) convolution (see winograd.h for the algebra): the filter transforms, the
// blocking and the choice of kernel family; the input/output transforms live in winograd_avx2.cpp and
// winograd_avx512.cpp (winograd_kernels.h).
#include "core/winograd.h"

#include <algorithm>

#include "core/check.h"
#include "core/winograd_kernels.h"

namespace razor::detail {

void winograd_filters(const float* w, int64_t OC, int64_t C, bool flip, float* u) {
    const int64_t stride = OC * C;
    for (int64_t oc = 0; oc < OC; ++oc)
        for (int64_t c = 0; c < C; ++c) {
            float g[9];
            for (int k = 0; k < 9; ++k) g[k] = flip ? w[(c * OC + oc) * 9 + (8 - k)] : w[(oc * C + c) * 9 + k];
            float gg[4][3];   // G g: the row combinations
            for (int k = 0; k < 3; ++k) {
                gg[0][k] = g[k];
                gg[1][k] = 0.5f * (g[k] + g[3 + k] + g[6 + k]);
                gg[2][k] = 0.5f * (g[k] - g[3 + k] + g[6 + k]);
                gg[3][k] = g[6 + k];
            }
            for (int p = 0; p < 4; ++p) {   // (G g) G^T: the same combinations of each row's columns
                float* up = u + p * 4 * stride + oc * C + c;
                up[0] = gg[p][0];
                up[stride] = 0.5f * (gg[p][0] + gg[p][1] + gg[p][2]);
                up[2 * stride] = 0.5f * (gg[p][0] - gg[p][1] + gg[p][2]);
                up[3 * stride] = gg[p][2];
            }
        }
}

void winograd_filter_grad_to_weights(const float* du, int64_t OC, int64_t C, float* gw) {
    // U = G g G^T is linear in g, so dL/dg = G^T dU G: with h = G^T dU (3x4), the rows of G^T are (1, .5, .5, 0),
    // (0, .5, -.5, 0), (0, .5, .5, 1); the columns likewise.
    const int64_t stride = OC * C;
    for (int64_t oc = 0; oc < OC; ++oc)
        for (int64_t c = 0; c < C; ++c) {
            float d[4][4];
            for (int p = 0; p < 4; ++p)
                for (int q = 0; q < 4; ++q) d[p][q] = du[(p * 4 + q) * stride + oc * C + c];
            float h[3][4];
            for (int q = 0; q < 4; ++q) {
                h[0][q] = d[0][q] + 0.5f * (d[1][q] + d[2][q]);
                h[1][q] = 0.5f * (d[1][q] - d[2][q]);
                h[2][q] = 0.5f * (d[1][q] + d[2][q]) + d[3][q];
            }
            float* g = gw + (oc * C + c) * 9;
            for (int a = 0; a < 3; ++a) {
                g[a * 3] = h[a][0] + 0.5f * (h[a][1] + h[a][2]);
                g[a * 3 + 1] = 0.5f * (h[a][1] - h[a][2]);
                g[a * 3 + 2] = 0.5f * (h[a][1] + h[a][2]) + h[a][3];
            }
        }
}

int64_t winograd_images_per_call(int64_t C, int64_t OC, int64_t H, int64_t W) {
    if (!winograd_small_map(H, W)) return 1;
    const int64_t tiles = (H / 2) * (W / 2);   // per image
    const int64_t fit = kWinogradBandFloats / (16 * (C + OC) * tiles), wide = (128 + tiles - 1) / tiles;
    return std::max<int64_t>(1, std::max(fit, wide));
}

int64_t winograd_scratch_floats(int64_t C, int64_t OC, int64_t H, int64_t W) {
    const int64_t th = H / 2, tw = W / 2;
    const bool small = winograd_small_map(H, W);
    const int64_t rows = small ? th : winograd_band_rows(C, OC, th, tw);   // tile rows per band
    const int64_t T = small ? winograd_images_per_call(C, OC, H, W) * th * tw : rows * tw;
    // V and M (or G), then the AVX2 kernels' padded input strip of one band: 2 rows + 2 image rows.
    return 16 * ((C + OC) * T + 2 * kWinogradSkew) + (2 * rows + 2) * winograd_strip_width(W);
}

namespace {
// The Winograd kernels exist for these families only (winograd_kernels.h).
bool has_kernels(Isa isa) { return isa == Isa::Avx2 || isa == Isa::Avx512; }
}  // namespace

bool winograd_available(Isa isa) { return has_kernels(isa) && isa_supported(isa); }

bool winograd_available() { return winograd_available(active_isa()); }

void winograd_conv3x3(Isa isa, const float* u, int64_t OC, int64_t C, const float* x, int64_t H, int64_t W,
                      int64_t nb, const float* bias, float* y, float* scratch) {
    if (!winograd_available(isa))
        throw Error(fmt("winograd_conv3x3: no Winograd kernel for ISA family ", isa_name(isa), " on this CPU (it runs ",
                        isa_name(cpu_isa()), "); hint: check winograd_available(isa), or call conv2d"));
#if defined(RAZOR_X86_KERNELS)
    if (isa == Isa::Avx512) return winograd_conv3x3_avx512(u, OC, C, x, H, W, nb, bias, y, scratch);
    winograd_conv3x3_avx2(u, OC, C, x, H, W, nb, bias, y, scratch);
#endif
}

void winograd_filter_grad(Isa isa, int64_t OC, int64_t C, const float* x, const float* gy, int64_t H, int64_t W,
                          int64_t nb, bool accumulate, float* du, float* scratch) {
    if (!winograd_available(isa))
        throw Error(fmt("winograd_filter_grad: no Winograd kernel for ISA family ", isa_name(isa),
                        " on this CPU (it runs ", isa_name(cpu_isa()), "); hint: check winograd_available(isa)"));
#if defined(RAZOR_X86_KERNELS)
    if (isa == Isa::Avx512) return winograd_filter_grad_avx512(OC, C, x, gy, H, W, nb, accumulate, du, scratch);
    winograd_filter_grad_avx2(OC, C, x, gy, H, W, nb, accumulate, du, scratch);
#endif
}

}  // namespace razor::detail
