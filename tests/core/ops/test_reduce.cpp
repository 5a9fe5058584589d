// tests/core/ops/test_reduce.cpp -- sum, mean, max, argmax: gradcheck, PyTorch parity, precision of long sums,
// the fast paths against a double reference, ties/NaN, errors, what is saved.
#include <cmath>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {
// Distinct values, spaced 0.1 apart in a shuffled order: keeps max away from ties for finite differences.
Tensor distinct_leaf(const Shape& shape, uint64_t seed) {
    Generator gen(seed);
    Tensor t = Tensor::empty(shape);
    const int64_t n = t.numel();
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = 0.1f * static_cast<float>(i - n / 2);
    for (int64_t i = n - 1; i > 0; --i) std::swap(v[i], v[gen.randint(i + 1)]);
    std::copy(v.begin(), v.end(), t.f32());
    t.requires_grad_();
    return t;
}

// Sum over `dims` of a packed (d0, d1, ...) tensor in double, as a reference for the kernels.
std::vector<double> reference_sum(const Tensor& x, const std::vector<bool>& reduced) {
    const Shape& s = x.shape();
    Shape out_shape;
    for (size_t d = 0; d < s.size(); ++d)
        if (!reduced[d]) out_shape.push_back(s[d]);
    std::vector<double> out(shape_numel(out_shape), 0.0);
    const auto v = x.to_vector();
    const Shape out_strides = contiguous_strides(out_shape);
    for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t rem = i, o = 0, k = static_cast<int64_t>(out_shape.size());
        for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
            const int64_t idx = rem % s[d];
            rem /= s[d];
            if (!reduced[d]) o += idx * out_strides[--k];
        }
        out[o] += v[i];
    }
    return out;
}

void check_against_reference(const Tensor& got, const std::vector<double>& ref, double rtol, const std::string& what) {
    const auto g = got.to_vector();
    REQUIRE(g.size() == ref.size());
    int64_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) {
        const double err = std::abs(g[i] - ref[i]) / (std::abs(ref[i]) + 1e-3);
        worst = std::max(worst, err);
        bad += err > rtol;
    }
    CHECK_MESSAGE(bad == 0, what << ": " << bad << " elements off, worst relative error " << worst);
}
}  // namespace

TEST_CASE("reduce: gradcheck sum and mean") {
    Tensor x = randn_leaf({2, 3, 4, 5}, 41);
    // Linear ops: finite differences exact up to float rounding of the forward sums.
    gradcheck("sum all", [](const std::vector<Tensor>& in) { return sum(in[0]); }, {x});
    gradcheck("mean all", [](const std::vector<Tensor>& in) { return mean(in[0]); }, {x});
    const std::vector<std::vector<int64_t>> dim_sets = {{0}, {-1}, {0, 2, 3}, {1, 3}, {1, 2}, {0, 1, 2, 3}, {}};
    for (const auto& dims : dim_sets)
        for (bool keepdim : {false, true}) {
            const std::string tag = shape_str(dims) + (keepdim ? " keepdim" : "");
            gradcheck("sum " + tag, [dims, keepdim](const std::vector<Tensor>& in) { return sum(in[0], dims, keepdim); },
                      {x});
            gradcheck("mean " + tag,
                      [dims, keepdim](const std::vector<Tensor>& in) { return mean(in[0], dims, keepdim); }, {x});
        }
    Tensor y = randn_leaf({2, 3, 2, 3, 2, 3}, 42);   // 6 alternating segments: the multi-pass path
    gradcheck("sum (0, 2, 4)", [](const std::vector<Tensor>& in) { return sum(in[0], {0, 2, 4}); }, {y});
    gradcheck("mean (1, 3, 5)", [](const std::vector<Tensor>& in) { return mean(in[0], {1, 3, 5}, true); }, {y});
    // A strided input (the reduction packs it; the gradient flows back through the transpose).
    gradcheck("sum of transpose", [](const std::vector<Tensor>& in) { return sum(transpose(in[0], 1, 3), {1}); }, {x});
}

