// tests/support/overwrite.h -- checks shared by the ops that may write their result over an input the caller gives
// up (add(Tensor&&, b), add_relu(Tensor&&, b); docs/ops.md "Writing over an input the caller gives up"), and by the
// backward nodes that write their input gradient over the gradient the walk hands them (Node::backward_consuming).
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <vector>

#include "core/core.h"

namespace razor::test {

// op(std::move(a), b) must leave a alone whenever a is not the caller's alone to give:
// - a second handle on a keeps its values, and the result has a buffer of its own;
// - b aliasing a (op(a, a)) is computed from the inputs, not from a half-written output.
// make_a returns a fresh tensor each call (with history, as in a real forward).
template <class Op>
void check_overwrite_spares_shared(const std::function<Tensor()>& make_a, const Tensor& b, Op op) {
    Tensor shared = make_a();
    const Tensor keep = shared;
    const std::vector<float> before = keep.to_vector();
    const Tensor y = op(std::move(shared), b);
    CHECK(keep.to_vector() == before);
    CHECK_FALSE(y.same_storage(keep));
    Tensor twice = make_a();
    const Tensor alias = twice;
    CHECK(op(std::move(twice), alias).to_vector() == op(make_a(), make_a()).to_vector());
}

// make() runs the op's forward afresh (its output's grad_fn is the node under test). Handed a gradient nobody else
// holds, backward_consuming returns the same values as backward(g) in the same buffer; handed one with a second
// handle on it, it leaves that alone and returns the same values in a buffer of its own.
inline void check_backward_writes_over_handed_gradient(const std::function<Tensor()>& make, const Tensor& g) {
    const std::vector<float> reference = make().grad_fn()->backward(g)[0].to_vector();
    Tensor handed = g.clone();
    const float* buffer = handed.f32();
    const std::vector<Tensor> consumed = make().grad_fn()->backward_consuming(std::move(handed));
    CHECK(consumed[0].f32() == buffer);
    CHECK(consumed[0].to_vector() == reference);
    Tensor shared = g.clone();
    const Tensor keep = shared;
    const std::vector<Tensor> spared = make().grad_fn()->backward_consuming(std::move(shared));
    CHECK_FALSE(spared[0].same_storage(keep));
    CHECK(keep.to_vector() == g.to_vector());
    CHECK(spared[0].to_vector() == reference);
}

}  // namespace razor::test
