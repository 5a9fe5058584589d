// core/ops/reduce.cpp -- sum, mean, max (values), argmax.
//
// reference: torch.sum, torch.mean, torch.max(x, dim), torch.argmax. docs: docs/ops.md.
//
// Layout. x is packed, then its dims are described as segments: size-1 dims are dropped (they do not move
// memory) and neighbouring dims of the same kind (reduced / kept) are merged. Almost every reduction then fits
//     x: (K0, R1, K1, R2)   ->   out: (K0, K1)          (K = kept, R = reduced; absent segments have size 1)
// which covers the hot cases in one pass:
//     sum over the last dim   (M, D) -> (M)            K0=M, R2=D      row kernel, contiguous inner sums
//     bias grads              (M, D) -> (D)            R1=M, K1=D      column kernel, vector adds over rows
//     BN grads  (0, 2, 3)     (N, C, H, W) -> (C)      R1=N, K1=C, R2=H*W   row kernel over N runs of H*W
// Longer patterns (e.g. dims (0, 2, 4) of a 5-d tensor: R K R K R) reduce one segment per pass.
// Accumulation is in double (vectorised), so results agree with PyTorch's float cascade sums to ~1e-7 relative.
// max/argmax view x as (outer, D, inner) around the reduced dim.
//
// Saves:
//   sum, mean  nothing: the gradient is g broadcast back (scaled by 1/count for mean); shapes are node members.
//   max        the argmax positions (SaveRole::Indices, i64, one per output element), only when x needs a
//              gradient. Not x and not the values.
//   argmax     no node.
#include "core/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/autograd.h"
#include "core/check.h"

namespace razor {
namespace {

#ifdef _OPENMP
int max_threads() { return omp_get_max_threads(); }
int thread_id() { return omp_get_thread_num(); }
int team_size() { return omp_get_num_threads(); }
#else
int max_threads() { return 1; }
int thread_id() { return 0; }
int team_size() { return 1; }
#endif

constexpr int64_t kParallelWork = 1 << 15;   // elements below which a reduction stays on one thread
constexpr int64_t kBlock = 256;              // columns per block in the column and max kernels

void check_f32(const Tensor& x, const char* op) {
    if (!x.defined()) throw Error(fmt(op, ": x is undefined; hint: was it initialised?"));
    if (x.dtype() != DType::F32)
        throw Error(fmt(op, ": expected an f32 tensor, got ", dtype_name(x.dtype()), " ", shape_str(x.shape()),
                        "; hint: reductions are defined on f32 values"));
}

// Marks the reduced dims. Negative dims count from the end; a 0-d x accepts 0 / -1 (as torch) and reduces
// nothing. An empty list reduces every dim (torch 1.13's sum(x, dim=[])).
std::vector<bool> reduced_dims(const Tensor& x, const std::vector<int64_t>& dims, const char* op) {
    const int64_t ndim = x.dim();
    std::vector<bool> reduced(ndim, dims.empty());
    std::vector<bool> seen(std::max<int64_t>(ndim, 1), false);
    for (int64_t d : dims) {
        const int64_t w = wrap_dim(d, std::max<int64_t>(ndim, 1), op);
        if (seen[w])
            throw Error(fmt(op, ": dim ", w, " appears more than once in dims ", shape_str(dims), " for x ",
                            shape_str(x.shape()), "; hint: list each dim once"));
        seen[w] = true;
        if (ndim > 0) reduced[w] = true;
    }
    return reduced;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdim) {
    Shape out;
    for (size_t d = 0; d < shape.size(); ++d) {
        if (!reduced[d]) out.push_back(shape[d]);
        else if (keepdim) out.push_back(1);
    }
    return out;
}

struct Segment {
    bool reduced;
    int64_t size;
};

// Size-1 dims dropped, neighbours of the same kind merged.
std::vector<Segment> segments_of(const Shape& shape, const std::vector<bool>& reduced) {
    std::vector<Segment> segs;
    for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == 1) continue;
        if (!segs.empty() && segs.back().reduced == reduced[d]) segs.back().size *= shape[d];
        else segs.push_back({static_cast<bool>(reduced[d]), shape[d]});
    }
    return segs;
}

// x: (K0, R1, K1, R2) -> out: (K0, K1). Returns false when `segs` has more segments than this pattern holds.
struct Plan {
    int64_t K0 = 1, R1 = 1, K1 = 1, R2 = 1;
};
bool fit_plan(const std::vector<Segment>& segs, Plan& p) {
    size_t i = 0;
    const size_t n = segs.size();
    if (i < n && !segs[i].reduced) p.K0 = segs[i++].size;
    if (i < n && segs[i].reduced) p.R1 = segs[i++].size;
    if (i < n && !segs[i].reduced) p.K1 = segs[i++].size;
    if (i < n && segs[i].reduced) p.R2 = segs[i++].size;
    if (i != n) return false;
    if (p.K1 == 1 && p.R2 == 1) std::swap(p.R1, p.R2);   // (K0, R) is a row reduction: make R the inner one
    return true;
}

