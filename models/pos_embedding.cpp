// models/pos_embedding.cpp -- bicubic resize of a ViT position embedding's patch grid (see pos_embedding.h).
#include "models/pos_embedding.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace razor::models {
namespace {

// PyTorch's cubic convolution weights (Keys' kernel, A = -0.75) for the four taps at -1, 0, 1, 2 around a sample
// whose fractional offset from tap 0 is t in [0, 1).
std::array<double, 4> cubic_weights(double t) {
    constexpr double A = -0.75;
    auto inner = [](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };              // |x| <= 1
    auto outer = [](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };         // 1 < |x| < 2
    return {outer(t + 1), inner(t), inner(1 - t), outer(2 - t)};
}

// R (out, in): row o holds the weights output o gives each input, align_corners=False. The source coordinate is
// (o + 0.5) * in / out - 0.5 (not clamped: the cubic kernel reaches past the border, where taps clamp to it).
std::vector<double> resize_matrix(int64_t in, int64_t out) {
    std::vector<double> R(static_cast<size_t>(out * in), 0.0);
    const double scale = static_cast<double>(in) / out;
    for (int64_t o = 0; o < out; ++o) {
        const double x = (o + 0.5) * scale - 0.5;
        const double base = std::floor(x);
        const std::array<double, 4> w = cubic_weights(x - base);
        for (int k = 0; k < 4; ++k) {
            const int64_t i = std::clamp(static_cast<int64_t>(base) - 1 + k, int64_t{0}, in - 1);
            R[static_cast<size_t>(o * in + i)] += w[static_cast<size_t>(k)];
        }
    }
    return R;
}

}  // namespace

Tensor resize_pos_embedding(const Tensor& pos, int64_t grid, const std::string& source) {
    const int64_t tokens = pos.dim() == 3 ? pos.size(1) : 0, g = static_cast<int64_t>(std::lround(std::sqrt(tokens - 1.0)));
    if (pos.dim() != 3 || pos.size(0) != 1 || tokens < 2 || g * g != tokens - 1 || grid < 1)
        throw Error(fmt(source, ": position embedding ", shape_str(pos.shape()), " cannot be resized to a ", grid, "x",
                        grid, " grid: expected (1, 1 + g*g, D), a class token and a square patch grid; hint: razor "
                        "resizes ViTs with one class token (no distillation token) at square image sizes"));
    const int64_t D = pos.size(2);
    const std::vector<float> p = pos.contiguous().to_vector();   // row 0 the class token, then the g x g grid
    const std::vector<double> R = resize_matrix(g, grid);         // (grid, g), used for rows and columns alike
    // rows first: tmp (grid, g, D) = R (grid, g) x P (g, g, D); then columns: out (grid, grid, D) = tmp x R^T
    std::vector<double> tmp(static_cast<size_t>(grid * g * D), 0.0);
    for (int64_t oy = 0; oy < grid; ++oy)
        for (int64_t iy = 0; iy < g; ++iy)
            if (const double w = R[static_cast<size_t>(oy * g + iy)]; w != 0)
                for (int64_t x = 0; x < g * D; ++x)
                    tmp[static_cast<size_t>(oy * g * D + x)] += w * p[static_cast<size_t>(D + iy * g * D + x)];
    std::vector<float> out(static_cast<size_t>((1 + grid * grid) * D));
    std::copy(p.begin(), p.begin() + D, out.begin());   // the class token, unchanged
    for (int64_t oy = 0; oy < grid; ++oy)
        for (int64_t ox = 0; ox < grid; ++ox)
            for (int64_t d = 0; d < D; ++d) {
                double s = 0;
                for (int64_t ix = 0; ix < g; ++ix)
                    s += R[static_cast<size_t>(ox * g + ix)] * tmp[static_cast<size_t>((oy * g + ix) * D + d)];
                out[static_cast<size_t>(D + (oy * grid + ox) * D + d)] = static_cast<float>(s);
            }
    return Tensor::from_vector({1, 1 + grid * grid, D}, out);
}

}  // namespace razor::models
