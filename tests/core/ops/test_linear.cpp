// tests/core/ops/test_linear.cpp -- linear: gradcheck (2-D/3-D/1-D x, with/without bias), PyTorch parity, errors,
// what is saved under each requires_grad combination.
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("linear: gradcheck 2-D and 3-D input, with and without bias") {
    auto with_bias = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
    auto no_bias = [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); };
    gradcheck("linear 2-D + bias", with_bias, {randn_leaf({5, 6}, 1), randn_leaf({4, 6}, 2), randn_leaf({4}, 3)});
    gradcheck("linear 3-D + bias", with_bias, {randn_leaf({2, 3, 6}, 4), randn_leaf({4, 6}, 5), randn_leaf({4}, 6)});
    gradcheck("linear 3-D", no_bias, {randn_leaf({2, 3, 6}, 7), randn_leaf({4, 6}, 8)});
    gradcheck("linear 1-D + bias", with_bias, {randn_leaf({6}, 9), randn_leaf({4, 6}, 10), randn_leaf({4}, 11)});
}

TEST_CASE("linear: large M takes the threaded bias-gradient path") {
    auto f = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
    gradcheck("linear M = 2*600", f, {randn_leaf({2, 600, 8}, 12), randn_leaf({70, 8}, 13), randn_leaf({70}, 14)},
              {.eps = 1e-2, .rtol = 2e-2, .atol = 5e-3, .max_probes = 24});
}

TEST_CASE("linear: matches PyTorch") {
    SafeTensors fx = load_fixture("linear");
    auto& t = fx.tensors;
    for (std::string c : {"bias2d", "nobias3d", "bias1d"}) {
        const bool has_bias = t.count(c + ".b") > 0;
        Tensor x = leaf(t.at(c + ".x")), W = leaf(t.at(c + ".W"));
        Tensor b = has_bias ? leaf(t.at(c + ".b")) : Tensor();
        Tensor y = linear(x, W, b);
        check_close(y, t.at(c + ".out"), 1e-5, 1e-5, c + " forward");
        y.backward(t.at(c + ".grad_out"));
        check_close(x.grad(), t.at(c + ".grad_x"), 1e-5, 1e-5, c + " grad x");
        check_close(W.grad(), t.at(c + ".grad_W"), 1e-5, 1e-5, c + " grad W (summed over leading dims)");
        if (has_bias) check_close(b.grad(), t.at(c + ".grad_b"), 1e-5, 1e-5, c + " grad b");
    }
}

TEST_CASE("linear: bad shapes name the op, expected and actual, and a hint") {
    Tensor W = Tensor::zeros({4, 6});
    CHECK_THROWS_WITH_AS(linear(Tensor::zeros({8, 65, 5}), W),
                         doctest::Contains("linear: expected x (..., 6), got (8, 65, 5); hint: check in_features"),
                         Error);
    CHECK_THROWS_WITH_AS(linear(Tensor::zeros({2, 6}), Tensor::zeros({4, 6, 1})),
                         doctest::Contains("linear: expected W (out, in), got (4, 6, 1)"), Error);
    CHECK_THROWS_WITH_AS(linear(Tensor::zeros({2, 6}), W, Tensor::zeros({6})),
                         doctest::Contains("linear: expected bias (4), got (6)"), Error);
    CHECK_THROWS_WITH_AS(linear(Tensor::zeros({2, 6}, DType::I64), W),
                         doctest::Contains("linear: expected f32 tensors, got i64"), Error);
}

TEST_CASE("linear: saves x only if W needs grad, W (by reference) only if x needs grad") {
    auto& tape = current_tape();
    const int64_t x_bytes = 3 * 5 * 8 * 4;
    SUBCASE("x is data (no grad), W trains: x saved, W not") {
        Tensor x = Tensor::randn({3, 5, 8}, default_generator());
        Tensor W = randn_leaf({4, 8}, 1), b = randn_leaf({4}, 2);
        Tensor y = linear(x, W, b);
        auto records = tape.records();
        REQUIRE(records.size() == 1);
        CHECK(records[0].name == "x");
        CHECK(records[0].kind == SaveKind::Activation);
        CHECK(tape.live().stored_bytes == x_bytes);
        y.backward(Tensor::ones(y.shape()));
        CHECK(tape.live().stored_bytes == 0);
        CHECK(tape.live().items == 0);
    }
    SUBCASE("W frozen, x needs grad: W by reference (0 bytes), no x") {
        Tensor x = randn_leaf({3, 5, 8}, 3);
        Tensor W = Tensor::randn({4, 8}, default_generator());
        Tensor y = linear(x, W);
        auto records = tape.records();
        REQUIRE(records.size() == 1);
        CHECK(records[0].name == "W");
        CHECK(records[0].kind == SaveKind::Parameter);
        CHECK(tape.live().stored_bytes == 0);
        y.backward(Tensor::ones(y.shape()));
        CHECK(tape.live().items == 0);
    }
    SUBCASE("only the bias trains: nothing saved") {
        Tensor x = Tensor::randn({3, 5, 8}, default_generator());
        Tensor W = Tensor::randn({4, 8}, default_generator());
        Tensor b = randn_leaf({4}, 4);
        Tensor y = linear(x, W, b);
        CHECK(tape.live().items == 0);
        y.backward(Tensor::ones(y.shape()));
        CHECK(b.grad().to_vector() == std::vector<float>(4, 15.f));
    }
    SUBCASE("both train: x dense, W by reference") {
        Tensor x = randn_leaf({3, 5, 8}, 5);
        Tensor W = randn_leaf({4, 8}, 6);
        Tensor y = linear(x, W);
        CHECK(tape.live().items == 2);
        CHECK(tape.live().stored_bytes == x_bytes);
        y.backward(Tensor::ones(y.shape()));
        CHECK(tape.live().items == 0);
    }
}

TEST_CASE("linear: no rows gives an empty output and zero weight and bias gradients") {
    Tensor x = Tensor::zeros({0, 6});
    x.requires_grad_();
    Tensor W = randn_leaf({4, 6}, 1), b = randn_leaf({4}, 2);
    Tensor y = linear(x, W, b);
    CHECK(y.shape() == Shape{0, 4});
    y.backward(Tensor::zeros(y.shape()));
    CHECK(W.grad().to_vector() == std::vector<float>(24, 0.f));
    CHECK(b.grad().to_vector() == std::vector<float>(4, 0.f));
}
