// data/resize_aa.cpp -- antialiased separable resize (see resize_aa.h).
#include "data/resize_aa.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace razor::data {
namespace {

// Triangle filter (bilinear): 1 - |x| on (-1, 1).
float triangle(float x) {
    x = std::abs(x);
    return x < 1.f ? 1.f - x : 0.f;
}
// Keys' cubic convolution with a = -0.5 (PIL's and PyTorch's antialiased bicubic; plain bicubic uses -0.75).
float keys_cubic(float x) {
    constexpr float a = -0.5f;
    x = std::abs(x);
    if (x < 1.f) return ((a + 2.f) * x - (a + 3.f)) * x * x + 1.f;
    if (x < 2.f) return ((a * x - 5.f * a) * x + 8.f * a) * x - 4.f * a;
    return 0.f;
}

// The input window and weights of every output index along one axis.
struct AxisWeights {
    int64_t taps = 0;               // weights per output (the widest window)
    std::vector<int64_t> first;     // (out): first input index of output o's window
    std::vector<int64_t> count;     // (out): window length (<= taps)
    std::vector<float> w;           // (out, taps): normalised weights, zero past count
};

AxisWeights axis_weights(int64_t in, int64_t out, Interpolation mode) {
    const float half = mode == Interpolation::Bilinear ? 1.f : 2.f;   // filter half-width at scale 1
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    const float support = scale >= 1.f ? half * scale : half;
    const float inv = scale >= 1.f ? 1.f / scale : 1.f;
    AxisWeights a;
    a.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
    a.first.resize(out), a.count.resize(out), a.w.assign(out * a.taps, 0.f);
    for (int64_t o = 0; o < out; ++o) {
        const float centre = scale * (static_cast<float>(o) + 0.5f);
        const int64_t lo = std::max<int64_t>(static_cast<int64_t>(centre - support + 0.5f), 0);
        const int64_t n = std::min<int64_t>(static_cast<int64_t>(centre + support + 0.5f), in) - lo;
        RAZOR_CHECK(n >= 1 && n <= a.taps) << "resize_antialias: window of " << n << " taps, at most " << a.taps;
        float* w = &a.w[o * a.taps];
        float total = 0.f;
        for (int64_t j = 0; j < n; ++j) {
            const float x = (static_cast<float>(j + lo) - centre + 0.5f) * inv;
            w[j] = mode == Interpolation::Bilinear ? triangle(x) : keys_cubic(x);
            total += w[j];
        }
        if (total != 0.f)
            for (int64_t j = 0; j < n; ++j) w[j] /= total;
        a.first[o] = lo, a.count[o] = n;
    }
    return a;
}

// Rows: in (rows, W) -> out (rows, ow), each output a weighted sum along the row.
void resize_rows(const float* in, int64_t rows, int64_t W, float* out, const AxisWeights& a, int64_t ow) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* src = in + r * W;
        float* dst = out + r * ow;
        for (int64_t o = 0; o < ow; ++o) {
            const float* w = &a.w[o * a.taps];
            const float* s = src + a.first[o];
            float acc = 0.f;
            for (int64_t j = 0; j < a.count[o]; ++j) acc += w[j] * s[j];
            dst[o] = acc;
        }
    }
}

// Columns: in (C, H, W) -> out (C, oh, W), each output row a weighted sum of input rows.
void resize_cols(const float* in, int64_t C, int64_t H, int64_t W, float* out, const AxisWeights& a, int64_t oh) {
    for (int64_t c = 0; c < C; ++c)
        for (int64_t o = 0; o < oh; ++o) {
            float* dst = out + (c * oh + o) * W;
            std::fill(dst, dst + W, 0.f);
            const float* w = &a.w[o * a.taps];
            for (int64_t j = 0; j < a.count[o]; ++j) {
                const float* src = in + (c * H + a.first[o] + j) * W;
                const float wj = w[j];
                for (int64_t x = 0; x < W; ++x) dst[x] += wj * src[x];
            }
        }
}

}  // namespace

std::string interpolation_name(Interpolation mode) { return mode == Interpolation::Bilinear ? "bilinear" : "bicubic"; }

Interpolation parse_interpolation(const std::string& name, const std::string& what) {
    if (name == "bilinear") return Interpolation::Bilinear;
    if (name == "bicubic") return Interpolation::Bicubic;
    throw Error(fmt(what, ": expected bilinear or bicubic, got '", name, "'"));
}

Tensor resize_antialias(const Tensor& img_in, int64_t out_h, int64_t out_w, Interpolation mode) {
    if (!img_in.defined() || img_in.dim() != 3 || (img_in.dtype() != DType::U8 && img_in.dtype() != DType::F32))
        throw Error(fmt("resize_antialias: expected a u8 or f32 image (C, H, W), got ",
                        img_in.defined() ? std::string(dtype_name(img_in.dtype())) + " " + shape_str(img_in.shape()) : "undefined",
                        "; hint: images in razor's data pipeline are channels-first"));
    if (out_h < 1 || out_w < 1)
        throw Error(fmt("resize_antialias: expected an output size >= 1x1, got ", out_h, "x", out_w));
    const int64_t C = img_in.size(0), H = img_in.size(1), W = img_in.size(2);
    Tensor x = img_in.dtype() == DType::F32 ? img_in.contiguous() : Tensor::empty({C, H, W});   // (C, H, W) f32
    if (img_in.dtype() == DType::U8) {
        const Tensor u = img_in.contiguous();
        const uint8_t* p = u.data<uint8_t>();
        float* q = x.f32();
        for (int64_t i = 0, n = u.numel(); i < n; ++i) q[i] = static_cast<float>(p[i]);
    }
    if (out_w != W) {   // width first
        Tensor t = Tensor::empty({C, H, out_w});
        resize_rows(x.f32(), C * H, W, t.f32(), axis_weights(W, out_w, mode), out_w);
        x = t;
    }
    if (out_h != H) {   // then height
        Tensor t = Tensor::empty({C, out_h, out_w});
        resize_cols(x.f32(), C, H, out_w, t.f32(), axis_weights(H, out_h, mode), out_h);
        x = t;
    }
    if (img_in.dtype() == DType::F32) return out_w == W && out_h == H ? x.clone() : x;   // never the input itself
    Tensor out = Tensor::empty({C, out_h, out_w}, DType::U8);
    const float* p = x.f32();
    uint8_t* q = out.data<uint8_t>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i)
        q[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(p[i]), 0.f, 255.f));
    return out;
}

}  // namespace razor::data
