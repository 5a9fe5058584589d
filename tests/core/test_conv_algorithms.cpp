// tests/core/test_conv_algorithms.cpp -- conv2d's kernel chooser (select_algorithm) and its kernel families: which
// family runs each representative geometry under the active kernel family (padded planes and Winograd only where it is
// avx2 or avx512: under RAZOR_ISA=generic they are not offered),
// and every family that can run a geometry agrees with a float64 direct loop, forward, gx and gW, with a dense x and
// with x expanded one image at a time.
#include <set>

#include "core/isa.h"
#include "core/saved.h"
#include "support/conv_reference.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {

using A = ConvAlgorithm;

// Whether the active kernel family has razor's own GEMM (gemm_rows) and Winograd kernels: avx2 and avx512 do.
bool simd_family() { return active_isa() != Isa::Generic; }

Conv2dOptions opts(int64_t stride, int64_t pad, int64_t dil = 1, int64_t groups = 1) {
    return {{stride, stride}, {pad, pad}, {dil, dil}, groups};
}

// The geometry of a conv with a k x k kernel, OC outputs, on x of this shape.
ConvGeometry geo(const Shape& x, int64_t OC, int64_t k, int64_t stride, int64_t pad, int64_t groups = 1,
                 int64_t dil = 1) {
    return conv2d_geometry(x, {OC, x[1] / groups, k, k}, opts(stride, pad, dil, groups));
}

// A saved x that expands one image at a time, as Back Razor's forms do (here lossless, so gW must not change).
class RowSaved final : public SavedTensor {
public:
    RowSaved(std::vector<float> v, Shape shape) : SavedTensor(shape, DType::F32), v_(std::move(v)) {}
    Tensor unpack() const override { return Tensor::from_vector(shape(), v_); }
    int64_t stored_bytes() const override { return static_cast<int64_t>(v_.size() * sizeof(float)); }
    std::string format() const override { return "rows"; }
    bool has_row_unpack() const override { return true; }
    void unpack_rows(int64_t first, int64_t count, float* dst) const override {
        const int64_t row = shape()[0] ? shape_numel(shape()) / shape()[0] : 0;
        std::copy_n(v_.data() + first * row, count * row, dst);
    }

private:
    std::vector<float> v_;
};

}  // namespace

TEST_CASE("conv algorithms: select_algorithm picks, per kernel family, the kernel measured fastest") {
    auto check = [](const char* name, const ConvGeometry& g, A expected) {
        INFO(name);
        const ConvAlgorithms a = select_algorithm(g);
        CHECK(conv_algorithm_name(a.forward) == std::string(conv_algorithm_name(expected)));
        CHECK(a.input_grad == a.forward);   // every family computes gx and gW in the forward's kernel today
        CHECK(a.weight_grad == a.forward);
        CHECK(conv2d_supports(a.forward, g));
    };
    struct Case {
        const char* name;
        ConvGeometry g;
        A simd, other;   // the choice under avx2 or avx512 (same thresholds), and under generic
    };
    const std::vector<Case> by_isa = {
        {"3x3 p1 16->16 at 32x32", geo({2, 16, 32, 32}, 16, 3, 1, 1), A::WinogradF2x3, A::Im2col},
        {"3x3 p1 32->32 at 16x16", geo({2, 32, 16, 16}, 32, 3, 1, 1), A::WinogradF2x3, A::Im2col},
        {"3x3 p1 64->64 at 8x8", geo({2, 64, 8, 8}, 64, 3, 1, 1), A::WinogradF2x3, A::Im2colBatched},
        {"3x3 p1 512->512 at 2x2", geo({2, 512, 2, 2}, 512, 3, 1, 1), A::WinogradF2x3, A::Im2colBatched},
        {"3x3 p1 16->16 at 4x4, one image", geo({1, 16, 4, 4}, 16, 3, 1, 1), A::WinogradF2x3, A::Im2colBatched},
        {"3x3 p1 3->16 at 32x32 (the stem)", geo({2, 3, 32, 32}, 16, 3, 1, 1), A::PaddedPlanes, A::Im2col},
        {"3x3 p1 16->16 at 12x12 (untuned)", geo({2, 16, 12, 12}, 16, 3, 1, 1), A::PaddedPlanes, A::Im2col},
        {"3x3 p1 16->16 at 15x16 (odd)", geo({2, 16, 15, 16}, 16, 3, 1, 1), A::PaddedPlanes, A::Im2col},
        {"5x5 p2 at 16x16", geo({2, 16, 16, 16}, 16, 5, 1, 2), A::PaddedPlanes, A::Im2col},
    };
    for (const Case& c : by_isa) check(c.name, c.g, simd_family() ? c.simd : c.other);
    // The same in every build.
    check("1x1 16->32 at 32x32", geo({2, 16, 32, 32}, 32, 1, 1, 0), A::Gemm1x1);
    check("1x1 32->64 at 8x8 (batched beats in place)", geo({2, 32, 8, 8}, 64, 1, 1, 0), A::Im2colBatched);
    check("1x1 s2 16->32 at 32x32 (a projection shortcut)", geo({2, 16, 32, 32}, 32, 1, 2, 0), A::Im2col);
    check("3x3 p1 8->8 at 8x8 (too few channels for Winograd)", geo({2, 8, 8, 8}, 8, 3, 1, 1), A::Im2colBatched);
    check("3x3 p1 s2 16->32 at 32x32", geo({2, 16, 32, 32}, 32, 3, 2, 1), A::Im2col);
    check("3x3 p1 s2 32->64 at 16x16 -> 8x8", geo({2, 32, 16, 16}, 64, 3, 2, 1), A::Im2colBatched);
    check("3x3 p1 groups 2 at 16x16", geo({2, 16, 16, 16}, 16, 3, 1, 1, 2), A::Im2col);
    check("3x3 p2 dilation 2 at 16x16", geo({2, 16, 16, 16}, 16, 3, 1, 2, 1, 2), A::Im2col);
    check("depthwise 3x3 p1", geo({2, 32, 16, 16}, 32, 3, 1, 1, 32), A::Depthwise);
    check("depthwise 3x3 p1 s2, multiplier 2", geo({2, 32, 16, 16}, 64, 3, 2, 1, 32), A::Depthwise);
    check("7x7 p3 s2 3->64 at 224x224 (an ImageNet stem)", geo({1, 3, 224, 224}, 64, 7, 2, 3), A::Im2col);
}