TEST_CASE("reduce: gradcheck max away from ties") {
    Tensor x = distinct_leaf({3, 4, 5}, 43);   // values 0.1 apart > 2 eps
    for (int64_t dim : {0, 1, 2, -1})
        for (bool keepdim : {false, true})
            gradcheck("max dim " + std::to_string(dim),
                      [dim, keepdim](const std::vector<Tensor>& in) { return max(in[0], dim, keepdim); }, {x});
}

TEST_CASE("reduce: shapes, keepdim, empty dims, 0-d and empty tensors") {
    Tensor x = Tensor::ones({2, 3, 4});
    CHECK(sum(x).shape() == Shape{});
    CHECK(sum(x).item() == 24.f);
    CHECK(sum(x, {}).item() == 24.f);   // torch 1.13: an empty dims list reduces all
    CHECK(sum(x, {0, 2}).shape() == Shape{3});
    CHECK(sum(x, {0, 2}, true).shape() == Shape{1, 3, 1});
    CHECK(mean(x, {-1}).shape() == Shape{2, 3});
    CHECK(max(x, 1).shape() == Shape{2, 4});
    CHECK(max(x, 1, true).shape() == Shape{2, 1, 4});
    CHECK(argmax(x, -1, true).shape() == Shape{2, 3, 1});
    CHECK(sum(Tensor::scalar(3.f), {0}).item() == 3.f);
    CHECK(max(Tensor::scalar(3.f), -1).item() == 3.f);
    CHECK(argmax(Tensor::scalar(3.f), 0).item() == 0.f);
    CHECK(sum(Tensor::zeros({0, 3}), {0}).to_vector() == std::vector<float>{0, 0, 0});
    CHECK(std::isnan(mean(Tensor::zeros({0, 3})).item()));
    CHECK(max(Tensor::zeros({0, 3}), 1).shape() == Shape{0});
    // Reducing size-1 dims keeps the values.
    Tensor v = Tensor::from_vector({3, 1, 2}, {1, 2, 3, 4, 5, 6});
    CHECK(sum(v, {1}).to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
    CHECK(mean(v, {0, 1}).to_vector() == std::vector<float>{3, 4});
}

TEST_CASE("reduce: max and argmax pick the first maximum; NaN wins") {
    Tensor x = Tensor::from_vector({2, 4}, {1, 3, 3, 2, 5, 5, 5, 5});
    x.requires_grad_();
    CHECK(argmax(x, 1).to_vector_i64() == std::vector<int64_t>{1, 0});
    CHECK(argmax(x, 0).to_vector_i64() == std::vector<int64_t>{1, 1, 1, 1});
    Tensor m = max(x, 1);
    CHECK(m.to_vector() == std::vector<float>{3, 5});
    m.backward(Tensor::from_vector({2}, {10, 20}));
    CHECK(x.grad().to_vector() == std::vector<float>{0, 10, 0, 0, 20, 0, 0, 0});
    // Columns (inner > 1) take the same rule.
    Tensor c = Tensor::from_vector({3, 2}, {1, 7, 4, 7, 4, 2});
    CHECK(argmax(c, 0).to_vector_i64() == std::vector<int64_t>{1, 0});
    const float nan = std::nanf("");
    Tensor n = Tensor::from_vector({2, 3}, {1, nan, 3, 4, 5, nan});
    CHECK(argmax(n, 1).to_vector_i64() == std::vector<int64_t>{1, 2});
    CHECK(std::isnan(max(n, 1).to_vector()[0]));
    CHECK(argmax(Tensor::from_vector({3, 2}, {1, 2, nan, 0, nan, 9}), 0).to_vector_i64() == std::vector<int64_t>{1, 2});
    // argmax records no node.
    Tensor l = randn_leaf({3, 3}, 44);
    CHECK_FALSE(argmax(l, 1).requires_grad());
}

TEST_CASE("reduce: long sums stay accurate and the fast paths match a double reference") {
    Generator gen(45);
    // 2^20 values of 0.1 + noise: a naive float accumulator drifts by ~1e-3 relative; ours must not.
    Tensor big = Tensor::randn({1 << 20}, gen);
    big.mul_(0.01f);
    big.add_(Tensor::full({1 << 20}, 0.1f));
    check_against_reference(reshape(sum(big), {1}), reference_sum(big, {true}), 1e-6, "sum of 2^20");
    check_against_reference(reshape(mean(big), {1}), [&] {
        auto r = reference_sum(big, {true});
        r[0] /= (1 << 20);
        return r;
    }(), 1e-6, "mean of 2^20");
    // Hot paths at sizes that run in parallel.
    Tensor nchw = Tensor::randn({16, 24, 12, 12}, gen);
    nchw.add_(Tensor::full(nchw.shape(), 1.f));
    check_against_reference(sum(nchw, {0, 2, 3}), reference_sum(nchw, {true, false, true, true}), 1e-6, "NCHW (0,2,3)");
    check_against_reference(sum(nchw, {-1}), reference_sum(nchw, {false, false, false, true}), 1e-6, "last dim");
    check_against_reference(sum(nchw, {0}), reference_sum(nchw, {true, false, false, false}), 1e-6, "dim 0 (columns)");
    check_against_reference(sum(nchw, {1, 3}), reference_sum(nchw, {false, true, false, true}), 1e-6, "(1, 3)");
    check_against_reference(sum(nchw, {0, 2}), reference_sum(nchw, {true, false, true, false}), 1e-6, "(0, 2)");
    // Bias-gradient shape: many rows, few columns (rows split among threads).
    Tensor rows = Tensor::randn({1 << 16, 10}, gen);
    check_against_reference(sum(rows, {0}), reference_sum(rows, {true, false}), 1e-6, "(65536, 10) over dim 0");
    Tensor wide = Tensor::randn({3, 4000, 300}, gen);
    check_against_reference(sum(wide, {1}), reference_sum(wide, {false, true, false}), 1e-6, "(3, 4000, 300) over 1");
    // Gradients of the hot paths: a broadcast of g.
    Tensor p = randn_leaf({4, 6, 5, 7}, 46);
    Tensor s = mean(p, {0, 2, 3});
    s.backward(Tensor::arange(6));
    const auto gp = p.grad().to_vector();
    for (int64_t i = 0; i < p.numel(); ++i)
        REQUIRE(gp[i] == doctest::Approx(((i / 35) % 6) / 140.0).epsilon(1e-6));
    // max over many rows and wide columns (both kernels in parallel) against a serial scan.
    Tensor mx = Tensor::randn({64, 50, 40}, gen);
    for (int64_t dim : {1, 2}) {
        const auto idx = argmax(mx, dim).to_vector_i64();
        const auto vals = max(mx, dim).to_vector();
        const auto v = mx.to_vector();
        const int64_t D = mx.shape()[dim], inner = dim == 1 ? 40 : 1, outer = mx.numel() / (D * inner);
        int64_t bad = 0;
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t j = 0; j < inner; ++j) {
                int64_t best = 0;
                for (int64_t d = 1; d < D; ++d)
                    if (v[(o * D + d) * inner + j] > v[(o * D + best) * inner + j]) best = d;
                bad += idx[o * inner + j] != best || vals[o * inner + j] != v[(o * D + best) * inner + j];
            }
        CHECK_MESSAGE(bad == 0, "max dim " << dim);
    }
}

