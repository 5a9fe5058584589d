// tests/sparse/test_vrpge_step.cpp -- one VR-PGE iteration (spec §6, §15.3 item 9) on a toy masked linear model,
// against a hand computation in double.
//
// Toy: x (N=4, IC=2), W (OC=3, IC=2); the masked layer's output channels are multiplied by m:
//   L(W, m) = mean_{n,o} ( (x Wᵀ)_{no} · m_o − y_{no} )²         dL/dW_{oi} = (2 / (N·OC)) Σ_n r_{no} m_o x_{ni}
// s starts at 0.5, so every score g = (m − s)/√(s(1−s)) = ±1 and the VR-PGE term is ½(L₁ − L₂)(±1 ∓ 1).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/core.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "sparse/vrpge_step.h"

using namespace razor;
using namespace razor::sparse;

namespace {

constexpr int N = 4, IC = 2, OC = 3;
const std::vector<float> kX = {1.0f, -0.5f, 0.3f, 2.0f, -1.2f, 0.7f, 0.4f, 0.9f};
const std::vector<float> kY = {8.0f, -6.0f, 10.0f, 5.0f, 12.0f, -8.0f, 6.0f, 2.0f, -4.0f, 11.0f, 1.0f, 7.0f};
const std::vector<float> kW = {0.2f, -0.1f, 0.4f, 0.3f, -0.25f, 0.15f};

struct Hand {
    double loss = 0;
    std::vector<double> dW = std::vector<double>(OC * IC, 0.0);
};

Hand hand_pass(const std::vector<float>& m) {
    Hand h;
    for (int n = 0; n < N; ++n)
        for (int o = 0; o < OC; ++o) {
            double pred = 0;
            for (int i = 0; i < IC; ++i) pred += double(kX[n * IC + i]) * kW[o * IC + i];
            const double r = pred * m[o] - kY[n * OC + o];
            h.loss += r * r / (N * OC);
            for (int i = 0; i < IC; ++i) h.dW[o * IC + i] += 2.0 / (N * OC) * r * m[o] * kX[n * IC + i];
        }
    return h;
}

}  // namespace

