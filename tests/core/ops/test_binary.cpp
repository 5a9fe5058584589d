// tests/core/ops/test_binary.cpp -- add/sub/mul/div (+ broadcasting, scalar forms): gradcheck and PyTorch parity.
#include "support/gradcheck.h"
#include "support/overwrite.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("binary ops: gradcheck with broadcasting") {
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{5}, {}}, {{2, 3, 2, 2}, {1, 3, 1, 1}}};
    for (const auto& [sa, sb] : shapes) {
        Tensor a = randn_leaf(sa, 1), b = randn_leaf(sb, 2);
        gradcheck("add", [](const std::vector<Tensor>& in) { return add(in[0], in[1]); }, {a, b});
        gradcheck("sub", [](const std::vector<Tensor>& in) { return sub(in[0], in[1]); }, {a, b});
        gradcheck("mul", [](const std::vector<Tensor>& in) { return mul(in[0], in[1]); }, {a, b});
        Tensor bpos = away_from(randn_leaf(sb, 3), {0.f}, 0.5f);
        gradcheck("div", [](const std::vector<Tensor>& in) { return div(in[0], in[1]); }, {a, bpos},
                  {.eps = 1e-3, .rtol = 2e-2, .atol = 5e-3});
    }
}

TEST_CASE("binary ops: scalar forms gradcheck") {
    Tensor a = away_from(randn_leaf({3, 5}, 4), {0.f}, 0.5f);
    gradcheck("add_scalar", [](const std::vector<Tensor>& in) { return in[0] + 2.5f; }, {a});
    gradcheck("sub_scalar", [](const std::vector<Tensor>& in) { return in[0] - 2.5f; }, {a});
    gradcheck("mul_scalar", [](const std::vector<Tensor>& in) { return in[0] * -1.5f; }, {a});
    gradcheck("div_scalar", [](const std::vector<Tensor>& in) { return in[0] / 4.f; }, {a});
    gradcheck("rsub_scalar", [](const std::vector<Tensor>& in) { return 1.f - in[0]; }, {a});
    gradcheck("rdiv_scalar", [](const std::vector<Tensor>& in) { return 2.f / in[0]; }, {a},
              {.eps = 1e-3, .rtol = 2e-2, .atol = 5e-3});
}

TEST_CASE("binary ops: shapes that do not broadcast name the op and both shapes") {
    Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
    CHECK_THROWS_WITH_AS(add(a, b), doctest::Contains("add: shapes (2, 3) and (4) do not broadcast"), Error);
}

TEST_CASE("binary ops: match PyTorch") {
    SafeTensors fx = load_fixture("binary");
    auto& t = fx.tensors;
    for (const char* op : {"add", "sub", "mul", "div"}) {
        Tensor a = leaf(t.at("a")), b = leaf(t.at("b"));
        Tensor out;
        std::string name = op;
        if (name == "add") out = add(a, b);
        if (name == "sub") out = sub(a, b);
        if (name == "mul") out = mul(a, b);
        if (name == "div") out = div(a, b);
        check_close(out, t.at(name + ".out"), 1e-5, 1e-6, name + " forward");
        out.backward(t.at("grad_out"));
        check_close(a.grad(), t.at(name + ".grad_a"), 1e-5, 1e-6, name + " grad a");
        check_close(b.grad(), t.at(name + ".grad_b"), 1e-4, 1e-5, name + " grad b (sum over broadcast dims)");
    }
}

TEST_CASE("binary ops: scalar forms match PyTorch") {
    SafeTensors fx = load_fixture("scalar");
    auto& t = fx.tensors;
    const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
        {"add", [](const Tensor& a) { return a + 2.5f; }},  {"sub", [](const Tensor& a) { return a - 2.5f; }},
        {"mul", [](const Tensor& a) { return a * -1.5f; }}, {"div", [](const Tensor& a) { return a / 4.f; }},
        {"rsub", [](const Tensor& a) { return 1.f - a; }},  {"rdiv", [](const Tensor& a) { return 2.f / a; }}};
    for (const auto& [name, fn] : ops) {
        Tensor a = leaf(t.at("a"));
        Tensor out = fn(a);
        check_close(out, t.at(name + ".out"), 1e-6, 1e-7, name + "_scalar forward");
        out.backward(t.at("grad_out"));
        check_close(a.grad(), t.at(name + ".grad_a"), 1e-6, 1e-7, name + "_scalar grad");
    }
}

TEST_CASE("add(Tensor&&, b): the sum written over the a the caller gave up, b broadcast onto it; same values and "
          "gradients; never over a shared a or an a that b would broadcast") {
    Tensor w = randn_leaf({2, 5, 4}, 41), pos = randn_leaf({1, 5, 4}, 42);
    const Tensor g = randn_leaf({2, 5, 4}, 43).detach();
    const Tensor expected = add(mul(w, 3.f), pos);
    expected.backward(g);
    const std::vector<float> gw = w.grad().to_vector(), gpos = pos.grad().to_vector();
    w.zero_grad(), pos.zero_grad();
    Tensor a = mul(w, 3.f);   // fresh, with history: the residual stream
    const void* storage = a.storage().get();
    const Tensor y = add(std::move(a), pos);
    CHECK(y.storage().get() == storage);
    CHECK(y.to_vector() == expected.to_vector());
    y.backward(g);
    CHECK(w.grad().to_vector() == gw);
    CHECK(pos.grad().to_vector() == gpos);
    check_overwrite_spares_shared([&] { return mul(w, 3.f); }, pos,
                                  [](Tensor&& x, const Tensor& other) { return add(std::move(x), other); });
    // a smaller than the result: a fresh buffer of the broadcast shape.
    const Tensor y3 = add(mul(pos, 1.f), mul(w, 1.f));
    CHECK(y3.shape() == Shape{2, 5, 4});
    CHECK(y3.to_vector() == add(w, pos).to_vector());
}
