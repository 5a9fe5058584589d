// tests/core/test_accounting.cpp -- the tape's byte accounting equals a hand count for conv -> bn -> relu -> pool ->
// linear, and the tracking allocator sees the saved state go away after backward.
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("accounting: conv -> bn -> relu -> maxpool -> linear equals the hand count") {
    Generator gen(3);
    Tensor x = Tensor::randn({2, 3, 8, 8}, gen);            // input: no grad
    Tensor w1 = randn_leaf({4, 3, 3, 3}, 1, 0.3f);
    Tensor gamma = Tensor::ones({4}).requires_grad_(), beta = Tensor::zeros({4}).requires_grad_();
    Tensor rm = Tensor::zeros({4}), rv = Tensor::ones({4});
    Tensor w2 = randn_leaf({10, 64}, 2, 0.1f), b2 = randn_leaf({10}, 3, 0.1f);

    const int64_t live_before = memory_stats().live_bytes;
    Conv2dOptions conv_opt;
    conv_opt.padding = {1, 1};
    Tensor h = conv2d(x, w1, Tensor(), conv_opt);           // (2, 4, 8, 8)
    h = batch_norm(h, gamma, beta, rm, rv, /*training=*/true);
    h = relu(h);
    h = max_pool2d(h, Pool2dOptions{});                       // (2, 4, 4, 4)
    Tensor logits = linear(flatten(h, 1), w2, b2);            // (2, 10)

    // Hand count, bytes physically held by the tape:
    //   conv2d   x (2*3*8*8 f32)                         1536   (W: parameter, by reference, 0; x needs no grad -> no W save)
    //   bn       x (2*4*8*8 f32) + mean (4) + rstd (4)   2048 + 16 + 16
    //   relu     1-bit mask over 512 elements             64
    //   maxpool  argmax, 1 byte per output (128)          128
    //   flatten  nothing (a view)                           0
    //   linear   x = the pool output (2*64 f32)            512   (W by reference)
    const TapeTotals live = current_tape().live();
    CHECK(live.stored_bytes == 1536 + 2048 + 32 + 64 + 128 + 512);
    // Dense-equivalent: what the dense tape holds for the same items -- here exactly what is stored (the relu mask is
    // bits in both).
    CHECK(live.dense_bytes == live.stored_bytes);
    CHECK(live.items == 9);   // the 7 above + bn weight and linear W held by reference (0 bytes)

    logits.backward(Tensor::ones(logits.shape()));
    CHECK(current_tape().live().items == 0);
    CHECK(current_tape().live().stored_bytes == 0);
    // What is left allocated: the graph's outputs we still hold and the leaves' gradients; no saved state.
    h = Tensor();
    logits = Tensor();
    const int64_t grads = (w1.numel() + 4 + 4 + w2.numel() + b2.numel()) * 4;
    CHECK(memory_stats().live_bytes - live_before == grads);
}
