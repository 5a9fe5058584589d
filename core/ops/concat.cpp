// core/ops/concat.cpp -- out = cat(xs, dim).
//
// reference: torch.cat. docs: docs/ops.md.
//
// Layout: each input x_k (contiguous, row-major) is viewed as (outer, size_k * inner), with outer = prod of the
// sizes before `dim` and inner = prod of the sizes after it; the output (outer, total * inner) is these rows side
// by side, so the forward is outer x K memcpys and the backward the same copies in reverse.
//
// Saves: nothing. Backward needs only each input's size along `dim` (node members); no tensor is kept.
#include "core/ops/concat.h"

#include <cstring>

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

// dst[r, 0:width] = src[r, 0:width] for every row r; elements of `esize` bytes, leading dims in elements.
//   src: (rows, src_ld); dst: (rows, dst_ld); width <= both
void copy_rows(const char* src, int64_t src_ld, char* dst, int64_t dst_ld, int64_t rows, int64_t width,
               size_t esize) {
    if (rows == 0 || width == 0) return;
#pragma omp parallel for schedule(static) if (rows * width > (1 << 16) && rows > 1)
    for (int64_t r = 0; r < rows; ++r)
        std::memcpy(dst + r * dst_ld * esize, src + r * src_ld * esize, static_cast<size_t>(width) * esize);
}

// g: out shape (outer, total, inner) -> gx_k: (outer, size_k, inner), the k-th block along dim. Exact (a copy).
struct ConcatBackward final : Node {
    int64_t dim = 0;
    std::vector<int64_t> sizes;   // size(dim) of each input
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const Tensor g = g_in.contiguous();
        const Shape& gs = g.shape();
        int64_t outer = 1, inner = 1;
        for (int64_t d = 0; d < dim; ++d) outer *= gs[d];
        for (size_t d = dim + 1; d < gs.size(); ++d) inner *= gs[d];
        const int64_t total = gs[dim];
        std::vector<Tensor> grads(sizes.size());
        int64_t at = 0;
        for (size_t k = 0; k < sizes.size(); ++k) {
            if (needs_grad(k)) {
                grads[k] = Tensor::empty(edges()[k].shape);
                copy_rows(reinterpret_cast<const char*>(g.f32() + at * inner), total * inner,
                          reinterpret_cast<char*>(grads[k].f32()), sizes[k] * inner, outer, sizes[k] * inner,
                          sizeof(float));
            }
            at += sizes[k];
        }
        return grads;
    }
};

}  // namespace

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
    if (xs.empty())
        throw Error("concat: expected at least one tensor, got an empty list; hint: pass the tensors to join");
    for (size_t k = 0; k < xs.size(); ++k)
        if (!xs[k].defined())
            throw Error(fmt("concat: input ", k, " is undefined; hint: was it initialised?"));
    const Tensor& first = xs[0];
    const int64_t ndim = first.dim();
    if (ndim == 0)
        throw Error("concat: input 0 is 0-d (a scalar) and cannot be concatenated; hint: reshape it to (1) first");
    const int64_t d = wrap_dim(dim, ndim, "concat");
    Shape shape = first.shape();
    shape[d] = 0;
    std::vector<int64_t> sizes(xs.size());
    for (size_t k = 0; k < xs.size(); ++k) {
        const Tensor& x = xs[k];
        if (x.dtype() != first.dtype())
            throw Error(fmt("concat: input ", k, " has dtype ", dtype_name(x.dtype()), " but input 0 has ",
                            dtype_name(first.dtype()), "; hint: all inputs must share a dtype"));
        bool match = x.dim() == ndim;
        for (int64_t i = 0; match && i < ndim; ++i) match = i == d || x.shape()[i] == first.shape()[i];
        if (!match) {
            std::string expected = "(";   // input 0's shape with '*' at dim: "(2, *, 4)"
            for (int64_t i = 0; i < ndim; ++i)
                expected += (i ? ", " : "") + (i == d ? std::string("*") : std::to_string(first.shape()[i]));
            expected += ")";
            throw Error(fmt("concat: input ", k, " has shape ", shape_str(x.shape()), " but input 0 has shape ",
                            shape_str(first.shape()), "; expected ", expected, " along dim ", d,
                            "; hint: all sizes except the concatenation dim must match"));
        }
        sizes[k] = x.shape()[d];
        shape[d] += sizes[k];
    }

    Tensor out = Tensor::empty(shape, first.dtype());
    const size_t esize = dtype_size(first.dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < d; ++i) outer *= shape[i];
    for (int64_t i = d + 1; i < ndim; ++i) inner *= shape[i];
    const int64_t total = shape[d];
    char* o = static_cast<char*>(out.storage()->data);
    int64_t at = 0;
    for (size_t k = 0; k < xs.size(); ++k) {
        // x_k: (outer, sizes[k], inner) -> out[:, at:at+sizes[k], :]. detach() so that packing a strided input
        // records no extra node: the concat node below links to xs[k] itself.
        const Tensor x = xs[k].detach().contiguous();
        const char* src = static_cast<const char*>(x.storage()->data) + x.offset() * esize;
        copy_rows(src, sizes[k] * inner, o + at * inner * esize, total * inner, outer, sizes[k] * inner, esize);
        at += sizes[k];
    }
    if (auto node = record<ConcatBackward>("concat", xs, out)) {
        node->dim = d;
        node->sizes = std::move(sizes);
    }
    return out;
}

}  // namespace razor