TEST_CASE("reduce: errors") {
    Tensor x = Tensor::zeros({2, 3});
    CHECK_THROWS_WITH_AS(sum(x, {1, -1}), doctest::Contains("sum: dim 1 appears more than once in dims (1, -1)"),
                         Error);
    CHECK_THROWS_WITH_AS(mean(x, {2}), doctest::Contains("mean: dimension 2 is out of range"), Error);
    CHECK_THROWS_WITH_AS(sum(Tensor::zeros({2}, DType::I64)), doctest::Contains("sum: expected an f32 tensor, got i64"),
                         Error);
    CHECK_THROWS_WITH_AS(max(Tensor::zeros({2, 0}), 1),
                         doctest::Contains("max: cannot reduce dim 1 of size 0 (x (2, 0))"), Error);
    CHECK_THROWS_WITH_AS(argmax(x, -3), doctest::Contains("argmax: dimension -3 is out of range"), Error);
}

TEST_CASE("reduce: sum/mean save nothing; max saves only its argmax (i64)") {
    Tape& tape = current_tape();
    Tensor x = randn_leaf({4, 5, 6}, 47);
    Tensor s = sum(mean(x, {0, 2}));
    CHECK(tape.live().items == 0);
    s.backward();
    Tensor m = max(x, 1);   // (4, 6): 24 indices
    CHECK(tape.live().items == 1);
    CHECK(tape.live().stored_bytes == 24 * 8);
    CHECK(tape.records().at(0).kind == SaveKind::Indices);
    m.backward(Tensor::ones(m.shape()));
    CHECK(tape.live().stored_bytes == 0);
    // Not recorded at all when no gradient is needed.
    NoGradGuard no_grad;
    Tensor m2 = max(x, 1);
    CHECK(tape.live().items == 0);
    CHECK_FALSE(m2.requires_grad());
}

