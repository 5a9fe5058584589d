// core/ops/view.cpp -- reshape, view, flatten, transpose, permute, slice (see view.h).
//
// reference: torch.reshape, Tensor.view, torch.flatten, torch.transpose, torch.permute, python slicing x[a:b:s].
// docs: docs/ops.md.
//
// Each op builds the output as a strided alias of x (Tensor::as_strided: same Storage, hence the same version
// counter, so an in-place write through any alias invalidates every saved alias) and records a node whose
// backward maps the gradient back to x's shape. reshape/flatten fall back to a packed copy only when x's strides
// cannot express the new shape; the node is the same either way.
//
// Saves: nothing. Backward needs only shapes and dims, which the nodes keep as plain members (0 tape bytes).
#include "core/ops/view.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

// Resolves one -1 in `shape` against numel; throws naming `op`, x's shape and the requested sizes.
Shape infer_shape(const Tensor& x, Shape shape, const char* op) {
    const int64_t numel = x.numel();
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == -1) {
            if (infer >= 0)
                throw Error(fmt(op, ": only one dimension can be -1, got shape ", shape_str(shape),
                                "; hint: spell out all sizes but one"));
            infer = static_cast<int64_t>(i);
        } else if (shape[i] < 0) {
            throw Error(fmt(op, ": invalid size ", shape[i], " at dim ", i, " in shape ", shape_str(shape),
                            "; hint: sizes must be >= 0, or -1 for one inferred dimension"));
        } else {
            known *= shape[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            throw Error(fmt(op, ": shape ", shape_str(shape), " is invalid for x ", shape_str(x.shape()), " of ",
                            numel, " elements (the other sizes multiply to ", known,
                            "); hint: the known sizes must divide the element count"));
        shape[infer] = numel / known;
    } else if (known != numel) {
        throw Error(fmt(op, ": shape ", shape_str(shape), " (", known, " elements) is invalid for x ",
                        shape_str(x.shape()), " of ", numel, " elements; hint: the sizes must multiply to ", numel,
                        ", or use -1 for one of them"));
    }
    return shape;
}

// Strides that make (storage, offset) of x read as `shape` in row-major order, or nullopt when x's layout cannot
// (then a copy is needed). x's dims are grouped into maximal runs that are contiguous with each other (stride of
// dim d-1 == size(d) * stride(d)); each new dim must fall entirely inside one run, where strides are again
// "product of the sizes to the right, times the run's innermost stride".
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& shape) {
    if (old_shape.empty() || shape_numel(old_shape) == 0) return contiguous_strides(shape);
    Shape strides(shape.size(), 1);
    int64_t nd = static_cast<int64_t>(shape.size()) - 1;   // next new dim to assign, right to left
    int64_t run_stride = old_strides.back();                 // stride of the innermost dim of the current run
    int64_t run_numel = 1, new_numel = 1;
    for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
        run_numel *= old_shape[d];
        const bool run_ends = d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != run_numel * run_stride);
        if (!run_ends) continue;
        // Assign new dims (right to left) until they cover this run's elements; size-1 dims ride along.
        while (nd >= 0 && (new_numel < run_numel || shape[nd] == 1)) {
            strides[nd] = new_numel * run_stride;
            new_numel *= shape[nd];
            --nd;
        }
        if (new_numel != run_numel) return std::nullopt;   // a new dim straddles two runs
        if (d > 0) {
            run_stride = old_strides[d - 1];
            run_numel = 1;
            new_numel = 1;
        }
    }
    if (nd != -1) return std::nullopt;
    return strides;
}

// gx = reshape(g, x.shape)        g: out shape -> x shape; exact (a reshape moves no values)
struct ReshapeBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override { return {reshape(g, edges()[0].shape)}; }
};

Tensor reshape_impl(const Tensor& x, Shape shape_in, const char* op, bool allow_copy) {
    const Shape shape = infer_shape(x, std::move(shape_in), op);
    Tensor out;
    if (auto strides = view_strides(x.shape(), x.strides(), shape)) {
        out = x.as_strided(shape, *strides, x.offset());
    } else {
        if (!allow_copy)
            throw Error(fmt(op, ": cannot view x ", shape_str(x.shape()), " with strides ", shape_str(x.strides()),
                            " as ", shape_str(shape), " without a copy (a new dim spans non-adjacent memory); "
                            "hint: use reshape(), or call contiguous() first"));
        Tensor packed = x.clone();   // no history: the node below links straight to x
        out = packed.as_strided(shape, contiguous_strides(shape), 0);
    }
    record<ReshapeBackward>(op, {x}, out);
    return out;
}

// Writes packed src (logical row-major order) into the strided destination (dst, shape, strides). F32.
//   src: shape (packed); dst: shape with `strides` from `dst` (element 0 of the view).
void slice_backward(const Tensor& src, float* dst, const Shape& shape, const Shape& strides) {
    const int64_t n = shape_numel(shape);
    if (n == 0) return;
    const float* s = src.f32();
    const int64_t ndim = static_cast<int64_t>(shape.size());
    if (ndim == 0) {
        dst[0] = s[0];
        return;
    }
    const int64_t inner = shape[ndim - 1], inner_stride = strides[ndim - 1];
    const int64_t outer = n / inner;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t o = 0; o < outer; ++o) {
        int64_t rem = o, off = 0;
        for (int64_t d = ndim - 2; d >= 0; --d) {
            off += (rem % shape[d]) * strides[d];
            rem /= shape[d];
        }
        const float* row = s + o * inner;
        float* out = dst + off;
        if (inner_stride == 1)
            std::memcpy(out, row, static_cast<size_t>(inner) * sizeof(float));
        else
            for (int64_t i = 0; i < inner; ++i) out[i * inner_stride] = row[i];
    }
}

}  // namespace