TEST_CASE("conv algorithms: padded planes and Winograd are offered exactly under the avx2 and avx512 families") {
    const ConvGeometry g = geo({2, 16, 32, 32}, 16, 3, 1, 1);
    CHECK(conv2d_supports(A::PaddedPlanes, g) == simd_family());
    CHECK(conv2d_supports(A::WinogradF2x3, g) == simd_family());
    CHECK(conv2d_supports(A::Im2col, g));
    CHECK_FALSE(conv2d_supports(A::Gemm1x1, g));
    CHECK_FALSE(conv2d_supports(A::Depthwise, g));
    CHECK_FALSE(conv2d_supports(A::Im2colBatched, g));   // 1024 positions: too large to batch
    const ConvGeometry strided = geo({1, 4, 40, 40}, 4, 3, 2, 0);   // 19x19 out: only im2col runs it
    for (A a : kConvAlgorithms) CHECK(conv2d_supports(a, strided) == (a == A::Im2col));
}

TEST_CASE("conv algorithms: names are distinct, and a summary names the passes when they differ") {
    std::set<std::string> names;
    for (A a : kConvAlgorithms) names.insert(conv_algorithm_name(a));
    CHECK(names.size() == std::size(kConvAlgorithms));
    CHECK(names.count("im2col") == 1);
    CHECK(names.count("winograd-f2x3") == 1);
    CHECK(names.count("depthwise") == 1);
    CHECK(conv_algorithms_str({A::WinogradF2x3, A::WinogradF2x3, A::WinogradF2x3}) == "winograd-f2x3");
    CHECK(conv_algorithms_str({A::Im2col, A::Gemm1x1, A::Im2col}) == "im2col (gx gemm-1x1, gW im2col)");
}

