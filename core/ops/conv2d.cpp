// core/ops/conv2d.cpp -- 2-D convolution, NCHW: the argument checks, the choice of kernel, the autograd node.
//
// reference: torch.nn.functional.conv2d. docs: docs/ops.md "Conv kernels", docs/back-razor.md (what a conv keeps).
//
// Letters as in core/conv_geometry.h. The kernels live one family per file (core/conv_im2col.h, core/conv_planes.h,
// core/conv_winograd.h, core/conv_depthwise.h); select_algorithm below is the one place that picks among them, and
// the forward and both backward passes dispatch on its answer (conv2d_forward_with, conv2d_backward_with). Every
// family derives its own backward in its header.
//
// Saves: x as SaveRole::WeightGradOperand, only if W needs a gradient (gW = sum_n g[n] . im2col(x[n])^T; Back Razor
//        prunes this one). W as SaveRole::Parameter (reference, 0 bytes), only if x needs a gradient (gx).
//        Nothing else: no im2col buffer is kept (backward rebuilds it from x, one image at a time), no output,
//        and the bias gradient needs only g. A pruned x (Back Razor) is read in its sparse form where that is
//        faster (sparse_weight_grad_faster, core/conv_sparse_input.h), else expanded one image at a time into
//        scratch inside the gW loop (SavedTensor::unpack_rows), never into an (N, C, H, W) transient.
#include "core/ops/conv2d.h"

#include <algorithm>
#include <vector>

#include "core/autograd.h"
#include "core/check.h"
#include "core/conv_depthwise.h"
#include "core/conv_im2col.h"
#include "core/conv_planes.h"
#include "core/conv_sparse_input.h"
#include "core/conv_winograd.h"

