// tests/core/ops/test_relu.cpp -- relu: gradcheck, 1-bit save, PyTorch parity.
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("relu: gradcheck away from 0") {
    Tensor x = away_from(randn_leaf({4, 7}, 5), {0.f}, 0.05f);
    gradcheck("relu", [](const std::vector<Tensor>& in) { return relu(in[0]); }, {x});
}

TEST_CASE("relu: saves a 1-bit mask, not the tensor") {
    Tensor x = randn_leaf({8, 64}, 6);   // 512 elements -> 512 bits = 64 bytes
    Tensor y = relu(x);
    TapeTotals live = TapeAccounting::instance().live();
    CHECK(live.stored_bytes == 64);
    CHECK(live.dense_bytes == 512 * 4);
    y.backward(Tensor::ones(y.shape()));
    CHECK(TapeAccounting::instance().live().stored_bytes == 0);
}

TEST_CASE("relu: matches PyTorch") {
    SafeTensors fx = load_fixture("relu");
    Tensor x = leaf(fx.tensors.at("x"));
    Tensor y = relu(x);
    check_close(y, fx.tensors.at("out"), 0, 0, "relu forward");
    y.backward(fx.tensors.at("grad_out"));
    check_close(x.grad(), fx.tensors.at("grad_x"), 0, 0, "relu grad");
}
