// core/ops/binary.cpp -- element-wise add, sub, mul, div with broadcasting.
//
// reference: torch.add / sub / mul / div. docs: docs/ops.md.
//
// Broadcasting: shapes are right-aligned; a dimension of size 1 (or a missing one) repeats. The forward walks
// the output with per-input strides that are 0 along broadcast dimensions. The backward of every binary op
// produces a gradient of the output's shape and sums it back to each input's shape (sum_to).
//
// Saves:
//   add, sub  nothing (the gradients are g and +/-g).
//   mul       both inputs as SaveRole::PointwiseOperand (ga = g * b needs b, gb = g * a needs a), only those whose
//             partner requires grad.
//   div       a and b as PointwiseOperand (ga = g / b, gb = -g a / b^2).
//   scalar    mul/div by a scalar save nothing; rdiv (s / a) saves a (PointwiseOperand).
#include "core/ops/binary.h"

#include "core/anomaly.h"
#include "core/autograd.h"
#include "core/check.h"

namespace razor {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    const size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (da != db && da != 1 && db != 1)
            throw Error(fmt(op, ": shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast (dim ", i,
                            ": ", da, " vs ", db, "); hint: sizes must match or be 1, aligned from the right"));
        out[i] = da == 1 ? db : da;
    }
    return out;
}

namespace {

// Strides of `t` viewed with the broadcast shape `out` (0 along repeated dimensions).
Shape broadcast_strides(const Tensor& t, const Shape& out) {
    Shape strides(out.size(), 0);
    const size_t lead = out.size() - t.shape().size();
    for (size_t i = 0; i < t.shape().size(); ++i)
        strides[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
    return strides;
}

// out[i] = f(a[i], b[i]) over the broadcast shape. overwrite_a (a contiguous, of the broadcast shape): out is a's
// storage, each element read before it is written (add(Tensor&&, b)).
template <class F>
Tensor broadcast_apply(const Tensor& a, const Tensor& b, const char* op, F f, bool overwrite_a = false) {
    if (a.dtype() != DType::F32 || b.dtype() != DType::F32)
        throw Error(fmt(op, ": expected f32 tensors, got ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype())));
    const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
    RAZOR_CHECK(!overwrite_a || (a.shape() == shape && a.is_contiguous())) << op << ": overwriting a of the wrong shape";
    Tensor out = overwrite_a ? a.detach() : Tensor::empty(shape);
    if (overwrite_a) out.bump_version();
    float* o = out.f32();
    const float* pa = a.f32();
    const float* pb = b.f32();
    const int64_t n = out.numel();
    if (a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous()) {   // the common case
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
        for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i], pb[i]);
        return out;
    }
    if (n == 0) return out;
    const Shape sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
    const int64_t ndim = static_cast<int64_t>(shape.size());
    const int64_t inner = ndim ? shape[ndim - 1] : 1;
    const int64_t ia = ndim ? sa[ndim - 1] : 0, ib = ndim ? sb[ndim - 1] : 0;
    const int64_t outer = n / inner;
#pragma omp parallel for schedule(static) if (n > (1 << 15))
    for (int64_t r = 0; r < outer; ++r) {
        int64_t rem = r, oa = 0, ob = 0;
        for (int64_t d = ndim - 2; d >= 0; --d) {
            const int64_t idx = rem % shape[d];
            rem /= shape[d];
            oa += idx * sa[d];
            ob += idx * sb[d];
        }
        float* orow = o + r * inner;
        for (int64_t i = 0; i < inner; ++i) orow[i] = f(pa[oa + i * ia], pb[ob + i * ib]);
    }
    return out;
}

template <class F>
Tensor unary_apply(const Tensor& a, const char* op, F f) {
    if (a.dtype() != DType::F32) throw Error(fmt(op, ": expected an f32 tensor, got ", dtype_name(a.dtype())));
    Tensor x = a.contiguous();
    Tensor out = Tensor::empty(x.shape());
    const float* p = x.f32();
    float* o = out.f32();
    const int64_t n = out.numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 15))
    for (int64_t i = 0; i < n; ++i) o[i] = f(p[i]);
    return out;
}

}  // namespace

