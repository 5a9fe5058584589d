// tests/sparse/test_sparse_weight_grad.cpp -- conv2d's gW read straight from a razored x (core/conv_sparse_input.h):
// the bit walker and value decoding it reads through (core/sparse_samples.h), the kernel against the float64
// definition on the unpacked x for every codec and many geometries, and conv2d's backward choosing it under Back
// Razor with the same gradient as the expanded path. Strided convs run one list per channel and phase.
#include <set>

#include "core/conv_sparse_input.h"
#include "core/linear_sparse_input.h"
#include "sparse/back_razor.h"
#include "support/conv_reference.h"
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::sparse;
using namespace razor::test;

namespace {

Conv2dOptions opts(int64_t stride, int64_t pad, int64_t dil = 1, int64_t groups = 1) {
    return {{stride, stride}, {pad, pad}, {dil, dil}, groups};
}

// relu(N(0, 1)): about half the elements 0 before pruning, as after a BN-ReLU.
Tensor relu_randn(const Shape& shape, Generator& gen) {
    Tensor x = Tensor::randn(shape, gen);
    float* p = x.f32();
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = std::max(p[i], 0.f);
    return x;
}

// Back Razor at ratio r with fp16 values (the CLI's default), everything else at RazorConfig's defaults.
std::shared_ptr<const SavePolicy> razor_f16(double ratio) {
    RazorConfig config;
    config.ratio = ratio;
    config.values = ValueCodec::F16;
    return std::make_shared<RazorSavePolicy>(config);
}

}  // namespace

TEST_CASE("sparse samples: for_each_set_bit visits exactly the set bits of a range, across word edges") {
    std::vector<uint64_t> bits(4, 0);
    std::set<int64_t> set_bits = {0, 1, 62, 63, 64, 100, 127, 128, 190, 255};
    for (int64_t i : set_bits) bits[i >> 6] |= uint64_t{1} << (i & 63);
    for (auto [begin, end] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 256}, {1, 63}, {63, 65}, {64, 64}, {5, 129}, {100, 101}, {128, 255}, {0, 1}, {191, 256}}) {
        INFO("range [", begin, ", ", end, ")");
        std::vector<int64_t> got, expected;
        for_each_set_bit(bits.data(), begin, end, [&](int64_t i) { got.push_back(i); });
        for (int64_t i : set_bits)
            if (i >= begin && i < end) expected.push_back(i);
        CHECK(got == expected);
    }
}

TEST_CASE("sparse samples: a razored tensor's view decodes to what unpack gives, for every codec") {
    Generator gen(3);
    const Tensor x = relu_randn({3, 5, 7, 3}, gen);   // 105 elements per sample: a partial second bitmap word
    for (ValueCodec codec : {ValueCodec::F32, ValueCodec::F16, ValueCodec::I8}) {
        INFO(value_codec_name(codec));
        const auto r = RazoredTensor::pack(x, {.ratio = 0.7, .values = codec});
        const SparseSamples s = *r->sparse_samples();
        REQUIRE(s.samples == 3);
        REQUIRE(s.sample_numel == 105);
        CHECK(s.kept_fraction() == doctest::Approx(static_cast<double>(r->total_kept()) / 315));
        const Tensor u = r->unpack();
        for (int64_t b = 0; b < 3; ++b) {
            std::vector<float> values(static_cast<size_t>(s.kept(b)));
            s.decode_values(b, values.data());
            std::vector<float> dense(105, 0.f);
            size_t k = 0;
            for_each_set_bit(s.sample_bits(b), 0, 105, [&](int64_t i) { dense[static_cast<size_t>(i)] = values[k++]; });
            CHECK(k == values.size());
            for (int64_t i = 0; i < 105; ++i) CHECK(dense[static_cast<size_t>(i)] == doctest::Approx(u.f32()[b * 105 + i]).epsilon(1e-6));
        }
    }
    // Forms that are not per-sample sparse offer no view.
    CHECK_FALSE(DenseSaved(x, "test", true).sparse_samples().has_value());
}

