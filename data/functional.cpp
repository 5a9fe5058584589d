// data/functional.cpp -- image kernels (see functional.h).
#include "data/functional.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"

namespace razor::data {
namespace {

// img must be an image: (C, H, W), or also (N, C, H, W) where `batched`; u8 or f32.
void check_image(const char* op, const Tensor& img, bool batched = false) {
    if (!img.defined()) throw Error(fmt(op, ": got an undefined tensor; expected an image (C, H, W)"));
    const bool rank_ok = img.dim() == 3 || (batched && img.dim() == 4);
    if (!rank_ok)
        throw Error(fmt(op, ": expected an image (C, H, W)", batched ? " or a batch (N, C, H, W)" : "", ", got ",
                        shape_str(img.shape()), "; hint: images in razor's data pipeline are channels-first"));
    if (img.dtype() != DType::U8 && img.dtype() != DType::F32)
        throw Error(fmt(op, ": expected a u8 or f32 image, got ", dtype_name(img.dtype())));
}

// One source row/column of bilinear interpolation: out[i] = (1 - l) * in[i0] + l * in[i0 + step].
struct Tap {
    int64_t i0, step;
    float l;
};

// PyTorch's half-pixel source index for output `dst` (align_corners=False): src = max((dst + 0.5) * in/out - 0.5, 0),
// i0 = floor(src) (clamped to in-1), the neighbour one further unless i0 is the last.
std::vector<Tap> taps(int64_t in, int64_t out) {
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    std::vector<Tap> t(out);
    for (int64_t d = 0; d < out; ++d) {
        const float src = std::max(scale * (static_cast<float>(d) + 0.5f) - 0.5f, 0.f);
        const int64_t i0 = std::min(static_cast<int64_t>(src), in - 1);
        const float l = std::min(std::max(src - static_cast<float>(i0), 0.f), 1.f);
        t[d] = {i0, i0 < in - 1 ? 1 : 0, l};
    }
    return t;
}

template <class T>
void resize_plane(const T* in, int64_t W, T* out, int64_t oh, int64_t ow, const std::vector<Tap>& ty,
                  const std::vector<Tap>& tx) {
    for (int64_t y = 0; y < oh; ++y) {
        const T* r0 = in + ty[y].i0 * W;
        const T* r1 = r0 + ty[y].step * W;
        const float ly = ty[y].l, hy = 1.f - ly;
        for (int64_t x = 0; x < ow; ++x) {
            const int64_t x0 = tx[x].i0, x1 = x0 + tx[x].step;
            const float lx = tx[x].l, hx = 1.f - lx;
            const float v = hy * (hx * static_cast<float>(r0[x0]) + lx * static_cast<float>(r0[x1])) +
                            ly * (hx * static_cast<float>(r1[x0]) + lx * static_cast<float>(r1[x1]));
            if constexpr (std::is_same_v<T, uint8_t>)
                out[y * ow + x] = static_cast<uint8_t>(std::min(std::max(std::nearbyint(v), 0.f), 255.f));
            else
                out[y * ow + x] = v;
        }
    }
}

template <class T>
void crop_image(const T* in, int64_t C, int64_t H, int64_t W, T* out, int64_t top, int64_t left, int64_t h, int64_t w) {
    // Columns of the window that fall inside the image: [x_begin, x_end) in window coordinates.
    const int64_t x_begin = std::clamp<int64_t>(-left, 0, w), x_end = std::clamp<int64_t>(W - left, 0, w);
    for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < h; ++y) {
            T* row = out + (c * h + y) * w;
            const int64_t sy = top + y;
            if (sy < 0 || sy >= H || x_begin >= x_end) {
                std::memset(row, 0, w * sizeof(T));
                continue;
            }
            std::memset(row, 0, x_begin * sizeof(T));
            std::memcpy(row + x_begin, in + (c * H + sy) * W + left + x_begin, (x_end - x_begin) * sizeof(T));
            std::memset(row + x_end, 0, (w - x_end) * sizeof(T));
        }
}

template <class T>
void hflip_image(const T* in, int64_t rows, int64_t W, T* out) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t x = 0; x < W; ++x) out[r * W + x] = in[r * W + W - 1 - x];
}

}  // namespace

