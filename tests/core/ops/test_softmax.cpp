// tests/core/ops/test_softmax.cpp -- softmax / log_softmax along any dim: gradcheck, PyTorch parity, the
// parallel and blocked paths against a double-precision reference, stability, errors, what is saved.
#include <cmath>
#include <limits>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {
// softmax or log_softmax of contiguous x along dim, in double: the reference for the kernel paths.
std::vector<double> reference(const Tensor& x, int64_t dim, bool log) {
    const Shape& s = x.shape();
    int64_t O = 1, D = s[dim], I = 1;
    for (int64_t k = 0; k < dim; ++k) O *= s[k];
    for (int64_t k = dim + 1; k < x.dim(); ++k) I *= s[k];
    const float* p = x.f32();
    std::vector<double> out(x.numel());
    for (int64_t o = 0; o < O; ++o)
        for (int64_t i = 0; i < I; ++i) {
            double m = -INFINITY, sum = 0;
            for (int64_t d = 0; d < D; ++d) m = std::max(m, double(p[(o * D + d) * I + i]));
            for (int64_t d = 0; d < D; ++d) sum += std::exp(p[(o * D + d) * I + i] - m);
            for (int64_t d = 0; d < D; ++d) {
                const double v = p[(o * D + d) * I + i] - m;
                out[(o * D + d) * I + i] = log ? v - std::log(sum) : std::exp(v) / sum;
            }
        }
    return out;
}

void check_against_reference(const Tensor& x, int64_t dim, bool log) {
    Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
    const std::vector<double> want = reference(x, dim, log);
    const std::vector<float> got = y.to_vector();
    // softmax: relative error of each probability; log_softmax: error relative to 1 + |value| (a value near 0
    // is a difference of O(|x|) terms, so float32 rounding of x itself bounds its absolute accuracy)
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::abs(got[i] - want[i]) / ((log ? 1.0 : 0.0) + std::abs(want[i])));
    const std::string what = fmt(log ? "log_softmax" : "softmax", " dim ", dim, " of ", shape_str(x.shape()));
    INFO(what << ": worst relative error " << worst);
    CHECK(worst < 1e-5);
}
}  // namespace

TEST_CASE("softmax, log_softmax: gradcheck along every dim") {
    Tensor x = randn_leaf({2, 3, 4}, 31);
    for (int64_t dim : {-1, 0, 1, 2}) {
        INFO("dim " << dim);
        gradcheck("softmax", [dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); }, {x}, {.eps = 1e-3});
        gradcheck("log_softmax", [dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }, {x},
                  {.eps = 1e-3});
    }
}

TEST_CASE("softmax, log_softmax: match PyTorch along every dim") {
    SafeTensors fx = load_fixture("softmax");
    auto& t = fx.tensors;
    for (const char* op : {"softmax", "log_softmax"}) {
        for (int64_t dim : {-1, 0, 1, 2}) {
            const std::string key = fmt(op, ".d", dim);
            Tensor x = leaf(t.at("x"));
            Tensor y = std::string(op) == "softmax" ? softmax(x, dim) : log_softmax(x, dim);
            check_close(y, t.at(key + ".out"), 1e-5, 1e-6, key + " forward");
            y.backward(t.at("grad_out"));
            // 1e-4 relative: the row sum in backward is float32 in a different order than PyTorch's
            check_close(x.grad(), t.at(key + ".grad"), 1e-4, 1e-6, key + " grad");
        }
    }
}

TEST_CASE("softmax, log_softmax: multi-threaded rows and partial column blocks match a double reference") {
    // (64, 300): the row path over 19200 elements (parallel); (3, 7, 70) dim 1: column blocks of 64 + 6;
    // (2, 50, 200) dim 1: blocked and parallel.
    Tensor a = randn_leaf({64, 300}, 32, 3.f).detach();
    Tensor b = randn_leaf({3, 7, 70}, 33, 3.f).detach();
    Tensor c = randn_leaf({2, 50, 200}, 34, 3.f).detach();
    for (bool log : {false, true}) {
        check_against_reference(a, 1, log);
        check_against_reference(a, 0, log);
        check_against_reference(b, 1, log);
        check_against_reference(b, 0, log);
        check_against_reference(c, 1, log);
    }
}