TEST_CASE("sparse gW: equals the float64 definition on the unpacked x, every geometry and codec") {
    struct Case {
        const char* name;
        Shape x;
        int64_t OC, k;
        Conv2dOptions o;
    };
    Conv2dOptions tall = opts(1, 1);
    tall.stride = {2, 1};
    tall.padding = {1, 0};
    tall.dilation = {1, 2};
    Conv2dOptions wide = opts(1, 1);   // p (1, 0) d (1, 2)
    wide.padding = {1, 0};
    wide.dilation = {1, 2};
    const std::vector<Case> cases = {
        {"3x3 p1 16->12 at 16x16", {3, 16, 16, 16}, 12, 3, opts(1, 1)},
        {"3x3 p1 at 15x14 (odd; channels straddle bitmap words)", {2, 4, 15, 14}, 6, 3, opts(1, 1)},
        {"3x3 p1 16->20 at 16x16 (OC not a multiple of the vector)", {3, 16, 16, 16}, 20, 3, opts(1, 1)},
        {"3x3 p2 d2", {2, 4, 10, 11}, 3, 3, opts(1, 2, 2)},
        {"1x1 at 7x7", {4, 24, 7, 7}, 20, 1, opts(1, 0)},
        {"1x1 48->200 at 5x5 (several vector blocks)", {2, 48, 5, 5}, 200, 1, opts(1, 0)},
        {"3x3 p0 (valid)", {2, 5, 9, 8}, 7, 3, opts(1, 0)},
        {"p (1, 0) d (1, 2)", {2, 3, 9, 10}, 4, 3, wide},
        {"3x3 p1 s2 at 16x16", {3, 4, 16, 16}, 6, 3, opts(2, 1)},
        {"3x3 p1 s2 at 15x13 (odd)", {2, 5, 15, 13}, 18, 3, opts(2, 1)},
        {"1x1 s2", {3, 4, 9, 9}, 5, 1, opts(2, 0)},
        {"7x7 p3 s2 at 20x20 (a stem)", {2, 3, 20, 20}, 8, 7, opts(2, 3)},
        {"5x5 p2 at 13x12", {2, 3, 13, 12}, 4, 5, opts(1, 2)},
        {"3x3 s3 p0", {2, 4, 11, 11}, 5, 3, opts(3, 0)},
        {"s (2, 1) p (1, 0) d (1, 2)", {2, 3, 9, 10}, 4, 3, tall},
        {"groups 2, s2", {2, 8, 10, 10}, 6, 3, opts(2, 1, 1, 2)},
        {"3x3 p3 (padding beyond the kernel)", {2, 3, 6, 6}, 4, 3, opts(1, 3)},
        {"groups 2 at 16x16", {2, 8, 16, 16}, 6, 3, opts(1, 1, 1, 2)},
        {"one image", {1, 6, 8, 8}, 5, 3, opts(1, 1)},
    };
    for (const Case& c : cases) {
        const ConvGeometry g = conv2d_geometry(c.x, {c.OC, c.x[1] / c.o.groups, c.k, c.k}, c.o);
        REQUIRE(detail::conv2d_sparse_input_supports(g));
        Generator gen(42);
        const Tensor x = relu_randn(c.x, gen), gy = Tensor::randn({g.N, g.OC, g.OH, g.OW}, gen);
        const Tensor w = Tensor::randn({g.OC, g.Cg, g.KH, g.KW}, gen);
        for (ValueCodec codec : {ValueCodec::F32, ValueCodec::F16, ValueCodec::I8})
            for (double ratio : {0.0, 0.5, 0.9, 1.0}) {
                INFO(c.name, ", values ", value_codec_name(codec), ", r = ", ratio);
                const auto saved = RazoredTensor::pack(x, {.ratio = ratio, .values = codec});
                const ConvReference r = conv_reference(g, saved->unpack(), w, Tensor(), gy);
                Tensor gw = Tensor::full({g.OC, g.Cg, g.KH, g.KW}, 7.f);   // every element must be written
                detail::conv2d_sparse_input_weight_grad(g, *saved->sparse_samples(), gy.f32(), gw.f32());
                check_close(gw, r.gw, 1e-4, 1e-3, "gW");
            }
    }
}

