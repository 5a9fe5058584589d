// tests/nn/test_channel_subset.cpp -- the channel-subset seam (nn/channel_subset.h) module by module: Conv2d and
// Linear compute the kept rows of the dense op on an input whose other channels are zero (forward and gradients),
// BatchNorm2d is true-sparse (the kept channels' running statistics only, the batch counted), scopes nest and end,
// a plain call ignores the scope, and misuse names the module.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/sequential.h"

using namespace razor;

namespace {

// x with every channel (dim 1) outside `keep` set to zero.
Tensor zero_others(const Tensor& x, const std::vector<int64_t>& keep) {
    std::vector<float> m(static_cast<size_t>(x.size(1)), 0.f);
    for (int64_t c : keep) m[static_cast<size_t>(c)] = 1.f;
    Shape s(static_cast<size_t>(x.dim()), 1);
    s[1] = x.size(1);
    return mul(x, Tensor::from_vector(s, m));
}

void check_near(const Tensor& a, const Tensor& b, double tol = 1e-5) {
    const auto va = a.to_vector(), vb = b.to_vector();
    REQUIRE(va.size() == vb.size());
    for (size_t i = 0; i < va.size(); ++i) CHECK(std::fabs(va[i] - vb[i]) <= tol * std::max(1.f, std::fabs(vb[i])));
}

}  // namespace

TEST_CASE("channel subset: Conv2d computes the kept output rows from the input's channels, gradients scatter into "
          "the full weight; MACs counted in the scope") {
    Generator gen(3);
    nn::Sequential net;   // the conv's path is "0"
    auto conv = net.add(std::make_shared<nn::Conv2d>(6, 5, nn::Conv2dConfig{.kernel_size = 3, .padding = 1}, gen));
    const std::vector<int64_t> in = {0, 2, 5}, out = {1, 4};
    const Tensor full = Tensor::randn({2, 6, 5, 5}, gen);
    const Tensor xc = index_select(full, 1, nn::index_tensor(in));   // (2, 3, 5, 5)
    nn::ChannelSubsets subsets;
    subsets.keep("0", out);
    nn::ChannelTensor y;
    {
        nn::ChannelSubsetScope scope(subsets);
        y = net(nn::ChannelTensor{xc, in});
        CHECK(scope.cost().macs == 2 * 3 * 9 * 25);
        CHECK(scope.cost().dense_macs == 5 * 6 * 9 * 25);
    }
    CHECK(nn::ChannelSubsetScope::current() == nullptr);
    CHECK(y.channels == out);
    REQUIRE(y.x.shape() == Shape{2, 2, 5, 5});
    const Tensor reference = (*conv)(zero_others(full, in));   // dense, the scope is gone
    check_near(y.x, index_select(reference, 1, nn::index_tensor(out)));
    sum(y.x).backward();
    const Tensor g_compact = conv->weight.grad().clone(), gb_compact = conv->bias.grad().clone();
    conv->zero_grad();
    sum(index_select(reference, 1, nn::index_tensor(out))).backward();
    // dense reference gradient: rows outside `out` get none, columns outside `in` see zero inputs
    check_near(g_compact, conv->weight.grad());
    check_near(gb_compact, conv->bias.grad());
}

TEST_CASE("channel subset: BatchNorm2d is true-sparse -- kept channels' statistics only, the batch counted; eval "
          "changes nothing") {
    Generator gen(4);
    nn::BatchNorm2d bn(5);
    const std::vector<int64_t> keep = {0, 3, 4};
    const Tensor x = Tensor::randn({4, 3, 3, 3}, gen);   // channels 0, 3, 4
    const std::vector<float> mean0 = bn.running_mean.to_vector(), var0 = bn.running_var.to_vector();
    const nn::ChannelTensor y = bn(nn::ChannelTensor{x, keep});
    CHECK(y.channels == keep);
    CHECK(bn.num_batches_tracked.to_vector_i64() == std::vector<int64_t>{1});
    // reference: a 3-channel BN on the same values
    nn::BatchNorm2d three(3);
    check_near(y.x, three(x));
    const auto m = bn.running_mean.to_vector(), v = bn.running_var.to_vector();
    const auto m3 = three.running_mean.to_vector(), v3 = three.running_var.to_vector();
    for (size_t i = 0; i < keep.size(); ++i) {
        CHECK(m[static_cast<size_t>(keep[i])] == doctest::Approx(m3[i]));
        CHECK(v[static_cast<size_t>(keep[i])] == doctest::Approx(v3[i]));
    }
    for (size_t c : {size_t{1}, size_t{2}}) CHECK((m[c] == mean0[c] && v[c] == var0[c]));
    // the fused form: relu of the same values
    bn.eval();
    const auto before = bn.running_mean.to_vector();
    const nn::ChannelTensor z = bn.forward_relu(nn::ChannelTensor{x, keep});
    CHECK(bn.running_mean.to_vector() == before);
    CHECK(bn.num_batches_tracked.to_vector_i64() == std::vector<int64_t>{1});
    for (float f : z.x.to_vector()) CHECK(f >= 0.f);
}

