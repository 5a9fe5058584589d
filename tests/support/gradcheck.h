// tests/support/gradcheck.h -- finite-difference gradient checks and PyTorch fixture helpers for op tests.
//
// gradcheck(f, inputs): for every f32 input that requires grad, compares the analytic vector-Jacobian product
// (backward of f's output with a fixed random cotangent w) with central differences of L(x) = <w, f(x)>,
// accumulated in double. By default every element of every input is probed (a full Jacobian-vector check);
// set max_probes for large inputs (random probe points, seeded).
//
// Precision: razor's kernels are float32, so the differences are float32 forward passes; eps and tolerances are
// per op (defaults suit smooth ops on O(1) inputs). Keep inputs away from non-smooth points (relu at 0, max ties):
// see away_from(...).
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/core.h"

namespace razor::test {

struct GradcheckOptions {
    double eps = 1e-2;          // finite-difference step
    double rtol = 2e-2;
    double atol = 2e-3;
    int64_t max_probes = -1;    // per input; -1 probes every element
    uint64_t seed = 1234;
};

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Returns true when all probes pass; each failure is also reported through doctest (CHECK) with its location.
bool gradcheck(const std::string& op, const OpFn& f, std::vector<Tensor> inputs, GradcheckOptions options = {});

// A random f32 tensor N(0, 1) (seeded) that requires grad.
Tensor randn_leaf(const Shape& shape, uint64_t seed, float scale = 1.f);
// Moves values closer than `margin` to any of `points` away from them (for non-smooth ops).
Tensor away_from(Tensor t, std::vector<float> points, float margin);

// ---- PyTorch fixtures (tests/fixtures/<name>.safetensors, written by scripts/fixtures/make_fixtures.py) ----
SafeTensors load_fixture(const std::string& name);
// Element-wise |a - b| <= atol + rtol |b|, with the worst element in the failure message.
void check_close(const Tensor& got, const Tensor& expected, double rtol, double atol, const std::string& what);
// A leaf copy of a fixture tensor, with requires_grad set.
Tensor leaf(const Tensor& t);

}  // namespace razor::test