TEST_CASE("sparse gW: conv2d's backward reads a razored x sparse at r = 0.9 and gives the expanded path's gradient") {
    const ConvGeometry g = conv2d_geometry({4, 8, 12, 12}, {16, 8, 3, 3}, opts(1, 1));
    CHECK(sparse_weight_grad_faster(g, 0.1));
    CHECK_FALSE(sparse_weight_grad_faster(g, 0.5));
    CHECK_FALSE(sparse_weight_grad_faster(conv2d_geometry({4, 8, 12, 12}, {8, 1, 3, 3}, opts(1, 1, 1, 8)), 0.1));
    CHECK_FALSE(sparse_weight_grad_faster(conv2d_geometry({4, 3, 12, 12}, {16, 3, 7, 7}, opts(2, 3)), 0.1));
    CHECK_FALSE(sparse_weight_grad_faster(conv2d_geometry({4, 8, 12, 12}, {16, 8, 1, 1}, opts(2, 0)), 0.1));
    CHECK(sparse_weight_grad_faster(conv2d_geometry({4, 8, 12, 12}, {16, 8, 3, 3}, opts(2, 1)), 0.1));
    CHECK(sparse_weight_grad_faster(conv2d_geometry({4, 8, 12, 12}, {128, 8, 1, 1}, opts(1, 0)), 0.1));
    CHECK_FALSE(sparse_weight_grad_faster(conv2d_geometry({4, 8, 12, 12}, {64, 8, 1, 1}, opts(1, 0)), 0.1));

    Generator gen(7);
    const Tensor x0 = relu_randn({4, 8, 12, 12}, gen), w0 = Tensor::randn({16, 8, 3, 3}, gen);
    const Tensor gy = Tensor::randn({4, 16, 12, 12}, gen);
    for (double ratio : {0.9, 0.5}) {
        INFO("r = ", ratio);
        Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
        {
            SavePolicyGuard guard(razor_f16(ratio));
            conv2d(x, w, Tensor(), opts(1, 1)).backward(gy);
        }
        // The same step by hand: x as the policy stored it, unpacked, through the dense definition.
        const auto saved = RazoredTensor::pack(x0, {.ratio = ratio, .values = ValueCodec::F16});
        const ConvReference r = conv_reference(g, saved->unpack(), w0, Tensor(), gy);
        check_close(w.grad(), r.gw, 1e-4, 1e-3, "gW");
        check_close(x.grad(), r.gx, 1e-4, 1e-4, "gx (unaffected: needs W and gy only)");
    }
}

TEST_CASE("sparse gW: linear's equals g^T x on the unpacked x, every codec, tokens per sample or one row") {
    struct Case {
        const char* name;
        Shape x;
        int64_t out;
    };
    const std::vector<Case> cases = {
        {"(B, T, in) tokens", {3, 5, 24}, 40},
        {"(B, in) one row per sample", {6, 37}, 9},
        {"wide in and out: several column blocks, a partial vector", {2, 3, 700}, 300},
        {"many rows per sample: column blocks narrower than out", {2, 600, 8}, 300},
    };
    for (const Case& c : cases) {
        Generator gen(11);
        const Tensor x = relu_randn(c.x, gen);
        const int64_t in = c.x.back(), M = x.numel() / in;
        const Tensor g = Tensor::randn({M, c.out}, gen);
        for (ValueCodec codec : {ValueCodec::F32, ValueCodec::F16, ValueCodec::I8})
            for (double ratio : {0.0, 0.9, 1.0}) {
                INFO(c.name, ", values ", value_codec_name(codec), ", r = ", ratio);
                const auto saved = RazoredTensor::pack(x, {.ratio = ratio, .values = codec});
                const Tensor u = saved->unpack();
                std::vector<double> expected(static_cast<size_t>(c.out * in), 0.0);
                for (int64_t m = 0; m < M; ++m)
                    for (int64_t o = 0; o < c.out; ++o)
                        for (int64_t j = 0; j < in; ++j)
                            expected[static_cast<size_t>(o * in + j)] +=
                                static_cast<double>(g.f32()[m * c.out + o]) * u.f32()[m * in + j];
                std::vector<float> e(expected.begin(), expected.end());
                Tensor gw = Tensor::full({c.out, in}, 7.f);
                detail::linear_sparse_input_weight_grad(*saved->sparse_samples(), M, in, c.out, g.f32(), gw.f32());
                check_close(gw, Tensor::from_vector({c.out, in}, e), 1e-4, 1e-4, "gW");
            }
    }
}

