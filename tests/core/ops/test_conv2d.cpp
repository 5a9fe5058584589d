// tests/core/ops/test_conv2d.cpp -- conv2d: gradcheck over stride/padding/dilation/groups/bias/non-square
// configs, PyTorch parity, batch chunking, errors, and what is saved (x and W only, never an im2col buffer).
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {
Conv2dOptions opts(int64_t stride, int64_t pad, int64_t dil, int64_t groups) {
    Conv2dOptions o;
    o.stride = {stride, stride};
    o.padding = {pad, pad};
    o.dilation = {dil, dil};
    o.groups = groups;
    return o;
}

struct Case {
    const char* name;
    Shape x, w;
    bool bias;
    Conv2dOptions o;
};

// gradcheck of conv2d on each case: x, W (scaled 0.5) and the bias if any, from fixed seeds.
void gradcheck_cases(const std::vector<Case>& cases, GradcheckOptions options = {}) {
    for (const Case& c : cases) {
        INFO(c.name);
        std::vector<Tensor> in = {randn_leaf(c.x, 1), randn_leaf(c.w, 2, 0.5f)};
        if (c.bias) in.push_back(randn_leaf({c.w[0]}, 3));
        const Conv2dOptions o = c.o;
        gradcheck(
            c.name,
            [o](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), o); },
            in, options);
    }
}
}  // namespace

TEST_CASE("conv2d: gradcheck over stride, padding, dilation, groups, bias, non-square") {
    Conv2dOptions nonsquare;
    nonsquare.stride = {2, 1};
    nonsquare.padding = {1, 0};
    nonsquare.dilation = {1, 2};
    const std::vector<Case> cases = {
        {"3x3 s1 p1", {2, 3, 5, 5}, {4, 3, 3, 3}, true, opts(1, 1, 1, 1)},
        {"3x3 s2 p0 no bias", {2, 2, 7, 6}, {3, 2, 3, 3}, false, opts(2, 0, 1, 1)},
        {"3x3 s1 p1 dilation 2", {1, 2, 6, 7}, {2, 2, 3, 3}, true, opts(1, 1, 2, 1)},
        {"groups 2", {2, 4, 5, 4}, {6, 2, 3, 3}, true, opts(1, 1, 1, 2)},
        {"depthwise s1", {2, 3, 5, 5}, {3, 1, 3, 3}, true, opts(1, 1, 1, 3)},
        {"depthwise s2 d2 no bias", {2, 4, 7, 6}, {4, 1, 3, 3}, false, opts(2, 2, 2, 4)},
        {"depthwise multiplier 2", {1, 2, 5, 4}, {4, 1, 3, 3}, true, opts(1, 1, 1, 2)},
        {"1x1 pointwise", {2, 3, 4, 5}, {5, 3, 1, 1}, true, opts(1, 0, 1, 1)},
        {"1x1 stride 2", {2, 3, 5, 5}, {4, 3, 1, 1}, false, opts(2, 0, 1, 1)},
        {"non-square kernel, stride, dilation", {2, 2, 6, 7}, {3, 2, 3, 2}, true, nonsquare},
        {"3x3 p2 d2, same size (shifted rows)", {2, 2, 5, 6}, {3, 2, 3, 3}, true, opts(1, 2, 2, 1)},
        {"5x5 p2", {1, 2, 4, 5}, {2, 2, 5, 5}, false, opts(1, 2, 1, 1)},
        {"3x3 s2 p2 (taps left of the row)", {1, 2, 7, 8}, {2, 2, 3, 3}, true, opts(2, 2, 1, 1)},
        {"3x3 s3 p1, odd width", {1, 2, 8, 11}, {2, 2, 3, 3}, false, opts(3, 1, 1, 1)},
        {"H = 1: taps that see only padding", {2, 2, 1, 4}, {2, 2, 3, 3}, true, opts(1, 1, 1, 1)},
        {"padding larger than the kernel", {1, 2, 2, 3}, {2, 2, 3, 3}, true, opts(2, 3, 1, 1)},
        {"depthwise same size", {2, 2, 4, 4}, {2, 1, 3, 3}, false, opts(1, 1, 1, 2)},
        {"batch 3 (uneven chunks)", {3, 2, 4, 4}, {2, 2, 2, 2}, true, opts(1, 0, 1, 1)},
        {"batch 1 (serial path)", {1, 3, 4, 4}, {2, 3, 3, 3}, true, opts(1, 1, 1, 1)},
    };
    gradcheck_cases(cases);
}

