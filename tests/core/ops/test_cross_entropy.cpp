// tests/core/ops/test_cross_entropy.cpp -- fused cross-entropy (+ label smoothing): gradcheck, PyTorch parity,
// stability, errors, what is saved.
#include <cmath>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("cross_entropy: gradcheck with and without label smoothing") {
    Tensor logits = randn_leaf({5, 7}, 41, 2.f);
    Tensor target = Tensor::from_vector_i64({5}, {0, 6, 3, 3, 1});
    for (float eps : {0.f, 0.1f, 0.5f}) {
        INFO("label_smoothing " << eps);
        gradcheck("cross_entropy",
                  [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], target, eps); }, {logits},
                  {.eps = 1e-3});
    }
}

TEST_CASE("cross_entropy: matches PyTorch with and without label smoothing") {
    SafeTensors fx = load_fixture("cross_entropy");
    auto& t = fx.tensors;
    for (const std::string c : {"plain", "smooth", "wide"}) {
        Tensor logits = leaf(t.at(c + ".logits"));
        const float eps = t.at(c + ".eps").item();
        Tensor loss = cross_entropy(logits, t.at(c + ".target"), eps);
        CHECK(loss.dim() == 0);
        check_close(loss, t.at(c + ".loss"), 1e-5, 1e-6, c + " loss");
        loss.backward(t.at(c + ".grad_out"));
        check_close(logits.grad(), t.at(c + ".grad"), 1e-5, 1e-7, c + " grad");
    }
}

TEST_CASE("cross_entropy: stable for large logits; value without a node when no gradient is needed") {
    Tensor logits = Tensor::from_vector({2, 3}, {1e4f, 0.f, -1e4f, 50.f, 50.f, 50.f});
    Tensor target = Tensor::from_vector_i64({2}, {1, 2});
    const float loss = cross_entropy(logits, target).item();
    CHECK(std::isfinite(loss));
    CHECK(loss == doctest::Approx((1e4 + std::log(3.0)) / 2).epsilon(1e-6));
    CHECK(current_tape().live().items == 0);
}

TEST_CASE("cross_entropy: errors name the op, the values and a hint") {
    Tensor logits = Tensor::zeros({4, 10});
    Tensor ok = Tensor::from_vector_i64({4}, {0, 1, 2, 3});
    CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::from_vector_i64({4}, {0, 1, 2, 12})),
                         doctest::Contains("cross_entropy: target 12 at row 3 is out of range for 10 classes; hint:"),
                         Error);
    CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::from_vector_i64({4}, {0, -100, 2, 3})),
                         doctest::Contains("target -100 at row 1 is out of range"), Error);
    CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::zeros({4})),
                         doctest::Contains("cross_entropy: expected target (4) of i64 class indices, got f32 (4)"), Error);
    CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::from_vector_i64({3}, {0, 1, 2})),
                         doctest::Contains("cross_entropy: expected target (4) for logits (4, 10), got (3)"), Error);
    CHECK_THROWS_WITH_AS(cross_entropy(Tensor::zeros({4, 10, 2}), ok),
                         doctest::Contains("cross_entropy: expected logits (N, C) of f32, got f32 (4, 10, 2)"), Error);
    CHECK_THROWS_WITH_AS(cross_entropy(logits, ok, 1.f), doctest::Contains("label_smoothing must be in [0, 1), got 1"),
                         Error);
    CHECK_THROWS_WITH_AS(cross_entropy(logits, ok, -0.1f), doctest::Contains("label_smoothing must be in [0, 1)"), Error);
    CHECK_THROWS_WITH_AS(cross_entropy(Tensor::zeros({0, 10}), Tensor::zeros({0}, DType::I64)),
                         doctest::Contains("cross_entropy: expected at least one row"), Error);
}

TEST_CASE("cross_entropy: saves the probabilities (activation) and the targets (indices), freed after backward") {
    Tensor logits = randn_leaf({6, 9}, 42);
    Tensor target = Tensor::from_vector_i64({6}, {0, 1, 2, 3, 4, 8});
    Tensor loss = cross_entropy(logits, target, 0.1f);
    const auto records = current_tape().records();
    REQUIRE(records.size() == 2);
    CHECK(records[0].name == "probs");
    CHECK(records[0].kind == SaveKind::Activation);
    CHECK(records[1].name == "target");
    CHECK(records[1].kind == SaveKind::Indices);
    CHECK(current_tape().live().stored_bytes == 6 * 9 * 4 + 6 * 8);
    loss.backward();
    CHECK(current_tape().live().stored_bytes == 0);
    // the gradient of each row sums to 0 (P and q both sum to 1)
    std::vector<float> g = logits.grad().to_vector();
    for (int i = 0; i < 6; ++i) {
        double s = 0;
        for (int c = 0; c < 9; ++c) s += g[i * 9 + c];
        CHECK(std::abs(s) < 1e-7);
    }
}
