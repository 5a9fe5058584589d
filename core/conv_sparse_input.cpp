// core/conv_sparse_input.cpp -- see conv_sparse_input.h.
#include "core/conv_sparse_input.h"

#include <algorithm>

#include "core/check.h"
#include "core/sparse_outer.h"
#include "core/tensor.h"

namespace razor::detail {
namespace {

// gy (OH*OW positions, OC) with a zero border: output position (oh, ow) is row (oh + top) * Q + ow + left of a
// (P*Q, OC) matrix, and input position (ih, iw) reads, through tap (kh, kw), row base(ih, iw) - tap(kh, kw) with
// base = (ih + ph + top) * Q + iw + pw + left and tap = kh*dh * Q + kw*dw (oh = ih + ph - kh*dh at stride 1).
struct PaddedRows {
    int64_t top, left, P, Q;
    explicit PaddedRows(const ConvGeometry& g)
        : top(std::max<int64_t>(0, (g.KH - 1) * g.dh - g.ph)),
          left(std::max<int64_t>(0, (g.KW - 1) * g.dw - g.pw)),
          P(top + std::max(g.OH, g.H + g.ph)),
          Q(left + std::max(g.OW, g.W + g.pw)) {}
};

// The interior of padded (P*Q, OC) = gy (OC, OH*OW)^T, through a 16 x 16 tile in L1: rows of gy are read 16
// contiguous floats at a time and rows of padded written 16 at a time (reading gy column-wise instead, 16 loads a
// row apart, was most of this kernel's own time).
void transpose_into(const ConvGeometry& g, const PaddedRows& pr, const float* gy, float* padded) {
    constexpr int64_t B = 16;
    const int64_t OC = g.OC, ohw = g.ohw();
    float tile[B][B];   // [p - p0][o - o0]
    for (int64_t p0 = 0; p0 < ohw; p0 += B) {
        const int64_t np = std::min(B, ohw - p0);
        for (int64_t o0 = 0; o0 < OC; o0 += B) {
            const int64_t no = std::min(B, OC - o0);
            if (np == B && no == B) {   // full tiles: fixed trip counts, so the compiler keeps them in registers
                for (int64_t o = 0; o < B; ++o)
                    for (int64_t p = 0; p < B; ++p) tile[p][o] = gy[(o0 + o) * ohw + p0 + p];
            } else {
                for (int64_t o = 0; o < no; ++o)
                    for (int64_t p = 0; p < np; ++p) tile[p][o] = gy[(o0 + o) * ohw + p0 + p];
            }
            int64_t oh = p0 / g.OW, ow = p0 % g.OW;
            for (int64_t p = 0; p < np; ++p) {
                float* dst = padded + ((oh + pr.top) * pr.Q + ow + pr.left) * OC + o0;
                if (no == B) std::copy_n(tile[p], B, dst);
                else std::copy_n(tile[p], no, dst);
                if (++ow == g.OW) ow = 0, ++oh;
            }
        }
    }
}

// The rows of the padded gy that one image's kept elements read, per input channel (e.value already holds their
// values: they are in the same element order).
void list_rows(const ConvGeometry& g, const PaddedRows& pr, const uint64_t* bits, ChannelEntries& e) {
    const int64_t hw = g.hw();
    int64_t k = 0;
    for (int64_t c = 0; c < g.C; ++c) {
        e.start[c] = k;
        int64_t ih = 0, row_end = c * hw + g.W;   // the row of the next bit, and where that row ends
        for_each_set_bit(bits, c * hw, (c + 1) * hw, [&](int64_t i) {
            while (i >= row_end) ++ih, row_end += g.W;
            const int64_t iw = i - (row_end - g.W);
            e.row[k++] = static_cast<int32_t>((ih + g.ph + pr.top) * pr.Q + iw + g.pw + pr.left);
        });
    }
    e.start[g.C] = k;
}

}  // namespace

bool conv2d_sparse_input_supports(const ConvGeometry& g) {
    return g.sh == 1 && g.sw == 1 && (g.kk() == 1 || g.kk() == 9);
}

void conv2d_sparse_input_weight_grad(const ConvGeometry& g, const SparseSamples& x, const float* gy, float* gw) {
    RAZOR_CHECK(x.samples == g.N && x.sample_numel == g.C * g.hw())
        << "conv2d sparse gW: x holds " << x.samples << " samples of " << x.sample_numel << ", geometry wants " << g.N
        << " of " << g.C * g.hw();
    RAZOR_CHECK(conv2d_sparse_input_supports(g)) << "conv2d sparse gW: stride-1 1x1 or 3x3 convs only";
    const PaddedRows pr(g);
    const int64_t kk = g.kk(), part = g.C * kk * g.OCg, padded_size = pr.P * pr.Q * g.OC;
    const int64_t max_kept = x.max_kept(), per_chunk = part + padded_size;
    const int64_t chunks = batch_chunks(g.N);
    std::vector<int64_t> tap(static_cast<size_t>(kk));
    for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) tap[kh * g.KW + kw] = kh * g.dh * pr.Q + kw * g.dw;
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* acc = ws + c * per_chunk;      // gW^T (groups, Cg*KK, OCg) partial
        float* padded = acc + part;   // (P*Q, OC), zero border
        std::fill(acc, acc + part + padded_size, 0.f);
        ChannelEntries entries;
        entries.start.resize(static_cast<size_t>(g.C + 1));
        entries.row.resize(static_cast<size_t>(max_kept));
        entries.value.resize(static_cast<size_t>(max_kept));
        for (int64_t n = g.N * c / chunks; n < g.N * (c + 1) / chunks; ++n) {
            if (x.kept(n) == 0) continue;
            transpose_into(g, pr, gy + n * g.OC * g.ohw(), padded);
            x.decode_values(n, entries.value.data());
            list_rows(g, pr, x.sample_bits(n), entries);
            for (int64_t gi = 0; gi < g.groups; ++gi)
                sparse_outer_accumulate(entries, gi * g.Cg, (gi + 1) * g.Cg, tap.data(), kk, padded + gi * g.OCg,
                                        g.OC, g.OCg, acc + gi * g.Cg * kk * g.OCg, g.OCg);
        }
    }
    gw_from_transposed(g, ws, per_chunk, chunks, gw);
}

}  // namespace razor::detail