namespace razor {

// The forward takes the first of these that applies (the fastest where measured; docs/ops.md "Conv kernels"):
//   Depthwise      groups == C (Cg = 1): a direct kernel.
//   WinogradF2x3   3x3 pad-1 stride-1 convs on even maps (avx2, avx512) with at least 10 channels in and out, on
//                  maps of at least 256 positions (16x16 and larger) or at most 16 2x2 tiles (8x8 and smaller). Where
//                  it is faster was measured on one image and one thread against the padded-window GEMM: the 16 GEMMs
//                  have K = C (and K = OC for gx), and below about 10 channels or 256 positions their fixed costs and
//                  the transforms outweigh the saved multiplies (3 -> 16 channels at 32x32: 17 us against 10 us
//                  direct; 16 -> 16 at 32x32: 39 against 47; 64 -> 64: 397 against 733). Maps between 8x8 and 16x16
//                  stay direct: untuned. (Measured with the AVX-512 kernels; the avx2 family takes the same thresholds.)
//   PaddedPlanes   the other stride-1 "same" convs with one group (avx2, avx512), unless 1x1 or batched below.
//   Im2colBatched  maps of at most 128 output positions: several images per GEMM.
//   Gemm1x1        1x1 stride-1 unpadded convs: the image is the GEMM operand.
//   Im2col         everything else.
// gx and gW take the forward's kernel: each family's backward computes both in one pass over the batch (PaddedPlanes
// pads gy once for both, Im2col reuses one tile buffer for col and gcol), and the choices were measured on whole
// training steps. The node still dispatches each pass on its own entry.
ConvAlgorithms select_algorithm(const ConvGeometry& g) {
    using A = ConvAlgorithm;
    const A forward = [&] {
        if (g.depthwise()) return A::Depthwise;
        const bool winograd_faster = std::min(g.C, g.OC) >= 10 && (g.hw() >= 256 || (g.H / 2) * (g.W / 2) <= 16);
        if (detail::conv2d_winograd_supports(g) && winograd_faster) return A::WinogradF2x3;
        const bool batched = detail::im2col_images_per_gemm(g) > 1;
        if (detail::conv2d_planes_supports(g) && !g.pointwise() && !batched) return A::PaddedPlanes;
        if (batched) return A::Im2colBatched;
        return g.pointwise() ? A::Gemm1x1 : A::Im2col;
    }();
    return {forward, forward, forward};
}

// gW from a sparse saved x (Back Razor's bitmap + values) instead of the gW family above, when at most
// kSparseWeightGradMaxKept of x's elements were kept and the conv is one the sparse kernel was measured faster on
// (bench/sparse_grad_bench.cpp at f = 0.1; docs/back-razor.md "Sparse weight gradients"): a 3x3 at stride 1 or 2
// (1.2-2.1x on ResNet-20 and ResNet-50 shapes), or a 1x1 at stride 1 with at least 128 output channels per group
// (1.0-1.5x on ResNet-50 and MobileNetV2 shapes). The sparse kernel does f of the direct multiplies, but reads a row
// of gy per kept element and tap after transposing gy, so narrower 1x1 convs lose to the dense GEMM over the whole
// map (MobileNetV2's 144->24 at 56x56: 0.45x; 384->64 at 14x14: 0.75x), as do a 1x1 at stride 2 (a quarter of x is
// used, the dense path just subsamples: 0.36x), a 7x7 stem (up to 16 taps a phase, summed without registers: 0.24x)
// and depthwise convs (one output channel per group).
bool sparse_weight_grad_faster(const ConvGeometry& g, double kept_fraction) {
    const bool square_stride = g.sh == g.sw && g.sh <= 2;
    const bool measured = (g.kk() == 9 && square_stride) || (g.kk() == 1 && g.sh == 1 && g.sw == 1 && g.OCg >= 128);
    return measured && detail::conv2d_sparse_input_supports(g) && kept_fraction <= kSparseWeightGradMaxKept;
}

std::string conv_algorithms_str(const ConvAlgorithms& a) {
    std::string s = conv_algorithm_name(a.forward);
    if (a.input_grad != a.forward || a.weight_grad != a.forward)
        s += fmt(" (gx ", conv_algorithm_name(a.input_grad), ", gW ", conv_algorithm_name(a.weight_grad), ")");
    return s;
}

bool conv2d_supports(ConvAlgorithm algorithm, const ConvGeometry& g) {
    switch (algorithm) {
        case ConvAlgorithm::Im2col:
        case ConvAlgorithm::Im2colBatched:
        case ConvAlgorithm::Gemm1x1: return detail::conv2d_im2col_supports(algorithm, g);
        case ConvAlgorithm::PaddedPlanes: return detail::conv2d_planes_supports(g);
        case ConvAlgorithm::WinogradF2x3: return detail::conv2d_winograd_supports(g);
        case ConvAlgorithm::Depthwise: return detail::conv2d_depthwise_supports(g);
    }
    return false;
}

namespace detail {

void conv2d_forward_with(ConvAlgorithm algorithm, const ConvGeometry& g, const float* x /*(N, C, H, W)*/,
                         const float* w /*(OC, Cg, KH, KW)*/, const float* b /*(OC) or null*/,
                         float* y /*(N, OC, OH, OW)*/) {
    switch (algorithm) {
        case ConvAlgorithm::Im2col:
        case ConvAlgorithm::Im2colBatched:
        case ConvAlgorithm::Gemm1x1: return conv2d_im2col_forward(g, algorithm, x, w, b, y);
        case ConvAlgorithm::PaddedPlanes: return conv2d_planes_forward(g, x, w, b, y);
        case ConvAlgorithm::WinogradF2x3: return conv2d_winograd_forward(g, x, w, b, y);
        case ConvAlgorithm::Depthwise: return conv2d_depthwise_forward(g, x, w, b, y);
    }
}

void conv2d_backward_with(ConvAlgorithm algorithm, const ConvGeometry& g, const float* x /*(N, C, H, W) or null*/,
                          const SavedTensor* x_saved, const float* w /*(OC, Cg, KH, KW) or null*/,
                          const float* gy /*(N, OC, OH, OW)*/, float* gx /*(N, C, H, W) or null*/,
                          float* gw /*(OC, Cg, KH, KW) or null*/) {
    switch (algorithm) {
        case ConvAlgorithm::Im2col:
        case ConvAlgorithm::Im2colBatched:
        case ConvAlgorithm::Gemm1x1: return conv2d_im2col_backward(g, algorithm, x, x_saved, w, gy, gx, gw);
        case ConvAlgorithm::PaddedPlanes: return conv2d_planes_backward(g, x, x_saved, w, gy, gx, gw);
        case ConvAlgorithm::WinogradF2x3:
            if (gw) conv2d_winograd_weight_grad(g, x, x_saved, gy, gw);
            if (gx) conv2d_winograd_input_grad(g, w, gy, gx);
            return;
        case ConvAlgorithm::Depthwise: return conv2d_depthwise_backward(g, x, x_saved, w, gy, gx, gw);
    }
}

}  // namespace detail

namespace {

// sums[oc] = sum over n, h, w of g[n, oc, h, w]  (double accumulation; g: (N, OC, HW)).
void channel_sums(const float* g, int64_t N, int64_t OC, int64_t hw, float* sums /*(OC)*/) {
#pragma omp parallel for schedule(static) if (N * OC * hw > (1 << 16))
    for (int64_t oc = 0; oc < OC; ++oc) {
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
            const float* p = g + (n * OC + oc) * hw;
            float s = 0.f;
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < hw; ++i) s += p[i];
            acc += s;
        }
        sums[oc] = static_cast<float>(acc);
    }
}