TEST_CASE("reduce: match PyTorch") {
    SafeTensors fx = load_fixture("shape_reduce");
    auto& t = fx.tensors;
    struct Case {
        std::string name, input;
        std::function<Tensor(const Tensor&)> f;
    };
    const std::vector<Case> cases = {
        {"sum_all", "x", [](const Tensor& x) { return sum(x); }},
        {"sum_nchw", "x", [](const Tensor& x) { return sum(x, {0, 2, 3}); }},
        {"sum_last", "x", [](const Tensor& x) { return sum(x, {-1}); }},
        {"sum_0_keep", "x", [](const Tensor& x) { return sum(x, {0}, true); }},
        {"sum_13_keep", "x", [](const Tensor& x) { return sum(x, {1, 3}, true); }},
        {"sum_024", "y", [](const Tensor& y) { return sum(y, {0, 2, 4}); }},
        {"mean_all", "x", [](const Tensor& x) { return mean(x); }},
        {"mean_12", "x", [](const Tensor& x) { return mean(x, {1, 2}); }},
        {"mean_last_keep", "x", [](const Tensor& x) { return mean(x, {-1}, true); }},
    };
    SafeTensors fl = load_fixture("shape_reduce_long");
    const std::vector<Case> long_cases = {
        {"z_sum_rows", "z", [](const Tensor& z) { return sum(z, {1}); }},
        {"z_sum_cols", "z", [](const Tensor& z) { return sum(z, {0}); }},
        {"z_mean", "z", [](const Tensor& z) { return mean(z); }},
    };
    for (auto [file, list] : {std::pair{&t, &cases}, std::pair{&fl.tensors, &long_cases}}) {
        for (const Case& c : *list) {
            Tensor x = leaf(file->at(c.input));
            Tensor y = c.f(x);
            // Forward: our double accumulation vs torch's float cascade sum; 1e-5 relative (+1e-6 absolute for
            // sums that cancel towards 0) covers torch's own rounding.
            check_close(y, file->at(c.name + ".out"), 1e-5, 1e-6, c.name + " forward");
            y.backward(file->at(c.name + ".grad_out"));
            // Backward is a broadcast (times 1/count for mean): one rounding at most.
            check_close(x.grad(), file->at(c.name + ".grad_" + c.input), 1e-6, 0, c.name + " grad");
        }
    }
}

TEST_CASE("max / argmax: match PyTorch") {
    SafeTensors fx = load_fixture("shape_max");
    auto& t = fx.tensors;
    const std::vector<std::tuple<std::string, int64_t, bool>> cases = {
        {"max1", 1, false}, {"max_last_keep", -1, true}, {"max0", 0, false}};
    for (const auto& [name, dim, keepdim] : cases) {
        Tensor x = leaf(t.at("x"));
        Tensor y = max(x, dim, keepdim);
        check_close(y, t.at(name + ".out"), 0, 0, name + " forward");   // a selection: bit-exact
        y.backward(t.at(name + ".grad_out"));
        check_close(x.grad(), t.at(name + ".grad_x"), 0, 0, name + " grad");
    }
    check_close(argmax(t.at("x"), 1), t.at("argmax1"), 0, 0, "argmax dim 1");
    check_close(argmax(t.at("x"), -1, true), t.at("argmax_last_keep"), 0, 0, "argmax dim -1 keepdim");
}
