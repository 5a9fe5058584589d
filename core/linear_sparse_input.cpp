// core/linear_sparse_input.cpp -- see linear_sparse_input.h.
#include "core/linear_sparse_input.h"

#include <algorithm>

#include "core/check.h"
#include "core/conv_geometry.h"
#include "core/sparse_outer.h"
#include "core/tensor.h"

namespace razor::detail {

namespace {

// One sample's kept elements (rows (rows, in), row-major), listed per column j as (row, value): a counting sort of
// the bitmap's row-major order by column.
void list_by_column(const SparseSamples& x, int64_t b, int64_t in, const float* values, ChannelEntries& e) {
    std::fill(e.start.begin(), e.start.end(), 0);
    const uint64_t* bits = x.sample_bits(b);
    for_each_set_bit(bits, 0, x.sample_numel, [&](int64_t i) { ++e.start[i % in + 1]; });
    for (int64_t j = 0; j < in; ++j) e.start[j + 1] += e.start[j];
    std::vector<int64_t>& next = e.cursor;
    next.assign(e.start.begin(), e.start.end() - 1);
    int64_t k = 0;
    for_each_set_bit(bits, 0, x.sample_numel, [&](int64_t i) {
        const int64_t slot = next[i % in]++;
        e.row[slot] = static_cast<int32_t>(i / in);
        e.value[slot] = values[k++];
    });
}

}  // namespace

void linear_sparse_input_weight_grad(const SparseSamples& x, int64_t M, int64_t in, int64_t out, const float* g,
                                     float* gw) {
    RAZOR_CHECK(x.samples * x.sample_numel == M * in && (x.samples == 0 || x.sample_numel % in == 0))
        << "linear sparse gW: x holds " << x.samples << " samples of " << x.sample_numel << ", expected (" << M
        << ", " << in << ")";
    const int64_t rows = x.samples ? x.sample_numel / in : 0;   // rows of x per sample
    // Columns of `out` per pass over a sample: a block of the sample's g (rows, block) of at most 256 KiB stays in L2
    // while every column's entries read it. A multiple of 128 floats (the kernel's widest vector block).
    const int64_t block = std::min(out, std::max<int64_t>(128, (65536 / std::max<int64_t>(rows, 1)) / 128 * 128));
    const int64_t part = in * out, max_kept = x.max_kept(), per_chunk = part + max_kept;
    const int64_t chunks = batch_chunks(x.samples), zero = 0;
    const OuterTaps one_tap{1, &zero, &zero};   // row m of g, into row j of gW^T
    const OuterLists columns{0, in, 1, 0};
    Tensor workspace = Tensor::empty({chunks * per_chunk});
    float* ws = workspace.f32();
#pragma omp parallel for schedule(static, 1) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
        float* acc = ws + c * per_chunk;   // gW^T (in, out) partial
        float* values = acc + part;        // (max_kept)
        std::fill(acc, acc + part, 0.f);
        ChannelEntries entries;
        entries.start.resize(static_cast<size_t>(in + 1));
        entries.row.resize(static_cast<size_t>(max_kept));
        entries.value.resize(static_cast<size_t>(max_kept));
        for (int64_t b = x.samples * c / chunks; b < x.samples * (c + 1) / chunks; ++b) {
            if (x.kept(b) == 0) continue;
            x.decode_values(b, values);
            list_by_column(x, b, in, values, entries);
            const float* g_b = g + b * rows * out;
            for (int64_t o0 = 0; o0 < out; o0 += block)
                sparse_outer_accumulate(entries, columns, one_tap, g_b + o0, out, std::min(block, out - o0), acc + o0,
                                        out, out);
        }
    }
    // gW[o, j] = the chunks' partials summed in chunk order.
    for (int64_t o = 0; o < out; ++o)
        for (int64_t j = 0; j < in; ++j) {
            float sum = 0.f;
            for (int64_t c = 0; c < chunks; ++c) sum += ws[c * per_chunk + j * out + o];
            gw[o * in + j] = sum;
        }
}

}  // namespace razor::detail
