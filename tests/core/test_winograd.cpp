// tests/core/test_winograd.cpp -- conv2d's Winograd F(2x2, 3x3) path (core/winograd.h) against a float64 direct
// convolution: forward, gx (the flipped-filter conv) and gW (padded windows, unchanged), on shapes that take the
// path: vector tails (tile rows of 10 and 17 tiles), several bands of tile rows, small maps with several images
// per call, bias, non-square maps.
#include "core/winograd.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {

// y = conv3x3(x, W, pad 1) + b in float64, and gx, gW for the upstream gradient g.
struct Reference {
    std::vector<double> y, gx, gw;
};

Reference direct(const Tensor& x, const Tensor& W, const Tensor& b, const Tensor& g) {
    const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], Wd = x.shape()[3], OC = W.shape()[0];
    const std::vector<float> xv = x.to_vector(), wv = W.to_vector(), bv = b.to_vector(), gv = g.to_vector();
    Reference r;
    r.y.assign(static_cast<size_t>(N * OC * H * Wd), 0.0);
    r.gx.assign(xv.size(), 0.0);
    r.gw.assign(wv.size(), 0.0);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t oc = 0; oc < OC; ++oc)
            for (int64_t h = 0; h < H; ++h)
                for (int64_t w = 0; w < Wd; ++w) {
                    const size_t yi = static_cast<size_t>(((n * OC + oc) * H + h) * Wd + w);
                    double acc = bv[oc];
                    for (int64_t c = 0; c < C; ++c)
                        for (int64_t kh = 0; kh < 3; ++kh)
                            for (int64_t kw = 0; kw < 3; ++kw) {
                                const int64_t ih = h + kh - 1, iw = w + kw - 1;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= Wd) continue;
                                const size_t xi = static_cast<size_t>(((n * C + c) * H + ih) * Wd + iw);
                                const size_t wi = static_cast<size_t>(((oc * C + c) * 3 + kh) * 3 + kw);
                                acc += double(wv[wi]) * xv[xi];
                                r.gx[xi] += double(wv[wi]) * gv[yi];
                                r.gw[wi] += double(xv[xi]) * gv[yi];
                            }
                    r.y[yi] = acc;
                }
    return r;
}

Tensor from_doubles(const std::vector<double>& v, const Shape& shape) {
    return Tensor::from_vector(shape, std::vector<float>(v.begin(), v.end()));
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
        REQUIRE(detail::winograd_applies(3, 3, 1, 1, 1, 1, 1, 1, 1, c.C, c.OC, c.H, c.W));
        Tensor x = randn_leaf({c.N, c.C, c.H, c.W}, 11), W = randn_leaf({c.OC, c.C, 3, 3}, 12, 0.3f);
        Tensor b = randn_leaf({c.OC}, 13);
        const Tensor g = Tensor::randn({c.N, c.OC, c.H, c.W}, default_generator());
        Conv2dOptions o;
        o.padding = {1, 1};
        Tensor y = conv2d(x, W, b, o);
        y.backward(g);
        const Reference r = direct(x, W, b, g);
        // Sums of 9 C (or 9 OC, or N H W for gW) products of O(1) values: float rounding alone is ~1e-6 relative.
        check_close(y, from_doubles(r.y, y.shape()), 1e-5, 1e-4, "forward");
        check_close(x.grad(), from_doubles(r.gx, x.shape()), 1e-5, 1e-4, "gx");
        check_close(W.grad(), from_doubles(r.gw, W.shape()), 1e-5, 1e-3, "gW");
    }
}

TEST_CASE("winograd: taken only where it was measured faster") {
    CHECK(detail::winograd_applies(3, 3, 1, 1, 1, 1, 1, 1, 1, 16, 16, 32, 32));   // resnet20 stage 1
    CHECK_FALSE(detail::winograd_applies(3, 3, 1, 1, 1, 1, 1, 1, 1, 3, 16, 32, 32));   // the stem: 3 channels
    CHECK(detail::winograd_applies(3, 3, 1, 1, 1, 1, 1, 1, 1, 64, 64, 8, 8));         // resnet20 stage 3
    CHECK(detail::winograd_applies(3, 3, 1, 1, 1, 1, 1, 1, 1, 512, 512, 2, 2));       // vgg's last convs
    CHECK_FALSE(detail::winograd_applies(3, 3, 1, 1, 1, 1, 1, 1, 1, 16, 16, 12, 12));  // 36 tiles, 144 positions
    CHECK_FALSE(detail::winograd_applies(3, 3, 2, 2, 1, 1, 1, 1, 1, 16, 32, 32, 32));  // stride 2
    CHECK_FALSE(detail::winograd_applies(3, 3, 1, 1, 1, 1, 1, 1, 1, 16, 16, 15, 16));  // odd height
    CHECK_FALSE(detail::winograd_applies(3, 3, 1, 1, 1, 1, 1, 1, 2, 16, 16, 16, 16));  // groups
}
