// tests/sparse/test_vrpge_projection.cpp -- the global projection onto {0 ≤ s ≤ 1, Σ s ≤ K} (spec §5, §15.2).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/core.h"
#include "sparse/vrpge_projection.h"

using namespace razor;
using namespace razor::sparse;

namespace {

double total(const std::vector<Tensor>& ts) {
    double sum = 0;
    for (const Tensor& t : ts)
        for (float v : t.to_vector()) sum += v;
    return sum;
}

std::vector<float> flat(const std::vector<Tensor>& ts) {
    std::vector<float> out;
    for (const Tensor& t : ts)
        for (float v : t.to_vector()) out.push_back(v);
    return out;
}

const std::vector<float> kZ = {0.0015f, 1.0712f, 0.9457f, 0.1826f, 0.5432f,  0.4742f,
                               0.7774f, 0.9831f, -0.0592f, -0.1575f, 1.0536f, 0.4492f};

}  // namespace

TEST_CASE("vrpge projection: the spec §5.4 vector, bisection (reference rule)") {
    std::vector<Tensor> z = {Tensor::from_vector({12}, kZ)};
    const ProjectionResult r = project_scores_(z, 3.6, ProjectionMethod::Bisection);
    CHECK(r.iterations == 12);
    CHECK(std::fabs(r.shift - 0.3371037109375) < 1e-6);   // f32 inputs: the decimals are not exact
    CHECK(std::fabs(r.sum - 3.6007703125) < 1e-5);
    CHECK(std::fabs(r.sum - 3.6) < 1e-3);
    const std::vector<float> expect = {0, 0.734096f, 0.608596f, 0, 0.206096f, 0.137096f,
                                       0.440296f, 0.645996f, 0, 0, 0.716496f, 0.112096f};
    const auto s = z[0].to_vector();
    for (size_t i = 0; i < s.size(); ++i) CHECK(std::fabs(s[i] - expect[i]) < 1e-6);
}

TEST_CASE("vrpge projection: the spec §5.4 vector, exact (sort-based)") {
    // Split over two layers: the shift is global.
    std::vector<Tensor> z = {Tensor::from_vector({5}, std::vector<float>(kZ.begin(), kZ.begin() + 5)),
                             Tensor::from_vector({7}, std::vector<float>(kZ.begin() + 5, kZ.end()))};
    const ProjectionResult r = project_scores_(z, 3.6, ProjectionMethod::Exact);
    CHECK(r.iterations == 0);
    // v* = (6.2976 − 3.6)/8 = 0.3372; the f32 inputs move it by < 1e-7.
    CHECK(std::fabs(r.shift - 0.3372) < 1e-7);
    CHECK(std::fabs(r.sum - 3.6) < 1e-9);          // exact in double
    CHECK(std::fabs(total(z) - 3.6) < 1e-6);       // stored in f32
    const std::vector<float> expect = {0, 0.7340f, 0.6085f, 0, 0.2060f, 0.1370f, 0.4402f, 0.6459f, 0, 0, 0.7164f, 0.1120f};
    const auto s = flat(z);
    for (size_t i = 0; i < s.size(); ++i) CHECK(std::fabs(s[i] - expect[i]) < 1e-6);
}

TEST_CASE("vrpge projection: s = 0.5 everywhere with rho = 0.1 becomes 0.1 everywhere") {
    for (auto method : {ProjectionMethod::Bisection, ProjectionMethod::Exact}) {
        std::vector<Tensor> z = {Tensor::full({600}, 0.5f), Tensor::full({400}, 0.5f)};
        const ProjectionResult r = project_scores_(z, 0.1 * 1000, method);
        CHECK(std::fabs(r.shift - 0.4) < 1e-3 / 1000 + 1e-7);
        CHECK(std::fabs(total(z) - 100.0) < 1e-3 + 1e-4);
        for (float v : flat(z)) CHECK(std::fabs(v - 0.1f) < 1e-5);
    }
}

