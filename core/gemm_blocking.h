// core/gemm_blocking.h -- what razor's GEMM kernels (gemm_avx2.cpp, gemm_avx512.cpp) share around their
// micro-kernels: the operands, the packed-panel buffer, the offsets of a tile's rows of op(A), and the split of C
// over an OpenMP team. docs: docs/bench-ops.md "GEMM engine". Internal to core/; callers use gemm.h.
//
// Everything here has internal linkage on purpose: each kernel file compiles its own copy with its own target flags,
// so no AVX-encoded copy can be the one the linker keeps for another file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace razor::detail {
namespace {

// C = alpha op(A) op(B) + beta C as gemm.h states it, plus what a kernel reads B through.
struct GemmOperands {
    bool trans_a, trans_b;
    int64_t M, N, K;
    float alpha;
    const float* A;
    int64_t lda;
    const float* B;
    int64_t ldb;
    float beta;
    float* C;
    int64_t ldc;
    const float* b_packed;   // op(B) in NR-column panels, else null: B is read in place
    const int64_t* a_rows;   // row i of A (M, K) at A + a_rows[i] (gemm_rows; not trans_a), else as lda says
    const int64_t* b_rows;   // stored row r of B at B + b_rows[r] (gemm_rows), else at B + r * ldb
    int64_t b_row(int64_t r) const { return b_rows ? b_rows[r] : r * ldb; }
};

// A growable 64-byte-aligned float buffer (one per calling thread, for op(B)'s panels).
struct PanelBuffer {
    float* data = nullptr;
    int64_t size = 0;
    PanelBuffer() = default;
    PanelBuffer(const PanelBuffer&) = delete;
    PanelBuffer& operator=(const PanelBuffer&) = delete;
    ~PanelBuffer() { std::free(data); }
    float* get(int64_t n) {
        if (n > size) {
            std::free(data);
            data = static_cast<float*>(std::aligned_alloc(64, (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64));
            size = n;
        }
        return data;
    }
};

// Offsets (from op(A) at k = 0) of the MR rows of the tile starting at row i0 with m <= MR real rows; rows past m
// repeat row m - 1 (computed, never stored). a_row: the stride between rows of op(A) (lda, or 1 when trans_a).
template <int MR>
void tile_rows(const GemmOperands& p, int64_t i0, int m, int64_t a_row, int64_t (&row)[MR]) {
    for (int i = 0; i < MR; ++i) {
        const int64_t r = i0 + std::min(i, m - 1);
        row[i] = p.a_rows ? p.a_rows[r] : r * a_row;
    }
}

// One K block of a block of C columns, as the micro-kernels see it.
struct KBlock {
    int64_t jc, nc;         // columns jc .. jc + nc of C (jc a multiple of the kernel's NR)
    int64_t pc, kc;         // steps pc .. pc + kc of K
    float beta;             // p.beta in the first K block, 1 after it: beta == 0 never reads C
    const int64_t* b_off;   // row k of op(B) in this block: k * NR in a packed panel, else B's row pc + k
};

// The loops around the micro-kernels, over C rows m0 .. m1 and columns n0 .. n1 (n0 a multiple of NR): blocks of NC
// columns, K blocks of KC steps, row tiles of MR rows. start(block) runs once per K block (before its row tiles),
// tile(block, i0, m, a, row, step) once per row tile: rows i0 .. i0 + m, op(A)(i, k) at a[row[i] + k * step].
template <int MR, int NR, int64_t KC, int64_t NC, class Start, class Tile>
void for_each_tile(const GemmOperands& p, int64_t m0, int64_t m1, int64_t n0, int64_t n1, Start start, Tile tile) {
    // op(A)(i, k): A[k * lda + i] (A stored (K, M)) or A[i * lda + k] (stored (M, K))
    const int64_t a_row = p.trans_a ? 1 : p.lda, a_step = p.trans_a ? p.lda : 1;
    for (int64_t jc = n0; jc < n1; jc += NC) {
        const int64_t nc = std::min(NC, n1 - jc);
        for (int64_t pc = 0; pc < p.K; pc += KC) {
            const int64_t kc = std::min(KC, p.K - pc);
            int64_t b_off[KC];
            for (int64_t k = 0; k < kc; ++k) b_off[k] = p.b_packed ? k * NR : p.b_row(pc + k);
            const KBlock block{jc, nc, pc, kc, pc == 0 ? p.beta : 1.f, b_off};
            start(block);
            for (int64_t i0 = m0; i0 < m1; i0 += MR) {
                const int m = static_cast<int>(std::min<int64_t>(MR, m1 - i0));
                int64_t row[MR];   // offsets of the tile's rows of op(A), from a
                tile_rows<MR>(p, i0, m, a_row, row);
                tile(block, i0, m, p.A + pc * a_step, row, a_step);
            }
        }
    }
}

// One product over `threads` threads: panel jp of op(B) packed by pack(jp, dst) (when p.b_packed; split over the
// team, then one barrier), then each thread's block of C rows (multiples of MR), or of C columns (multiples of NR)
// when C is wide (M < N), computed by block(m0, m1, n0, n1) reading the shared panels.
template <int MR, int NR, class Pack, class Block>
void split_over_threads(const GemmOperands& p, int threads, Pack pack, Block block) {
    const int64_t panels = (p.N + NR - 1) / NR;
    const bool split_rows = p.M >= p.N;
    const int64_t unit = split_rows ? MR : NR, units = split_rows ? (p.M + MR - 1) / MR : panels;
#ifdef _OPENMP
    const int parts = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, units)));
#else
    const int parts = 1;
#endif
    auto run = [&](int t) {
        if (p.b_packed)
            for (int64_t jp = t; jp < panels; jp += parts) pack(jp, const_cast<float*>(p.b_packed) + jp * p.K * NR);
        if (parts > 1) {
#pragma omp barrier
        }
        const int64_t lo = units * t / parts * unit, hi = units * (t + 1) / parts * unit;
        if (split_rows) block(lo, std::min(hi, p.M), int64_t{0}, p.N);
        else block(int64_t{0}, p.M, lo, std::min(hi, p.N));
    };
    if (parts == 1) return run(0);
#ifdef _OPENMP
#pragma omp parallel num_threads(parts)
    run(omp_get_thread_num());
#endif
}

}  // namespace
}  // namespace razor::detail