TEST_CASE("conv2d: images wider than a tile are done in several tiles of output rows") {
    // Tiles hold about 256 output positions: OW = 40 gives 6 rows per tile, so OH = 13 is 6 + 6 + 1 rows.
    const std::vector<Case> cases = {
        {"3x3 p1, 3 row tiles", {2, 2, 13, 40}, {3, 2, 3, 3}, true, opts(1, 1, 1, 1)},
        {"3x3 s2 p1 d2, 2 row tiles", {1, 2, 15, 80}, {2, 2, 3, 3}, false, opts(2, 1, 2, 1)},
        {"groups 2, 3 row tiles", {1, 4, 13, 40}, {2, 2, 3, 3}, true, opts(1, 1, 1, 2)},
    };
    gradcheck_cases(cases, {.max_probes = 200});
}

TEST_CASE("conv2d: same-size convs on maps of more than 128 positions run on padded planes (no im2col)") {
    // Stride 1, one group, KH = 2 ph + 1 and KW = 2 pw + 1: gemm_rows reads windows of zero-padded planes.
    Conv2dOptions tall;   // 3x1 kernel, padding (1, 0)
    tall.padding = {1, 0};
    const std::vector<Case> cases = {
        {"3x3 p1 12x12", {3, 3, 12, 12}, {4, 3, 3, 3}, true, opts(1, 1, 1, 1)},
        {"5x5 p2 11x14, no bias", {2, 2, 11, 14}, {3, 2, 5, 5}, false, opts(1, 2, 1, 1)},
        {"3x1 p(1, 0) 13x12", {2, 2, 13, 12}, {3, 2, 3, 1}, true, tall},
        {"batch 1 (the GEMM splits over threads)", {1, 2, 12, 12}, {2, 2, 3, 3}, true, opts(1, 1, 1, 1)},
    };
    gradcheck_cases(cases, {.max_probes = 200});
}

TEST_CASE("conv2d: maps of at most 128 positions run several images per GEMM (row copies, or tables below 8 wide)") {
    // images_per_gemm = 256 / OHW: 4 images of 8x8 (row im2col), 16 of 4x4 and 64 of 2x2 (tap tables); a chunk's
    // last image may run alone.
    const std::vector<Case> cases = {
        {"8x8 p1, 3 images", {3, 2, 8, 8}, {3, 2, 3, 3}, true, opts(1, 1, 1, 1)},
        {"16x16 s2 -> 8x8, 5 images", {5, 2, 16, 16}, {2, 2, 3, 3}, false, opts(2, 1, 1, 1)},
        {"4x4 p1, 5 images", {5, 3, 4, 4}, {2, 3, 3, 3}, true, opts(1, 1, 1, 1)},
        {"2x2 p1, 3 images, groups 2", {3, 4, 2, 2}, {4, 2, 3, 3}, true, opts(1, 1, 1, 2)},
        {"1x1 pointwise 4x4, 3 images", {3, 3, 4, 4}, {2, 3, 1, 1}, true, opts(1, 0, 1, 1)},
    };
    gradcheck_cases(cases, {.max_probes = 200});
}

TEST_CASE("conv2d: input that needs no gradient (the stem) still trains W and b") {
    Tensor x = Tensor::randn({2, 3, 5, 5}, default_generator());
    gradcheck("conv2d stem", [](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t[2], opts(1, 1, 1, 1)); },
              {x, randn_leaf({4, 3, 3, 3}, 4), randn_leaf({4}, 5)});
}

