// core/ops/matmul.cpp -- C = A B over batches of matrices, with broadcast batch dims.
//
// reference: torch.matmul. docs: docs/back-razor.md §5.1 (Q K^T, softmax V) and §6 (MatMul row).
//
// Dimension letters: a (..., M, K), b (..., K, N), out (..., M, N); the "..." are the batch dims, broadcast
// right-aligned as in torch (a size-1 or missing dim repeats). Bout is the number of output matrices.
//
// Kernels:
//   * Every matrix goes to gemm (core/gemm.h) in place: an operand whose last two dims are row-major, or
//     transposed (k.transpose(-2, -1): column stride 1), or have a row stride larger than the row (a column
//     slice), is passed with a trans flag and leading dimension instead of being copied. Anything else is made
//     contiguous first.
//   * b without batch dims (x W, the linear case) and a batch that folds into rows: ONE gemm with
//     M' = Bout * M, which gemm splits over the threads; its weight-style gradient gb is then one reduced gemm too
//     (no per-batch partial products).
//   * Otherwise one gemm per output matrix; with Bout >= threads the matrices are spread over the OpenMP threads
//     (each gemm single-threaded), else gemm splits each product over the threads.
//
// Saves: a as SaveRole::InputGradOperand if b needs a gradient (gb = a^T g), b as SaveRole::InputGradOperand if a
//        needs one (ga = g b^T). Nothing else: the shapes come from the node's edges. Saved views (a transposed K)
//        are kept as the view, so the tape holds no copy of them.
#include "core/ops/matmul.h"

#include <algorithm>

#include "core/autograd.h"
#include "core/check.h"
#include "core/gemm.h"
#include "core/runtime.h"

