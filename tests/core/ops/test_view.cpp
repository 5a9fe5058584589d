// tests/core/ops/test_view.cpp -- reshape/view/flatten/transpose/permute/slice: gradcheck, aliasing, PyTorch
// parity, errors, and the shared version counter of views.
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {
Tensor iota(const Shape& shape) {
    Tensor t = Tensor::empty(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = static_cast<float>(i);
    return t;
}
}  // namespace

TEST_CASE("view ops: gradcheck") {
    Tensor x = randn_leaf({2, 3, 4}, 11);
    // Views are linear: the finite differences are exact up to float rounding.
    gradcheck("reshape -1", [](const std::vector<Tensor>& in) { return reshape(in[0], {4, -1}); }, {x});
    gradcheck("view", [](const std::vector<Tensor>& in) { return view(in[0], {6, 4}); }, {x});
    gradcheck("flatten", [](const std::vector<Tensor>& in) { return flatten(in[0], 1); }, {x});
    gradcheck("transpose", [](const std::vector<Tensor>& in) { return transpose(in[0], 0, 2); }, {x});
    gradcheck("permute", [](const std::vector<Tensor>& in) { return permute(in[0], {2, 0, 1}); }, {x});
    gradcheck("slice step", [](const std::vector<Tensor>& in) { return slice(in[0], 2, -3, 10, 2); }, {x});
    gradcheck("slice mid", [](const std::vector<Tensor>& in) { return slice(in[0], 1, 1, 3); }, {x});
    gradcheck("transpose+reshape (copy)",
              [](const std::vector<Tensor>& in) { return reshape(transpose(in[0], 1, 2), {4, 6}); }, {x});
    // A chain of views, consumed by an op that reads strides (mul), so non-contiguous gradients flow through.
    Tensor w = randn_leaf({4, 3}, 12);
    gradcheck("views into mul",
              [](const std::vector<Tensor>& in) {
                  Tensor v = slice(permute(in[0], {1, 2, 0}), 1, 1, 4, 2);   // (3, 2, 2), strided
                  return mul(flatten(v, 1), transpose(in[1], 0, 1));         // (3, 4) * (3, 4)
              },
              {x, w});
}

TEST_CASE("view ops: outputs alias the input storage; reshape copies only when it must") {
    Tensor x = iota({2, 3, 4});
    CHECK(reshape(x, {4, 6}).same_storage(x));
    CHECK(view(x, {24}).same_storage(x));
    CHECK(flatten(x).same_storage(x));
    Tensor t = transpose(x, 1, 2);   // (2, 4, 3)
    CHECK(t.same_storage(x));
    CHECK_FALSE(t.is_contiguous());
    CHECK(t.shape() == Shape{2, 4, 3});
    CHECK(t.to_vector()[1] == 4.f);   // t[0, 0, 1] = x[0, 1, 0]
    CHECK(permute(x, {2, 0, 1}).same_storage(x));
    CHECK(slice(x, 1, 1, 3).same_storage(x));
    // Splitting a transposed dim is still a view; merging across the transposed dims needs a copy.
    Tensor split = view(t, {2, 2, 2, 3});
    CHECK(split.same_storage(x));
    CHECK(split.to_vector() == t.to_vector());
    Tensor merged = reshape(t, {2, 12});
    CHECK_FALSE(merged.same_storage(x));
    CHECK(merged.to_vector() == t.to_vector());
    // A size-1 dim may be inserted anywhere, even in a non-contiguous view.
    CHECK(view(t, {2, 1, 4, 3, 1}).same_storage(x));
    // A slice with a step, then flattened over the untouched dims, stays a view.
    Tensor s = slice(x, 2, 0, 4, 2);   // (2, 3, 2)
    CHECK(flatten(s, 0, 1).same_storage(x));
    CHECK(flatten(s, 0, 1).to_vector() == s.to_vector());
    // Views of i64 tensors (labels) work too.
    Tensor labels = Tensor::from_vector_i64({6}, {0, 1, 2, 3, 4, 5});
    CHECK(slice(reshape(labels, {2, 3}), 1, 1, 3).to_vector_i64() == std::vector<int64_t>{1, 2, 4, 5});
}

TEST_CASE("view ops: reshape infers -1 and names the sizes when it cannot") {
    Tensor x = iota({2, 3, 4});
    CHECK(reshape(x, {-1}).shape() == Shape{24});
    CHECK(reshape(x, {3, -1, 2}).shape() == Shape{3, 4, 2});
    CHECK(reshape(Tensor::scalar(2.f), {1, 1}).shape() == Shape{1, 1});
    CHECK(reshape(Tensor::zeros({0, 3}), {3, -1, 5}).shape() == Shape{3, 0, 5});
    CHECK(flatten(Tensor::scalar(2.f)).shape() == Shape{1});
    CHECK(flatten(iota({2, 3, 4, 5}), 1, 2).shape() == Shape{2, 12, 5});
    CHECK_THROWS_WITH_AS(reshape(x, {5, -1}), doctest::Contains("reshape: shape (5, -1) is invalid for x (2, 3, 4) of 24 elements"),
                         Error);
    CHECK_THROWS_WITH_AS(reshape(x, {5, 5}), doctest::Contains("reshape: shape (5, 5) (25 elements) is invalid for x (2, 3, 4) of 24"),
                         Error);
    CHECK_THROWS_WITH_AS(reshape(x, {-1, -1}), doctest::Contains("only one dimension can be -1"), Error);
    CHECK_THROWS_WITH_AS(reshape(x, {-2, 12}), doctest::Contains("invalid size -2"), Error);
    CHECK_THROWS_WITH_AS(view(transpose(x, 1, 2), {2, 12}),
                         doctest::Contains("view: cannot view x (2, 4, 3) with strides (12, 1, 4) as (2, 12)"), Error);
    CHECK_THROWS_WITH_AS(flatten(x, 2, 1), doctest::Contains("flatten: start_dim 2 comes after end_dim 1"), Error);
    CHECK_THROWS_WITH_AS(transpose(x, 0, 3), doctest::Contains("transpose: dimension 3 is out of range"), Error);
}

TEST_CASE("view ops: permute rejects invalid dims") {
    Tensor x = iota({2, 3, 4});
    CHECK(permute(x, {-1, 0, 1}).shape() == Shape{4, 2, 3});
    CHECK_THROWS_WITH_AS(permute(x, {0, 1}), doctest::Contains("permute: expected 3 dims for x (2, 3, 4), got 2 dims (0, 1)"),
                         Error);
    CHECK_THROWS_WITH_AS(permute(x, {0, 1, 1}), doctest::Contains("permute: dim 1 appears twice in dims (0, 1, 1)"), Error);
    CHECK_THROWS_WITH_AS(permute(x, {0, 1, -1 - 3}), doctest::Contains("permute: dimension -4 is out of range"), Error);
}

TEST_CASE("view ops: slice clamps like python and takes negative bounds") {
    Tensor x = Tensor::arange(10);
    CHECK(slice(x, 0, -3, 100).to_vector() == std::vector<float>{7, 8, 9});
    CHECK(slice(x, 0, -100, 2).to_vector() == std::vector<float>{0, 1});
    CHECK(slice(x, 0, 1, -1, 3).to_vector() == std::vector<float>{1, 4, 7});
    CHECK(slice(x, 0, 2, 9, 3).to_vector() == std::vector<float>{2, 5, 8});
    CHECK(slice(x, -1, 8, 20, 5).to_vector() == std::vector<float>{8});
    CHECK(slice(x, 0, 5, 2).numel() == 0);    // empty range
    CHECK(slice(x, 0, 12, 20).numel() == 0);  // past the end
    Tensor m = iota({3, 4});
    CHECK(slice(m, 1, -2, 4).to_vector() == std::vector<float>{2, 3, 6, 7, 10, 11});
    CHECK_THROWS_WITH_AS(slice(x, 0, 0, 5, 0), doctest::Contains("slice: step must be positive, got 0"), Error);
    CHECK_THROWS_WITH_AS(slice(x, 1, 0, 5), doctest::Contains("slice: dimension 1 is out of range"), Error);
    // Gradient of an empty slice is all zeros.
    Tensor l = randn_leaf({4}, 3);
    Tensor e = slice(l, 0, 3, 1);
    sum(e).backward();
    CHECK(l.grad().to_vector() == std::vector<float>(4, 0.f));
}

TEST_CASE("view ops: match PyTorch") {
    SafeTensors fx = load_fixture("shape_view");
    auto& t = fx.tensors;
    const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> cases = {
        {"reshape", [](const Tensor& x) { return reshape(x, {4, -1}); }},
        {"view", [](const Tensor& x) { return view(x, {6, 4}); }},
        {"flatten", [](const Tensor& x) { return flatten(x, 1); }},
        {"transpose", [](const Tensor& x) { return transpose(x, 0, 2); }},
        {"permute", [](const Tensor& x) { return permute(x, {2, 0, 1}); }},
        {"slice", [](const Tensor& x) { return slice(x, 2, -3, 10, 2); }},
        {"slice_mid", [](const Tensor& x) { return slice(x, 1, 1, 3); }},
        {"transpose_reshape", [](const Tensor& x) { return reshape(transpose(x, 1, 2), {4, 6}); }},
    };
    for (const auto& [name, f] : cases) {
        Tensor x = leaf(t.at("x"));
        Tensor y = f(x);
        // Pure data movement: bit-exact.
        check_close(y, t.at(name + ".out"), 0, 0, name + " forward");
        y.backward(t.at(name + ".grad_out"));
        check_close(x.grad(), t.at(name + ".grad_x"), 0, 0, name + " grad");
    }
}

TEST_CASE("view ops: save nothing on the tape") {
    Tensor x = randn_leaf({2, 3, 4}, 13);
    Tensor y = slice(permute(reshape(transpose(x, 0, 1), {3, 8}), {1, 0}), 0, 1, 7, 2);
    CHECK(current_tape().live().items == 0);
    CHECK(current_tape().live().stored_bytes == 0);
    y.backward(Tensor::ones(y.shape()));
    CHECK(x.grad().defined());
}

TEST_CASE("view ops: views share the version counter, so a write to the base invalidates a saved view") {
    SUBCASE("base that needs no grad, a slice saved by mul") {
        Generator gen(7);
        Tensor base = Tensor::randn({4, 6}, gen);
        Tensor w = randn_leaf({4, 3}, 8);
        Tensor v = slice(base, 1, 0, 6, 2);   // (4, 3) view of base
        Tensor y = mul(v, w);                 // saves v (w needs a gradient)
        base.add_(Tensor::ones({4, 6}));      // in-place on the base: bumps the shared version
        CHECK(v.version() == base.version());
        CHECK_THROWS_WITH_AS(y.backward(Tensor::ones(y.shape())),
                             doctest::Contains("mul: a tensor (4, 3) saved for backward was modified in place"), Error);
    }
    SUBCASE("a non-leaf base, a transposed view saved by a later op") {
        Tensor a = randn_leaf({3, 4}, 9);
        Tensor h = a * 2.f;                   // non-leaf base
        Tensor v = transpose(h, 0, 1);        // (4, 3)
        Tensor w = randn_leaf({4, 3}, 10);
        Tensor y = mul(w, v);                 // saves v as "b"
        h.mul_(3.f);
        CHECK_THROWS_WITH_AS(y.backward(Tensor::ones(y.shape())), doctest::Contains("mul: a tensor (4, 3) saved"),
                             Error);
    }
    SUBCASE("without the write, backward works") {
        Tensor a = randn_leaf({3, 4}, 9);
        Tensor h = a * 2.f;
        Tensor y = mul(transpose(h, 0, 1), transpose(h, 0, 1));
        y.backward(Tensor::ones(y.shape()));
        // d/da sum((2a)^2) = 8a
        const auto ga = a.grad().to_vector(), av = a.to_vector();
        for (size_t i = 0; i < av.size(); ++i) CHECK(ga[i] == doctest::Approx(8 * av[i]).epsilon(1e-6));
    }
}
