// tests/core/ops/test_matmul.cpp -- matmul: gradcheck (2-D, batched, broadcast, 1-D), transposed views read in
// place, PyTorch parity, errors, what is saved.
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {
Tensor mm(const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }

// A leaf that is the transpose view (..., C, R) of a fresh contiguous (..., R, C) tensor: strides (.., 1, C).
Tensor transposed_leaf(const Tensor& rc) {
    const Shape& s = rc.shape();
    const int64_t nd = rc.dim(), R = s[nd - 2], C = s[nd - 1];
    Shape shape = s, strides = contiguous_strides(s);
    std::swap(shape[nd - 2], shape[nd - 1]);
    strides[nd - 2] = 1;
    strides[nd - 1] = C;
    (void)R;
    Tensor view = rc.clone().as_strided(shape, strides, 0);
    view.requires_grad_();
    return view;
}
}  // namespace

TEST_CASE("matmul: gradcheck 2-D, batched, broadcast batch dims, 1-D operands") {
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{3, 4}, {4, 5}},           // plain
        {{2, 3, 4}, {4, 5}},        // batched a, unbatched b: one folded GEMM
        {{2, 1, 3, 4}, {3, 4, 2}},  // broadcast on both sides
        {{3, 4}, {2, 4, 5}},        // unbatched a repeats over b's batch
        {{2, 3, 4}, {1, 4, 2}},     // b batch of size 1
        {{4}, {2, 4, 3}},           // 1-D a
        {{2, 3, 4}, {4}},           // 1-D b
        {{5}, {5}},                 // dot
    };
    for (const auto& [sa, sb] : shapes) {
        INFO("a ", shape_str(sa), " b ", shape_str(sb));
        gradcheck("matmul", mm, {randn_leaf(sa, 1), randn_leaf(sb, 2)});
    }
}

TEST_CASE("matmul: many small matrices spread over threads (batch >= threads)") {
    gradcheck("matmul batched", mm, {randn_leaf({6, 3, 4}, 3), randn_leaf({6, 4, 2}, 4)}, {.max_probes = 20});
}

TEST_CASE("matmul: a transposed view is read in place and gives the same result as its contiguous copy") {
    Tensor q = randn_leaf({2, 4, 3}, 5);
    Tensor kt = transposed_leaf(Tensor::randn({2, 5, 3}, default_generator()));   // (2, 3, 5), strides (15, 1, 3)
    REQUIRE(!kt.is_contiguous());
    Tensor kt_copy = kt.clone();
    kt_copy.requires_grad_();
    Tensor q2 = q.clone();
    q2.requires_grad_();
    Tensor s = matmul(q, kt);
    Tensor s2 = matmul(q2, kt_copy);
    check_close(s, s2, 1e-6, 1e-6, "q kt forward");
    Tensor g = Tensor::randn(s.shape(), default_generator());
    s.backward(g);
    s2.backward(g);
    check_close(kt.grad(), kt_copy.grad(), 1e-6, 1e-6, "grad of the transposed view");
    check_close(q.grad(), q2.grad(), 1e-6, 1e-6, "grad of q");
    // Also a transposed a (x^T y) and a column slice (row stride > row length).
    Tensor at = transposed_leaf(Tensor::randn({4, 3}, default_generator()));    // (3, 4)
    Tensor wide = Tensor::randn({4, 7}, default_generator());
    Tensor slice = wide.as_strided({4, 5}, {7, 1}, 1);                           // columns 1..5 of wide
    Tensor ref = matmul(at.clone(), slice.clone());
    check_close(matmul(at, slice), ref, 1e-6, 1e-6, "transposed a times a column slice");
}

TEST_CASE("matmul: matches PyTorch") {
    SafeTensors fx = load_fixture("matmul");
    auto& t = fx.tensors;
    for (std::string c : {"mm", "fold", "bcast", "unbatched_a", "vec_mat", "mat_vec", "dot"}) {
        Tensor a = leaf(t.at(c + ".a")), b = leaf(t.at(c + ".b"));
        Tensor out = matmul(a, b);
        check_close(out, t.at(c + ".out"), 1e-5, 1e-5, c + " forward");
        out.backward(t.at(c + ".grad_out"));
        check_close(a.grad(), t.at(c + ".grad_a"), 1e-5, 1e-5, c + " grad a");
        check_close(b.grad(), t.at(c + ".grad_b"), 1e-5, 1e-5, c + " grad b (summed over broadcast dims)");
    }
    Tensor q = leaf(t.at("qkt.q"));
    Tensor kt = transposed_leaf(t.at("qkt.k"));
    Tensor s = matmul(q, kt);
    check_close(s, t.at("qkt.out"), 1e-5, 1e-5, "q kt forward");
    s.backward(t.at("qkt.grad_out"));
    check_close(q.grad(), t.at("qkt.grad_q"), 1e-5, 1e-5, "q kt grad q");
    check_close(kt.grad(), t.at("qkt.grad_kt"), 1e-5, 1e-5, "q kt grad kt");
}

TEST_CASE("matmul: bad shapes and dtypes name the op, both shapes and a hint") {
    CHECK_THROWS_WITH_AS(matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})),
                         doctest::Contains("matmul: expected b (..., 3, N) to match a (2, 3), got b (4, 5)"), Error);
    CHECK_THROWS_WITH_AS(matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5})),
                         doctest::Contains("matmul: batch dims (2) of a (2, 3, 4) and (3) of b (3, 4, 5) do not "
                                           "broadcast"),
                         Error);
    CHECK_THROWS_WITH_AS(matmul(Tensor::scalar(1.f), Tensor::zeros({3})),
                         doctest::Contains("matmul: expected tensors of rank >= 1"), Error);
    CHECK_THROWS_WITH_AS(matmul(Tensor::zeros({2, 2}, DType::I64), Tensor::zeros({2, 2})),
                         doctest::Contains("matmul: expected f32 tensors, got i64"), Error);
}

TEST_CASE("matmul: saves only the operands the gradients need") {
    Tensor a = randn_leaf({4, 8}, 7), b = Tensor::randn({8, 2}, default_generator());   // b needs no grad
    Tensor y = matmul(a, b);                    // ga = g b^T needs b; a is not needed
    auto records = current_tape().records();
    REQUIRE(records.size() == 1);
    CHECK(records[0].name == "b");
    CHECK(records[0].kind == SaveKind::Activation);
    CHECK(current_tape().live().stored_bytes == 8 * 2 * 4);
    y.backward(Tensor::ones(y.shape()));
    CHECK(current_tape().live().stored_bytes == 0);

    Tensor a2 = randn_leaf({4, 8}, 8), b2 = randn_leaf({8, 2}, 9);
    Tensor y2 = matmul(a2, b2);
    CHECK(current_tape().live().stored_bytes == (4 * 8 + 8 * 2) * 4);
    y2.backward(Tensor::ones(y2.shape()));
    CHECK(current_tape().live().items == 0);
}

TEST_CASE("matmul: an empty broadcast batch gives zero gradients for the repeated operand") {
    Tensor a = randn_leaf({1, 3, 4}, 1), b = Tensor::zeros({0, 4, 5});
    b.requires_grad_();
    Tensor y = matmul(a, b);
    CHECK(y.shape() == Shape{0, 3, 5});
    y.backward(Tensor::zeros(y.shape()));
    CHECK(a.grad().to_vector() == std::vector<float>(12, 0.f));
    CHECK(b.grad().shape() == b.shape());
}