TEST_CASE("vrpge step: one iteration on a toy masked linear model equals the hand computation") {
    for (auto method : {ProjectionMethod::Exact, ProjectionMethod::Bisection}) {
        const Tensor x = Tensor::from_vector({N, IC}, kX), y = Tensor::from_vector({N, OC}, kY);
        Tensor W = Tensor::from_vector({OC, IC}, kW);
        W.requires_grad_(true);
        ChannelScores scores({{"fc", OC, true}}, 0.5f);
        optim::Adam opt_s(scores.named_parameters(), {.lr = 12e-3});
        optim::SGD opt_w({{"fc.weight", W}}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
        auto forward = [&](const ChannelMasks& masks) {
            return mean(pow(sub(mul(linear(x, W), masks.m[0]), y), 2.f));   // masks.m[0]: (OC), broadcast over N
        };
        Generator gen(3);
        Generator replay = gen;   // the same stream: predicts the masks
        const std::vector<float> m1 = scores.sample(replay).m[0].to_vector();
        const std::vector<float> m2 = scores.sample(replay).m[0].to_vector();
        bool disagree = false;
        for (int o = 0; o < OC; ++o) disagree |= m1[o] != m2[o];
        REQUIRE(disagree);   // otherwise the VR-PGE term is trivially 0: pick another seed

        VrpgeStepOptions options;
        options.rho = 0.3;
        options.projection = method;
        const VrpgeStepResult r = vrpge_step(scores, opt_s, opt_w, forward, gen, options);
        CHECK(r.masks1.m[0].to_vector() == m1);
        CHECK(r.masks2.m[0].to_vector() == m2);

        // Hand: two passes, w.grad = average, s.grad = ½(L₁ − L₂)(g¹ − g²), joint clip to 3.
        const Hand h1 = hand_pass(m1), h2 = hand_pass(m2);
        CHECK(r.loss1 == doctest::Approx(h1.loss).epsilon(1e-6));
        CHECK(r.loss2 == doctest::Approx(h2.loss).epsilon(1e-6));
        std::vector<double> gw(OC * IC), gs(OC);
        double sq = 0;
        for (int k = 0; k < OC * IC; ++k) sq += (gw[k] = 0.5 * (h1.dW[k] + h2.dW[k])) * gw[k];
        for (int o = 0; o < OC; ++o) {
            const double g1 = (m1[o] - 0.5) / 0.5, g2 = (m2[o] - 0.5) / 0.5;
            sq += (gs[o] = 0.5 * (h1.loss - h2.loss) * (g1 - g2)) * gs[o];
        }
        const double norm = std::sqrt(sq);
        CHECK(r.grad_norm == doctest::Approx(norm).epsilon(1e-5));
        double s_sq = 0;
        for (int o = 0; o < OC; ++o) s_sq += gs[o] * gs[o];
        CHECK(r.s_grad_norm == doctest::Approx(std::sqrt(s_sq)).epsilon(1e-5));   // before the clip
        REQUIRE(norm > 3.0);   // the toy is built so the clip binds
        const double coef = 3.0 / (norm + 1e-6);
        const auto Wg = W.grad().to_vector(), sg = scores.s(0).grad().to_vector();
        for (int k = 0; k < OC * IC; ++k) CHECK(Wg[k] == doctest::Approx(gw[k] * coef).epsilon(1e-5));
        for (int o = 0; o < OC; ++o) CHECK(sg[o] == doctest::Approx(gs[o] * coef).epsilon(1e-5));

        // SGD (first step: buf = g + wd·w) on W; Adam's first step is lr·g/(|g| + eps) on s.
        const auto Wv = W.to_vector();
        for (int k = 0; k < OC * IC; ++k)
            CHECK(Wv[k] == doctest::Approx(kW[k] - 0.1 * (gw[k] * coef + 5e-4 * kW[k])).epsilon(1e-5));
        std::vector<double> z(OC);
        double zsum = 0;
        for (int o = 0; o < OC; ++o) {
            const double g = gs[o] * coef;
            zsum += (z[o] = 0.5 - 12e-3 * g / (std::fabs(g) + 1e-8));
        }
        // Projection after the step: K = 0.3·3 = 0.9 binds and every channel stays inside (0, 1), so
        // v = (Σ z − K)/3 and s = z − v.
        const double v = (zsum - 0.9) / 3;
        CHECK(r.projection.shift == doctest::Approx(v).epsilon(method == ProjectionMethod::Exact ? 1e-6 : 1e-3));
        const auto s = scores.s(0).to_vector();
        for (int o = 0; o < OC; ++o)
            CHECK(s[o] == doctest::Approx(z[o] - r.projection.shift).epsilon(1e-5));
        double total = 0;
        for (float sv : s) total += sv;
        CHECK(std::fabs(total - 0.9) < (method == ProjectionMethod::Exact ? 1e-6 : 1e-3));

        // Adam's state survives the projection: exp_avg = (1 − β1)·g of the clipped gradient.
        const auto state = opt_s.state_dict();
        const auto exp_avg = state.at("fc.s.exp_avg").to_vector();
        for (int o = 0; o < OC; ++o) CHECK(exp_avg[o] == doctest::Approx(0.1 * gs[o] * coef).epsilon(1e-5));
    }
}

TEST_CASE("vrpge step: opt_s must hold the scores' tensors") {
    Tensor W = Tensor::from_vector({OC, IC}, kW);
    W.requires_grad_(true);
    ChannelScores scores({{"fc", OC, true}}, 0.5f);
    optim::Adam wrong(optim::NamedParameters{{"fc.weight", W}});
    optim::SGD opt_w({{"fc.weight", W}}, {.lr = 0.1});
    Generator gen(0);
    auto forward = [&](const ChannelMasks&) { return mean(W); };
    CHECK_THROWS_AS(vrpge_step(scores, wrong, opt_w, forward, gen), Error);
}