TEST_CASE("conv algorithms: every family that can run a geometry matches a float64 direct conv") {
    struct Case {
        const char* name;
        Shape x;
        int64_t OC, k;
        Conv2dOptions o;
        bool bias;
    };
    Conv2dOptions tall;
    tall.stride = {2, 1};
    tall.padding = {1, 0};
    tall.dilation = {1, 2};
    const std::vector<Case> cases = {
        {"1x1 at 12x12", {3, 6, 12, 12}, 5, 1, opts(1, 0), true},
        {"1x1 at 4x4 (batched or in place)", {5, 6, 4, 4}, 7, 1, opts(1, 0), false},
        {"1x1 s2", {3, 4, 9, 9}, 5, 1, opts(2, 0), true},
        {"3x3 p1 16->12 at 16x16", {3, 16, 16, 16}, 12, 3, opts(1, 1), true},
        {"3x3 p1 12->10 at 12x12", {2, 12, 12, 12}, 10, 3, opts(1, 1), false},
        {"3x3 p1 12->16 at 8x8", {5, 12, 8, 8}, 16, 3, opts(1, 1), true},
        {"3x3 p1 10->12 at 4x4", {7, 10, 4, 4}, 12, 3, opts(1, 1), true},
        {"3x3 p1 10->10 at 2x2", {9, 10, 2, 2}, 10, 3, opts(1, 1), false},
        {"3x3 p1 at 15x14 (odd)", {2, 4, 15, 14}, 6, 3, opts(1, 1), true},
        {"3x3 p1 s2 at 16x16", {3, 4, 16, 16}, 6, 3, opts(2, 1), true},
        {"3x3 p2 d2", {2, 4, 10, 11}, 3, 3, opts(1, 2, 2), false},
        {"5x5 p2 at 13x12", {2, 3, 13, 12}, 4, 5, opts(1, 2), true},
        {"7x7 p3 s2 at 20x20", {2, 3, 20, 20}, 8, 7, opts(2, 3), true},
        {"s (2, 1) p (1, 0) d (1, 2)", {2, 3, 9, 10}, 4, 3, tall, true},
        {"groups 2 at 16x16", {2, 8, 16, 16}, 6, 3, opts(1, 1, 1, 2), true},
        {"groups 2 at 4x4", {5, 8, 4, 4}, 6, 3, opts(1, 1, 1, 2), false},
        {"depthwise 3x3 p1", {3, 6, 9, 9}, 6, 3, opts(1, 1, 1, 6), true},
        {"depthwise 5x5 s2 p2, multiplier 2", {2, 4, 11, 11}, 8, 5, opts(2, 2, 1, 4), false},
        {"depthwise 3x3 p1 at 4x4", {6, 5, 4, 4}, 5, 3, opts(1, 1, 1, 5), true},
    };
    int runs = 0;
    for (const Case& c : cases) {
        const ConvGeometry g = conv2d_geometry(c.x, {c.OC, c.x[1] / c.o.groups, c.k, c.k}, c.o);
        Generator gen(42);
        const Tensor x = Tensor::randn(c.x, gen), w = Tensor::randn({g.OC, g.Cg, g.KH, g.KW}, gen);
        const Tensor b = c.bias ? Tensor::randn({g.OC}, gen) : Tensor();
        const Tensor gy = Tensor::randn({g.N, g.OC, g.OH, g.OW}, gen);
        const ConvReference r = conv_reference(g, x, w, b, gy);
        const RowSaved x_rows(x.to_vector(), x.shape());
        for (A a : kConvAlgorithms) {
            if (!conv2d_supports(a, g)) continue;
            INFO(c.name, " with ", conv_algorithm_name(a));
            ++runs;
            Tensor y = Tensor::empty(gy.shape()), gx = Tensor::empty(x.shape()), gw = Tensor::empty(w.shape());
            detail::conv2d_forward_with(a, g, x.f32(), w.f32(), b.defined() ? b.f32() : nullptr, y.f32());
            detail::conv2d_backward_with(a, g, x.f32(), nullptr, w.f32(), gy.f32(), gx.f32(), gw.f32());
            // Sums of up to Cg*KK (y, gx) or N*OHW (gW) products of O(1) values.
            check_close(y, r.y, 1e-4, 1e-4, "forward");
            check_close(gx, r.gx, 1e-4, 1e-4, "gx");
            check_close(gw, r.gw, 1e-4, 1e-3, "gW");
            // Each pass alone gives the same bits as both together.
            Tensor gx_only = Tensor::empty(x.shape()), gw_only = Tensor::empty(w.shape());
            detail::conv2d_backward_with(a, g, nullptr, nullptr, w.f32(), gy.f32(), gx_only.f32(), nullptr);
            detail::conv2d_backward_with(a, g, x.f32(), nullptr, nullptr, gy.f32(), nullptr, gw_only.f32());
            CHECK(gx_only.to_vector() == gx.to_vector());
            CHECK(gw_only.to_vector() == gw.to_vector());
            // x expanded image by image (Back Razor's path) gives the same bits as the dense x.
            Tensor gw_rows = Tensor::empty(w.shape());
            detail::conv2d_backward_with(a, g, nullptr, &x_rows, nullptr, gy.f32(), nullptr, gw_rows.f32());
            CHECK(gw_rows.to_vector() == gw.to_vector());
        }
    }
    // im2col runs all 19, im2col-batched the 13 with at most 128 output positions, gemm-1x1 the 2 pointwise ones,
    // depthwise 3; under avx2 or avx512 the padded planes run the 9 stride-1 same-padded ones with one group and Winograd
    // the 5 of those that are 3x3 on even maps.
    CHECK(runs == 19 + 13 + 2 + 3 + (simd_family() ? 9 + 5 : 0));
}
