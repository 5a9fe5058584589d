// tests/core/test_autograd.cpp -- autograd semantics: accumulation, zero_grad, NoGradGuard, freeing, versions.
#include "support/gradcheck.h"
#include "support/overwrite.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("autograd: backward twice accumulates, zero_grad resets") {
    Tensor a = Tensor::from_vector({3}, {1, 2, 3}).requires_grad_();
    Tensor b = Tensor::from_vector({3}, {4, 5, 6}).requires_grad_();
    for (int i = 0; i < 2; ++i) {
        Tensor y = mul(a, b);
        y.backward(Tensor::ones({3}));
    }
    CHECK(a.grad().to_vector() == std::vector<float>{8, 10, 12});
    CHECK(b.grad().to_vector() == std::vector<float>{2, 4, 6});
    a.zero_grad();
    CHECK_FALSE(a.grad().defined());
}

TEST_CASE("autograd: retain_graph lets a second backward through the same graph accumulate") {
    Tensor a = Tensor::from_vector({2}, {1, 2}).requires_grad_();
    Tensor y = mul(a, a);
    y.backward(Tensor::ones({2}), /*retain_graph=*/true);
    y.backward(Tensor::ones({2}));
    CHECK(a.grad().to_vector() == std::vector<float>{4, 8});
}

TEST_CASE("autograd: a second backward after the saved state was freed is a clear error") {
    Tensor a = Tensor::from_vector({2}, {1, 2}).requires_grad_();
    Tensor y = mul(a, a);
    y.backward(Tensor::ones({2}));
    CHECK_THROWS_WITH_AS(y.backward(Tensor::ones({2})), doctest::Contains("retain_graph"), Error);
}

TEST_CASE("autograd: a tensor used twice gets the sum of both gradients") {
    Tensor a = Tensor::from_vector({2}, {3, -1}).requires_grad_();
    Tensor y = add(mul(a, 2.f), relu(a));   // dy/da = 2 + 1[a > 0]
    y.backward(Tensor::ones({2}));
    CHECK(a.grad().to_vector() == std::vector<float>{3, 2});
}

TEST_CASE("autograd: a leaf's .grad never aliases another tensor (the first gradient is taken over only when unshared)") {
    Tensor a = Tensor::from_vector({3}, {1, 2, 3}).requires_grad_();
    Tensor b = Tensor::from_vector({3}, {4, 5, 6}).requires_grad_();
    add(a, b).backward(Tensor::ones({3}));   // add's backward may hand one tensor to both inputs
    REQUIRE(a.grad().defined());
    REQUIRE(b.grad().defined());
    CHECK_FALSE(a.grad().same_storage(b.grad()));
    a.grad().add_(Tensor::ones({3}));
    CHECK(b.grad().to_vector() == std::vector<float>{1, 1, 1});
    // The caller's seed on a leaf root stays the caller's.
    Tensor seed = Tensor::from_vector({3}, {7, 8, 9});
    Tensor c = Tensor::from_vector({3}, {0, 0, 0}).requires_grad_();
    c.backward(seed);
    CHECK_FALSE(c.grad().same_storage(seed));
    c.grad().add_(Tensor::ones({3}));
    CHECK(seed.to_vector() == std::vector<float>{7, 8, 9});
    // A fresh gradient (mul's) is taken over: nothing else holds its storage.
    Tensor d = Tensor::from_vector({3}, {1, 2, 3}).requires_grad_();
    mul(d, 2.f).backward(Tensor::ones({3}));
    CHECK(d.grad().storage().use_count() == 1);
    CHECK(d.grad().to_vector() == std::vector<float>{2, 2, 2});
}

TEST_CASE("autograd: NoGradGuard records nothing") {
    Tensor a = randn_leaf({4}, 1);
    {
        NoGradGuard guard;
        Tensor y = relu(mul(a, a));
        CHECK_FALSE(y.requires_grad());
        CHECK(y.grad_fn() == nullptr);
        CHECK(current_tape().live().items == 0);
    }
    CHECK(grad_enabled());
}

TEST_CASE("autograd: saved state is freed right after backward; accounting returns to zero") {
    Tensor a = randn_leaf({16, 16}, 2), b = randn_leaf({16, 16}, 3);
    const TapeTotals before = current_tape().live();
    CHECK(before.items == 0);
    Tensor y = relu(mul(a, b));
    const TapeTotals during = current_tape().live();
    CHECK(during.items == 3);                              // a, b (mul) and the relu mask
    CHECK(during.stored_bytes == 2 * 16 * 16 * 4 + 32);    // two dense inputs + 256 bits
    y.backward(Tensor::ones({16, 16}));
    CHECK(current_tape().live().items == 0);
    CHECK(current_tape().live().stored_bytes == 0);
}

TEST_CASE("autograd: a storage saved by several nodes is counted once") {
    Tensor a = randn_leaf({10}, 4);
    Tensor y = add(mul(a, a), mul(a, 3.f));
    // mul(a, a) saves a twice (as 'a' and as 'b'); the scalar mul saves nothing
    CHECK(current_tape().live().stored_bytes == 40);
    CHECK(current_tape().live().dense_bytes == 40);   // the dense-equivalent is deduplicated the same way
    y.backward(Tensor::ones({10}));
    CHECK(current_tape().live().stored_bytes == 0);
}

TEST_CASE("autograd: modifying a saved tensor in place is an error naming the op") {
    Tensor a = randn_leaf({4}, 5);
    Tensor h = mul(a, 2.f);          // non-leaf
    Tensor y = mul(h, h);            // saves h
    {
        NoGradGuard guard;
        h.mul_(3.f);                 // in-place write bumps the version
    }
    CHECK_THROWS_WITH_AS(y.backward(Tensor::ones({4})), doctest::Contains("mul: a tensor (4) saved for backward was modified in place"), Error);
}

