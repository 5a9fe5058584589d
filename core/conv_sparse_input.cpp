// core/conv_sparse_input.cpp -- see conv_sparse_input.h.
#include "core/conv_sparse_input.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/sparse_outer.h"
#include "core/tensor.h"

namespace razor::detail {
namespace {

// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Where each kept element and tap read gy. Input row ih feeds output row oh = (ih + ph - kh*dh) / sh through tap kh
// when that divides exactly. With the row's phase a = (ih + ph) mod sh, exactly the taps with kh*dh = a (mod sh) do,
// at oh = (ih + ph - a) / sh - (kh*dh - a) / sh: a base row for the element minus a distance for the tap. The same
// for columns. gy is stored transposed, (positions, OC), in a zero-bordered (P, Q) grid: output (oh, ow) at grid row
// (oh + top) * Q + ow + left, the border wide enough that every tap of every input position lands inside it (a tap
// that falls off the output map reads zeros: no bounds test per element). At stride 1 there is one phase.
struct TapGrid {
    int64_t top, left, P, Q, phases;
    // Per input row ih: (oh + top) * Q of its base output row and a * sw; per input column iw: ow + left of its base
    // output column and b. An element's grid row is row_base[ih] + col_base[iw], its phase row_phase[ih] +
    // col_phase[iw]: no division per element.
    std::vector<int64_t> row_base, row_phase, col_base, col_phase;
    explicit TapGrid(const ConvGeometry& g)
        : top(std::max<int64_t>(0, floor_div((g.KH - 1) * g.dh - g.ph, g.sh))),
          left(std::max<int64_t>(0, floor_div((g.KW - 1) * g.dw - g.pw, g.sw))),
          P(top + std::max(g.OH, floor_div(g.H - 1 + g.ph, g.sh) + 1)),
          Q(left + std::max(g.OW, floor_div(g.W - 1 + g.pw, g.sw) + 1)),
          phases(g.sh * g.sw) {
        for (int64_t ih = 0; ih < g.H; ++ih) {
            const int64_t a = (ih + g.ph) % g.sh;
            row_base.push_back(((ih + g.ph - a) / g.sh + top) * Q);
            row_phase.push_back(a * g.sw);
        }
        for (int64_t iw = 0; iw < g.W; ++iw) {
            const int64_t b = (iw + g.pw) % g.sw;
            col_base.push_back((iw + g.pw - b) / g.sw + left);
            col_phase.push_back(b);
        }
    }
};

// The taps of each phase (a, b), phase index a * sw + b: how many grid rows back each reads, and which (kh, kw) row
// of the channel's gW^T block it sums into.
struct PhaseTaps {
    std::vector<int64_t> distance, acc_row;   // all phases' taps, phase by phase
    std::vector<int64_t> first;               // (phases + 1): phase p's taps are [first[p], first[p + 1])
    PhaseTaps(const ConvGeometry& g, const TapGrid& grid) {
        for (int64_t a = 0; a < g.sh; ++a)
            for (int64_t b = 0; b < g.sw; ++b) {
                first.push_back(static_cast<int64_t>(distance.size()));
                for (int64_t kh = 0; kh < g.KH; ++kh) {
                    if ((kh * g.dh) % g.sh != a) continue;
                    for (int64_t kw = 0; kw < g.KW; ++kw) {
                        if ((kw * g.dw) % g.sw != b) continue;
                        distance.push_back((kh * g.dh - a) / g.sh * grid.Q + (kw * g.dw - b) / g.sw);
                        acc_row.push_back(kh * g.KW + kw);
                    }
                }
            }
        first.push_back(static_cast<int64_t>(distance.size()));
    }
    OuterTaps of(int64_t phase) const {
        return {first[phase + 1] - first[phase], distance.data() + first[phase], acc_row.data() + first[phase]};
    }
};

// The grid's interior = gy (OC, OH*OW)^T, through a 16 x 16 tile in L1: rows of gy are read 16 contiguous floats at a
// time and rows of the grid written 16 at a time (reading gy column-wise instead, 16 loads a row apart, was most of
// this kernel's own time).
void transpose_into(const ConvGeometry& g, const TapGrid& grid, const float* gy, float* padded) {
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
                float* dst = padded + ((oh + grid.top) * grid.Q + ow + grid.left) * OC + o0;
                if (no == B) std::copy_n(tile[p], B, dst);
                else std::copy_n(tile[p], no, dst);
                if (++ow == g.OW) ow = 0, ++oh;
            }
        }
    }
}

