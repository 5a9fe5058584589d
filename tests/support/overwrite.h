// tests/support/overwrite.h -- checks shared by the ops that may write their result over an input the caller gives
// up (add(Tensor&&, b), add_relu(Tensor&&, b); docs/ops.md "Writing over an input the caller gives up").
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

}  // namespace razor::test