namespace razor {
namespace {

// A tensor (..., R, C) seen as Bt = prod(batch) matrices of R x C for gemm.
struct MatrixBatch {
    const float* data = nullptr;
    int64_t rows = 0, cols = 0;
    bool trans = false;          // stored transposed: element (r, c) at data[c * ld + r]
    int64_t ld = 1;              // row stride (or column stride when trans), in elements
    Shape batch, batch_strides;  // leading dims and their strides, in elements
};

// Shape of the matrix an operand stands for: a (K) is a row (1, K), b (K) a column (K, 1).
Shape matrix_shape(const Shape& s, bool is_b) {
    if (s.size() != 1) return s;
    return is_b ? Shape{s[0], 1} : Shape{1, s[0]};
}

// Fills m when t's last two dims can go to gemm as they are; false when t needs contiguous() first.
bool describe(const Tensor& t, bool is_b, MatrixBatch& m) {
    Shape shape = t.shape(), strides = t.strides();
    if (t.dim() == 1) {   // the added dim has size 1: its stride is never used
        shape = matrix_shape(shape, is_b);
        strides = is_b ? Shape{strides[0], 1} : Shape{0, strides[0]};
    }
    const size_t nd = shape.size();
    const int64_t R = shape[nd - 2], C = shape[nd - 1], sr = strides[nd - 2], sc = strides[nd - 1];
    if ((C <= 1 || sc == 1) && (R <= 1 || sr >= C)) {
        m.trans = false;
        m.ld = R <= 1 ? std::max<int64_t>(C, 1) : sr;
    } else if ((R <= 1 || sr == 1) && (C <= 1 || sc >= R)) {
        m.trans = true;
        m.ld = C <= 1 ? std::max<int64_t>(R, 1) : sc;
    } else {
        return false;
    }
    m.data = t.f32();
    m.rows = R;
    m.cols = C;
    m.batch.assign(shape.begin(), shape.end() - 2);
    m.batch_strides.assign(strides.begin(), strides.end() - 2);
    return true;
}

// t itself when gemm can read it in place, else a contiguous copy (differentiable: contiguous() keeps the link).
Tensor gemm_ready(const Tensor& t, bool is_b, MatrixBatch& m) {
    if (describe(t, is_b, m)) return t;
    Tensor c = t.contiguous();
    RAZOR_CHECK(describe(c, is_b, m)) << "matmul: a contiguous tensor must be gemm-ready";
    return c;
}

// True when the Bt row-major matrices of m are consecutive rows of one (Bt * rows, cols) matrix with row
// stride m.ld (e.g. a contiguous (B, T, K) tensor), so a batch of products with one b is a single gemm.
bool rows_fold(const MatrixBatch& m) {
    if (m.trans) return false;
    int64_t expected = m.rows * m.ld;
    for (size_t d = m.batch.size(); d-- > 0;) {
        if (m.batch[d] == 1) continue;
        if (m.batch_strides[d] != expected) return false;
        expected *= m.batch[d];
    }
    return true;
}

// The broadcast batch shape of a and b; throws naming both operands when they do not broadcast.
Shape broadcast_batch(const Shape& ba, const Shape& bb, const Shape& sa, const Shape& sb) {
    const size_t n = std::max(ba.size(), bb.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        const int64_t da = i < n - ba.size() ? 1 : ba[i - (n - ba.size())];
        const int64_t db = i < n - bb.size() ? 1 : bb[i - (n - bb.size())];
        if (da != db && da != 1 && db != 1)
            throw Error(fmt("matmul: batch dims ", shape_str(ba), " of a ", shape_str(sa), " and ", shape_str(bb),
                            " of b ", shape_str(sb), " do not broadcast; hint: leading dims must match or be 1, "
                            "aligned from the right"));
        out[i] = da == 1 ? db : da;
    }
    return out;
}

// For each output matrix o (flat index over out_batch), the element offset of the operand's matrix, given the
// operand's batch dims and their strides (right-aligned; size-1 dims repeat: offset 0 along them).
std::vector<int64_t> broadcast_offsets(const Shape& batch, const Shape& strides, const Shape& out_batch) {
    const int64_t n = shape_numel(out_batch);
    const size_t lead = out_batch.size() - batch.size();
    std::vector<int64_t> offsets(static_cast<size_t>(n));
    for (int64_t o = 0; o < n; ++o) {
        int64_t rem = o, off = 0;
        for (size_t d = out_batch.size(); d-- > 0;) {
            const int64_t idx = rem % out_batch[d];
            rem /= out_batch[d];
            if (d >= lead && batch[d - lead] != 1) off += idx * strides[d - lead];
        }
        offsets[static_cast<size_t>(o)] = off;
    }
    return offsets;
}

// Spread whole gemms over the threads only when there are at least as many as threads; else gemm splits each
// product over the threads itself.
[[maybe_unused]] bool gemms_over_threads(int64_t count) { return count > 1 && count >= num_threads(); }

// out[o] (M, N) = a[o] (M, K) . b[o] (K, N), for every output matrix o.
void matmul_forward(const MatrixBatch& a, const MatrixBatch& b, const Shape& out_batch, float* out /*(Bout, M, N)*/) {
    const int64_t M = a.rows, K = a.cols, N = b.cols;
    if (shape_numel(b.batch) == 1 && rows_fold(a)) {
        gemm(false, b.trans, shape_numel(a.batch) * M, N, K, 1.f, a.data, a.ld, b.data, b.ld, 0.f, out, N);
        return;
    }
    const int64_t n = shape_numel(out_batch);
    const std::vector<int64_t> off_a = broadcast_offsets(a.batch, a.batch_strides, out_batch);
    const std::vector<int64_t> off_b = broadcast_offsets(b.batch, b.batch_strides, out_batch);
#pragma omp parallel for schedule(static) if (gemms_over_threads(n))
    for (int64_t o = 0; o < n; ++o)
        gemm(a.trans, b.trans, M, N, K, 1.f, a.data + off_a[o], a.ld, b.data + off_b[o], b.ld, 0.f, out + o * M * N,
             N);
}

// Groups the output matrices by the operand matrix they read (its flat batch index): the gradient of that matrix
// is the sum of their contributions. Returned as CSR: order[begin[s] .. begin[s + 1]) are the o's of slot s.
void group_by_slot(const Shape& batch, const Shape& out_batch, std::vector<int64_t>& begin, std::vector<int64_t>& order) {
    const std::vector<int64_t> slot = broadcast_offsets(batch, contiguous_strides(batch), out_batch);
    const int64_t slots = shape_numel(batch);
    begin.assign(static_cast<size_t>(slots + 1), 0);
    for (int64_t s : slot) ++begin[static_cast<size_t>(s + 1)];
    for (int64_t s = 0; s < slots; ++s) begin[s + 1] += begin[s];
    order.resize(slot.size());
    std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
    for (size_t o = 0; o < slot.size(); ++o) order[static_cast<size_t>(fill[slot[o]]++)] = static_cast<int64_t>(o);
}

// d out[o] = d a[o] . b[o] + a[o] . d b[o], so with g[o] = dL/d out[o] (M, N):
//   ga[s] (M, K) = sum over o reading a[s] of g[o] (M, N) . b[o]^T (N, K)      -- exact
//   gb[s] (K, N) = sum over o reading b[s] of a[o]^T (K, M) . g[o] (M, N)      -- exact (approximate only if
//                                                                                a saved operand was razored)
// When b has no batch and a's batch folds into rows: ga (Bout*M, K) = g (Bout*M, N) . b^T, one gemm, and
// gb (K, N) = a^T (K, Bout*M) . g (Bout*M, N), one gemm that also does the sum over the batch.
struct MatmulBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const Shape sa = matrix_shape(edges()[0].shape, false), sb = matrix_shape(edges()[1].shape, true);
        const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
        const Shape a_batch(sa.begin(), sa.end() - 2), b_batch(sb.begin(), sb.end() - 2);
        const Shape out_batch = broadcast_batch(a_batch, b_batch, sa, sb);
        const bool b_unbatched = shape_numel(b_batch) == 1;
        Tensor g = g_in.contiguous();
        const float* pg = g.f32();   // g: (Bout, M, N)
        Tensor ga, gb;
        if (needs_grad(0)) {
            MatrixBatch b;
            Tensor b_keep = gemm_ready(ctx.unpack("b"), true, b);
            ga = Tensor::empty(edges()[0].shape);   // (..., M, K), contiguous
            float* pga = ga.f32();
            if (b_unbatched) {   // every ga row block is its own g row block times b^T: one gemm
                gemm(false, !b.trans, shape_numel(out_batch) * M, K, N, 1.f, pg, N, b.data, b.ld, 0.f, pga, K);
            } else {
                std::vector<int64_t> begin, order;
                group_by_slot(a_batch, out_batch, begin, order);
                const std::vector<int64_t> off_b = broadcast_offsets(b.batch, b.batch_strides, out_batch);
                const int64_t slots = shape_numel(a_batch);
#pragma omp parallel for schedule(static) if (gemms_over_threads(slots))
                for (int64_t s = 0; s < slots; ++s) {
                    float* dst = pga + s * M * K;
                    if (begin[s] == begin[s + 1]) std::fill(dst, dst + M * K, 0.f);
                    for (int64_t i = begin[s]; i < begin[s + 1]; ++i) {
                        const int64_t o = order[i];
                        gemm(false, !b.trans, M, K, N, 1.f, pg + o * M * N, N, b.data + off_b[o], b.ld,
                             i == begin[s] ? 0.f : 1.f, dst, K);
                    }
                }
            }
        }
        // gb from a saved form that expands one sample at a time (attention's P V: P as dense int8), when every
        // output matrix is its own a times its own g: one sample's matrices at a time in a small scratch, never
        // the whole a as a transient (vit_b_16 at batch 16: 1.9 MB per thread, not P's 29.8 MB).
        const SavedTensor* a_rows = needs_grad(1) && ctx.has("a") ? &ctx.saved("a") : nullptr;
        if (a_rows && a_rows->has_row_unpack() && !b_unbatched && a_batch == out_batch && b_batch == out_batch &&
            a_rows->shape() == edges()[0].shape && a_rows->shape().size() >= 3) {
            gb = Tensor::empty(edges()[1].shape);   // (..., K, N), contiguous
            float* pgb = gb.f32();
            const int64_t samples = a_rows->shape()[0], per_sample = shape_numel(a_batch) / samples;
            const int64_t chunks = std::min<int64_t>(samples, num_threads());
            Tensor scratch = Tensor::empty({chunks, per_sample * M * K});   // one sample of a per chunk
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
            for (int64_t c = 0; c < chunks; ++c) {
                float* a_sample = scratch.f32() + c * per_sample * M * K;   // (per_sample, M, K)
                for (int64_t n = samples * c / chunks; n < samples * (c + 1) / chunks; ++n) {
                    a_rows->unpack_rows(n, 1, a_sample);
                    for (int64_t j = 0; j < per_sample; ++j) {
                        const int64_t o = n * per_sample + j;
                        gemm(true, false, K, N, M, 1.f, a_sample + j * M * K, K, pg + o * M * N, N, 0.f,
                             pgb + o * K * N, N);
                    }
                }
            }
        } else if (needs_grad(1)) {
            MatrixBatch a;
            Tensor a_keep = gemm_ready(ctx.unpack("a"), false, a);
            if (b_unbatched && !rows_fold(a)) a_keep = gemm_ready(a_keep.contiguous(), false, a);
            gb = Tensor::empty(edges()[1].shape);   // (..., K, N), contiguous
            float* pgb = gb.f32();
            if (b_unbatched) {   // the sum over the batch happens inside one gemm
                gemm(!a.trans, false, K, N, shape_numel(out_batch) * M, 1.f, a.data, a.ld, pg, N, 0.f, pgb, N);
            } else {
                std::vector<int64_t> begin, order;
                group_by_slot(b_batch, out_batch, begin, order);
                const std::vector<int64_t> off_a = broadcast_offsets(a.batch, a.batch_strides, out_batch);
                const int64_t slots = shape_numel(b_batch);
#pragma omp parallel for schedule(static) if (gemms_over_threads(slots))
                for (int64_t s = 0; s < slots; ++s) {
                    float* dst = pgb + s * K * N;
                    if (begin[s] == begin[s + 1]) std::fill(dst, dst + K * N, 0.f);
                    for (int64_t i = begin[s]; i < begin[s + 1]; ++i) {
                        const int64_t o = order[i];
                        gemm(!a.trans, false, K, N, M, 1.f, a.data + off_a[o], a.ld, pg + o * M * N, N,
                             i == begin[s] ? 0.f : 1.f, dst, N);
                    }
                }
            }
        }
        return {ga, gb};
    }
};

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
    if (!a_in.defined() || !b_in.defined()) throw Error("matmul: got an undefined tensor; hint: pass both operands");
    if (a_in.dtype() != DType::F32 || b_in.dtype() != DType::F32)
        throw Error(fmt("matmul: expected f32 tensors, got ", dtype_name(a_in.dtype()), " and ",
                        dtype_name(b_in.dtype()), "; hint: convert the operands to f32"));
    if (a_in.dim() < 1 || b_in.dim() < 1)
        throw Error(fmt("matmul: expected tensors of rank >= 1, got a ", shape_str(a_in.shape()), " and b ",
                        shape_str(b_in.shape()), "; hint: use mul for a scalar factor"));
    const Shape sa = matrix_shape(a_in.shape(), false), sb = matrix_shape(b_in.shape(), true);
    const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
    if (sb[sb.size() - 2] != K)
        throw Error(fmt("matmul: expected b (..., ", K, ", N) to match a ", shape_str(a_in.shape()), ", got b ",
                        shape_str(b_in.shape()), "; hint: the last dim of a must equal the second-to-last dim of b "
                        "(transpose one of them?)"));
    const Shape out_batch =
        broadcast_batch(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2), a_in.shape(), b_in.shape());

    MatrixBatch ma, mb;
    Tensor a = gemm_ready(a_in, false, ma);
    Tensor b = gemm_ready(b_in, true, mb);
    Shape out_shape = out_batch;
    if (a_in.dim() > 1) out_shape.push_back(M);
    if (b_in.dim() > 1) out_shape.push_back(N);
    Tensor out = Tensor::empty(out_shape);
    matmul_forward(ma, mb, out_batch, out.f32());
    if (auto node = record<MatmulBackward>("matmul", {a, b}, out)) {
        if (node->needs_grad(1)) node->ctx.save("a", a, SaveRole::InputGradOperand);
        if (node->needs_grad(0)) node->ctx.save("b", b, SaveRole::InputGradOperand);
    }
    return out;
}

}  // namespace razor
