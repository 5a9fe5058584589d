// core/conv_depthwise.cpp -- depthwise conv kernels (see conv_depthwise.h).
#include "core/conv_depthwise.h"

#include <algorithm>
#include <vector>

#include "core/saved.h"
#include "core/tensor.h"

namespace razor::detail {

namespace {
constexpr int64_t kLanes = 256;   // output columns summed at a time in gW (a 1 KiB stack buffer)
}

bool conv2d_depthwise_supports(const ConvGeometry& g) { return g.groups == g.C; }

void conv2d_depthwise_forward(const ConvGeometry& g, const float* x /*(N, C, H, W)*/,
                              const float* w /*(OC, 1, KH, KW)*/, const float* b /*(OC) or null*/,
                              float* y /*(N, OC, OH, OW)*/) {
    const int64_t mult = g.OC / g.C, ohw = g.ohw(), OW = g.OW;
#pragma omp parallel for collapse(2) schedule(static) if (g.N * g.OC * ohw * g.kk() > (1 << 15))
    for (int64_t n = 0; n < g.N; ++n)
        for (int64_t oc = 0; oc < g.OC; ++oc) {
            const float* xp = x + (n * g.C + oc / mult) * g.hw();   // (H, W)
            const float* wk = w + oc * g.kk();                       // (KH, KW)
            float* yp = y + (n * g.OC + oc) * ohw;                   // (OH, OW)
            std::fill(yp, yp + ohw, b ? b[oc] : 0.f);
            for_each_tap(g, [&](const ConvTap& t) {   // y row oh += w[tap] * x row (oh*sh + ih0), strided by sw
                const float wv = wk[t.kh * g.KW + t.kw];
                for (int64_t oh = t.oh_lo; oh < t.oh_hi; ++oh) {
                    const float* src = xp + (oh * g.sh + t.ih0) * g.W + t.iw0;
                    float* dst = yp + oh * OW;
                    if (g.sw == 1) {
#pragma omp simd
                        for (int64_t ow = t.ow_lo; ow < t.ow_hi; ++ow) dst[ow] += wv * src[ow];
                    } else if (g.sw == 2) {   // a constant stride: vectorised with permutes (a variable one is not)
#pragma omp simd
                        for (int64_t ow = t.ow_lo; ow < t.ow_hi; ++ow) dst[ow] += wv * src[2 * ow];
                    } else {
                        for (int64_t ow = t.ow_lo; ow < t.ow_hi; ++ow) dst[ow] += wv * src[ow * g.sw];
                    }
                }
            });
        }
}

// y[n, oc, oh, ow] = b[oc] + sum_{kh,kw} w[oc, kh, kw] x[n, oc/mult, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw], so:
//   gx[n, ic, ih, iw] = sum over the (oc, kh, kw, oh, ow) that read it of w[oc, kh, kw] gy[n, oc, oh, ow]  -- exact
//   gw[oc, kh, kw]    = sum over n, oh, ow of gy[n, oc, oh, ow] x[n, ic, ih, iw]   -- summed over the batch here;
//                       exact for a dense x
void conv2d_depthwise_backward(const ConvGeometry& g, const float* x /*(N, C, H, W) or null*/,
                               const SavedTensor* x_saved /*x compressed, when x is null and gw is wanted*/,
                               const float* w /*(OC, 1, KH, KW) or null*/, const float* gy /*(N, OC, OH, OW)*/,
                               float* gx /*(N, C, H, W) or null*/, float* gw /*(OC, 1, KH, KW) or null*/) {
    const int64_t mult = g.OC / g.C, ohw = g.ohw(), OW = g.OW, kk = g.kk();
    [[maybe_unused]] const bool big = g.N * g.OC * ohw * kk > (1 << 15);
    if (gx) {
#pragma omp parallel for collapse(2) schedule(static) if (big)
        for (int64_t n = 0; n < g.N; ++n)
            for (int64_t ic = 0; ic < g.C; ++ic) {
                float* gxp = gx + (n * g.C + ic) * g.hw();   // (H, W)
                std::fill(gxp, gxp + g.hw(), 0.f);
                for (int64_t oc = ic * mult; oc < (ic + 1) * mult; ++oc) {
                    const float* gp = gy + (n * g.OC + oc) * ohw;   // (OH, OW)
                    for_each_tap(g, [&](const ConvTap& t) {   // the adjoint: scatter gy row oh into gx row
                        const float wv = w[oc * kk + t.kh * g.KW + t.kw];
                        for (int64_t oh = t.oh_lo; oh < t.oh_hi; ++oh) {
                            float* dst = gxp + (oh * g.sh + t.ih0) * g.W + t.iw0;
                            const float* src = gp + oh * OW;
                            if (g.sw == 2) {
#pragma omp simd
                                for (int64_t ow = t.ow_lo; ow < t.ow_hi; ++ow) dst[2 * ow] += wv * src[ow];
                                continue;
                            }
                            if (g.sw != 1) {
                                for (int64_t ow = t.ow_lo; ow < t.ow_hi; ++ow) dst[ow * g.sw] += wv * src[ow];
                                continue;
                            }
#pragma omp simd
                            for (int64_t ow = t.ow_lo; ow < t.ow_hi; ++ow) dst[ow] += wv * src[ow];
                        }
                    });
                }
            }
    }
    if (gw) {
        // One chunk of images per thread (batch_chunks), each with its own partial sums in double and, for a
        // compressed x, one image expanded at a time into its scratch; the partials are added in chunk order.
        const int64_t chunks = batch_chunks(g.N), image = g.C * g.hw(), kw_size = g.OC * kk;
        std::vector<double> partial(static_cast<size_t>(chunks * kw_size), 0.0);   // (chunks, OC, KH, KW)
        Tensor scratch = x ? Tensor() : Tensor::empty({chunks * image});           // (chunks, C, H, W)
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
        for (int64_t c = 0; c < chunks; ++c) {
            double* acc = partial.data() + c * kw_size;
            float* x_img = x ? nullptr : scratch.f32() + c * image;
            for (int64_t n = g.N * c / chunks; n < g.N * (c + 1) / chunks; ++n) {
                const float* xn = x ? x + n * image : (x_saved->unpack_rows(n, 1, x_img), x_img);   // (C, H, W)
#pragma omp parallel for schedule(static) if (chunks == 1 && big)
                for (int64_t oc = 0; oc < g.OC; ++oc) {
                    const float* xp = xn + (oc / mult) * g.hw();
                    const float* gp = gy + (n * g.OC + oc) * ohw;
                    // One float sum per (n, tap), added up in double. Products are summed per output column
                    // first (`lane`) and the columns once per tap: a reduction per row cost 16 scalar adds for
                    // 56-112 products and was most of this loop's time.
                    for_each_tap(g, [&](const ConvTap& t) {
                        float s = 0.f;
                        for (int64_t c0 = t.ow_lo; c0 < t.ow_hi; c0 += kLanes) {
                            const int64_t c1 = std::min(t.ow_hi, c0 + kLanes);
                            alignas(64) float lane[kLanes];
                            std::fill(lane, lane + (c1 - c0), 0.f);
                            for (int64_t oh = t.oh_lo; oh < t.oh_hi; ++oh) {
                                const float* src = xp + (oh * g.sh + t.ih0) * g.W + t.iw0;
                                const float* gr = gp + oh * OW;
                                if (g.sw == 1) {
#pragma omp simd
                                    for (int64_t ow = c0; ow < c1; ++ow) lane[ow - c0] += gr[ow] * src[ow];
                                } else if (g.sw == 2) {
#pragma omp simd
                                    for (int64_t ow = c0; ow < c1; ++ow) lane[ow - c0] += gr[ow] * src[2 * ow];
                                } else {
                                    for (int64_t ow = c0; ow < c1; ++ow) lane[ow - c0] += gr[ow] * src[ow * g.sw];
                                }
                            }
                            for (int64_t i = 0; i < c1 - c0; ++i) s += lane[i];
                        }
                        acc[oc * kk + t.kh * g.KW + t.kw] += s;
                    });
                }
            }
        }
        for (int64_t i = 0; i < kw_size; ++i) {
            double sum = 0.0;
            for (int64_t c = 0; c < chunks; ++c) sum += partial[static_cast<size_t>(c * kw_size + i)];
            gw[i] = static_cast<float>(sum);
        }
    }
}

}  // namespace razor::detail
