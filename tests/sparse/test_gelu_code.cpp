// tests/sparse/test_gelu_code.cpp -- the 4-bit GELU-derivative code (sparse/gelu_code.h): levels and their
// representatives, the error bound against the exact derivative, packing (nibble order, odd sizes, bytes), and
// GELU's backward through RazorSavePolicy with GeluSave::Derivative4.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "core/core.h"
#include "sparse/back_razor.h"

using namespace razor;
using namespace razor::sparse;

namespace {
double exact_derivative(double x) {
    return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}
}  // namespace

TEST_CASE("gelu code: 16 equally spaced levels over [d_min, d_max]; d at each representative is its level") {
    CHECK(GeluDerivativeCode::level(0) == doctest::Approx(exact_derivative(-std::sqrt(2.0))).epsilon(1e-6));
    CHECK(GeluDerivativeCode::level(15) == doctest::Approx(exact_derivative(std::sqrt(2.0))).epsilon(1e-6));
    CHECK(GeluDerivativeCode::level(0) == doctest::Approx(-0.12890).epsilon(1e-4));
    CHECK(GeluDerivativeCode::level(15) == doctest::Approx(1.12890).epsilon(1e-4));
    for (int j = 0; j < 16; ++j) {
        INFO("code " << j);
        CHECK(exact_derivative(GeluDerivativeCode::representative(j)) ==
              doctest::Approx(GeluDerivativeCode::level(j)).epsilon(1e-5));
        if (j) CHECK(GeluDerivativeCode::level(j) > GeluDerivativeCode::level(j - 1));
    }
}

TEST_CASE("gelu code: |L(code(x)) - d(x)| <= 0.0435 everywhere, and the bound is nearly reached") {
    double worst = 0;
    for (int i = -200000; i <= 200000; ++i) {
        const float x = static_cast<float>(i * 5e-5);   // [-10, 10]
        const double err = std::abs(GeluDerivativeCode::level(GeluDerivativeCode::code_of(x)) - exact_derivative(x));
        worst = std::max(worst, err);
    }
    for (float x : {-1e30f, -50.f, -8.0001f, 8.f, 50.f, 1e30f})
        worst = std::max(worst, std::abs(GeluDerivativeCode::level(GeluDerivativeCode::code_of(x)) -
                                         exact_derivative(std::clamp(x, -60.f, 60.f))));
    MESSAGE("largest derivative error " << worst);
    CHECK(worst <= GeluDerivativeCode::kMaxError);
    CHECK(worst > 0.04);   // uniform 16 levels over a range of 1.26: the half step, 0.0419, is the real figure
}

TEST_CASE("gelu code: packing -- two codes per byte, low nibble first, odd sizes, ceil(n/2) bytes") {
    Generator gen(3);
    // The first 40 values of each tensor include every special case of code_at (beyond +-8, +-inf, NaN, the exact
    // edges), so the 16-lane kernel sees them too.
    const std::vector<float> special = {-1e30f, -50.f, -8.0001f, -8.f, -7.99f, 0.f, -0.f, 7.99f, 8.f, 8.0001f, 50.f,
                                        1e30f, INFINITY, -INFINITY, NAN, -NAN, 1.4142f, -1.4142f, 1e-30f, -1e-30f};
    for (int64_t n : {1, 2, 7, 40, 64, 100001}) {
        INFO("n " << n);
        Tensor x = mul(Tensor::randn({n}, gen), 2.f);
        for (int64_t i = 0; i < n && i < 40; i += 2) x.f32()[i] = special[static_cast<size_t>(i / 2) % special.size()];
        const auto coded = GeluDerivativeCode::pack(x);
        CHECK(coded->stored_bytes() == (n + 1) / 2);
        CHECK(coded->dense_bytes() == 4 * n);
        CHECK(coded->format() == "gelu-d4");
        const Tensor back = coded->unpack();
        REQUIRE(back.shape() == x.shape());
        const float* px = x.f32();
        const float* pb = back.f32();
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i) {
            const int c = GeluDerivativeCode::code_of(px[i]);
            wrong += !(pb[i] == GeluDerivativeCode::representative(c));
            wrong += ((coded->codes()[i / 2] >> (4 * (i % 2))) & 15) != c;
        }
        CHECK(wrong == 0);
    }
}

TEST_CASE("gelu code: GELU backward under GeluSave::Derivative4 is within 0.0435 |g| of the exact one") {
    Generator gen(4);
    Tensor x = mul(Tensor::randn({4, 9, 33}, gen), 1.5f).detach();
    x.requires_grad_();
    const Tensor g = Tensor::randn({4, 9, 33}, gen);
    auto grad_under = [&](std::shared_ptr<const SavePolicy> policy) {
        x.zero_grad();
        Tensor y;
        {
            SavePolicyGuard guard(std::move(policy));
            y = gelu(x);
        }
        y.backward(g);
        return x.grad().clone();
    };
    RazorConfig config;
    config.gelu = GeluSave::Derivative4;
    const Tensor exact = grad_under(std::make_shared<DenseSavePolicy>());
    const Tensor coded = grad_under(std::make_shared<RazorSavePolicy>(config));
    const float *pe = exact.f32(), *pc = coded.f32(), *pg = g.f32();
    double worst = 0;
    for (int64_t i = 0; i < exact.numel(); ++i)
        worst = std::max(worst, std::abs(double(pe[i]) - pc[i]) / std::max(std::abs(double(pg[i])), 1e-6));
    CHECK(worst <= GeluDerivativeCode::kMaxError + 1e-4);
    CHECK(worst > 0);   // it is an approximation
    // what the tape holds: 0.5 bytes per element
    {
        SavePolicyGuard guard(std::make_shared<RazorSavePolicy>(config));
        const uint64_t before = current_tape().records().size();
        Tensor y = gelu(x);
        const auto records = current_tape().records();
        REQUIRE(records.size() == before + 1);
        CHECK(records.back().format == "gelu-d4");
        CHECK(records.back().stored_bytes == (x.numel() + 1) / 2);
    }
}

TEST_CASE("gelu code: multiply_by_codebook gives g * f(unpack()) element for element, odd sizes and chunks") {
    Generator gen(5);
    auto f = [](float v) { return 0.25f * v * v - v + 0.5f; };   // any function of the representative
    for (int64_t n : {1, 15, 16, 17, 33, 65537, 200001}) {   // AVX-512 blocks of 16, tails, several 32 KiB chunks
        INFO("n " << n);
        const Tensor x = mul(Tensor::randn({n}, gen), 2.f), g = Tensor::randn({n}, gen);
        const auto coded = GeluDerivativeCode::pack(x);
        std::vector<float> out(static_cast<size_t>(n), -1.f);
        REQUIRE(coded->multiply_by_codebook(+f, g.f32(), out.data()));
        const Tensor rep = coded->unpack();
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i) wrong += out[i] != g.f32()[i] * f(rep.f32()[i]);
        CHECK(wrong == 0);
    }
    // A dense form has no codebook: the caller unpacks.
    const Tensor t = Tensor::ones({3});
    float o[3];
    CHECK_FALSE(DenseSaved(t, "test", true).multiply_by_codebook(+f, t.f32(), o));
}
