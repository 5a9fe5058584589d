// tests/core/ops/test_pool.cpp -- max_pool2d, avg_pool2d, adaptive_avg_pool2d: gradcheck, PyTorch parity, errors,
// what is saved.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {
// A leaf whose values are a random permutation of 0, 0.1, 0.2, ...: distinct and 0.1 apart, so no max window has a
// tie within the finite-difference step.
Tensor spread_leaf(const Shape& shape, uint64_t seed) {
    const int64_t n = shape_numel(shape);
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), 0.f);
    Generator gen(seed);
    for (int64_t i = n - 1; i > 0; --i) std::swap(v[i], v[gen.randint(static_cast<uint64_t>(i + 1))]);
    for (float& f : v) f *= 0.1f;
    Tensor t = Tensor::from_vector(shape, v);
    t.requires_grad_();
    return t;
}
}  // namespace

TEST_CASE("max_pool2d: gradcheck away from ties") {
    const GradcheckOptions opt{.eps = 1e-2, .rtol = 1e-2, .atol = 1e-3};
    Tensor x = spread_leaf({2, 2, 5, 6}, 71);
    gradcheck("max_pool2d k2", [](const std::vector<Tensor>& in) { return max_pool2d(in[0], {}); }, {x}, opt);
    gradcheck("max_pool2d k3 s2 p1 (overlapping, padded)",
              [](const std::vector<Tensor>& in) { return max_pool2d(in[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}); },
              {x}, opt);
    gradcheck("max_pool2d k(2,3) s1",
              [](const std::vector<Tensor>& in) { return max_pool2d(in[0], {.kernel = {2, 3}, .stride = {1, 1}}); }, {x},
              opt);
}

TEST_CASE("avg_pool2d: gradcheck with padding") {
    Tensor x = randn_leaf({2, 2, 5, 6}, 72);
    gradcheck("avg_pool2d k3 s2 p1",
              [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}); },
              {x});
    gradcheck("avg_pool2d k2", [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {}); }, {x});
}

TEST_CASE("adaptive_avg_pool2d: gradcheck with non-divisible sizes") {
    Tensor x = randn_leaf({2, 2, 5, 7}, 73);
    gradcheck("adaptive 5x7 -> 3x4", [](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], {3, 4}); }, {x});
    gradcheck("adaptive 5x7 -> 6x9 (upsampling windows)",
              [](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], {6, 9}); }, {x});
    gradcheck("adaptive global", [](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], {1, 1}); }, {x});
}

TEST_CASE("pooling: matches PyTorch") {
    SafeTensors fx = load_fixture("pool");
    auto& t = fx.tensors;
    const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> cases = {
        {"max_k3s2p1", [](const Tensor& x) { return max_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}); }},
        {"max_k2", [](const Tensor& x) { return max_pool2d(x, {}); }},
        {"max_k3s1", [](const Tensor& x) { return max_pool2d(x, {.kernel = {3, 2}, .stride = {1, 2}}); }},
        {"avg_k3s2p1", [](const Tensor& x) { return avg_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}); }},
        {"avg_k2", [](const Tensor& x) { return avg_pool2d(x, {.kernel = {2, 2}}); }},
        {"adaptive_5x7_3x4", [](const Tensor& x) { return adaptive_avg_pool2d(x, {3, 4}); }},
        {"adaptive_3x4_5x6", [](const Tensor& x) { return adaptive_avg_pool2d(x, {5, 6}); }},
        {"adaptive_global", [](const Tensor& x) { return adaptive_avg_pool2d(x, {1, 1}); }},
    };
    for (const auto& [name, fn] : cases) {
        CAPTURE(name);
        Tensor x = leaf(t.at(name + ".x"));
        Tensor y = fn(x);
        check_close(y, t.at(name + ".out"), 1e-5, 1e-6, name + " forward");
        y.backward(t.at(name + ".grad_out"));
        check_close(x.grad(), t.at(name + ".grad_x"), 1e-5, 1e-6, name + " grad x");
    }
}