TEST_CASE("sparse gW: linear's backward reads a razored x sparse at r = 0.9 and gives g^T x of what was kept") {
    CHECK(linear_sparse_weight_grad_faster(0.1));
    CHECK_FALSE(linear_sparse_weight_grad_faster(0.5));
    Generator gen(5);
    const Tensor x0 = relu_randn({4, 6, 32}, gen), w0 = Tensor::randn({20, 32}, gen);
    const Tensor g = Tensor::randn({4, 6, 20}, gen);
    for (double ratio : {0.9, 0.5}) {
        INFO("r = ", ratio);
        Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
        {
            SavePolicyGuard guard(razor_f16(ratio));
            linear(x, w).backward(g);
        }
        const auto saved = RazoredTensor::pack(x0, {.ratio = ratio, .values = ValueCodec::F16});
        const Tensor u = saved->unpack();   // (4, 6, 32) = (24, 32) rows
        std::vector<float> expected(20 * 32, 0.f);
        for (int64_t m = 0; m < 24; ++m)
            for (int64_t o = 0; o < 20; ++o)
                for (int64_t j = 0; j < 32; ++j) expected[o * 32 + j] += g.f32()[m * 20 + o] * u.f32()[m * 32 + j];
        check_close(w.grad(), Tensor::from_vector({20, 32}, expected), 1e-4, 1e-4, "gW");
    }
}

namespace {
// Every save as per-sample dense int8 (attention's Q, K, V, P under --razor-attn int8).
class DenseInt8Policy final : public SavePolicy {
public:
    std::string name() const override { return "dense-i8"; }
    std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite&) const override {
        return DenseCodedTensor::pack(t, ValueCodec::I8);
    }
};
}  // namespace

TEST_CASE("matmul gb: a saved form that expands one sample at a time gives a^T g of the unpacked a, per matrix") {
    Generator gen(6);
    const Tensor a0 = Tensor::rand({3, 2, 5, 7}, gen), b0 = Tensor::randn({3, 2, 7, 4}, gen);   // P (B, h, N, N) x V
    const Tensor g = Tensor::randn({3, 2, 5, 4}, gen);
    for (bool needs_ga : {true, false}) {
        INFO("a needs a gradient: " << needs_ga);
        Tensor a = a0.clone(), b = b0.clone().requires_grad_();
        if (needs_ga) a.requires_grad_();
        {
            SavePolicyGuard guard(std::make_shared<DenseInt8Policy>());
            matmul(a, b).backward(g);
        }
        const Tensor u = DenseCodedTensor::pack(a0, ValueCodec::I8)->unpack();   // what backward reads
        std::vector<float> expected(3 * 2 * 7 * 4, 0.f);
        for (int64_t o = 0; o < 6; ++o)
            for (int64_t k = 0; k < 7; ++k)
                for (int64_t n = 0; n < 4; ++n) {
                    double acc = 0;
                    for (int64_t m = 0; m < 5; ++m) acc += double(u.f32()[(o * 5 + m) * 7 + k]) * g.f32()[(o * 5 + m) * 4 + n];
                    expected[(o * 7 + k) * 4 + n] = static_cast<float>(acc);
                }
        check_close(b.grad(), Tensor::from_vector({3, 2, 7, 4}, expected), 1e-5, 1e-6, "gb");
    }
}

TEST_CASE("softmax backward: a saved P that expands one sample at a time gives P (g - rowsum(g P)) of the unpacked P") {
    Generator gen(7);
    const Tensor x0 = Tensor::randn({3, 2, 5, 7}, gen), g = Tensor::randn({3, 2, 5, 7}, gen);
    Tensor x = x0.clone().requires_grad_();
    {
        SavePolicyGuard guard(std::make_shared<DenseInt8Policy>());
        softmax(x, -1).backward(g);
    }
    Tensor p;
    {
        NoGradGuard no_grad;
        p = softmax(x0, -1);
    }
    const Tensor u = DenseCodedTensor::pack(p, ValueCodec::I8)->unpack();   // what backward reads
    std::vector<float> expected(3 * 2 * 5 * 7);
    for (int64_t row = 0; row < 3 * 2 * 5; ++row) {
        const float *ur = u.f32() + row * 7, *gr = g.f32() + row * 7;
        double dot = 0;
        for (int64_t d = 0; d < 7; ++d) dot += double(gr[d]) * ur[d];
        for (int64_t d = 0; d < 7; ++d) expected[row * 7 + d] = static_cast<float>(ur[d] * (gr[d] - dot));
    }
    check_close(x.grad(), Tensor::from_vector({3, 2, 5, 7}, expected), 1e-5, 1e-6, "gx");
}