// ---------------------------------------------------------------- reshape, view, flatten

Tensor reshape(const Tensor& x, Shape shape) { return reshape_impl(x, std::move(shape), "reshape", true); }
Tensor view(const Tensor& x, Shape shape) { return reshape_impl(x, std::move(shape), "view", false); }

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
    const int64_t ndim = x.dim();
    if (ndim == 0) {   // as torch: a 0-d tensor flattens to (1); dims 0 / -1 are accepted
        wrap_dim(start_dim, 1, "flatten");
        wrap_dim(end_dim, 1, "flatten");
        return reshape_impl(x, {1}, "flatten", true);
    }
    const int64_t s = wrap_dim(start_dim, ndim, "flatten"), e = wrap_dim(end_dim, ndim, "flatten");
    if (s > e)
        throw Error(fmt("flatten: start_dim ", start_dim, " comes after end_dim ", end_dim, " for x ",
                        shape_str(x.shape()), "; hint: start_dim <= end_dim after wrapping negative dims"));
    Shape shape(x.shape().begin(), x.shape().begin() + s);
    int64_t merged = 1;
    for (int64_t d = s; d <= e; ++d) merged *= x.shape()[d];
    shape.push_back(merged);
    shape.insert(shape.end(), x.shape().begin() + e + 1, x.shape().end());
    return reshape_impl(x, std::move(shape), "flatten", true);
}

// ---------------------------------------------------------------- transpose, permute

namespace {
// gx = transpose(g, d0, d1)      g: x.shape with d0, d1 swapped -> x.shape; exact (a strided view, no copy)
struct TransposeBackward final : Node {
    int64_t d0 = 0, d1 = 0;
    std::vector<Tensor> backward(const Tensor& g) override { return {transpose(g, d0, d1)}; }
};
// gx = permute(g, inverse)       g: (x.shape[dims[0]], ...) -> x.shape; inverse[dims[i]] = i; exact (a view)
struct PermuteBackward final : Node {
    std::vector<int64_t> inverse;
    std::vector<Tensor> backward(const Tensor& g) override { return {permute(g, inverse)}; }
};
}  // namespace

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
    const int64_t ndim = x.dim();
    if (ndim == 0) {   // as torch: a 0-d tensor transposes to itself with dims 0 / -1
        wrap_dim(dim0, 1, "transpose");
        wrap_dim(dim1, 1, "transpose");
        Tensor out = x.as_strided(x.shape(), x.strides(), x.offset());
        if (auto node = record<TransposeBackward>("transpose", {x}, out)) node->d0 = node->d1 = 0;
        return out;
    }
    const int64_t a = wrap_dim(dim0, ndim, "transpose"), b = wrap_dim(dim1, ndim, "transpose");
    Shape shape = x.shape(), strides = x.strides();
    std::swap(shape[a], shape[b]);
    std::swap(strides[a], strides[b]);
    Tensor out = x.as_strided(shape, strides, x.offset());
    if (auto node = record<TransposeBackward>("transpose", {x}, out)) node->d0 = a, node->d1 = b;
    return out;
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
    const int64_t ndim = x.dim();
    if (static_cast<int64_t>(dims.size()) != ndim)
        throw Error(fmt("permute: expected ", ndim, " dims for x ", shape_str(x.shape()), ", got ", dims.size(),
                        " dims ", shape_str(dims), "; hint: list every dim of x exactly once"));
    Shape shape(ndim), strides(ndim);
    std::vector<int64_t> inverse(ndim, -1);
    for (int64_t i = 0; i < ndim; ++i) {
        const int64_t d = wrap_dim(dims[i], ndim, "permute");
        if (inverse[d] >= 0)
            throw Error(fmt("permute: dim ", d, " appears twice in dims ", shape_str(dims), " for x ",
                            shape_str(x.shape()), "; hint: dims must be a permutation of 0..", ndim - 1));
        inverse[d] = i;
        shape[i] = x.shape()[d];
        strides[i] = x.strides()[d];
    }
    Tensor out = x.as_strided(shape, strides, x.offset());
    if (auto node = record<PermuteBackward>("permute", {x}, out)) node->inverse = std::move(inverse);
    return out;
}

// ---------------------------------------------------------------- slice

namespace {
// gx = zeros(x.shape); gx[..., start:end:step, ...] = g     g: x.shape with size(dim) = len -> x.shape
// Exact: every element of x outside the slice has zero gradient.
struct SliceBackward final : Node {
    int64_t dim = 0, start = 0, step = 1;
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const Tensor g = g_in.contiguous();
        Tensor gx = Tensor::zeros(edges()[0].shape);
        Shape strides = gx.strides();
        const int64_t offset = start * strides[dim];
        strides[dim] *= step;
        slice_backward(g, gx.f32() + offset, g.shape(), strides);
        return {gx};
    }
};
}  // namespace

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
    const int64_t d = wrap_dim(dim, x.dim(), "slice");
    if (step <= 0)
        throw Error(fmt("slice: step must be positive, got ", step, " (dim ", dim, " of x ", shape_str(x.shape()),
                        "); hint: reverse with a flip op, not a negative step"));
    const int64_t size = x.shape()[d];
    auto clamp_index = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
    const int64_t b = clamp_index(start), e = clamp_index(end);
    const int64_t len = e > b ? (e - b + step - 1) / step : 0;
    Shape shape = x.shape(), strides = x.strides();
    shape[d] = len;
    strides[d] *= step;
    Tensor out = x.as_strided(shape, strides, x.offset() + (len > 0 ? b * x.strides()[d] : 0));
    if (auto node = record<SliceBackward>("slice", {x}, out)) node->dim = d, node->start = b, node->step = step;
    return out;
}

}  // namespace razor