Tensor sum_to(const Tensor& g, const Shape& shape) {
    if (g.shape() == shape) return g;
    Tensor gc = g.contiguous();
    Tensor out = Tensor::zeros(shape);
    // View `out` with g's shape and stride 0 along the summed dimensions, then accumulate.
    const Shape& gs = gc.shape();
    const int64_t ndim = static_cast<int64_t>(gs.size());
    Shape os(ndim, 0);
    const Shape ostr = contiguous_strides(shape);
    const size_t lead = gs.size() - shape.size();
    for (size_t i = 0; i < shape.size(); ++i) os[lead + i] = shape[i] == 1 ? 0 : ostr[i];
    const float* p = gc.f32();
    float* o = out.f32();
    const int64_t n = gc.numel();
    const int64_t inner = ndim ? gs[ndim - 1] : 1;
    const int64_t oi = ndim ? os[ndim - 1] : 0;
    for (int64_t r = 0; r < (inner ? n / inner : 0); ++r) {
        int64_t rem = r, off = 0;
        for (int64_t d = ndim - 2; d >= 0; --d) {
            off += (rem % gs[d]) * os[d];
            rem /= gs[d];
        }
        const float* row = p + r * inner;
        if (oi == 0) {
            double acc = 0;   // a whole row folds into one element: sum in double (long rows, e.g. bias grads)
            for (int64_t i = 0; i < inner; ++i) acc += row[i];
            o[off] += static_cast<float>(acc);
        } else {
            for (int64_t i = 0; i < inner; ++i) o[off + i * oi] += row[i];
        }
    }
    return out;
}

// ---------------------------------------------------------------- add / sub

namespace {
// d(a + alpha b): ga = g, gb = alpha g (each summed back to its input's shape).
struct AddBackward final : Node {
    float alpha = 1.f;
    std::vector<Tensor> backward(const Tensor& g) override {
        Tensor ga, gb;
        if (needs_grad(0)) ga = sum_to(g, edges()[0].shape);
        if (needs_grad(1)) gb = sum_to(alpha == 1.f ? g : mul(g, alpha), edges()[1].shape);
        return {ga, gb};
    }
};
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
    Tensor out = broadcast_apply(a, b, "add", [](float x, float y) { return x + y; });
    record<AddBackward>("add", {a, b}, out);
    return out;
}

// Add needs neither input in backward, so an `a` the caller gives up can hold the sum (the transformer's residual
// stream h = x + attn(ln(x))). Only where a already has the result's shape; b may broadcast onto it.
Tensor add(Tensor&& a, const Tensor& b) {
    const bool overwrite = may_write_over(a) && b.defined() && !a.same_storage(b) &&
                           broadcast_shapes(a.shape(), b.shape(), "add") == a.shape();
    Tensor out = broadcast_apply(a, b, "add", [](float x, float y) { return x + y; }, overwrite);
    record<AddBackward>("add", {a, b}, out);
    return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
    Tensor out = broadcast_apply(a, b, "sub", [](float x, float y) { return x - y; });
    if (auto node = record<AddBackward>("sub", {a, b}, out)) node->alpha = -1.f;
    return out;
}

// ---------------------------------------------------------------- mul

namespace {
// d(a b): ga = g b, gb = g a.
struct MulBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override {
        Tensor ga, gb;
        if (needs_grad(0)) ga = sum_to(mul(g, ctx.unpack("b")), edges()[0].shape);
        if (needs_grad(1)) gb = sum_to(mul(g, ctx.unpack("a")), edges()[1].shape);
        return {ga, gb};
    }
};
}  // namespace

