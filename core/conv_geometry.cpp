// core/conv_geometry.cpp -- see conv_geometry.h.
#include "core/conv_geometry.h"

#include "core/runtime.h"

namespace razor {

const char* conv_algorithm_name(ConvAlgorithm algorithm) {
    switch (algorithm) {
        case ConvAlgorithm::Im2col: return "im2col";
        case ConvAlgorithm::Im2colBatched: return "im2col-batched";
        case ConvAlgorithm::Gemm1x1: return "gemm-1x1";
        case ConvAlgorithm::PaddedPlanes: return "padded-planes";
        case ConvAlgorithm::WinogradF2x3: return "winograd-f2x3";
        case ConvAlgorithm::Depthwise: return "depthwise";
    }
    return "?";
}

namespace detail {

int64_t batch_chunks(int64_t N) {
    const int64_t threads = num_threads();
    return (threads > 1 && N >= threads) ? threads : 1;
}

void gw_from_transposed(const ConvGeometry& g, const float* parts, int64_t stride, int64_t chunks, float* gw) {
    const int64_t cgkk = g.Cg * g.kk(), groups = g.groups, OCg = g.OCg;
    for (int64_t gi = 0; gi < groups; ++gi)
        for (int64_t o = 0; o < OCg; ++o)
            for (int64_t r = 0; r < cgkk; ++r) {
                float sum = 0.f;
                for (int64_t c = 0; c < chunks; ++c) sum += parts[c * stride + (gi * cgkk + r) * OCg + o];
                gw[(gi * OCg + o) * cgkk + r] = sum;
            }
}

}  // namespace detail
}  // namespace razor