Tensor resize_bilinear(const Tensor& img_in, int64_t out_h, int64_t out_w) {
    check_image("resize", img_in, true);
    if (out_h < 1 || out_w < 1)
        throw Error(fmt("resize: expected an output size >= 1x1, got ", out_h, "x", out_w));
    const Tensor img = img_in.contiguous();
    const int64_t H = img.size(-2), W = img.size(-1), planes = img.numel() / (H * W);
    Shape shape = img.shape();
    shape[shape.size() - 2] = out_h;
    shape[shape.size() - 1] = out_w;
    Tensor out = Tensor::empty(shape, img.dtype());
    const auto ty = taps(H, out_h), tx = taps(W, out_w);
    for (int64_t p = 0; p < planes; ++p) {
        if (img.dtype() == DType::U8)
            resize_plane(img.data<uint8_t>() + p * H * W, W, out.data<uint8_t>() + p * out_h * out_w, out_h, out_w, ty, tx);
        else
            resize_plane(img.f32() + p * H * W, W, out.f32() + p * out_h * out_w, out_h, out_w, ty, tx);
    }
    return out;
}

Tensor crop(const Tensor& img_in, int64_t top, int64_t left, int64_t h, int64_t w) {
    check_image("crop", img_in);
    if (h < 1 || w < 1) throw Error(fmt("crop: expected a window of at least 1x1, got ", h, "x", w));
    const Tensor img = img_in.contiguous();
    const int64_t C = img.size(0), H = img.size(1), W = img.size(2);
    Tensor out = Tensor::empty({C, h, w}, img.dtype());
    if (img.dtype() == DType::U8)
        crop_image(img.data<uint8_t>(), C, H, W, out.data<uint8_t>(), top, left, h, w);
    else
        crop_image(img.f32(), C, H, W, out.f32(), top, left, h, w);
    return out;
}

Tensor hflip(const Tensor& img_in) {
    check_image("hflip", img_in);
    const Tensor img = img_in.contiguous();
    Tensor out = Tensor::empty_like(img);
    const int64_t rows = img.size(0) * img.size(1), W = img.size(2);
    if (img.dtype() == DType::U8) hflip_image(img.data<uint8_t>(), rows, W, out.data<uint8_t>());
    else hflip_image(img.f32(), rows, W, out.f32());
    return out;
}

Tensor to_float(const Tensor& img_in) {
    check_image("to_float", img_in, true);
    if (img_in.dtype() == DType::F32) return img_in;
    const Tensor img = img_in.contiguous();
    Tensor out = Tensor::empty(img.shape());
    const uint8_t* in = img.data<uint8_t>();
    float* o = out.f32();
    for (int64_t i = 0, n = img.numel(); i < n; ++i) o[i] = static_cast<float>(in[i]) / 255.f;   // a division, as torchvision's, so values match bit for bit
    return out;
}

Tensor normalize(const Tensor& img_in, const std::vector<float>& mean, const std::vector<float>& std) {
    check_image("normalize", img_in);
    if (img_in.dtype() != DType::F32)
        throw Error(fmt("normalize: expected an f32 image, got ", dtype_name(img_in.dtype()),
                        "; hint: put ToFloat() before Normalize, as torchvision puts ToTensor()"));
    const Tensor img = img_in.contiguous();
    const int64_t C = img.size(0), HW = img.size(1) * img.size(2);
    if (static_cast<int64_t>(mean.size()) != C || static_cast<int64_t>(std.size()) != C)
        throw Error(fmt("normalize: expected ", C, " mean and std values (one per channel) for an image ",
                        shape_str(img.shape()), ", got ", mean.size(), " and ", std.size()));
    Tensor out = Tensor::empty_like(img);
    for (int64_t c = 0; c < C; ++c) {
        if (!(std[c] > 0.f)) throw Error(fmt("normalize: std[", c, "] = ", std[c], "; expected > 0"));
        const float* in = img.f32() + c * HW;
        float* o = out.f32() + c * HW;
        const float m = mean[c], s = std[c];
        for (int64_t i = 0; i < HW; ++i) o[i] = (in[i] - m) / s;   // sub then div, as torchvision's normalize
    }
    return out;
}

}  // namespace razor::data