TEST_CASE("channel subset: without a scope every subset call is the plain op, bit for bit; a plain call ignores a "
          "scope") {
    Generator gen(5);
    auto make = [&] {   // conv, BN, ReLU, max-pool
        auto seq = std::make_shared<nn::Sequential>();
        seq->add(std::make_shared<nn::Conv2d>(3, 4, nn::Conv2dConfig{.kernel_size = 3, .padding = 1}, gen));
        seq->add(std::make_shared<nn::BatchNorm2d>(4));
        seq->add(std::make_shared<nn::ReLU>());
        seq->add(std::make_shared<nn::MaxPool2d>(2));
        return seq;
    };
    const auto net_ptr = make(), twin_ptr = make();
    nn::Sequential &net = *net_ptr, &twin = *twin_ptr;
    twin.load_state_dict(net.state_dict());
    const Tensor x = Tensor::randn({2, 3, 8, 8}, gen);
    const nn::ChannelTensor y = net(nn::ChannelTensor::all(x));
    CHECK(y.channels == nn::iota_channels(4));
    CHECK(y.x.to_vector() == twin(x).to_vector());
    nn::ChannelSubsets subsets;
    subsets.keep("0", {1});
    nn::ChannelSubsetScope scope(subsets);
    CHECK(twin(x).size(1) == 4);                              // a Tensor call is dense
    CHECK(net(nn::ChannelTensor::all(x)).x.size(1) == 1);     // a subset call is not
    {
        const nn::ChannelSubsets none{};   // an inner, empty scope: dense again
        nn::ChannelSubsetScope dense(none);
        CHECK(net(nn::ChannelTensor::all(x)).x.size(1) == 4);
    }
    CHECK(nn::ChannelSubsetScope::current() == &scope);
}

TEST_CASE("channel subset: Linear reads its kept inputs and computes its kept outputs") {
    Generator gen(6);
    nn::Sequential net;
    auto fc = net.add(std::make_shared<nn::Linear>(5, 4, true, gen));
    const std::vector<int64_t> in = {1, 3}, out = {0, 2, 3};
    const Tensor full = Tensor::randn({3, 5}, gen);
    nn::ChannelSubsets subsets;
    subsets.keep("0", out);
    nn::ChannelTensor y;
    {
        nn::ChannelSubsetScope scope(subsets);
        y = net(nn::ChannelTensor{index_select(full, 1, nn::index_tensor(in)), in});
    }
    check_near(y.x, index_select((*fc)(zero_others(full, in)), 1, nn::index_tensor(out)));
    CHECK(nn::to_dense(y, 4).shape() == Shape{3, 4});
}

TEST_CASE("channel subset: misuse names the module or the path") {
    Generator gen(7);
    nn::ChannelSubsets subsets;
    CHECK_THROWS_WITH_AS(subsets.keep("a", {2, 1}), doctest::Contains("ChannelSubsets::keep(a)"), Error);
    CHECK_THROWS_WITH_AS(subsets.at("b"), doctest::Contains("'b'"), Error);
    nn::Sequential net;
    net.add(std::make_shared<nn::Conv2d>(3, 4, nn::Conv2dConfig{.kernel_size = 1}, gen));
    subsets.keep("0", {1, 7});   // past the 4 out channels
    const Tensor x = Tensor::randn({1, 3, 2, 2}, gen);
    {
        nn::ChannelSubsetScope scope(subsets);
        CHECK_THROWS_WITH_AS(net(nn::ChannelTensor::all(x)), doctest::Contains("Conv2d(0)"), Error);
    }
    CHECK_THROWS_WITH_AS(net(nn::ChannelTensor{x, {0, 1}}), doctest::Contains("Conv2d(0)"), Error);   // 3 vs 2
    nn::GELU gelu;
    CHECK_THROWS_WITH_AS(gelu(nn::ChannelTensor::all(x)), doctest::Contains("cannot run on a channel subset"), Error);
}