// out[k0, k1] = scale * sum_{r1, r2} x[k0, r1, k1, r2]       x: (K0, R1, K1, R2) packed; out: (K0, K1)
void sum_forward_plan(const float* x, float* out, const Plan& p, double scale) {
    const int64_t n_out = p.K0 * p.K1, total = n_out * p.R1 * p.R2;
    if (n_out == 1) {   // everything into one value: one parallel reduction over the packed run
        double acc = 0;
#pragma omp parallel for simd reduction(+ : acc) schedule(static) if (total > kParallelWork)
        for (int64_t i = 0; i < total; ++i) acc += x[i];
        out[0] = static_cast<float>(acc * scale);
        return;
    }
    if (p.R2 > 1 || p.K1 == 1) {   // row kernel: each output sums R1 contiguous runs of R2
#pragma omp parallel for schedule(static) if (total > kParallelWork)
        for (int64_t o = 0; o < n_out; ++o) {
            const int64_t k0 = o / p.K1, k1 = o % p.K1;
            double acc = 0;
            for (int64_t r1 = 0; r1 < p.R1; ++r1) {
                const float* run = x + ((k0 * p.R1 + r1) * p.K1 + k1) * p.R2;
#pragma omp simd reduction(+ : acc)
                for (int64_t r2 = 0; r2 < p.R2; ++r2) acc += run[r2];
            }
            out[o] = static_cast<float>(acc * scale);
        }
        return;
    }
    // Column kernel (R2 == 1): out[k0, :] = sum over r1 of rows x[k0, r1, :], in blocks of kBlock columns.
    const int64_t blocks = (p.K1 + kBlock - 1) / kBlock;
    const int threads = max_threads();
    if (p.K0 * blocks >= threads || total <= kParallelWork) {
#pragma omp parallel for collapse(2) schedule(static) if (total > kParallelWork)
        for (int64_t k0 = 0; k0 < p.K0; ++k0)
            for (int64_t b = 0; b < blocks; ++b) {
                const int64_t j0 = b * kBlock, w = std::min(kBlock, p.K1 - j0);
                double acc[kBlock] = {};
                for (int64_t r1 = 0; r1 < p.R1; ++r1) {
                    const float* row = x + (k0 * p.R1 + r1) * p.K1 + j0;
#pragma omp simd
                    for (int64_t j = 0; j < w; ++j) acc[j] += row[j];
                }
                for (int64_t j = 0; j < w; ++j) out[k0 * p.K1 + j0 + j] = static_cast<float>(acc[j] * scale);
            }
        return;
    }
    // Few, wide-enough outputs but many rows (bias grads of a big batch): split the rows among threads, each with
    // private partial sums; add the partials in thread order.
    std::vector<double> partial(static_cast<size_t>(threads) * p.K1);
    for (int64_t k0 = 0; k0 < p.K0; ++k0) {
        std::fill(partial.begin(), partial.end(), 0.0);
        int used = 1;
#pragma omp parallel
        {
            const int t = thread_id(), nt = team_size();
            if (t == 0) used = nt;
            double* acc = partial.data() + static_cast<size_t>(t) * p.K1;
            const int64_t r_begin = p.R1 * t / nt, r_end = p.R1 * (t + 1) / nt;
            for (int64_t r1 = r_begin; r1 < r_end; ++r1) {
                const float* row = x + (k0 * p.R1 + r1) * p.K1;
#pragma omp simd
                for (int64_t j = 0; j < p.K1; ++j) acc[j] += row[j];
            }
        }
        for (int64_t j = 0; j < p.K1; ++j) {
            double s = 0;
            for (int t = 0; t < used; ++t) s += partial[static_cast<size_t>(t) * p.K1 + j];
            out[k0 * p.K1 + j] = static_cast<float>(s * scale);
        }
    }
}