// f(c, phase, grid row) for one image's kept elements, in element order.
template <class F>
void for_each_kept(const ConvGeometry& g, const TapGrid& grid, const uint64_t* bits, const F& f) {
    const int64_t hw = g.hw();
    const int64_t* row_base = grid.row_base.data();
    const int64_t* row_phase = grid.row_phase.data();
    const int64_t* col_base = grid.col_base.data();
    const int64_t* col_phase = grid.col_phase.data();
    for (int64_t c = 0; c < g.C; ++c) {
        int64_t ih = 0, row_end = c * hw + g.W;   // the row of the next bit, and where that row ends
        for_each_set_bit(bits, c * hw, (c + 1) * hw, [&](int64_t i) {
            while (i >= row_end) ++ih, row_end += g.W;
            const int64_t iw = i - (row_end - g.W);
            f(c, row_phase[ih] + col_phase[iw], row_base[ih] + col_base[iw]);
        });
    }
}

// One image's kept elements as lists per (channel, phase), list c * phases + phase, of (grid row, value). At stride 1
// (one phase) the lists are in element order, so the values are decoded straight into place; otherwise a counting
// sort by list, from the values decoded into `decoded`.
void list_entries(const ConvGeometry& g, const TapGrid& grid, const SparseSamples& x, int64_t n, float* decoded,
                  ChannelEntries& e) {
    const uint64_t* bits = x.sample_bits(n);
    if (grid.phases == 1) {
        x.decode_values(n, e.value.data());
        int64_t k = 0, list = -1;
        for_each_kept(g, grid, bits, [&](int64_t c, int64_t, int64_t row) {
            while (list < c) e.start[++list] = k;
            e.row[k++] = static_cast<int32_t>(row);
        });
        while (list < g.C) e.start[++list] = k;
        return;
    }
    x.decode_values(n, decoded);
    std::fill(e.start.begin(), e.start.end(), 0);
    for_each_kept(g, grid, bits, [&](int64_t c, int64_t phase, int64_t) { ++e.start[c * grid.phases + phase + 1]; });
    for (size_t l = 1; l < e.start.size(); ++l) e.start[l] += e.start[l - 1];
    e.cursor.assign(e.start.begin(), e.start.end() - 1);
    int64_t k = 0;
    for_each_kept(g, grid, bits, [&](int64_t c, int64_t phase, int64_t row) {
        const int64_t slot = e.cursor[c * grid.phases + phase]++;
        e.row[slot] = static_cast<int32_t>(row);
        e.value[slot] = decoded[k++];
    });
}

}  // namespace

bool conv2d_sparse_input_supports(const ConvGeometry& g) { return !g.depthwise(); }

void conv2d_sparse_input_weight_grad(const ConvGeometry& g, const SparseSamples& x, const float* gy, float* gw) {
    RAZOR_CHECK(x.samples == g.N && x.sample_numel == g.C * g.hw())
        << "conv2d sparse gW: x holds " << x.samples << " samples of " << x.sample_numel << ", geometry wants " << g.N
        << " of " << g.C * g.hw();
    const TapGrid grid(g);
    const PhaseTaps taps(g, grid);
    const int64_t kk = g.kk(), part = g.C * kk * g.OCg, padded_size = grid.P * grid.Q * g.OC;
    const int64_t max_kept = x.max_kept(), decoded_size = grid.phases > 1 ? max_kept : 0;
    const int64_t per_chunk = part + padded_size + decoded_size, chunks = batch_chunks(g.N);
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* acc = ws + c * per_chunk;         // gW^T (groups, Cg*KK, OCg) partial
        float* padded = acc + part;              // (P*Q, OC), zero border
        float* decoded = padded + padded_size;   // (max_kept) when there are several phases
        std::fill(acc, acc + part + padded_size, 0.f);
        ChannelEntries entries;
        entries.start.resize(static_cast<size_t>(g.C * grid.phases + 1));
        entries.row.resize(static_cast<size_t>(max_kept));
        entries.value.resize(static_cast<size_t>(max_kept));
        for (int64_t n = g.N * c / chunks; n < g.N * (c + 1) / chunks; ++n) {
            if (x.kept(n) == 0) continue;
            transpose_into(g, grid, gy + n * g.OC * g.ohw(), padded);
            list_entries(g, grid, x, n, decoded, entries);
            for (int64_t gi = 0; gi < g.groups; ++gi)
                for (int64_t phase = 0; phase < grid.phases; ++phase)
                    sparse_outer_accumulate(entries, {gi * g.Cg, (gi + 1) * g.Cg, grid.phases, phase},
                                            taps.of(phase), padded + gi * g.OCg, g.OC, g.OCg,
                                            acc + gi * g.Cg * kk * g.OCg, kk * g.OCg, g.OCg);
        }
    }
    gw_from_transposed(g, ws, per_chunk, chunks, gw);
}

}  // namespace razor::detail
