// tests/core/test_winograd.cpp -- conv2d's Winograd F(2x2, 3x3) path (core/winograd.h) against a float64 direct
// convolution: forward, gx (the flipped-filter conv) and gW (padded windows, unchanged), on shapes that take the
// path: vector tails (tile rows of 10 and 17 tiles), several bands of tile rows, small maps with several images
// per call, bias, non-square maps; then each kernel family the CPU runs (avx2, avx512), called directly. The generic
// family has no Winograd kernel (winograd_available()): there the same convs run the kernel select_algorithm picks
// instead and must match the reference all the same.
#include "core/isa.h"
#include "core/winograd.h"
#include "support/conv_reference.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {

// Whether conv2d runs a 3x3 pad-1 conv of these channels and map by Winograd.
bool takes_winograd(int64_t stride, int64_t groups, int64_t C, int64_t OC, int64_t H, int64_t W) {
    Conv2dOptions o;
    o.stride = {stride, stride};
    o.padding = {1, 1};
    o.groups = groups;
    const ConvGeometry g = conv2d_geometry({1, C, H, W}, {OC, C / groups, 3, 3}, o);
    return select_algorithm(g).forward == ConvAlgorithm::WinogradF2x3;
}

struct Case {
    const char* name;
    int64_t N, C, OC, H, W;
};

// Shapes that take the path: vector tails (AVX-512: 16 tiles a vector, AVX2: 8), several bands, small maps with
// several images per call, non-square.
std::vector<Case> cases() {
    return {
        {"16 -> 16 at 16x16, 2 images", 2, 16, 16, 16, 16},
        {"12 -> 10, 32x20 (a tile row of 10 tiles: one masked vector)", 1, 12, 10, 32, 20},
        {"10 -> 24, 16x34 (17 tiles a row: a full vector and a tail of 1)", 3, 10, 24, 16, 34},
        {"32 -> 40 at 32x32 (bands of 7, 7 and 2 tile rows)", 1, 32, 40, 32, 32},
        // maps of at most 16 tiles: several images per call, one vector of tiles each (gathers and scatters)
        {"16 -> 12 at 8x8, 3 images in one call", 3, 16, 12, 8, 8},
        {"64 -> 64 at 8x8, 19 images (8 per call: calls of 8 and of the rest)", 19, 64, 64, 8, 8},
        {"10 -> 16 at 6x6 (9 tiles: masked lanes)", 2, 10, 16, 6, 6},
        {"24 -> 20 at 4x4", 5, 24, 20, 4, 4},
        {"12 -> 12 at 2x2 (one tile per image)", 4, 12, 12, 2, 2},
        {"16 -> 16 at 2x8 (non-square)", 3, 16, 16, 2, 8},
    };
}

}  // namespace

TEST_CASE("winograd: conv2d's F(2x2, 3x3) path matches a float64 direct conv (forward, gx, gW)") {
    for (const Case& c : cases()) {
        INFO(c.name);
        REQUIRE(takes_winograd(1, 1, c.C, c.OC, c.H, c.W) == detail::winograd_available());
        Tensor x = randn_leaf({c.N, c.C, c.H, c.W}, 11), W = randn_leaf({c.OC, c.C, 3, 3}, 12, 0.3f);
        Tensor b = randn_leaf({c.OC}, 13);
        const Tensor g = Tensor::randn({c.N, c.OC, c.H, c.W}, default_generator());
        Conv2dOptions o;
        o.padding = {1, 1};
        Tensor y = conv2d(x, W, b, o);
        y.backward(g);
        const ConvReference r = conv_reference(conv2d_geometry(x.shape(), W.shape(), o), x, W, b, g);
        // Sums of 9 C (or 9 OC, or N H W for gW) products of O(1) values: float rounding alone is ~1e-6 relative.
        check_close(y, r.y, 1e-5, 1e-4, "forward");
        check_close(x.grad(), r.gx, 1e-5, 1e-4, "gx");
        check_close(W.grad(), r.gw, 1e-5, 1e-3, "gW");
    }
}

