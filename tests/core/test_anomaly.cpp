// tests/core/test_anomaly.cpp -- anomaly mode names the first op (forward output, backward gradient or non-finite
// input) that holds a NaN or an Inf, with its module path; it costs nothing when off.
#include <doctest/doctest.h>

#include <limits>

#include "core/core.h"

using namespace razor;
using doctest::Contains;

TEST_CASE("anomaly: count_nonfinite and grads_finite") {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const Tensor t = Tensor::from_vector({2, 3}, {1, nan, inf, -inf, 0, nan});
    const NonFiniteCount c = count_nonfinite(t);
    CHECK(c.nan == 2);
    CHECK(c.inf == 2);
    CHECK_FALSE(count_nonfinite(Tensor::ones({4})).any());
    CHECK(count_nonfinite(transpose(t, 0, 1)).nan == 2);   // a non-contiguous view counts the same

    Tensor w = Tensor::ones({3}).requires_grad_();
    Tensor v = Tensor::ones({2}).requires_grad_();
    sum(mul(w, w)).backward();
    CHECK(grads_finite({w, v}));   // v has no gradient: skipped
    w.grad().f32()[1] = inf;
    CHECK_FALSE(grads_finite({w, v}));
    w.grad().f32()[1] = nan;
    CHECK_FALSE(grads_finite({w}));
}

TEST_CASE("anomaly: the first non-finite forward output is named with its op and module path") {
    Tensor x = Tensor::from_vector({2, 2}, {1, 2, -3, 4}).requires_grad_();
    auto step = [&] {
        Tensor h;
        {
            NameScope a("encoder"), b("block0");
            h = mul(x, 2.f);
        }
        NameScope head("head");
        Tensor y = log(h);          // log(-6) = NaN: the first offender
        sum(exp(y)).backward();     // NaN flows on into exp and sum; those are not named
    };
    const std::optional<NonFiniteReport> r = detect_anomaly(step);
    REQUIRE(r);
    CHECK(r->op == "log");
    CHECK(r->module_path == "head");
    CHECK(r->where == "forward output");
    CHECK(r->shape == Shape{2, 2});
    CHECK(r->count.nan == 1);
    CHECK(r->count.inf == 0);
    CHECK(r->describe() == "log (module 'head') forward output (2, 2): 1 NaN, 0 Inf of 4 values");
    CHECK_FALSE(anomaly_mode_enabled());   // the guard is gone after detect_anomaly
}

TEST_CASE("anomaly: a NaN parameter is named as the input of the op that reads it") {
    Tensor w = Tensor::from_vector({3}, {1, std::numeric_limits<float>::quiet_NaN(), 3}).requires_grad_();
    Tensor x = Tensor::from_vector({3}, {1, 1, 1});
    const auto r = detect_anomaly(
        [&] {
            NameScope s("fc");
            sum(mul(x, w)).backward();
        },
        {{"fc.weight", w}});
    REQUIRE(r);
    CHECK(r->op == "mul");
    CHECK(r->module_path == "fc");
    CHECK(r->where == "input 1 (parameter fc.weight)");
    CHECK(r->count.nan == 1);
    // data (no grad) with an Inf is named as such
    x.f32()[0] = std::numeric_limits<float>::infinity();
    w.f32()[1] = 2;
    const auto d = detect_anomaly([&] { sum(mul(x, w)).backward(); });
    REQUIRE(d);
    CHECK(d->where == "input 0 (data or a constant)");
    CHECK(d->count.inf == 1);
}

TEST_CASE("anomaly: a gradient that only backward makes non-finite is named in backward order") {
    Tensor x = Tensor::from_vector({3}, {1, 0, 4}).requires_grad_();
    const auto r = detect_anomaly([&] {
        NameScope s("norm");
        sum(sqrt(relu(x))).backward();   // forward finite (sqrt(0) = 0); d sqrt(y)/dy = 1/(2 sqrt y) = Inf at 0
    });
    REQUIRE(r);
    CHECK(r->op == "sqrt");
    CHECK(r->module_path == "norm");
    CHECK(r->where == "backward gradient for input 0");
    CHECK(r->count.inf == 1);
    CHECK_THROWS_WITH_AS(
        [&] {
            AnomalyMode on;
            Tensor y = Tensor::from_vector({1}, {-1}).requires_grad_();
            log(y);
        }(),
        Contains("hint"), NonFiniteError);
}

TEST_CASE("anomaly: a finite step reports nothing, and without the guard nothing is checked") {
    Tensor x = Tensor::from_vector({2}, {1, 2}).requires_grad_();
    CHECK_FALSE(detect_anomaly([&] { sum(log(x)).backward(); }));
    Tensor z = Tensor::from_vector({1}, {-1}).requires_grad_();
    CHECK_NOTHROW(log(z));   // NaN, but anomaly mode is off: the loop's cheap checks decide when to look
}