// ---------------------------------------------------------------- autograd node

struct Conv2dBackward final : Node {
    ConvGeometry geo{};
    ConvAlgorithms algorithms{};   // select_algorithm(geo), as the forward used it
    std::vector<Tensor> backward(const Tensor& g_in) override {
        Tensor gy = g_in.contiguous();   // (N, OC, OH, OW)
        Tensor x, w, gx, gw, gb;
        if (needs_grad(0)) {
            w = ctx.unpack("W").contiguous();
            gx = Tensor::empty(edges()[0].shape);
        }
        const SavedTensor* x_saved = nullptr;   // expanded per image inside the kernel
        bool sparse_gw = false;                  // gW from x's sparse form (conv_sparse_input.h)
        if (needs_grad(1)) {
            const SavedTensor& s = ctx.saved("x");
            const std::optional<SparseSamples> sparse = s.sparse_samples();
            gw = Tensor::empty(edges()[1].shape);
            if (sparse && sparse_weight_grad_faster(geo, sparse->kept_fraction())) {
                detail::conv2d_sparse_input_weight_grad(geo, *sparse, gy.f32(), gw.f32());
                sparse_gw = true;
            } else if (s.has_row_unpack()) {
                x_saved = &s;   // every family expands it one image at a time inside its gW loop
            } else {
                x = ctx.unpack("x").contiguous();
            }
        }
        if (gx.defined() || (gw.defined() && !sparse_gw)) {
            const float* px = x.defined() ? x.f32() : nullptr;
            const float* pw = w.defined() ? w.f32() : nullptr;
            float* pgx = gx.defined() ? gx.f32() : nullptr;
            float* pgw = gw.defined() && !sparse_gw ? gw.f32() : nullptr;
            // one call when gx and gW share a kernel (its backward computes both in one pass), else one each
            const ConvAlgorithms& a = algorithms;
            if (a.input_grad == a.weight_grad) {
                detail::conv2d_backward_with(a.weight_grad, geo, px, x_saved, pw, gy.f32(), pgx, pgw);
            } else {
                if (pgx) detail::conv2d_backward_with(a.input_grad, geo, px, x_saved, pw, gy.f32(), pgx, nullptr);
                if (pgw) detail::conv2d_backward_with(a.weight_grad, geo, px, x_saved, pw, gy.f32(), nullptr, pgw);
            }
        }
        if (needs_grad(2)) {
            // gb[oc] = sum over n, oh, ow of gy[n, oc, oh, ow]   -- exact
            gb = Tensor::empty({geo.OC});
            channel_sums(gy.f32(), geo.N, geo.OC, geo.ohw(), gb.f32());
        }
        return {gx, gw, gb};
    }
};

std::string pair_str(const std::array<int64_t, 2>& p) { return fmt("(", p[0], ", ", p[1], ")"); }

ConvGeometry check_conv2d(const Tensor& x, const Tensor& W, const Tensor& b, const Conv2dOptions& o) {
    if (!x.defined() || !W.defined()) throw Error("conv2d: got an undefined x or W; hint: pass both");
    for (const Tensor* t : {&x, &W, &b})
        if (t->defined() && t->dtype() != DType::F32)
            throw Error(fmt("conv2d: expected f32 tensors, got ", dtype_name(t->dtype()), " ", shape_str(t->shape()),
                            "; hint: convert images to f32 (and normalise) before the first conv"));
    const ConvGeometry g = conv2d_geometry(x.shape(), W.shape(), o);
    if (b.defined() && (b.dim() != 1 || b.size(0) != g.OC))
        throw Error(fmt("conv2d: expected bias (", g.OC, "), got ", shape_str(b.shape()),
                        "; hint: the bias has one value per output channel"));
    return g;
}

}  // namespace