namespace {
void check_conv_fixture(const std::string& file, const std::vector<std::string>& names) {
    SafeTensors fx = load_fixture(file);
    auto& t = fx.tensors;
    for (const std::string& c : names) {
        const std::vector<int64_t> cfg = t.at(c + ".config").to_vector_i64();
        Conv2dOptions o;
        o.stride = {cfg[0], cfg[1]};
        o.padding = {cfg[2], cfg[3]};
        o.dilation = {cfg[4], cfg[5]};
        o.groups = cfg[6];
        const bool has_bias = t.count(c + ".b") > 0;
        Tensor x = leaf(t.at(c + ".x")), W = leaf(t.at(c + ".W"));
        Tensor b = has_bias ? leaf(t.at(c + ".b")) : Tensor();
        Tensor y = conv2d(x, W, b, o);
        check_close(y, t.at(c + ".out"), 1e-5, 1e-5, c + " forward");
        y.backward(t.at(c + ".grad_out"));
        check_close(x.grad(), t.at(c + ".grad_x"), 1e-5, 1e-5, c + " grad x");
        check_close(W.grad(), t.at(c + ".grad_W"), 1e-5, 1e-5, c + " grad W (summed over the batch)");
        if (has_bias) check_close(b.grad(), t.at(c + ".grad_b"), 1e-5, 1e-5, c + " grad b");
    }
}
}  // namespace

TEST_CASE("conv2d: matches PyTorch") {
    check_conv_fixture("conv2d", {"basic", "stride2_groups2", "dilated", "depthwise", "depthwise_mult", "pointwise",
                                  "proj1x1_s2", "stem_nopad"});
    check_conv_fixture("conv2d_edges", {"same_dilated", "pad_only_taps", "big_pad", "stride2_pad2", "stride3", "row_tiles",
                                        "row_tiles_s2"});
}

TEST_CASE("conv2d: a batch gives the per-image outputs and the sum of the per-image weight gradients") {
    // 5 images (uneven chunks over the threads) against one image at a time.
    const Conv2dOptions o = opts(2, 1, 1, 1);
    Tensor x = Tensor::randn({5, 3, 6, 6}, default_generator());
    Tensor W = randn_leaf({4, 3, 3, 3}, 6);
    Tensor y = conv2d(x, W, Tensor(), o);
    Generator gen(7);
    Tensor g = Tensor::randn(y.shape(), gen);
    y.backward(g);
    Tensor gw_batch = W.grad().clone();
    W.zero_grad();
    const int64_t img = 3 * 6 * 6, out = y.numel() / 5;
    for (int64_t n = 0; n < 5; ++n) {
        Tensor xn = x.as_strided({1, 3, 6, 6}, contiguous_strides({1, 3, 6, 6}), n * img).clone();
        Tensor yn = conv2d(xn, W, Tensor(), o);
        Tensor expected = y.as_strided(yn.shape(), contiguous_strides(yn.shape()), n * out).clone();
        check_close(yn, expected, 1e-6, 1e-6, "image " + std::to_string(n));
        yn.backward(g.as_strided(yn.shape(), contiguous_strides(yn.shape()), n * out).clone());   // accumulates
    }
    check_close(gw_batch, W.grad(), 1e-5, 1e-5, "batch gW vs sum of per-image gW");
}

TEST_CASE("conv2d: bad input names the op, expected and actual shapes, and a hint") {
    Tensor W16 = Tensor::zeros({16, 16, 3, 3});
    CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({128, 3, 32, 32}), W16),
                         doctest::Contains("conv2d: expected x (N, 16, H, W), got (128, 3, 32, 32); hint: check "
                                           "in_channels or the preceding layer"),
                         Error);
    CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({3, 32, 32}), W16),
                         doctest::Contains("conv2d: expected x (N, C, H, W), got (3, 32, 32)"), Error);
    CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({1, 16, 8, 8}), Tensor::zeros({16, 16, 3})),
                         doctest::Contains("conv2d: expected W (OC, C/groups, KH, KW), got (16, 16, 3)"), Error);
    CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({1, 16, 8, 8}), Tensor::zeros({15, 5, 3, 3}), Tensor(), opts(1, 1, 1, 3)),
                         doctest::Contains("conv2d: groups 3 does not divide the 16 input channels"), Error);
    CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({1, 16, 8, 8}), Tensor::zeros({6, 4, 3, 3}), Tensor(), opts(1, 1, 1, 4)),
                         doctest::Contains("conv2d: groups 4 does not divide the 6 output channels"), Error);
    CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({1, 3, 4, 4}), Tensor::zeros({8, 3, 7, 7})),
                         doctest::Contains("conv2d: output size (-2, -2) <= 0 for x (1, 3, 4, 4) with kernel (7, 7)"),
                         Error);
    CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({1, 3, 4, 4}), Tensor::zeros({8, 3, 3, 3}), Tensor::zeros({16})),
                         doctest::Contains("conv2d: expected bias (8), got (16)"), Error);
    CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({1, 3, 4, 4}), Tensor::zeros({8, 3, 3, 3}), Tensor(), opts(0, 1, 1, 1)),
                         doctest::Contains("conv2d: expected stride >= 1, got (0, 0)"), Error);
    CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({1, 3, 4, 4}, DType::U8), Tensor::zeros({8, 3, 3, 3})),
                         doctest::Contains("conv2d: expected f32 tensors, got u8"), Error);
}

