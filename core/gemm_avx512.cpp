// core/gemm_avx512.cpp -- razor's own AVX-512 GEMM: C = alpha op(A) op(B) + beta C (see gemm.h, gemm.cpp).
//
// reference: BLAS sgemm; the blocking follows the BLIS papers (Van Zee & van de Geijn, "BLIS: A Framework for
// Rapidly Instantiating BLAS Functionality", 2015). docs: docs/bench-ops.md "GEMM engine".
//
// Derivation. C (M, N) is row-major, so a row of C is contiguous along N: the micro-kernel keeps an MR x NR tile
// of C in registers, NR = 16 * NV columns as NV zmm vectors per row, MR rows -> MR * NV accumulators. One step k
// of the K loop is a rank-1 update of the tile:
//     tile(i, :) += op(A)(i, k) * op(B)(k, :)        for i < MR
// i.e. NV vector loads of op(B)'s row k, MR broadcasts of op(A)'s column k, MR * NV FMAs. Zen 4 retires one
// 512-bit FMA per cycle per core (two 256-bit pipes) with a 4-cycle latency, so any tile with >= 8 independent
// accumulators keeps the FMA pipe busy; a bigger tile lowers the loads per FMA ((NV + MR) / (MR * NV)).
// MR = 8, NV = 3 (24 of the 32 zmm registers for the tile; 8 x 48) was chosen by measurement: a standalone
// harness timed one thread (thread CPU time) on the conv and ViT shapes of docs/bench-ops.md, with an earlier
// version of this file that packed A. 8 x 48 and 6 x 64 ran alike (55-96 GFLOP/s) except on 64-column convs,
// where 48 wastes a third of the second tile (6 x 64 is the better tile there, not done yet); 14 x 32 and
// 12 x 32 ran at 0.3-0.6x Eigen as GCC 12 compiled them (not investigated). conv OC = 16/32/64 are multiples of 8.
//
// Operands as the kernel reads them:
//   op(A): in place. The MR values of step k are broadcast from A[k * lda + i] (stored (K, M): adjacent) or from
//          A[i * lda + k] (stored (M, K): one stream per row; gemm_rows: A[a_rows[i] + k]); an MR x KC block
//          (8 KiB) stays in L1 while the
//          kernel sweeps the B block. Rows past M repeat the last row (computed, never stored). Dropping the
//          packed copy of A (a transposing copy per MC x KC block) raised the same harness's figures 5-40 %
//          (e.g. ViT fc2 forward 62 -> 91 GFLOP/s, conv 64->64 forward 64 -> 75).
//   op(B): read in place when B is stored (K, N) (a row of op(B) is contiguous; the last vectors of a partial
//          tile are masked loads, so nothing past column N is touched). Stored (N, K) (trans_b) it is packed
//          ONCE per call into panels of NR columns, k-major (panel[k * NR + j]), 16 x 16 register transposes
//          (scalar packing made conv gW 0.8x Eigen, the transposes 1.3-1.5x), shared by all threads.
// Blocking: KC = 256 steps per pass over C (the A block of one tile row, 8 x 256 floats = 8 KiB, stays in L1
// while the kernel sweeps NC = 480 columns of B, a 256 x 480 block = 480 KiB that stays in the 1 MiB L2). The first
// K block applies beta, later ones add (beta = 1), so beta == 0 never reads C.
// Threads (gemm_blocking.h): one omp parallel region; packing of B is split over the threads, one barrier, then every
// thread computes its own block of C rows (or of C columns when C is wide: M < N), reading the shared op(B).
// Summation order per element is k = 0..K-1 in KC blocks whatever the thread count, so results do not depend on
// the number of threads.
#include "core/gemm.h"

#if defined(__AVX512F__)

// GCC 12 reports false "may be used uninitialized" warnings inside avx512fintrin.h's shuffle intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>

#include "core/gemm_blocking.h"

namespace razor::detail {
namespace {

constexpr int MR = 8, NV = 3, NR = 16 * NV;
constexpr int64_t KC = 256, NC = 10 * NR;

using Problem = GemmOperands;

// c (m <= MR rows, n <= 16 * V columns, row stride ldc) = alpha * a(MR, kc) . b(kc, 16 * V) + beta * c, with V <= NV
// column vectors: a tile edge narrower than NR runs the kernel with only the vectors it needs (a 64-column conv is a
// 48 + 16 tile pair, a 16-column one a single vector), instead of FMAs on masked-off zeros.
// a: element (i, k) at a[row[i] + k * step] (rows past m repeat row m - 1: read, computed, never stored);
// b: row k at b + b_off[k] (k * NR in a packed panel, k * ldb in place, or gemm_rows' table).
template <int V>
void micro_kernel(int64_t kc, const float* a, const int64_t* row, int64_t step, const float* b,
                  const int64_t* b_off, float* c, int64_t ldc, int m, int n, float alpha, float beta) {
    __mmask16 mask[V];   // vector v covers columns 16v .. 16v+15
    for (int v = 0; v < V; ++v) mask[v] = static_cast<__mmask16>((1u << std::clamp(n - 16 * v, 0, 16)) - 1u);
    __m512 acc[MR][V];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; ++k, a += step) {
        const float* bk = b + b_off[k];
        __m512 bv[V];
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], bk + 16 * v);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
            const __m512 ai = _mm512_set1_ps(a[row[i]]);
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
        if (i >= m) break;
        float* ci = c + i * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
            __m512 r = _mm512_mul_ps(acc[i][v], va);
            if (beta != 0.f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], ci + 16 * v), r);
            _mm512_mask_storeu_ps(ci + 16 * v, mask[v], r);
        }
    }
}