// out = scale * (sum of packed x over the reduced segments), in kept order.   x: segs; out: (prod kept)
void sum_forward(const float* x, float* out, std::vector<Segment> segs, double scale) {
    Plan plan;
    if (fit_plan(segs, plan)) {
        sum_forward_plan(x, out, plan, scale);
        return;
    }
    // Reduce the last reduced segment alone, x: (before, R, after) -> tmp: (before, after), and repeat.
    size_t last = segs.size();
    while (!segs[--last].reduced) {
    }
    Plan one;
    for (size_t i = 0; i < last; ++i) one.K0 *= segs[i].size;
    one.R1 = segs[last].size;
    for (size_t i = last + 1; i < segs.size(); ++i) one.K1 *= segs[i].size;
    if (one.K1 == 1) std::swap(one.R1, one.R2);
    Tensor tmp = Tensor::empty({one.K0 * one.K1});
    sum_forward_plan(x, tmp.f32(), one, scale);
    segs.erase(segs.begin() + static_cast<std::ptrdiff_t>(last));
    std::vector<Segment> merged;
    for (const Segment& s : segs) {
        if (!merged.empty() && merged.back().reduced == s.reduced) merged.back().size *= s.size;
        else merged.push_back(s);
    }
    sum_forward(tmp.f32(), out, std::move(merged), 1.0);
}

// gx[i] = scale * g[kept index of i]: g broadcast back over the reduced segments.
//   g: (prod of kept sizes), packed in kept order; gx: x's packed shape described by segs
void sum_backward(const float* g, float* gx, const std::vector<Segment>& segs, float scale) {
    if (segs.empty()) {   // one element
        gx[0] = g[0] * scale;
        return;
    }
    const int64_t nseg = static_cast<int64_t>(segs.size());
    std::vector<int64_t> gstride(nseg, 0);   // stride of each segment in g (0 where reduced)
    int64_t s = 1;
    for (int64_t i = nseg - 1; i >= 0; --i)
        if (!segs[i].reduced) gstride[i] = s, s *= segs[i].size;
    int64_t n = 1;
    for (const Segment& seg : segs) n *= seg.size;
    const int64_t inner = segs.back().size, rows = n / inner;
    const bool inner_reduced = segs.back().reduced;
#pragma omp parallel for schedule(static) if (n > kParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
        int64_t rem = r, off = 0;
        for (int64_t i = nseg - 2; i >= 0; --i) {
            off += (rem % segs[i].size) * gstride[i];
            rem /= segs[i].size;
        }
        float* out = gx + r * inner;
        if (inner_reduced) {
            const float v = g[off] * scale;
#pragma omp simd
            for (int64_t j = 0; j < inner; ++j) out[j] = v;
        } else {
            const float* src = g + off;
#pragma omp simd
            for (int64_t j = 0; j < inner; ++j) out[j] = src[j] * scale;
        }
    }
}

// d sum / dx:   gx[..] = g[kept index]          g: reduced shape -> gx: x shape; exact
// d mean / dx:  gx[..] = g[kept index] / count  (count = number of elements folded into each output); exact
struct SumBackward final : Node {
    std::vector<bool> reduced;
    float scale = 1.f;
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const Shape& shape = edges()[0].shape;
        if (shape_numel(shape) == 0) return {Tensor::zeros(shape)};
        const Tensor g = g_in.contiguous();
        Tensor gx = Tensor::empty(shape);
        sum_backward(g.f32(), gx.f32(), segments_of(shape, reduced), scale);
        return {gx};
    }
};

Tensor reduce_sum(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim, bool is_mean,
                  const char* op) {
    check_f32(x_in, op);
    const std::vector<bool> reduced = reduced_dims(x_in, dims, op);
    const Shape out_shape = reduced_shape(x_in.shape(), reduced, keepdim);
    const int64_t n = x_in.numel(), n_out = shape_numel(out_shape);
    const int64_t count = n_out ? n / n_out : 0;   // elements per output
    Tensor out = Tensor::empty(out_shape);
    const double scale = is_mean ? 1.0 / static_cast<double>(count) : 1.0;
    if (n == 0) {   // empty reductions: sum 0, mean NaN (as torch)
        std::fill_n(out.f32(), n_out, is_mean ? NAN : 0.f);
    } else {
        const Tensor x = x_in.detach().contiguous();   // detach: the node links to x_in, no extra copy node
        sum_forward(x.f32(), out.f32(), segments_of(x.shape(), reduced), scale);
    }
    if (auto node = record<SumBackward>(op, {x_in}, out)) {
        node->reduced = reduced;
        node->scale = static_cast<float>(scale);
    }
    return out;
}

// ---------------------------------------------------------------- max / argmax

// values[o, j] = max_d x[o, d, j], index[o, j] = the first d reaching it (NaN beats any number, first NaN wins).
//   x: (outer, D, inner) packed; values (nullable), index: (outer, inner)
inline bool beats(float v, float best) { return v > best || (std::isnan(v) && !std::isnan(best)); }