TEST_CASE("conv2d: saves x only if W trains, W only by reference, never an im2col buffer") {
    auto& tape = current_tape();
    const int64_t x_bytes = 2 * 3 * 8 * 8 * 4;
    SUBCASE("stem: x needs no grad -> only x is saved, densely, at exactly its own size") {
        Tensor x = Tensor::randn({2, 3, 8, 8}, default_generator());
        Tensor W = randn_leaf({4, 3, 3, 3}, 1), b = randn_leaf({4}, 2);
        Tensor y = conv2d(x, W, b, opts(1, 1, 1, 1));
        auto records = tape.records();
        REQUIRE(records.size() == 1);
        CHECK(records[0].name == "x");
        CHECK(records[0].kind == SaveKind::Activation);
        CHECK(tape.live().stored_bytes == x_bytes);
        y.backward(Tensor::ones(y.shape()));
        CHECK(tape.live().items == 0);
        CHECK(tape.live().stored_bytes == 0);
    }
    SUBCASE("frozen W, x trains -> W by reference (0 bytes), no x") {
        Tensor x = randn_leaf({2, 3, 8, 8}, 3);
        Tensor W = Tensor::randn({4, 3, 3, 3}, default_generator());
        Tensor y = conv2d(x, W, Tensor(), opts(2, 1, 1, 1));
        auto records = tape.records();
        REQUIRE(records.size() == 1);
        CHECK(records[0].name == "W");
        CHECK(records[0].kind == SaveKind::Parameter);
        CHECK(tape.live().stored_bytes == 0);
        y.backward(Tensor::ones(y.shape()));
        CHECK(tape.live().items == 0);
    }
    SUBCASE("both train (depthwise too): x and W, x's bytes only") {
        for (int64_t groups : {1, 3}) {
            Tensor x = randn_leaf({2, 3, 8, 8}, 4);
            Tensor W = randn_leaf({3, 3 / groups, 3, 3}, 5);
            Tensor y = conv2d(x, W, Tensor(), opts(1, 1, 1, groups));
            CHECK(tape.live().items == 2);
            CHECK(tape.live().stored_bytes == x_bytes);
            y.backward(Tensor::ones(y.shape()));
            CHECK(tape.live().items == 0);
        }
    }
}

TEST_CASE("conv2d: an empty batch gives an empty output and zero weight and bias gradients") {
    for (int64_t groups : {1, 2}) {
        Tensor x = Tensor::zeros({0, 2, 5, 5});
        x.requires_grad_();
        Tensor W = randn_leaf({2, 2 / groups, 3, 3}, 1), b = randn_leaf({2}, 2);
        Tensor y = conv2d(x, W, b, opts(1, 1, 1, groups));
        CHECK(y.shape() == Shape{0, 2, 5, 5});
        y.backward(Tensor::zeros(y.shape()));
        CHECK(x.grad().shape() == x.shape());
        CHECK(W.grad().to_vector() == std::vector<float>(static_cast<size_t>(W.numel()), 0.f));
        CHECK(b.grad().to_vector() == std::vector<float>(2, 0.f));
    }
}