TEST_CASE("max_pool2d: forward values, first-max ties, gradient routing") {
    // One 4x4 plane; 2x2 windows. The top-left window has a tie (5, 5): the first one gets the gradient.
    Tensor x = Tensor::from_vector({1, 1, 4, 4}, {5, 5, 1, 2,  //
                                                  0, 1, 3, 9,  //
                                                  -1, -2, -3, -4,  //
                                                  -5, -6, -8, -7});
    x.requires_grad_();
    Tensor y = max_pool2d(x, {});
    CHECK(y.shape() == Shape{1, 1, 2, 2});
    CHECK(y.to_vector() == std::vector<float>{5, 9, -1, -3});
    y.backward(Tensor::from_vector({1, 1, 2, 2}, {1, 2, 3, 4}));
    CHECK(x.grad().to_vector() == std::vector<float>{1, 0, 0, 0, 0, 0, 0, 2, 3, 0, 4, 0, 0, 0, 0, 0});
}

TEST_CASE("max_pool2d: the 2x2 stride-2 kernel equals the window definition (ties, NaN, -inf, row tails)") {
    // Values from a 5-level set, so most windows hold ties; some NaN and -inf. Widths give 1, 15, 16, 17 and 20
    // outputs per row (the vector kernel does 16 at a time) and an odd width (the last column is in no window).
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const float levels[] = {-inf, -1.f, 0.f, 2.f, 2.f};
    for (const int64_t W : {2, 30, 32, 35, 40}) {
        INFO("W = ", W);
        const int64_t P = 3, H = 6, OH = 3, OW = W / 2;
        Generator gen(static_cast<uint64_t>(W));
        std::vector<float> v(P * H * W);
        for (float& f : v) f = gen.uniform() < 0.02 ? nan : levels[gen.randint(5)];
        Tensor x = Tensor::from_vector({1, P, H, W}, v);
        x.requires_grad_();
        Tensor y = max_pool2d(x, {});
        std::vector<float> g(P * OH * OW);
        std::iota(g.begin(), g.end(), 1.f);
        y.backward(Tensor::from_vector(y.shape(), g));
        const std::vector<float> got = y.to_vector(), gx = x.grad().to_vector();
        for (int64_t p = 0; p < P; ++p)
            for (int64_t oh = 0; oh < OH; ++oh)
                for (int64_t ow = 0; ow < OW; ++ow) {
                    // window order (0,0), (0,1), (1,0), (1,1): the first maximum, or the last NaN
                    float best = -inf;
                    int64_t at = (p * H + 2 * oh) * W + 2 * ow;
                    for (int64_t i = 0; i < 2; ++i)
                        for (int64_t j = 0; j < 2; ++j) {
                            const int64_t q = (p * H + 2 * oh + i) * W + 2 * ow + j;
                            if (v[q] > best || std::isnan(v[q])) best = v[q], at = q;
                        }
                    const int64_t o = (p * OH + oh) * OW + ow;
                    if (std::isnan(best)) CHECK(std::isnan(got[o]));
                    else CHECK(got[o] == best);
                    CHECK(gx[at] == g[o]);   // the gradient went to that position
                }
    }
}

TEST_CASE("max_pool2d: saves 1 byte per output (U8 window index), nothing after backward") {
    auto live = [] { return current_tape().live(); };
    Tensor x = randn_leaf({2, 3, 8, 8}, 74);
    Tensor y = max_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});   // (2, 3, 4, 4): 96 outputs
    CHECK(y.shape() == Shape{2, 3, 4, 4});
    CHECK(live().stored_bytes == 96);
    CHECK(live().items == 1);
    const std::vector<SavedRecord> records = current_tape().records();
    REQUIRE(records.size() == 1);
    CHECK(records[0].kind == SaveKind::Indices);
    y.backward(Tensor::ones(y.shape()));
    CHECK(live().stored_bytes == 0);

    SUBCASE("a window over 256 elements falls back to I64 indices") {
        Tensor big = randn_leaf({1, 1, 17, 17}, 75);
        Tensor yb = max_pool2d(big, {.kernel = {17, 17}});   // 289 positions
        CHECK(live().stored_bytes == 8);
        yb.backward(Tensor::ones(yb.shape()));
        const std::vector<float> gx = big.grad().to_vector();
        const std::vector<float> xv = big.to_vector();
        const auto argmax = std::max_element(xv.begin(), xv.end()) - xv.begin();
        CHECK(gx[argmax] == 1.f);
        CHECK(std::accumulate(gx.begin(), gx.end(), 0.f) == 1.f);
    }
    SUBCASE("no grad: nothing saved") {
        NoGradGuard no_grad;
        Tensor y2 = max_pool2d(x, {});
        CHECK_FALSE(y2.requires_grad());
        CHECK(live().stored_bytes == 0);
    }
}

