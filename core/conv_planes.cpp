// core/conv_planes.cpp -- padded-plane conv kernels (see conv_planes.h).
#include "core/conv_planes.h"

#include <algorithm>
#include <vector>

#include "core/gemm.h"
#include "core/saved.h"
#include "core/tensor.h"

namespace razor::detail {
namespace {

struct PaddedGrid {
    int64_t Hp, Wp, plane;   // padded height, width, plane stride (Hp Wp + slack)
    explicit PaddedGrid(const ConvGeometry& g)
        : Hp(g.H + 2 * g.ph), Wp(g.W + 2 * g.pw), plane((g.H + 2 * g.ph) * (g.W + 2 * g.pw) + 2 * g.pw) {}
    int64_t cols(const ConvGeometry& g) const { return g.OH * Wp; }   // output positions on the padded-width grid

    // The offsets of windows (ch, kh, kw) -- row ch * KK + kh * KW + kw of an implicit im2col -- into planes.
    std::vector<int64_t> windows(const ConvGeometry& g, int64_t channels) const {
        std::vector<int64_t> rows(static_cast<size_t>(channels * g.kk()));
        for (int64_t ch = 0, r = 0; ch < channels; ++ch)
            for (int64_t kh = 0; kh < g.KH; ++kh)
                for (int64_t kw = 0; kw < g.KW; ++kw) rows[r++] = ch * plane + kh * Wp + kw;
        return rows;
    }
    // planes (channels, plane) = src (channels, h, w) inside a zero border of (top, left) = (ph, pw). One pass that
    // writes every float once: rows are short (8-32 floats), so plain loops, no memset/memcpy calls per row.
    void pad(const ConvGeometry& g, const float* src, int64_t channels, int64_t h, int64_t w, float* planes) const {
        for (int64_t ch = 0; ch < channels; ++ch) {
            float* d = planes + ch * plane;
            const float* s = src + ch * h * w;
            const int64_t head = g.ph * Wp + g.pw;   // top rows and the first row's left border
            for (int64_t i = 0; i < head; ++i) d[i] = 0.f;
            d += head;
            for (int64_t r = 0; r < h; ++r, s += w, d += Wp) {
#pragma omp simd
                for (int64_t i = 0; i < w; ++i) d[i] = s[i];
                for (int64_t i = w; i < Wp; ++i) d[i] = 0.f;   // right border, then the next row's left border
            }
            for (float* end = planes + (ch + 1) * plane; d < end; ++d) *d = 0.f;   // bottom rows and slack
        }
    }
    // dst (channels, h, w) = the valid columns of src (channels, h * Wp) on the padded-width grid, plus add[ch].
    void unpad(const float* src, int64_t channels, int64_t h, int64_t w, const float* add, float* dst) const {
        for (int64_t ch = 0; ch < channels; ++ch) {
            const float a = add ? add[ch] : 0.f;
            for (int64_t r = 0; r < h; ++r) {
                const float* s = src + (ch * h + r) * Wp;
                float* d = dst + (ch * h + r) * w;
#pragma omp simd
                for (int64_t i = 0; i < w; ++i) d[i] = s[i] + a;
            }
        }
    }
};


}  // namespace

bool conv2d_planes_supports(const ConvGeometry& g) {
    return gemm_rows_available() && g.groups == 1 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
           g.KH == 2 * g.ph + 1 && g.KW == 2 * g.pw + 1;
}

void conv2d_planes_forward(const ConvGeometry& g, const float* x /*(N, C, H, W)*/, const float* w /*(OC, C, KH, KW)*/,
                           const float* b /*(OC) or null*/, float* y /*(N, OC, OH, OW)*/) {
    const PaddedGrid pg(g);
    const int64_t T = pg.cols(g), ckk = g.C * g.kk();
    const std::vector<int64_t> rows = pg.windows(g, g.C);
    const int64_t per_chunk = g.C * pg.plane + g.OC * T;   // xp, y on the padded-width grid
    const int64_t chunks = batch_chunks(g.N);
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* xp = ws + c * per_chunk;    // (C, plane)
        float* yp = xp + g.C * pg.plane;   // (OC, T)
        for (int64_t n = g.N * c / chunks; n < g.N * (c + 1) / chunks; ++n) {
            pg.pad(g, x + n * g.C * g.hw(), g.C, g.H, g.W, xp);
            gemm_rows(false, g.OC, T, ckk, 1.f, w, ckk, nullptr, xp, 0, rows.data(), 0.f, yp, T);
            pg.unpad(yp, g.OC, g.OH, g.OW, b, y + n * g.OC * g.ohw());
        }
    }
}

