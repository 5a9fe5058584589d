// core/ops/index_select.cpp -- index_select (gather along a dim) and index_add (scatter-add along a dim).
//
// reference: torch.index_select, torch.index_add. docs: docs/ops.md.
//
// Layout: a tensor is viewed as (outer, size(dim), inner) with outer = prod of the sizes before `dim` and inner =
// prod of those after; each index picks one (inner)-long row per outer position. The two ops are adjoint:
// index_select's backward is an index_add into zeros, index_add's backward for src is an index_select.
//
// Saves:
//   index_select  the index (SaveRole::Indices, exact; K int64), only when x needs a gradient. Not x.
//   index_add     the index (SaveRole::Indices), only when src needs a gradient (gbase = g needs nothing).
#include "core/ops/index_select.h"

#include <algorithm>

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

struct Dims3 {
    int64_t outer = 1, size = 1, inner = 1;
};
Dims3 split_at(const Shape& shape, int64_t dim) {
    Dims3 s;
    for (int64_t d = 0; d < dim; ++d) s.outer *= shape[d];
    s.size = shape[dim];
    for (size_t d = dim + 1; d < shape.size(); ++d) s.inner *= shape[d];
    return s;
}

// Validates index (i64, 1-D, values in [0, size)) and returns it packed.
Tensor checked_index(const Tensor& index, const Tensor& x, int64_t dim, const char* op) {
    if (!index.defined()) throw Error(fmt(op, ": index is undefined; hint: pass an i64 1-D tensor"));
    if (index.dtype() != DType::I64)
        throw Error(fmt(op, ": expected index of dtype i64, got ", dtype_name(index.dtype()),
                        "; hint: build it with Tensor::from_vector_i64"));
    if (index.dim() != 1)
        throw Error(fmt(op, ": expected a 1-D index, got shape ", shape_str(index.shape()),
                        "; hint: flatten it first"));
    Tensor idx = index.contiguous();
    const int64_t* p = idx.i64();
    const int64_t size = x.shape()[dim];
    for (int64_t i = 0, n = idx.numel(); i < n; ++i)
        if (p[i] < 0 || p[i] >= size)
            throw Error(fmt(op, ": index value ", p[i], " (at position ", i, ") is out of range for dim ", dim,
                            " of size ", size, " (tensor ", shape_str(x.shape()), "); hint: valid values are 0..",
                            size - 1));
    return idx;
}

// out[o, i, :] = x[o, idx[i], :]
//   x: (outer, size, inner); idx: (K); out: (outer, K, inner)
void index_select_forward(const float* x, const int64_t* idx, float* out, Dims3 s, int64_t K) {
    const int64_t rows = s.outer * K;
#pragma omp parallel for schedule(static) if (rows * s.inner > (1 << 15))
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t o = r / K, i = r % K;
        std::copy_n(x + (o * s.size + idx[i]) * s.inner, s.inner, out + r * s.inner);
    }
}

// out[o, idx[i], :] += src[o, i, :]    (duplicates in idx add up)
//   out: (outer, size, inner); idx: (K); src: (outer, K, inner)
// Race-free parallelism: threads split (outer x inner-blocks); each owns disjoint output columns and walks all i.
void index_add_forward(float* out, const int64_t* idx, const float* src, Dims3 s, int64_t K) {
    constexpr int64_t kBlock = 512;
    const int64_t blocks = (s.inner + kBlock - 1) / kBlock;
#pragma omp parallel for collapse(2) schedule(static) if (s.outer * K * s.inner > (1 << 15))
    for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t b = 0; b < blocks; ++b) {
            const int64_t j0 = b * kBlock, j1 = std::min(s.inner, j0 + kBlock);
            for (int64_t i = 0; i < K; ++i) {
                float* orow = out + (o * s.size + idx[i]) * s.inner;
                const float* srow = src + (o * K + i) * s.inner;
#pragma omp simd
                for (int64_t j = j0; j < j1; ++j) orow[j] += srow[j];
            }
        }
}