Tensor mul(const Tensor& a, const Tensor& b) {
    Tensor out = broadcast_apply(a, b, "mul", [](float x, float y) { return x * y; });
    if (auto node = record<MulBackward>("mul", {a, b}, out)) {
        if (node->needs_grad(1)) node->ctx.save("a", a, SaveRole::PointwiseOperand);
        if (node->needs_grad(0)) node->ctx.save("b", b, SaveRole::PointwiseOperand);
    }
    return out;
}

// ---------------------------------------------------------------- div

namespace {
// d(a / b): ga = g / b, gb = -g a / b^2.
struct DivBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override {
        Tensor b = ctx.unpack("b");
        Tensor ga, gb;
        if (needs_grad(0)) ga = sum_to(div(g, b), edges()[0].shape);
        if (needs_grad(1)) {
            Tensor a = ctx.unpack("a");
            Tensor t = broadcast_apply(g, a, "div backward", [](float x, float y) { return -x * y; });
            gb = sum_to(broadcast_apply(t, b, "div backward", [](float x, float y) { return x / (y * y); }),
                        edges()[1].shape);
        }
        return {ga, gb};
    }
};
}  // namespace

Tensor div(const Tensor& a, const Tensor& b) {
    Tensor out = broadcast_apply(a, b, "div", [](float x, float y) { return x / y; });
    if (auto node = record<DivBackward>("div", {a, b}, out)) {
        if (node->needs_grad(1)) node->ctx.save("a", a, SaveRole::PointwiseOperand);
        node->ctx.save("b", b, SaveRole::PointwiseOperand);
    }
    return out;
}

// ---------------------------------------------------------------- scalar forms

namespace {
// d(a * s + c) = g * s. Saves nothing.
struct ScaleBackward final : Node {
    float scale = 1.f;
    std::vector<Tensor> backward(const Tensor& g) override {
        return {scale == 1.f ? g : unary_apply(g, "scale backward", [s = scale](float x) { return x * s; })};
    }
};
// d(s / a) = -g s / a^2. Saves a.
struct RdivBackward final : Node {
    float s = 1.f;
    std::vector<Tensor> backward(const Tensor& g) override {
        Tensor a = ctx.unpack("a").contiguous();
        Tensor out = Tensor::empty(a.shape());
        Tensor gc = g.contiguous();
        const float *pa = a.f32(), *pg = gc.f32();
        float* o = out.f32();
        const int64_t n = a.numel();
        for (int64_t i = 0; i < n; ++i) o[i] = -pg[i] * s / (pa[i] * pa[i]);
        return {out};
    }
};

Tensor affine_scalar(const Tensor& a, float scale, float shift, const char* op) {
    Tensor out = unary_apply(a, op, [scale, shift](float x) { return x * scale + shift; });
    if (auto node = record<ScaleBackward>(op, {a}, out)) node->scale = scale;
    return out;
}
}  // namespace

Tensor add(const Tensor& a, float s) { return affine_scalar(a, 1.f, s, "add_scalar"); }
Tensor sub(const Tensor& a, float s) { return affine_scalar(a, 1.f, -s, "sub_scalar"); }
Tensor mul(const Tensor& a, float s) { return affine_scalar(a, s, 0.f, "mul_scalar"); }
Tensor div(const Tensor& a, float s) { return affine_scalar(a, 1.f / s, 0.f, "div_scalar"); }
Tensor rsub(float s, const Tensor& a) { return affine_scalar(a, -1.f, s, "rsub_scalar"); }

Tensor rdiv(float s, const Tensor& a) {
    Tensor out = unary_apply(a, "rdiv_scalar", [s](float x) { return s / x; });
    if (auto node = record<RdivBackward>("rdiv_scalar", {a}, out)) {
        node->s = s;
        node->ctx.save("a", a, SaveRole::PointwiseOperand);
    }
    return out;
}

}  // namespace razor
