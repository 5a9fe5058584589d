// core/ops/linear.cpp -- y = x W^T + b with every leading dim of x folded into one GEMM dimension.
//
// reference: torch.nn.functional.linear. docs: docs/back-razor.md §5.1 (ViT Linears), §6 and §6.1.
//
// Dimension letters: M = product of x's leading dims (B * N tokens in a ViT), in and out = W's dims.
// Forward: y (M, out) = x (M, in) . W^T (in, out) as one gemm, started from the bias broadcast into y (beta = 1),
// so the bias costs no extra pass over y.
//
// Saves: x as SaveRole::WeightGradOperand, only if W needs a gradient (gW = g^T x; Back Razor prunes it, and gW
//        then reads the pruned form directly where linear_sparse_weight_grad_faster says so:
//        core/linear_sparse_input.h).
//        W as SaveRole::Parameter (a reference, 0 bytes, version-checked), only if x needs a gradient (gx = g W).
//        b: nothing (gb = sum of g).
#include "core/ops/linear.h"

#include <algorithm>
#include <vector>

#include "core/autograd.h"
#include "core/check.h"
#include "core/gemm.h"
#include "core/linear_sparse_input.h"
#include "core/runtime.h"

namespace razor {
namespace {

// sums[j] = sum over rows i of g[i, j]; g: (M, N) row-major, sums: (N). Row blocks per thread with double
// partial sums, added in a fixed order (deterministic for a given thread count).
void column_sums(const float* g, int64_t M, int64_t N, float* sums) {
    const int64_t blocks = (M * N > (1 << 16)) ? std::max<int64_t>(1, std::min<int64_t>(num_threads(), M)) : 1;
    std::vector<double> partial(static_cast<size_t>(blocks * N), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t t = 0; t < blocks; ++t) {
        double* acc = partial.data() + t * N;
        for (int64_t i = M * t / blocks, end = M * (t + 1) / blocks; i < end; ++i) {
            const float* row = g + i * N;
#pragma omp simd
            for (int64_t j = 0; j < N; ++j) acc[j] += row[j];
        }
    }
    for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t t = 0; t < blocks; ++t) s += partial[static_cast<size_t>(t * N + j)];
        sums[j] = static_cast<float>(s);
    }
}

// y = x W^T + b, so with g = dL/dy (M, out):
//   gx (M, in)   = g (M, out) . W (out, in)                    -- exact
//   gW (out, in) = g^T (out, M) . x (M, in)                    -- the sum over all M rows (batch and tokens)
//                                                                 happens inside this one gemm; exact for a
//                                                                 dense x, approximate if x was razored
//   gb (out)     = sum over M of g                             -- exact
struct LinearBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const Shape& x_shape = edges()[0].shape;
        const Shape& w_shape = edges()[1].shape;
        const int64_t out = w_shape[0], in = w_shape[1];
        const int64_t M = shape_numel(Shape(x_shape.begin(), x_shape.end() - 1));
        Tensor g = g_in.contiguous();   // (M, out)
        const float* pg = g.f32();
        Tensor gx, gW, gb;
        if (needs_grad(0)) {
            Tensor W = ctx.unpack("W").contiguous();   // (out, in)
            gx = Tensor::empty(x_shape);
            gemm(false, false, M, in, out, 1.f, pg, out, W.f32(), in, 0.f, gx.f32(), in);
        }
        if (needs_grad(1)) {
            gW = Tensor::empty(w_shape);
            const std::optional<SparseSamples> sparse = ctx.saved("x").sparse_samples();
            if (sparse && linear_sparse_weight_grad_faster(sparse->kept_fraction())) {
                detail::linear_sparse_input_weight_grad(*sparse, M, in, out, pg, gW.f32());
            } else {
                Tensor x = ctx.unpack("x").contiguous();   // (M, in)
                gemm(true, false, out, in, M, 1.f, pg, out, x.f32(), in, 0.f, gW.f32(), in);
            }
        }
        if (needs_grad(2)) {
            gb = Tensor::empty({out});
            column_sums(pg, M, out, gb.f32());
        }
        return {gx, gW, gb};
    }
};

}  // namespace

// gW from a pruned x read sparse (core/linear_sparse_input.h) instead of unpacking it for the GEMM, when at most
// kSparseWeightGradMaxKept (core/sparse_samples.h) of x's elements were kept: the sparse kernel does f of the
// multiplies, at a lower rate than the GEMM (a row of g read per kept element), so it wins only at small f.
bool linear_sparse_weight_grad_faster(double kept_fraction) { return kept_fraction <= kSparseWeightGradMaxKept; }

Tensor linear(const Tensor& x_in, const Tensor& W_in, const Tensor& b_in) {
    if (!x_in.defined() || !W_in.defined()) throw Error("linear: got an undefined x or W; hint: pass both");
    for (const Tensor* t : {&x_in, &W_in, &b_in})
        if (t->defined() && t->dtype() != DType::F32)
            throw Error(fmt("linear: expected f32 tensors, got ", dtype_name(t->dtype()), " ", shape_str(t->shape()),
                            "; hint: convert inputs and parameters to f32"));
    if (W_in.dim() != 2)
        throw Error(fmt("linear: expected W (out, in), got ", shape_str(W_in.shape()),
                        "; hint: the weight of a Linear layer is 2-D"));
    const int64_t out = W_in.size(0), in = W_in.size(1);
    if (x_in.dim() < 1 || x_in.size(-1) != in)
        throw Error(fmt("linear: expected x (..., ", in, "), got ", shape_str(x_in.shape()),
                        "; hint: check in_features or the preceding layer"));
    if (b_in.defined() && (b_in.dim() != 1 || b_in.size(0) != out))
        throw Error(fmt("linear: expected bias (", out, "), got ", shape_str(b_in.shape()),
                        "; hint: the bias has one value per output feature"));

    Tensor x = x_in.contiguous();   // (M, in)
    Tensor W = W_in.contiguous();   // (out, in)
    Shape y_shape(x.shape().begin(), x.shape().end() - 1);
    y_shape.push_back(out);
    Tensor y = Tensor::empty(y_shape);   // (M, out)
    const int64_t M = shape_numel(Shape(y_shape.begin(), y_shape.end() - 1));
    float* py = y.f32();
    float beta = 0.f;
    if (b_in.defined()) {
        Tensor b = b_in.contiguous();
        const float* pb = b.f32();
#pragma omp parallel for schedule(static) if (M * out > (1 << 16))
        for (int64_t i = 0; i < M; ++i) std::copy(pb, pb + out, py + i * out);
        beta = 1.f;
    }
    gemm(false, true, M, out, in, 1.f, x.f32(), in, W.f32(), in, beta, py, out);
    if (auto node = record<LinearBackward>("linear", {x, W, b_in}, y)) {
        if (node->needs_grad(1)) node->ctx.save("x", x, SaveRole::WeightGradOperand);
        if (node->needs_grad(0)) node->ctx.save("W", W, SaveRole::Parameter);
    }
    return y;
}

}  // namespace razor
