// core/conv_winograd.cpp -- conv2d's Winograd F(2x2, 3x3) kernels over a batch (see conv_winograd.h).
#include "core/conv_winograd.h"

#include <algorithm>
#include <vector>

#include "core/saved.h"
#include "core/tensor.h"
#include "core/winograd.h"

namespace razor::detail {
namespace {

// out (N, out_channels, H, W) = conv3x3(in (N, in_channels, H, W)) with transformed filters u, plus bias.
void winograd_over_batch(const ConvGeometry& g, const float* u, int64_t in_channels, int64_t out_channels,
                         const float* in, const float* bias, float* out) {
    const int64_t nb = winograd_images_per_call(in_channels, out_channels, g.H, g.W);
    const int64_t per_chunk = winograd_scratch_floats(in_channels, out_channels, g.H, g.W);
    const int64_t chunks = batch_chunks(g.N);
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t n1 = g.N * (c + 1) / chunks;
        for (int64_t n = g.N * c / chunks; n < n1; n += nb)
            winograd_conv3x3(active_isa(), u, out_channels, in_channels, in + n * in_channels * g.hw(), g.H, g.W,
                             std::min(nb, n1 - n), bias, out + n * out_channels * g.hw(), ws + c * per_chunk);
    }
}

}  // namespace

bool conv2d_winograd_supports(const ConvGeometry& g) {
    return winograd_available() && g.KH == 3 && g.KW == 3 && g.sh == 1 && g.sw == 1 && g.ph == 1 && g.pw == 1 &&
           g.dh == 1 && g.dw == 1 && g.groups == 1 && g.H % 2 == 0 && g.W % 2 == 0;
}

void conv2d_winograd_forward(const ConvGeometry& g, const float* x /*(N, C, H, W)*/, const float* w /*(OC, C, 3, 3)*/,
                             const float* b /*(OC) or null*/, float* y /*(N, OC, H, W)*/) {
    std::vector<float> u(static_cast<size_t>(16 * g.OC * g.C));   // (16, OC, C)
    winograd_filters(w, g.OC, g.C, false, u.data());
    winograd_over_batch(g, u.data(), g.C, g.OC, x, b, y);
}

void conv2d_winograd_input_grad(const ConvGeometry& g, const float* w /*(OC, C, 3, 3)*/,
                                const float* gy /*(N, OC, H, W)*/, float* gx /*(N, C, H, W)*/) {
    std::vector<float> uf(static_cast<size_t>(16 * g.C * g.OC));   // (16, C, OC): the flipped, transposed filters
    winograd_filters(w, g.C, g.OC, true, uf.data());
    winograd_over_batch(g, uf.data(), g.OC, g.C, gy, nullptr, gx);
}

// gW (OC, C, 3, 3) = sum over the batch, by the adjoint of the forward's algebra: per chunk a dU (16, OC, C) partial
// from x and gy, summed over the chunks, then G^T dU G. Exact for a dense x, approximate if x was razored (expanded
// a few images at a time into the chunk's scratch, as on the other paths).
void conv2d_winograd_weight_grad(const ConvGeometry& g, const float* x /*(N, C, H, W) or null*/,
                                 const SavedTensor* x_saved, const float* gy /*(N, OC, H, W)*/,
                                 float* gw /*(OC, C, 3, 3)*/) {
    const int64_t nb = winograd_images_per_call(g.C, g.OC, g.H, g.W), image = g.C * g.hw();
    const int64_t scratch = winograd_scratch_floats(g.C, g.OC, g.H, g.W), du_size = 16 * g.OC * g.C;
    const int64_t per_chunk = du_size + scratch + (x ? 0 : nb * image);
    const int64_t chunks = batch_chunks(g.N);
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* du = ws + c * per_chunk;           // (16, OC, C) partial
        float* x_imgs = du + du_size + scratch;   // (nb, C, H, W) when x is expanded
        const int64_t n1 = g.N * (c + 1) / chunks;
        bool first = true;
        for (int64_t n = g.N * c / chunks; n < n1; n += nb) {
            const int64_t k = std::min(nb, n1 - n);
            const float* xn = x ? x + n * image : (x_saved->unpack_rows(n, k, x_imgs), x_imgs);
            winograd_filter_grad(active_isa(), g.OC, g.C, xn, gy + n * g.OC * g.hw(), g.H, g.W, k, !first, du,
                                 du + du_size);
            first = false;
        }
        if (first) std::fill(du, du + du_size, 0.f);   // an empty chunk
    }
    for (int64_t c = 1; c < chunks; ++c)
        for (int64_t i = 0; i < du_size; ++i) ws[i] += ws[c * per_chunk + i];
    winograd_filter_grad_to_weights(ws, g.OC, g.C, gw);
}

}  // namespace razor::detail