// 16 x 16 transpose in registers: r[j] holds row j on entry, column j on exit (three shuffle rounds: 32-bit,
// 64-bit and 128-bit interleaves, then a 256-bit one).
inline void transpose16(__m512 (&r)[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {   // interleave 32-bit elements of row pairs
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {   // interleave 64-bit pairs
        const int q = 4 * i;
        r[q] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[q]), _mm512_castps_pd(t[q + 2])));
        r[q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[q]), _mm512_castps_pd(t[q + 2])));
        r[q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[q + 1]), _mm512_castps_pd(t[q + 3])));
        r[q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[q + 1]), _mm512_castps_pd(t[q + 3])));
    }
    for (int h = 0; h < 2; ++h)     // 128-bit lanes: rows 0-3 with 4-7, 8-11 with 12-15
        for (int i = 0; i < 4; ++i) {
            t[8 * h + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0x88);
            t[8 * h + 4 + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0xdd);
        }
    for (int i = 0; i < 8; ++i) {   // 256-bit halves: rows 0-7 with 8-15
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
    }
}

// Panel jp of op(B) = B^T (B stored (N, K)): columns jp*NR .. +NR, all K steps, into dst[k][NR], zero past N.
// 16 columns x 16 steps at a time: 16 row loads of B, one register transpose, 16 stores.
void pack_b_panel(const Problem& p, int64_t jp, float* dst) {
    const int64_t j0 = jp * NR;
    for (int v = 0; v < NV; ++v) {
        const int64_t jv = j0 + 16 * v;
        const int cols = static_cast<int>(std::clamp<int64_t>(p.N - jv, 0, 16));
        for (int64_t k0 = 0; k0 < p.K; k0 += 16) {
            const int steps = static_cast<int>(std::min<int64_t>(16, p.K - k0));
            const __mmask16 kmask = static_cast<__mmask16>((1u << steps) - 1u);
            __m512 r[16];
            for (int j = 0; j < 16; ++j)
                r[j] = j < cols ? _mm512_maskz_loadu_ps(kmask, p.B + p.b_row(jv + j) + k0) : _mm512_setzero_ps();
            transpose16(r);
            for (int k = 0; k < steps; ++k) _mm512_store_ps(dst + (k0 + k) * NR + 16 * v, r[k]);
        }
    }
}

// C rows m0 .. m1, columns n0 .. n1 (n0 a multiple of NR), on the calling thread.
void compute_block(const Problem& p, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    for_each_tile<MR, NR, KC, NC>(
        p, m0, m1, n0, n1, [](const KBlock&) {},
        [&](const KBlock& blk, int64_t i0, int m, const float* a, const int64_t* row, int64_t step) {
            for (int64_t j = blk.jc; j < blk.jc + blk.nc; j += NR) {
                const int n = static_cast<int>(std::min<int64_t>(NR, blk.jc + blk.nc - j));
                const float* b = p.b_packed ? p.b_packed + (j / NR) * p.K * NR + blk.pc * NR : p.B + j;
                float* c = p.C + i0 * p.ldc + j;
                const int64_t kc = blk.kc;
                const float beta = blk.beta;
                if (n > 32) micro_kernel<3>(kc, a, row, step, b, blk.b_off, c, p.ldc, m, n, p.alpha, beta);
                else if (n > 16) micro_kernel<2>(kc, a, row, step, b, blk.b_off, c, p.ldc, m, n, p.alpha, beta);
                else micro_kernel<1>(kc, a, row, step, b, blk.b_off, c, p.ldc, m, n, p.alpha, beta);
            }
        });
}

}  // namespace

void gemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int threads,
                 const int64_t* a_rows, const int64_t* b_rows) {
    Problem p{trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr, a_rows, b_rows};
    const int64_t panels = (N + NR - 1) / NR;
    thread_local PanelBuffer b_buffer;   // the calling thread's; shared with the team through p.b_packed
    p.b_packed = trans_b ? b_buffer.get(panels * K * NR) : nullptr;
    split_over_threads<MR, NR>(
        p, threads, [&](int64_t jp, float* dst) { pack_b_panel(p, jp, dst); },
        [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { compute_block(p, m0, m1, n0, n1); });
}

}  // namespace razor::detail

#endif  // __AVX512F__