void conv2d_planes_backward(const ConvGeometry& g, const float* x /*(N, C, H, W) or null*/,
                            const SavedTensor* x_saved, const float* w /*(OC, C, KH, KW) or null*/,
                            const float* gy /*(N, OC, OH, OW)*/, float* gx /*(N, C, H, W) or null*/,
                            float* gw /*(OC, C, KH, KW) or null*/) {
    const PaddedGrid pg(g);
    const int64_t T = pg.cols(g), kk = g.kk(), ckk = g.C * kk, w_size = g.OC * ckk, image = g.C * g.hw();
    const std::vector<int64_t> x_rows = gw ? pg.windows(g, g.C) : std::vector<int64_t>();
    const std::vector<int64_t> g_rows = gx ? pg.windows(g, g.OC) : std::vector<int64_t>();
    std::vector<float> wf;   // (C, OC*KK): wf[c, (oc, a, b)] = W[oc, c, KH-1-a, KW-1-b]
    if (gx) {
        wf.resize(static_cast<size_t>(g.C * g.OC * kk));
        for (int64_t c = 0; c < g.C; ++c)
            for (int64_t oc = 0; oc < g.OC; ++oc)
                for (int64_t t = 0; t < kk; ++t) wf[(c * g.OC + oc) * kk + t] = w[(oc * g.C + c) * kk + (kk - 1 - t)];
    }
    const int64_t chunks = batch_chunks(g.N);
    // Per chunk: gp, xp (when gW), gx on the padded-width grid (when gx), a gW partial, an image scratch.
    const int64_t gp_size = g.OC * pg.plane, xp_size = gw ? g.C * pg.plane : 0, gxp_size = gx ? g.C * T : 0;
    const int64_t scratch = gw && !x ? image : 0;
    const int64_t per_chunk = gp_size + xp_size + gxp_size + (gw ? w_size : 0) + scratch;
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* gp = ws + c * per_chunk;             // (OC, plane)
        float* xp = gp + gp_size;                   // (C, plane)
        float* gxp = xp + xp_size;                  // (C, T)
        float* gwt_c = gxp + gxp_size;              // (C*KK, OC): gW^T partial
        float* x_img = gxp + gxp_size + (gw ? w_size : 0);
        bool first = true;
        for (int64_t n = g.N * c / chunks; n < g.N * (c + 1) / chunks; ++n) {
            pg.pad(g, gy + n * g.OC * g.ohw(), g.OC, g.OH, g.OW, gp);
            if (gw) {
                const float* xn = x ? x + n * image : (x_saved->unpack_rows(n, 1, x_img), x_img);
                pg.pad(g, xn, g.C, g.H, g.W, xp);
                gemm_rows(true, ckk, g.OC, T, 1.f, xp, 0, x_rows.data(), gp + g.ph * pg.Wp + g.pw, pg.plane, nullptr,
                          first ? 0.f : 1.f, gwt_c, g.OC);
                first = false;
            }
            if (gx) {
                gemm_rows(false, g.C, T, g.OC * kk, 1.f, wf.data(), g.OC * kk, nullptr, gp, 0, g_rows.data(), 0.f, gxp, T);
                pg.unpad(gxp, g.C, g.H, g.W, nullptr, gx + n * image);
            }
        }
        if (gw && first) std::fill(gwt_c, gwt_c + w_size, 0.f);   // an empty batch
    }
    if (gw) gw_from_transposed(g, ws + gp_size + xp_size + gxp_size, per_chunk, chunks, gw);
}

}  // namespace razor::detail