void check_f32(const Tensor& t, const char* op, const char* what) {
    if (!t.defined()) throw Error(fmt(op, ": ", what, " is undefined; hint: was it initialised?"));
    if (t.dtype() != DType::F32)
        throw Error(fmt(op, ": expected ", what, " of dtype f32, got ", dtype_name(t.dtype()),
                        "; hint: only f32 tensors are gathered/scattered"));
}

// gx = index_add(zeros(x.shape), dim, index, g)
//   g: (outer, K, inner) -> gx: (outer, size, inner); exact (each x row gets the sum of the g rows that read it)
struct IndexSelectBackward final : Node {
    int64_t dim = 0;
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const Tensor g = g_in.contiguous();
        const Tensor idx = ctx.unpack("index");
        Tensor gx = Tensor::zeros(edges()[0].shape);
        index_add_forward(gx.f32(), idx.i64(), g.f32(), split_at(gx.shape(), dim), idx.numel());
        return {gx};
    }
};

// out = base + scatter(src):  gbase = g                                  (base shape; exact)
//                             gsrc  = index_select(g, dim, index)       (outer, size, inner) -> (outer, K, inner); exact
struct IndexAddBackward final : Node {
    int64_t dim = 0;
    std::vector<Tensor> backward(const Tensor& g_in) override {
        Tensor gbase, gsrc;
        if (needs_grad(0)) gbase = g_in;
        if (needs_grad(1)) {
            const Tensor g = g_in.contiguous();
            const Tensor idx = ctx.unpack("index");
            gsrc = Tensor::empty(edges()[1].shape);
            index_select_forward(g.f32(), idx.i64(), gsrc.f32(), split_at(g.shape(), dim), idx.numel());
        }
        return {gbase, gsrc};
    }
};

}  // namespace

Tensor index_select(const Tensor& x_in, int64_t dim, const Tensor& index) {
    check_f32(x_in, "index_select", "x");
    const int64_t d = wrap_dim(dim, x_in.dim(), "index_select");
    const Tensor idx = checked_index(index, x_in, d, "index_select");
    const Tensor x = x_in.detach().contiguous();   // detach: the node below links to x_in, no extra copy node
    Shape shape = x.shape();
    shape[d] = idx.numel();
    Tensor out = Tensor::empty(shape);
    index_select_forward(x.f32(), idx.i64(), out.f32(), split_at(x.shape(), d), idx.numel());
    if (auto node = record<IndexSelectBackward>("index_select", {x_in}, out)) {
        node->dim = d;
        node->ctx.save("index", idx, SaveRole::Indices);
    }
    return out;
}

Tensor index_add(const Tensor& base_in, int64_t dim, const Tensor& index, const Tensor& src_in) {
    check_f32(base_in, "index_add", "base");
    check_f32(src_in, "index_add", "src");
    const int64_t d = wrap_dim(dim, base_in.dim(), "index_add");
    const Tensor idx = checked_index(index, base_in, d, "index_add");
    Shape expected = base_in.shape();
    expected[d] = idx.numel();
    if (src_in.shape() != expected)
        throw Error(fmt("index_add: expected src ", shape_str(expected), " (base ", shape_str(base_in.shape()),
                        " with size(", d, ") = index length ", idx.numel(), "), got ", shape_str(src_in.shape()),
                        "; hint: src needs one slice per index along dim ", d));
    Tensor out = base_in.clone();
    const Tensor src = src_in.detach().contiguous();
    index_add_forward(out.f32(), idx.i64(), src.f32(), split_at(out.shape(), d), idx.numel());
    if (auto node = record<IndexAddBackward>("index_add", {base_in, src_in}, out)) {
        node->dim = d;
        if (node->needs_grad(1)) node->ctx.save("index", idx, SaveRole::Indices);
    }
    return out;
}

}  // namespace razor