TEST_CASE("winograd: taken only where it was measured faster, and only where the build has it") {
    const bool available = detail::winograd_available();
    CHECK(takes_winograd(1, 1, 16, 16, 32, 32) == available);     // resnet20 stage 1
    CHECK_FALSE(takes_winograd(1, 1, 3, 16, 32, 32));             // the stem: 3 channels
    CHECK(takes_winograd(1, 1, 64, 64, 8, 8) == available);       // resnet20 stage 3
    CHECK(takes_winograd(1, 1, 512, 512, 2, 2) == available);     // vgg's last convs
    CHECK_FALSE(takes_winograd(1, 1, 16, 16, 12, 12));            // 36 tiles, 144 positions
    CHECK_FALSE(takes_winograd(2, 1, 16, 32, 32, 32));            // stride 2
    CHECK_FALSE(takes_winograd(1, 1, 16, 16, 15, 16));            // odd height
    CHECK_FALSE(takes_winograd(1, 2, 16, 16, 16, 16));            // groups
}

TEST_CASE("winograd: every kernel family this CPU runs, called in-process, matches a float64 direct conv") {
    int families = 0;
    for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
        CHECK(detail::winograd_available(isa) == isa_supported(isa));
        if (!detail::winograd_available(isa)) {
            CHECK_THROWS_AS(detail::winograd_conv3x3(isa, nullptr, 1, 1, nullptr, 2, 2, 1, nullptr, nullptr, nullptr),
                            Error);
            continue;
        }
        ++families;
        for (const Case& c : cases()) {
            INFO(isa_name(isa), ": ", c.name);
            Generator gen(21);
            const Tensor x = Tensor::randn({c.N, c.C, c.H, c.W}, gen), w = Tensor::randn({c.OC, c.C, 3, 3}, gen);
            const Tensor b = Tensor::randn({c.OC}, gen), gy = Tensor::randn({c.N, c.OC, c.H, c.W}, gen);
            Conv2dOptions o;
            o.padding = {1, 1};
            const ConvReference r = conv_reference(conv2d_geometry(x.shape(), w.shape(), o), x, w, b, gy);
            // out (N, out_ch, H, W) = conv3x3(in) by the family's kernel, nb images per call as conv2d runs it.
            auto conv = [&](const float* u, int64_t in_ch, int64_t out_ch, const float* in, const float* bias) {
                const int64_t nb = detail::winograd_images_per_call(in_ch, out_ch, c.H, c.W), hw = c.H * c.W;
                std::vector<float> out(static_cast<size_t>(c.N * out_ch * hw)), scratch(static_cast<size_t>(
                    detail::winograd_scratch_floats(in_ch, out_ch, c.H, c.W)));
                for (int64_t n = 0; n < c.N; n += nb)
                    detail::winograd_conv3x3(isa, u, out_ch, in_ch, in + n * in_ch * hw, c.H, c.W,
                                             std::min(nb, c.N - n), bias, out.data() + n * out_ch * hw, scratch.data());
                return out;
            };
            std::vector<float> u(static_cast<size_t>(16 * c.OC * c.C)), uf(u.size());
            detail::winograd_filters(w.f32(), c.OC, c.C, false, u.data());
            detail::winograd_filters(w.f32(), c.C, c.OC, true, uf.data());
            check_close(Tensor::from_vector(r.y.shape(), conv(u.data(), c.C, c.OC, x.f32(), b.f32())), r.y, 1e-5, 1e-4,
                        "forward");
            check_close(Tensor::from_vector(r.gx.shape(), conv(uf.data(), c.OC, c.C, gy.f32(), nullptr)), r.gx, 1e-5,
                        1e-4, "gx");
            const int64_t nb = detail::winograd_images_per_call(c.C, c.OC, c.H, c.W), hw = c.H * c.W;
            std::vector<float> du(u.size()), gw(static_cast<size_t>(c.OC * c.C * 9)),
                scratch(static_cast<size_t>(detail::winograd_scratch_floats(c.C, c.OC, c.H, c.W)));
            for (int64_t n = 0; n < c.N; n += nb)
                detail::winograd_filter_grad(isa, c.OC, c.C, x.f32() + n * c.C * hw, gy.f32() + n * c.OC * hw, c.H,
                                             c.W, std::min(nb, c.N - n), n > 0, du.data(), scratch.data());
            detail::winograd_filter_grad_to_weights(du.data(), c.OC, c.C, gw.data());
            check_close(Tensor::from_vector(r.gw.shape(), gw), r.gw, 1e-5, 1e-3, "gW");
        }
    }
    CHECK(families == int{isa_supported(Isa::Avx2)} + int{isa_supported(Isa::Avx512)});
}