TEST_CASE("autograd: in-place write into a leaf that requires grad is refused while grad mode is on") {
    Tensor a = randn_leaf({4}, 6);
    CHECK_THROWS_AS(a.mul_(2.f), Error);
    NoGradGuard guard;
    CHECK_NOTHROW(a.mul_(2.f));
}

TEST_CASE("autograd: implicit gradient only for one-element outputs") {
    Tensor a = randn_leaf({3}, 7);
    Tensor y = mul(a, 2.f);
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("one-element"), Error);
}

TEST_CASE("autograd: module path attribution and report") {
    Tensor a = randn_leaf({8}, 8);
    Tensor y;
    {
        NameScope outer("layer1");
        NameScope inner("0");
        y = relu(a);
    }
    auto records = current_tape().records();
    REQUIRE(records.size() == 1);
    CHECK(records[0].module_path == "layer1.0");
    CHECK(records[0].op == "relu");
    CHECK(current_tape().report().find("layer1.0  relu") != std::string::npos);
    y.backward(Tensor::ones({8}));
}

TEST_CASE("autograd: a post-accumulate-grad hook runs once per backward, after the leaf's last gradient") {
    // y = sum(w * x) + sum(w * w): two edges into w, so the hook must wait for both.
    Tensor w = Tensor::from_vector({2}, {1, 2}).requires_grad_();
    Tensor x = Tensor::from_vector({2}, {3, 5});
    std::vector<std::vector<float>> seen;
    const uint64_t id = w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
        seen.push_back(leaf.grad().to_vector());
    });
    add(sum(mul(w, x)), sum(mul(w, w))).backward();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0] == std::vector<float>{3 + 2 * 1, 5 + 2 * 2});   // x + 2w: both contributions, summed
    // A second backward: once more, with the accumulated gradient.
    sum(mul(w, x)).backward();
    REQUIRE(seen.size() == 2);
    CHECK(seen[1] == std::vector<float>{5 + 3, 9 + 5});
    // Removed: no call. An unknown id is ignored.
    w.remove_post_accumulate_grad_hook(id);
    w.remove_post_accumulate_grad_hook(id + 7);
    sum(w).backward();
    CHECK(seen.size() == 2);
    // On the root itself (a leaf): d(root)/d(root).
    w.zero_grad();
    w.register_post_accumulate_grad_hook([&](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector()); });
    w.backward(Tensor::ones({2}));
    REQUIRE(seen.size() == 3);
    CHECK(seen[2] == std::vector<float>{1, 1});
}

TEST_CASE("autograd: a later layer's hook runs before an earlier layer's gradient exists, and may drop its gradient") {
    // h = w1 * x; y = sum(w2 * h): the walk reaches w2 first. The hook drops w2's gradient as an optimizer in
    // backward does, so the two gradients are never alive together.
    Tensor w1 = Tensor::from_vector({3}, {1, 2, 3}).requires_grad_();
    Tensor w2 = Tensor::from_vector({3}, {4, 5, 6}).requires_grad_();
    Tensor x = Tensor::from_vector({3}, {7, 8, 9});
    bool w1_had_grad = true;
    std::vector<float> w2_grad;
    w2.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
        w1_had_grad = w1.grad().defined();
        w2_grad = leaf.grad().to_vector();
        leaf.zero_grad();
    });
    sum(mul(w2, mul(w1, x))).backward();
    CHECK_FALSE(w1_had_grad);
    CHECK(w2_grad == std::vector<float>{7, 16, 27});   // w1 * x
    CHECK_FALSE(w2.grad().defined());
    CHECK(w1.grad().to_vector() == std::vector<float>{28, 40, 54});   // w2 * x
    // Only on leaves that require grad.
    CHECK_THROWS_WITH_AS(mul(w1, x).register_post_accumulate_grad_hook([](const Tensor&) {}),
                         doctest::Contains("not a leaf"), Error);
    CHECK_THROWS_WITH_AS(x.register_post_accumulate_grad_hook([](const Tensor&) {}),
                         doctest::Contains("does not require grad"), Error);
}

TEST_CASE("autograd: ReLU, BatchNorm, GELU and softmax write their input's gradient over a handed-over gradient, never "
          "a shared one") {
    Generator gen(3);
    const Tensor x = Tensor::randn({4, 3, 5, 5}, gen).requires_grad_();
    const Tensor w = Tensor::randn({3}, gen).requires_grad_(), b = Tensor::randn({3}, gen).requires_grad_();
    const Tensor g = Tensor::randn({4, 3, 5, 5}, gen);
    using Make = std::function<Tensor()>;
    const std::vector<std::pair<const char*, Make>> ops = {
        {"relu", [&] { return relu(x); }},
        {"relu6", [&] { return relu6(mul(x, 4.f)); }},
        {"batch_norm", [&] { return batch_norm(x, w, b, Tensor(), Tensor(), true, 0.1f, 1e-5f); }},
        {"batch_norm_relu", [&] { return batch_norm_relu(x, w, b, Tensor(), Tensor(), true, 0.1f, 1e-5f); }},
        {"gelu", [&] { return gelu(x); }},
        {"softmax (last dim: rows)", [&] { return softmax(x, -1); }},
        {"softmax (dim 1: column blocks)", [&] { return softmax(x, 1); }},
        {"log_softmax", [&] { return log_softmax(x, 2); }},
    };
    for (const auto& [name, make] : ops) {
        INFO(name);
        check_backward_writes_over_handed_gradient(make, g);
    }
}