TEST_CASE("vrpge projection: all-ones input shifts to the keep ratio; feasible input is unchanged; slack clips") {
    for (auto method : {ProjectionMethod::Bisection, ProjectionMethod::Exact}) {
        std::vector<Tensor> ones = {Tensor::ones({50})};
        const ProjectionResult r = project_scores_(ones, 0.3 * 50, method);
        CHECK(std::fabs(r.shift - 0.7) < 1e-4);
        for (float v : ones[0].to_vector()) CHECK(std::fabs(v - 0.3f) < 1e-4);

        const std::vector<float> feasible = {0.f, 0.2f, 1.f, 0.35f, 0.05f};   // Σ = 1.6 ≤ 2
        std::vector<Tensor> f = {Tensor::from_vector({5}, feasible)};
        const ProjectionResult rf = project_scores_(f, 2.0, method);
        CHECK(rf.shift == 0.0);
        CHECK(f[0].to_vector() == feasible);

        // Slack budget but out-of-box values: v = 0 and a plain clip to [0, 1].
        std::vector<Tensor> box = {Tensor::from_vector({4}, {-0.3f, 1.2f, 0.4f, 0.6f})};
        const ProjectionResult rb = project_scores_(box, 3.5, method);
        CHECK(rb.shift == 0.0);
        CHECK(box[0].to_vector() == std::vector<float>{0.f, 1.f, 0.4f, 0.6f});
    }
}

TEST_CASE("vrpge projection: random inputs -- feasible, on budget, KKT optimal, idempotent, methods agree") {
    Generator gen(77);
    for (int trial = 0; trial < 60; ++trial) {
        const int64_t n = 1 + static_cast<int64_t>(gen.randint(1000));
        const int64_t split = static_cast<int64_t>(gen.randint(static_cast<uint64_t>(n)));
        std::vector<float> zv(static_cast<size_t>(n));
        for (float& x : zv) x = gen.uniform(-0.2f, 1.1f);
        const double rho = gen.uniform(0.02f, 0.9f), K = rho * static_cast<double>(n);
        double clipped = 0;
        for (float x : zv) clipped += std::min(1.0, std::max(0.0, double(x)));
        const bool slack = clipped <= K;

        auto make = [&] {
            std::vector<Tensor> z;
            if (split > 0) z.push_back(Tensor::from_vector({split}, std::vector<float>(zv.begin(), zv.begin() + split)));
            z.push_back(Tensor::from_vector({n - split}, std::vector<float>(zv.begin() + split, zv.end())));
            return z;
        };
        std::vector<Tensor> zb = make(), ze = make();
        const ProjectionResult rb = project_scores_(zb, K, ProjectionMethod::Bisection);
        const ProjectionResult re = project_scores_(ze, K, ProjectionMethod::Exact);
        const auto pb = flat(zb), pe = flat(ze);
        for (auto* p : {&pb, &pe})
            for (float v : *p) REQUIRE((v >= 0.f && v <= 1.f));
        if (slack) {
            CHECK(rb.shift == 0.0);
            CHECK(re.shift == 0.0);
            CHECK(total(zb) <= K + 1e-4);
        } else {
            if (rb.iterations <= 20) CHECK(std::fabs(rb.sum - K) < 1e-3);
            CHECK(std::fabs(re.sum - K) < 1e-9 * std::max(1.0, K));
            CHECK(std::fabs(total(ze) - K) < 1e-6 * n + 1e-6);
            CHECK(std::fabs(rb.sum - re.sum) < 1e-3 + 1e-5);
        }
        // The output is clip(z − v) with the reported v.
        for (size_t i = 0; i < pe.size(); ++i)
            CHECK(pe[i] == static_cast<float>(std::min(1.0, std::max(0.0, double(zv[i]) - re.shift))));
        // KKT / variational inequality of a projection onto a convex set: (z − p)·(y − p) ≤ 0 for every feasible y.
        for (int probe = 0; probe < 5; ++probe) {
            std::vector<double> y(static_cast<size_t>(n));
            double sy = 0;
            for (double& v : y) sy += (v = gen.uniform());
            const double scale = std::min(1.0, K / sy);
            double ip = 0;
            for (size_t i = 0; i < y.size(); ++i) ip += (double(zv[i]) - pe[i]) * (y[i] * scale - pe[i]);
            CHECK(ip <= 1e-5 * n);
        }
        // Idempotent: projecting the projection moves nothing (beyond f32 rounding of the stored sum).
        const ProjectionResult again = project_scores_(ze, K, ProjectionMethod::Exact);
        CHECK(again.shift < 1e-6);
        const auto pe2 = flat(ze);
        for (size_t i = 0; i < pe.size(); ++i) CHECK(std::fabs(pe2[i] - pe[i]) < 1e-6);
    }
}

TEST_CASE("vrpge projection: errors name the op") {
    std::vector<Tensor> z = {Tensor::from_vector({2}, {0.5f, NAN})};
    CHECK_THROWS_AS(project_scores_(z, 1.0), Error);
    std::vector<Tensor> ok = {Tensor::full({2}, 0.5f)};
    CHECK_THROWS_AS(project_scores_(ok, -1.0), Error);
    CHECK(project_scores_({}, 1.0).shift == 0.0);
}