ConvGeometry conv2d_geometry(const Shape& x, const Shape& W, const Conv2dOptions& o) {
    if (x.size() != 4)
        throw Error(fmt("conv2d: expected x (N, C, H, W), got ", shape_str(x),
                        "; hint: conv2d takes a batch of NCHW images; add a batch dim of 1 for a single image"));
    if (W.size() != 4)
        throw Error(fmt("conv2d: expected W (OC, C/groups, KH, KW), got ", shape_str(W),
                        "; hint: a conv weight is 4-D"));
    for (int i = 0; i < 2; ++i) {
        if (o.stride[i] < 1)
            throw Error(fmt("conv2d: expected stride >= 1, got ", pair_str(o.stride), "; hint: use stride 1 or more"));
        if (o.dilation[i] < 1)
            throw Error(fmt("conv2d: expected dilation >= 1, got ", pair_str(o.dilation),
                            "; hint: dilation 1 is an ordinary conv"));
        if (o.padding[i] < 0)
            throw Error(fmt("conv2d: expected padding >= 0, got ", pair_str(o.padding), "; hint: crop the input instead"));
    }
    if (o.groups < 1)
        throw Error(fmt("conv2d: expected groups >= 1, got ", o.groups, "; hint: groups 1 is an ordinary conv"));
    ConvGeometry g{};
    g.N = x[0], g.C = x[1], g.H = x[2], g.W = x[3];
    g.OC = W[0], g.KH = W[2], g.KW = W[3];
    g.groups = o.groups;
    if (g.C % g.groups != 0)
        throw Error(fmt("conv2d: groups ", g.groups, " does not divide the ", g.C, " input channels of x ",
                        shape_str(x), "; hint: in_channels and out_channels must be multiples of groups"));
    if (g.OC % g.groups != 0)
        throw Error(fmt("conv2d: groups ", g.groups, " does not divide the ", g.OC, " output channels of W ",
                        shape_str(W), "; hint: in_channels and out_channels must be multiples of groups"));
    if (W[1] * g.groups != g.C)
        throw Error(fmt("conv2d: expected x (N, ", W[1] * g.groups, ", H, W), got ", shape_str(x),
                        "; hint: check in_channels or the preceding layer"));
    if (g.KH < 1 || g.KW < 1)
        throw Error(fmt("conv2d: expected a kernel of at least 1x1, got W ", shape_str(W),
                        "; hint: KH and KW are the last two dims of W"));
    g.sh = o.stride[0], g.sw = o.stride[1], g.ph = o.padding[0], g.pw = o.padding[1];
    g.dh = o.dilation[0], g.dw = o.dilation[1];
    g.Cg = g.C / g.groups, g.OCg = g.OC / g.groups;
    // OH = floor((H + 2 ph - dh (KH - 1) - 1) / sh) + 1, floor division as torch (<= 0: the kernel does not fit)
    auto out_size = [](int64_t in, int64_t pad, int64_t dil, int64_t k, int64_t stride) {
        const int64_t num = in + 2 * pad - dil * (k - 1) - 1;
        return (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
    };
    g.OH = out_size(g.H, g.ph, g.dh, g.KH, g.sh);
    g.OW = out_size(g.W, g.pw, g.dw, g.KW, g.sw);
    if (g.OH <= 0 || g.OW <= 0)
        throw Error(fmt("conv2d: output size (", g.OH, ", ", g.OW, ") <= 0 for x ", shape_str(x),
                        " with kernel (", g.KH, ", ", g.KW, "), stride ", pair_str(o.stride), ", padding ",
                        pair_str(o.padding), ", dilation ", pair_str(o.dilation),
                        "; hint: the input is smaller than the dilated kernel; pad it or use a smaller kernel"));
    return g;
}

Tensor conv2d(const Tensor& x_in, const Tensor& W_in, const Tensor& b_in, const Conv2dOptions& options) {
    const ConvGeometry geo = check_conv2d(x_in, W_in, b_in, options);
    const ConvAlgorithms algorithms = select_algorithm(geo);
    Tensor x = x_in.contiguous();   // (N, C, H, W)
    Tensor W = W_in.contiguous();   // (OC, Cg, KH, KW)
    Tensor b = b_in.defined() ? b_in.contiguous() : Tensor();
    Tensor y = Tensor::empty({geo.N, geo.OC, geo.OH, geo.OW});
    const float* pb = b.defined() ? b.f32() : nullptr;
    detail::conv2d_forward_with(algorithms.forward, geo, x.f32(), W.f32(), pb, y.f32());
    if (auto node = record<Conv2dBackward>("conv2d", {x, W, b}, y)) {
        node->geo = geo;
        node->algorithms = algorithms;
        if (node->needs_grad(1)) node->ctx.save("x", x, SaveRole::WeightGradOperand);
        if (node->needs_grad(0)) node->ctx.save("W", W, SaveRole::Parameter);
    }
    return y;
}

}  // namespace razor
