// core/sparse_outer.h -- the inner kernel of the weight gradients read from a sparse saved input
// (core/conv_sparse_input.h, core/linear_sparse_input.h): sums of value x row over the kept elements of each input
// channel, with the sums held in registers.
//
// docs: docs/back-razor.md "Sparse weight gradients".
//
// One sample's kept elements, grouped by input channel (ChannelEntries): channel c's are entries
// [start[c], start[c + 1]), each the index `row` of a row of a row-major matrix `rows` (row r at rows + r * ld) and
// its value. For each channel c in [c0, c1), tap t < KK and column o < width,
//
//     acc[((c - c0) * KK + t) * acc_ld + o] += sum over c's entries e of value[e] * rows[(row[e] - tap[t]) * ld + o]
//
// A conv's gW^T: rows = the image's gy transposed to (positions, OC) and zero-padded so that every tap lands inside
// it, tap[t] = the row distance of tap t. A Linear's gW^T: rows = g (M, out), one tap at distance 0.
//
// The KK x width block of sums for one channel is held in vector registers while its entries stream past (a 3x3
// conv keeps 9 x 2 AVX-512 vectors, a 1x1 conv or Linear 1 x 8), and added to acc once per channel and block: the
// loop carries no store-to-load chain through memory, and each entry costs KK x width / lanes multiply-adds.
#pragma once

#include <cstdint>
#include <vector>

#include "core/bitmask.h"

namespace razor::detail {

struct ChannelEntries {
    tracked_vector<int64_t> start;   // (channels + 1)
    tracked_vector<int32_t> row;     // (entries)
    tracked_vector<float> value;     // (entries)
    std::vector<int64_t> cursor;     // scratch for building the lists
};

void sparse_outer_accumulate(const ChannelEntries& entries, int64_t c0, int64_t c1, const int64_t* tap, int64_t KK,
                             const float* rows, int64_t ld, int64_t width, float* acc, int64_t acc_ld);

}  // namespace razor::detail