void max_forward(const float* x, float* values, int64_t* index, int64_t outer, int64_t D, int64_t inner) {
    const int64_t work = outer * D * inner;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (work > kParallelWork)
        for (int64_t o = 0; o < outer; ++o) {
            const float* row = x + o * D;
            float best = row[0];
            int64_t at = 0;
            for (int64_t d = 1; d < D; ++d)
                if (beats(row[d], best)) best = row[d], at = d;
            if (values) values[o] = best;
            index[o] = at;
        }
        return;
    }
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
#pragma omp parallel for collapse(2) schedule(static) if (work > kParallelWork)
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t b = 0; b < blocks; ++b) {
            const int64_t j0 = b * kBlock, w = std::min(kBlock, inner - j0);
            float best[kBlock];
            int64_t at[kBlock];
            const float* first = x + o * D * inner + j0;
            for (int64_t j = 0; j < w; ++j) best[j] = first[j], at[j] = 0;
            for (int64_t d = 1; d < D; ++d) {
                const float* row = first + d * inner;
                for (int64_t j = 0; j < w; ++j)
                    if (beats(row[j], best[j])) best[j] = row[j], at[j] = d;
            }
            for (int64_t j = 0; j < w; ++j) {
                if (values) values[o * inner + j0 + j] = best[j];
                index[o * inner + j0 + j] = at[j];
            }
        }
}

struct MaxLayout {
    int64_t dim = 0, outer = 1, D = 1, inner = 1;
    Shape out_shape;
};

MaxLayout max_layout(const Tensor& x, int64_t dim, bool keepdim, const char* op) {
    check_f32(x, op);
    MaxLayout l;
    const int64_t ndim = x.dim();
    l.dim = wrap_dim(dim, std::max<int64_t>(ndim, 1), op);
    if (ndim == 0) return l;   // a 0-d x: max over "dim 0" is x itself, index 0 (as torch)
    const Shape& s = x.shape();
    l.D = s[l.dim];
    if (l.D == 0)
        throw Error(fmt(op, ": cannot reduce dim ", l.dim, " of size 0 (x ", shape_str(s),
                        "); hint: a max over no elements is undefined"));
    for (int64_t d = 0; d < l.dim; ++d) l.outer *= s[d];
    for (int64_t d = l.dim + 1; d < ndim; ++d) l.inner *= s[d];
    l.out_shape = s;
    if (keepdim) l.out_shape[l.dim] = 1;
    else l.out_shape.erase(l.out_shape.begin() + l.dim);
    return l;
}

// gx[o, index[o, j], j] = g[o, j], zero elsewhere      g: (outer, inner) -> gx: (outer, D, inner)
// Exact away from ties; at ties the first maximum takes the whole gradient (as torch.max(x, dim)).
struct MaxBackward final : Node {
    int64_t outer = 1, D = 1, inner = 1;
    std::vector<Tensor> backward(const Tensor& g_in) override {
        const Tensor g = g_in.contiguous();
        const Tensor index = ctx.unpack("indices").contiguous();
        Tensor gx = Tensor::zeros(edges()[0].shape);
        const float* pg = g.f32();
        const int64_t* pi = index.i64();
        float* o = gx.f32();
#pragma omp parallel for schedule(static) if (outer * inner > kParallelWork)
        for (int64_t r = 0; r < outer; ++r)
            for (int64_t j = 0; j < inner; ++j) o[(r * D + pi[r * inner + j]) * inner + j] = pg[r * inner + j];
        return {gx};
    }
};

}  // namespace

Tensor sum(const Tensor& x) { return reduce_sum(x, {}, false, false, "sum"); }
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
    return reduce_sum(x, dims, keepdim, false, "sum");
}
Tensor mean(const Tensor& x) { return reduce_sum(x, {}, false, true, "mean"); }
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
    return reduce_sum(x, dims, keepdim, true, "mean");
}

Tensor max(const Tensor& x_in, int64_t dim, bool keepdim) {
    const MaxLayout l = max_layout(x_in, dim, keepdim, "max");
    const Tensor x = x_in.detach().contiguous();
    Tensor values = Tensor::empty(l.out_shape);
    Tensor index = Tensor::empty(l.out_shape, DType::I64);
    max_forward(x.f32(), values.f32(), index.i64(), l.outer, l.D, l.inner);
    if (auto node = record<MaxBackward>("max", {x_in}, values)) {
        node->outer = l.outer, node->D = l.D, node->inner = l.inner;
        node->ctx.save("indices", index, SaveRole::Indices);
    }
    return values;
}

Tensor argmax(const Tensor& x_in, int64_t dim, bool keepdim) {
    const MaxLayout l = max_layout(x_in, dim, keepdim, "argmax");
    const Tensor x = x_in.detach().contiguous();
    Tensor index = Tensor::empty(l.out_shape, DType::I64);
    max_forward(x.f32(), nullptr, index.i64(), l.outer, l.D, l.inner);
    return index;
}

}  // namespace razor
