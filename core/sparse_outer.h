// core/sparse_outer.h -- the inner kernel of the weight gradients read from a sparse saved input
// (core/conv_sparse_input.h, core/linear_sparse_input.h): sums of value x row over the kept elements of each input
// channel, with the sums held in registers.
//
// docs: docs/back-razor.md "Sparse weight gradients".
//
// One sample's kept elements in lists (ChannelEntries): list l holds entries [start[l], start[l + 1]), each the index
// `row` of a row of a row-major matrix `rows` (row r at rows + r * ld) and its value. Channel c's list is
// c * list_stride + list_offset (a strided conv keeps one list per channel and phase). For each channel c in
// [c0, c1), tap t < taps.count and column o < width,
//
//     acc[(c - c0) * acc_channel + taps.acc_row[t] * acc_ld + o] += sum over the list's entries e of
//                                                                   value[e] * rows[(row[e] - taps.distance[t]) * ld + o]
//
// A conv's gW^T: rows = the image's gy transposed to (positions, OC) and zero-padded so that every tap lands inside
// it, distance[t] = how many rows back tap t reads, acc_row[t] = its (kh, kw). A Linear's gW^T: rows = g (M, out),
// one tap at distance 0.
//
// The taps x width block of sums for one list is held in vector registers while its entries stream past (a 3x3
// conv keeps 9 x 3 AVX-512 vectors, a 1x1 conv or Linear 1 x 8), and added to acc once per list and block: the loop
// carries no store-to-load chain through memory, and each entry costs taps x width / lanes multiply-adds.
#pragma once

#include <cstdint>
#include <vector>

#include "core/bitmask.h"

namespace razor::detail {

struct ChannelEntries {
    tracked_vector<int64_t> start;   // (lists + 1)
    tracked_vector<int32_t> row;     // (entries)
    tracked_vector<float> value;     // (entries)
    std::vector<int64_t> cursor;     // scratch for building the lists
};

struct OuterTaps {
    int64_t count = 0;
    const int64_t* distance = nullptr;   // (count) rows back from an entry's row
    const int64_t* acc_row = nullptr;    // (count) which row of the channel's block of acc its sums go to
};

struct OuterLists {
    int64_t c0 = 0, c1 = 0;                   // channels
    int64_t list_stride = 1, list_offset = 0;  // channel c's list: c * list_stride + list_offset
};

void sparse_outer_accumulate(const ChannelEntries& entries, const OuterLists& lists, const OuterTaps& taps,
                             const float* rows, int64_t ld, int64_t width, float* acc, int64_t acc_channel,
                             int64_t acc_ld);

}  // namespace razor::detail