TEST_CASE("softmax: stable for large inputs; -inf entries get probability 0") {
    const float inf = std::numeric_limits<float>::infinity();
    Tensor x = Tensor::from_vector({2, 3}, {1000.f, 1001.f, 999.f, -inf, 0.f, 0.f});
    std::vector<float> p = softmax(x, 1).to_vector();
    for (float v : p) CHECK(std::isfinite(v));
    CHECK(p[1] == doctest::Approx(0.66524096).epsilon(1e-6));
    CHECK(p[3] == 0.f);
    CHECK(p[4] == doctest::Approx(0.5));
    std::vector<float> l = log_softmax(x, 1).to_vector();
    CHECK(l[0] == doctest::Approx(-1.40760596).epsilon(1e-6));
    CHECK(l[3] == -inf);
}

TEST_CASE("softmax: strided input, 0-d input") {
    Tensor base = randn_leaf({4, 3}, 35).detach();
    Tensor xt = base.as_strided({3, 4}, {1, 3}, 0);
    check_close(softmax(xt, 1), softmax(xt.contiguous(), 1), 0, 0, "softmax of a strided view");
    CHECK(softmax(Tensor::scalar(3.f), 0).item() == 1.f);
    CHECK(log_softmax(Tensor::scalar(3.f), -1).item() == 0.f);
}

TEST_CASE("softmax: errors name the op") {
    Tensor x = Tensor::zeros({2, 3});
    CHECK_THROWS_WITH_AS(softmax(x, 2), doctest::Contains("softmax: dimension 2 is out of range"), Error);
    CHECK_THROWS_WITH_AS(log_softmax(x, -3), doctest::Contains("log_softmax: dimension -3 is out of range"), Error);
    CHECK_THROWS_WITH_AS(softmax(Tensor::zeros({2}, DType::I64), 0),
                         doctest::Contains("softmax: expected an f32 tensor, got i64"), Error);
}

TEST_CASE("softmax, log_softmax: save the output (not the input) as an activation") {
    for (bool log : {false, true}) {
        Tensor x = randn_leaf({5, 8}, 36);
        Tensor y = log ? log_softmax(x, 0) : softmax(x, 0);
        const auto records = current_tape().records();
        REQUIRE(records.size() == 1);
        CHECK(records[0].name == "y");
        CHECK(records[0].kind == SaveKind::Activation);
        CHECK(current_tape().live().stored_bytes == 5 * 8 * 4);
        y.backward(Tensor::ones(y.shape()));
        CHECK(current_tape().live().stored_bytes == 0);
    }
}

TEST_CASE("softmax(Tensor&&): P written over the scores the caller gave up; same values and gradients; never over a "
          "shared input") {
    Tensor w = randn_leaf({3, 4, 9}, 37);
    const Tensor expected = softmax(mul(w, 2.f), -1);
    Tensor scores = mul(w, 2.f);   // fresh, with history: attention's Q K^T
    const void* storage = scores.storage().get();
    const Tensor p = softmax(std::move(scores), -1);
    CHECK(p.storage().get() == storage);
    CHECK(p.to_vector() == expected.to_vector());
    const Tensor g = randn_leaf({3, 4, 9}, 38).detach();
    p.backward(g);
    const std::vector<float> grad = w.grad().to_vector();
    w.zero_grad();
    expected.backward(g);
    CHECK(grad == w.grad().to_vector());
    // A second handle: the scores stay as they were.
    Tensor shared = mul(w, 2.f);
    const Tensor keep = shared;
    const std::vector<float> before = keep.to_vector();
    const Tensor p2 = softmax(std::move(shared), 1);
    CHECK(keep.to_vector() == before);
    CHECK_FALSE(p2.same_storage(keep));
    CHECK(p2.to_vector() == softmax(keep, 1).to_vector());
}
