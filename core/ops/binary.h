// core/ops/binary.h -- element-wise add, sub, mul, div with NumPy/PyTorch broadcasting, and scalar forms.
//
// reference: torch.add / sub / mul / div (broadcasting semantics of torch).
#pragma once

#include "core/tensor.h"

namespace razor {

Tensor add(const Tensor& a, const Tensor& b);
// a + b for an `a` the caller gives up (add(std::move(x), y)): when a.sole_owner() and a has the broadcast shape,
// the sum is written over a's values in its storage (add saves nothing). Otherwise (or in anomaly mode) add(a, b).
Tensor add(Tensor&& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor add(const Tensor& a, float s);   // a + s
Tensor mul(const Tensor& a, float s);   // a * s
Tensor sub(const Tensor& a, float s);   // a - s
Tensor div(const Tensor& a, float s);   // a / s
Tensor rsub(float s, const Tensor& a);  // s - a
Tensor rdiv(float s, const Tensor& a);  // s / a

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, float s) { return add(a, s); }
inline Tensor operator-(const Tensor& a, float s) { return sub(a, s); }
inline Tensor operator*(const Tensor& a, float s) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, float s) { return div(a, s); }
inline Tensor operator*(float s, const Tensor& a) { return mul(a, s); }
inline Tensor operator+(float s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(float s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator/(float s, const Tensor& a) { return rdiv(s, a); }

// The broadcast shape of a and b; throws naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Sums g (shape broadcast from `shape`) back down to `shape`: the gradient rule of broadcasting.
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace razor
