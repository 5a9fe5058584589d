// tests/core/ops/test_concat.cpp -- concat: gradcheck, PyTorch parity, strided inputs, errors, nothing saved.
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("concat: gradcheck along each dim") {
    Tensor a = randn_leaf({2, 3, 4}, 21), b = randn_leaf({2, 3, 4}, 22);
    // concat moves values only: finite differences are exact up to float rounding.
    for (int64_t dim : {0, 1, 2, -1}) {
        gradcheck("concat dim " + std::to_string(dim),
                  [dim](const std::vector<Tensor>& in) { return concat({in[0], in[1], in[0]}, dim); }, {a, b});
    }
    Tensor c = randn_leaf({2, 1, 4}, 23), d = randn_leaf({2, 5, 4}, 24);
    gradcheck("concat ragged", [](const std::vector<Tensor>& in) { return concat(in, 1); }, {a, c, d});
}

TEST_CASE("concat: inputs that need no gradient get none; strided inputs are packed") {
    Tensor a = randn_leaf({3, 2}, 25);
    Generator gen(1);
    Tensor frozen = Tensor::randn({3, 4}, gen);   // requires no grad
    Tensor src = randn_leaf({2, 3}, 26);
    Tensor t = transpose(src, 0, 1);              // (3, 2), non-contiguous
    Tensor y = concat({a, frozen, t}, 1);         // (3, 8)
    CHECK(y.shape() == Shape{3, 8});
    const auto yv = y.to_vector();
    CHECK(yv[2] == frozen.to_vector()[0]);
    CHECK(yv[6] == src.to_vector()[0]);   // y[0, 6] = t[0, 0] = src[0, 0]
    CHECK(yv[7] == src.to_vector()[3]);   // y[0, 7] = t[0, 1] = src[1, 0]
    Tensor g = Tensor::arange(24);
    y.backward(reshape(g, {3, 8}));
    CHECK(a.grad().to_vector() == std::vector<float>{0, 1, 8, 9, 16, 17});
    CHECK(src.grad().to_vector() == std::vector<float>{6, 14, 22, 7, 15, 23});
    CHECK_FALSE(frozen.grad().defined());
    // Nothing is saved: backward needs only the sizes.
    Tensor z = concat({a, a}, 0);
    CHECK(current_tape().live().items == 0);
    // i64 inputs concatenate too (no node).
    Tensor l = concat({Tensor::from_vector_i64({2}, {1, 2}), Tensor::from_vector_i64({1}, {3})}, 0);
    CHECK(l.to_vector_i64() == std::vector<int64_t>{1, 2, 3});
}

TEST_CASE("concat: errors name the offending input and the shapes") {
    Tensor a = Tensor::zeros({2, 3, 4}), b = Tensor::zeros({2, 5, 4}), bad = Tensor::zeros({3, 5, 4});
    CHECK_THROWS_WITH_AS(concat({a, b, bad}, 1),
                         doctest::Contains("concat: input 2 has shape (3, 5, 4) but input 0 has shape (2, 3, 4); "
                                           "expected (2, *, 4) along dim 1"),
                         Error);
    CHECK_THROWS_WITH_AS(concat({a, Tensor::zeros({2, 3})}, 0),
                         doctest::Contains("concat: input 1 has shape (2, 3) but input 0 has shape (2, 3, 4)"), Error);
    CHECK_THROWS_WITH_AS(concat({a, Tensor::zeros({2, 3, 4}, DType::I64)}, 0),
                         doctest::Contains("concat: input 1 has dtype i64 but input 0 has f32"), Error);
    CHECK_THROWS_WITH_AS(concat({}, 0), doctest::Contains("concat: expected at least one tensor"), Error);
    CHECK_THROWS_WITH_AS(concat({a, b}, 3), doctest::Contains("concat: dimension 3 is out of range"), Error);
    CHECK_THROWS_WITH_AS(concat({Tensor::scalar(1.f)}, 0), doctest::Contains("concat: input 0 is 0-d"), Error);
}

TEST_CASE("concat: matches PyTorch") {
    SafeTensors fx = load_fixture("shape_concat");
    auto& t = fx.tensors;
    {
        Tensor a = leaf(t.at("a")), b = leaf(t.at("b")), c = leaf(t.at("c"));
        Tensor y = concat({a, b, c}, 1);
        check_close(y, t.at("dim1.out"), 0, 0, "concat dim1 forward");   // data movement: bit-exact
        y.backward(t.at("dim1.grad_out"));
        check_close(a.grad(), t.at("dim1.grad_a"), 0, 0, "concat grad a");
        check_close(b.grad(), t.at("dim1.grad_b"), 0, 0, "concat grad b");
        check_close(c.grad(), t.at("dim1.grad_c"), 0, 0, "concat grad c");
    }
    {
        Tensor d = leaf(t.at("d")), e = leaf(t.at("e"));
        Tensor y = concat({d, e}, -1);
        check_close(y, t.at("dimlast.out"), 0, 0, "concat dim -1 forward");
        y.backward(t.at("dimlast.grad_out"));
        check_close(d.grad(), t.at("dimlast.grad_d"), 0, 0, "concat grad d");
        check_close(e.grad(), t.at("dimlast.grad_e"), 0, 0, "concat grad e");
    }
}
