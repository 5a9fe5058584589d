// core/sparse_outer.cpp -- see sparse_outer.h.
//
// Vectors are GCC vector extensions of the build's widest float vector (16 lanes on AVX-512 builds, 8 on AVX, else
// 4): this file is compiled at the build's baseline flags like the other portable loops (CMakeLists.txt "kernel
// families"), so on a -march=native build it runs the machine's width.
#include "core/sparse_outer.h"

#include <algorithm>

namespace razor::detail {
namespace {

#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
constexpr int kRegisters = 32;
#elif defined(__AVX__)
constexpr int64_t kLanes = 8;
constexpr int kRegisters = 16;
#else
constexpr int64_t kLanes = 4;
constexpr int kRegisters = 16;
#endif
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float)), aligned(alignof(float))));   // unaligned

inline Vec load(const float* p) { return *reinterpret_cast<const Vec*>(p); }
inline void add_to(float* p, Vec v) { *reinterpret_cast<Vec*>(p) += v; }

// One list's entries [e0, e1) into acc at columns [0, R * kLanes) of rows (both already offset to the block's first
// column). KK and R are compile-time so that sum[][] lives in registers.
template <int KK, int R>
void block(const int32_t* row, const float* value, int64_t e0, int64_t e1, const OuterTaps& taps, const float* rows,
           int64_t ld, float* acc, int64_t acc_ld) {
    Vec sum[KK][R] = {};
    int64_t off[KK];
    for (int t = 0; t < KK; ++t) off[t] = taps.distance[t] * ld;
    for (int64_t e = e0; e < e1; ++e) {
        const float* base = rows + static_cast<int64_t>(row[e]) * ld;
        const Vec v = value[e] - Vec{};   // broadcast
        for (int t = 0; t < KK; ++t)
            for (int r = 0; r < R; ++r) sum[t][r] += v * load(base - off[t] + r * kLanes);
    }
    for (int t = 0; t < KK; ++t)
        for (int r = 0; r < R; ++r) add_to(acc + taps.acc_row[t] * acc_ld + r * kLanes, sum[t][r]);
}

// Any tap count and width, one scalar column at a time: the columns left over after the vector blocks, and tap
// counts without a compiled block.
void scalar_columns(const int32_t* row, const float* value, int64_t e0, int64_t e1, const OuterTaps& taps,
                    const float* rows, int64_t ld, int64_t o0, int64_t o1, float* acc, int64_t acc_ld) {
    for (int64_t t = 0; t < taps.count; ++t)
        for (int64_t o = o0; o < o1; ++o) {
            float s = 0.f;
            for (int64_t e = e0; e < e1; ++e)
                s += value[e] * rows[(static_cast<int64_t>(row[e]) - taps.distance[t]) * ld + o];
            acc[taps.acc_row[t] * acc_ld + o] += s;
        }
}

// Registers: KK * R sums, plus the broadcast value and a loaded row; at most 8 vectors wide.
template <int KK>
constexpr int widest() {
    return std::min(8, (kRegisters - 4) / KK);
}

// The vector blocks of width R * kLanes, then narrower ones (R - 1 vectors for 3x3, R / 2 otherwise), then scalar
// columns.
template <int KK, int R>
void channel(const int32_t* row, const float* value, int64_t e0, int64_t e1, const OuterTaps& taps, const float* rows,
             int64_t ld, int64_t o, int64_t width, float* acc, int64_t acc_ld) {
    for (; o + R * kLanes <= width; o += R * kLanes)
        block<KK, R>(row, value, e0, e1, taps, rows + o, ld, acc + o, acc_ld);
    if constexpr (R > 1) {
        channel<KK, (KK == 9 ? R - 1 : R / 2)>(row, value, e0, e1, taps, rows, ld, o, width, acc, acc_ld);
    } else {
        scalar_columns(row, value, e0, e1, taps, rows, ld, o, width, acc, acc_ld);
    }
}

}  // namespace

void sparse_outer_accumulate(const ChannelEntries& entries, const OuterLists& lists, const OuterTaps& taps,
                             const float* rows, int64_t ld, int64_t width, float* acc, int64_t acc_channel,
                             int64_t acc_ld) {
    const int32_t* row = entries.row.data();
    const float* value = entries.value.data();
    for (int64_t c = lists.c0; c < lists.c1; ++c) {
        const int64_t l = c * lists.list_stride + lists.list_offset;
        const int64_t e0 = entries.start[l], e1 = entries.start[l + 1];
        if (e0 == e1 || taps.count == 0) continue;
        float* acc_c = acc + (c - lists.c0) * acc_channel;
        switch (taps.count) {
            case 9: channel<9, widest<9>()>(row, value, e0, e1, taps, rows, ld, 0, width, acc_c, acc_ld); break;
            case 4: channel<4, widest<4>()>(row, value, e0, e1, taps, rows, ld, 0, width, acc_c, acc_ld); break;
            case 2: channel<2, widest<2>()>(row, value, e0, e1, taps, rows, ld, 0, width, acc_c, acc_ld); break;
            case 1: channel<1, widest<1>()>(row, value, e0, e1, taps, rows, ld, 0, width, acc_c, acc_ld); break;
            default: scalar_columns(row, value, e0, e1, taps, rows, ld, 0, width, acc_c, acc_ld);
        }
    }
}

}  // namespace razor::detail
