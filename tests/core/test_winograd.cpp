// tests/core/test_winograd.cpp -- conv2d's Winograd F(2x2, 3x3) path (core/winograd.h) against a float64 direct
// convolution: forward, gx (the flipped-filter conv) and gW (padded windows, unchanged), on shapes that take the
// path: vector tails (tile rows of 10 and 17 tiles), several bands of tile rows, small maps with several images
// per call, bias, non-square maps. Builds without AVX-512 have no Winograd kernel (winograd_available()): there the
// same convs run the kernel select_algorithm picks instead and must match the reference all the same.
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

}  // namespace

TEST_CASE("winograd: conv2d's F(2x2, 3x3) path matches a float64 direct conv (forward, gx, gW)") {
    struct Case {
        const char* name;
        int64_t N, C, OC, H, W;
    };
    const std::vector<Case> cases = {
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
    for (const Case& c : cases) {
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