TEST_CASE("avg_pool2d / adaptive_avg_pool2d: save nothing") {
    Tensor x = randn_leaf({2, 3, 6, 6}, 76);
    Tensor a = avg_pool2d(x, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}});
    Tensor b = adaptive_avg_pool2d(x, {4, 4});
    CHECK(a.shape() == Shape{2, 3, 6, 6});
    CHECK(b.shape() == Shape{2, 3, 4, 4});
    CHECK(current_tape().live().stored_bytes == 0);
    CHECK(current_tape().live().items == 0);
}

TEST_CASE("pooling: parallel path (large input) equals the definition") {
    // 4*16*32*32 = 65536 values: every kernel runs its OpenMP loop. Average of a linear ramp over a 2x2 window.
    const int64_t N = 4, C = 16, H = 32, W = 32;
    std::vector<float> v(N * C * H * W);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % (H * W));   // row-major index in the plane
    Tensor x = Tensor::from_vector({N, C, H, W}, v);
    const std::vector<float> avg = avg_pool2d(x, {}).to_vector();
    const std::vector<float> mx = max_pool2d(x, {}).to_vector();
    const std::vector<float> ad = adaptive_avg_pool2d(x, {16, 16}).to_vector();
    for (int64_t p = 0; p < N * C; ++p)
        for (int64_t i = 0; i < 16; ++i)
            for (int64_t j = 0; j < 16; ++j) {
                const int64_t o = (p * 16 + i) * 16 + j;
                const float top_left = static_cast<float>(2 * i * W + 2 * j);
                REQUIRE(avg[o] == top_left + (W + 1) / 2.f);
                REQUIRE(ad[o] == avg[o]);
                REQUIRE(mx[o] == top_left + W + 1);
            }
}

TEST_CASE("pooling: errors name the op, the expected and actual values, and a hint") {
    Tensor x = Tensor::zeros({2, 3, 4, 4});
    CHECK_THROWS_WITH_AS(max_pool2d(Tensor::zeros({3, 4}), {}),
                         doctest::Contains("max_pool2d: expected x (N, C, H, W) or (C, H, W), got (3, 4); hint"), Error);
    CHECK_THROWS_WITH_AS(avg_pool2d(Tensor::zeros({1, 2, 3, 4, 5}), {}),
                         doctest::Contains("avg_pool2d: expected x (N, C, H, W) or (C, H, W), got (1, 2, 3, 4, 5)"), Error);
    CHECK_THROWS_WITH_AS(max_pool2d(x, {.kernel = {0, 2}}), doctest::Contains("max_pool2d: expected a positive kernel, got (0, 2)"),
                         Error);
    CHECK_THROWS_WITH_AS(max_pool2d(x, {.kernel = {5, 5}}),
                         doctest::Contains("max_pool2d: kernel (5, 5) is larger than the padded input (4, 4) of x (2, 3, 4, 4)"),
                         Error);
    CHECK_THROWS_WITH_AS(avg_pool2d(x, {.kernel = {2, 2}, .padding = {2, 0}}),
                         doctest::Contains("avg_pool2d: expected padding between 0 and half the kernel (2, 2), got (2, 0)"),
                         Error);
    CHECK_THROWS_WITH_AS(avg_pool2d(x, {.kernel = {2, 2}, .stride = {-1, 1}}),
                         doctest::Contains("avg_pool2d: expected a positive stride"), Error);
    CHECK_THROWS_WITH_AS(adaptive_avg_pool2d(x, {0, 3}),
                         doctest::Contains("adaptive_avg_pool2d: expected a positive output_size, got (0, 3)"), Error);
    CHECK_THROWS_WITH_AS(adaptive_avg_pool2d(Tensor::zeros({2, 3, 0, 4}), {1, 1}),
                         doctest::Contains("adaptive_avg_pool2d: expected non-empty planes"), Error);
    CHECK_THROWS_WITH_AS(max_pool2d(Tensor::zeros({1, 1, 4, 4}, DType::I64), {}),
                         doctest::Contains("max_pool2d: expected x f32"), Error);
}
