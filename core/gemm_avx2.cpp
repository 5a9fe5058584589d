// core/gemm_avx2.cpp -- razor's AVX2+FMA GEMM: C = alpha op(A) op(B) + beta C (see gemm.h, gemm.cpp).
//
// reference: BLAS sgemm; the blocking follows the BLIS papers (Van Zee & van de Geijn, "BLIS: A Framework for
// Rapidly Instantiating BLAS Functionality", 2015), as gemm_avx512.cpp does. docs: docs/bench-ops.md "GEMM engine".
// Compiled with -mavx2 -mfma whatever the baseline (CMakeLists.txt); gemm.cpp calls it only where cpu_isa() has avx2.
//
// Derivation. C (M, N) is row-major; the micro-kernel keeps an R x 16 tile of C in registers (2 ymm per row), and
// one step k of the K loop is the rank-1 update
//     tile(i, :) += op(A)(i, k) * op(B)(k, 0..15)        for i < R
// (2 loads of op(B)'s row k, R broadcasts, 2R FMAs). With 16 ymm registers, R = 6 (MR) takes 12 accumulators, 2
// for op(B)'s row and 1 for the broadcast: 15. Zen 3 and the Intel cores since Haswell retire two 256-bit FMAs per
// cycle with a 4-5 cycle latency, so >= 10 independent accumulators keep both pipes busy, and 8 loads per 12 FMAs
// stay under the 2-3 loads per cycle. The last rows of a matrix run a 4- or 2-row tile (8 or 4 accumulators), so a
// conv with OC = 16 runs 6 + 6 + 4 rows, not 18.
//
// Operands as the kernel reads them:
//   op(A): per block of MC = 144 rows and KC steps, packed into MR-row micro-panels, k-major (a_pack[k * 6 + i]):
//          the 6 broadcasts of a step come from 24 adjacent bytes, and op(A) stored (K, M) stops striding lda per
//          step. Stored (M, K) (gemm_rows: row i at a_rows[i]) the copy is 8 x 8 register transposes, stored (K, M)
//          a 6-float copy per step. The copy pays only when the micro-panel is reused: a column block of fewer than
//          kPackAPanels = 8 panels of 16 (C narrower than 113 columns, e.g. conv gcol at T = 16-49 or gW^T with
//          OC = 32) reads op(A) in place instead, broadcast from A[k * lda + i] or A[i * lda + k]. Rows past M
//          repeat the last row (computed, never stored).
//   op(B): packed once per call into 16-column panels, k-major (panel[k * 16 + j]), zero past N, shared by all
//          threads: stored (N, K) (trans_b) by 8 x 8 register transposes, stored (K, N) by row copies when C has at
//          least kPackRows rows. The kernel then walks a panel by pointer increments (16 floats a step); shorter
//          products read B in place through a table of row offsets (b_off[k]), one extra load a step.
//   Edges: the last panel of a block, narrower than 16 columns, is copied once per K block into zero-padded 16-wide
//          scratch (when op(B) is read in place; packed panels are padded already); its tiles run the 8-column
//          kernel (n <= 8) or the 16-column one into a 16-wide C scratch, and copy the n columns back: AVX2 has no
//          cheap masked store.
// With packed A the k loop is unrolled by 4; as GCC 12 compiles it the 12 accumulators stay in registers, the
// broadcasts read memory directly (vbroadcastss m32) and nothing spills (checked with objdump on the object). The kernel prefetches
// its tile of C before the k loop, so the final read-modify-write of C does not wait on memory.
// Blocking: KC = 256 steps per pass over C. For each MC x KC block of op(A) (packed: 144 KiB, in the L2), each
// 6-row micro-panel (6 KiB, in L1) sweeps NC = 240 columns of packed B, a 256 x 240 block = 240 KiB that stays in
// the L2 (512 KiB on Zen 3, 1 MiB on Zen 4/5). The first K block applies beta, later ones add (beta = 1), so
// beta == 0 never reads C. Threads split C's rows (or columns when M < N) as in the AVX-512 kernel, and each element
// sums k = 0..K-1 in KC blocks, in the same order packed or in place, whatever the thread count.
// Compiled with -mno-avx512f (CMakeLists.txt) so an AVX-512 build machine's -march=native cannot hand this file
// the 32 registers and AVX-512VL forms an AVX2-only CPU lacks.
#include "core/gemm.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/gemm_blocking.h"

namespace razor::detail {
namespace {

constexpr int MR = 6, NR = 16;
constexpr int64_t KC = 256, MC = 24 * MR, NC = 15 * NR;
constexpr int64_t kPackRows = 32;   // op(B) stored (K, N) is packed for products with at least this many rows
constexpr int64_t kPackAPanels = 8;  // op(A) is packed for column blocks of at least this many NR-wide panels

using Operands = GemmOperands;

// c (m <= R rows, 8 V columns, row stride ldc) = alpha * a(R, kc) . b(kc, 8 V) + beta * c, V = 1 or 2 vectors.
// a: a packed micro-panel, element (i, k) at a[k * MR + i] (kPackedA), or op(A) in place at a[row[i] + k * step];
// b: row k at b + k * NR (kPackedB: a packed panel) or at b + b_off[k] (in place), 8 V readable floats.
// Only the packed-A loop is unrolled: unrolled, the in-place one (6 row offsets and a stride live besides the 15
// vector registers) measured slower on the narrow conv products that take it (16->16 gW^T: 84.5 GFLOP/s against
// 100.9 not unrolled, one thread, CPU time, median of 3 alternating rounds).
template <int R, int V, bool kPackedA, bool kPackedB>
void micro_kernel(int64_t kc, const float* a, const int64_t* row, int64_t step, const float* b, const int64_t* b_off,
                  float* c, int64_t ldc, int m, float alpha, float beta) {
    for (int i = 0; i < m; ++i) {   // the tile's rows of C (up to 2 lines each), needed once the k loop ends
        _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 8 * V - 1), _MM_HINT_T0);
    }
    __m256 acc[R][V];
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < V; ++v) acc[i][v] = _mm256_setzero_ps();
    auto step_k = [&](int64_t k, const float* ak) __attribute__((always_inline)) {
        const float* bk = kPackedB ? b + k * NR : b + b_off[k];
        __m256 bv[V];
        for (int v = 0; v < V; ++v) bv[v] = _mm256_loadu_ps(bk + 8 * v);
#pragma GCC unroll 6
        for (int i = 0; i < R; ++i) {
            const __m256 ai = _mm256_broadcast_ss(kPackedA ? ak + i : ak + row[i]);
            for (int v = 0; v < V; ++v) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
        }
    };
    if constexpr (kPackedA) {
#pragma GCC unroll 4
        for (int64_t k = 0; k < kc; ++k) step_k(k, a + k * MR);
    } else {
        for (int64_t k = 0; k < kc; ++k, a += step) step_k(k, a);
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
        if (i >= m) break;
        float* ci = c + i * ldc;
        for (int v = 0; v < V; ++v) {
            __m256 r = _mm256_mul_ps(acc[i][v], va);
            if (beta != 0.f) r = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8 * v), r);
            _mm256_storeu_ps(ci + 8 * v, r);
        }
    }
}

// The kernel with the tile height that fits m rows (6, 4 or 2) and V vectors of columns.
template <int V, bool kPackedA, bool kPackedB>
void tile(int64_t kc, const float* a, const int64_t* row, int64_t step, const float* b, const int64_t* b_off,
          float* c, int64_t ldc, int m, float alpha, float beta) {
    if (m > 4) micro_kernel<6, V, kPackedA, kPackedB>(kc, a, row, step, b, b_off, c, ldc, m, alpha, beta);
    else if (m > 2) micro_kernel<4, V, kPackedA, kPackedB>(kc, a, row, step, b, b_off, c, ldc, m, alpha, beta);
    else micro_kernel<2, V, kPackedA, kPackedB>(kc, a, row, step, b, b_off, c, ldc, m, alpha, beta);
}

// A tile of n < 16 columns, with op(B)'s block b already zero-padded to 16 columns (packed, or edge_panel): the
// 8- or 16-column kernel into 16-wide scratch, then the n columns of C copied in and out.
template <bool kPackedA>
void edge_tile(int64_t kc, const float* a, const int64_t* row, int64_t step, const float* b, float* c, int64_t ldc,
               int m, int n, float alpha, float beta) {
    alignas(32) float ct[MR * NR];   // (m, 16)
    if (beta != 0.f)
        for (int i = 0; i < m; ++i) std::memcpy(ct + i * NR, c + i * ldc, sizeof(float) * n);
    if (n <= 8) tile<1, kPackedA, true>(kc, a, row, step, b, nullptr, ct, NR, m, alpha, beta);
    else tile<2, kPackedA, true>(kc, a, row, step, b, nullptr, ct, NR, m, alpha, beta);
    for (int i = 0; i < m; ++i) std::memcpy(c + i * ldc, ct + i * NR, sizeof(float) * n);
}

// 8 x 8 transpose in registers: r[j] holds row j on entry, column j on exit.
inline void transpose8(__m256 (&r)[8]) {
    __m256 t[8], s[8];
    for (int i = 0; i < 4; ++i) {   // interleave 32-bit elements of row pairs
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; ++h) {   // 64-bit pairs: rows 0-3 (h = 0) and 4-7 (h = 1)
        const int q = 4 * h;
        s[q] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(1, 0, 1, 0));
        s[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], _MM_SHUFFLE(3, 2, 3, 2));
        s[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(1, 0, 1, 0));
        s[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {   // 128-bit halves: rows 0-3 with 4-7
        r[i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(s[i], s[4 + i], 0x31);
    }
}

// Panel jp of op(B) = B (stored (K, N)): columns jp*NR .. +NR of every row, into dst[k][NR], zero past N.
void copy_b_panel(const Operands& p, int64_t jp, float* dst) {
    const int64_t j0 = jp * NR, cols = std::min<int64_t>(NR, p.N - j0);
    for (int64_t k = 0; k < p.K; ++k) {
        const float* src = p.B + p.b_row(k) + j0;
        float* d = dst + k * NR;
        if (cols == NR) {
            _mm256_store_ps(d, _mm256_loadu_ps(src));
            _mm256_store_ps(d + 8, _mm256_loadu_ps(src + 8));
        } else {
            std::memcpy(d, src, sizeof(float) * cols);
            std::fill(d + cols, d + NR, 0.f);
        }
    }
}

// Panel jp of op(B) = B^T (B stored (N, K)): columns jp*NR .. +NR, all K steps, into dst[k][NR], zero past N.
// Full 8 x 8 blocks by register transposes, the ragged rest element by element.
void pack_b_panel(const Operands& p, int64_t jp, float* dst) {
    for (int v = 0; v < NR / 8; ++v) {
        const int64_t jv = jp * NR + 8 * v;
        const int cols = static_cast<int>(std::clamp<int64_t>(p.N - jv, 0, 8));
        int64_t k0 = 0;
        if (cols == 8)
            for (; k0 + 8 <= p.K; k0 += 8) {
                __m256 r[8];
                for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(p.B + p.b_row(jv + j) + k0);
                transpose8(r);
                for (int k = 0; k < 8; ++k) _mm256_store_ps(dst + (k0 + k) * NR + 8 * v, r[k]);
            }
        for (int64_t k = k0; k < p.K; ++k)
            for (int j = 0; j < 8; ++j) dst[k * NR + 8 * v + j] = j < cols ? p.B[p.b_row(jv + j) + k] : 0.f;
    }
}

// Rows i0 .. i0 + m (m <= MR) of op(A), steps pc .. pc + kc, into the micro-panel dst[k * MR + i]; rows past m
// repeat row m - 1 (computed, never stored). Writes up to 2 floats past the panel (dst needs them readable and
// writable: the next panel's start, or the buffer's slack).
void pack_a_panel(const Operands& p, int64_t i0, int m, int64_t pc, int64_t kc, float* dst) {
    if (p.trans_a) {   // op(A)(i, k) = A[k * lda + i]: the MR values of a step are adjacent
        for (int64_t k = 0; k < kc; ++k) {
            const float* src = p.A + (pc + k) * p.lda + i0;
            if (m == MR) {   // 4 + 2 floats, nothing read past row i0 + 5
                _mm_storeu_ps(dst + k * MR, _mm_loadu_ps(src));
                _mm_storel_pi(reinterpret_cast<__m64*>(dst + k * MR + 4),
                              _mm_loadl_pi(_mm_setzero_ps(), reinterpret_cast<const __m64*>(src + 4)));
            } else {
                for (int i = 0; i < MR; ++i) dst[k * MR + i] = src[std::min(i, m - 1)];
            }
        }
        return;
    }
    int64_t row[MR];   // op(A)(i, k) = A[row[i] + k]
    tile_rows<MR>(p, i0, m, p.lda, row);
    int64_t k0 = 0;
    for (; k0 + 8 <= kc; k0 += 8) {   // 8 steps of the 6 rows by one 8 x 8 register transpose
        __m256 r[8];
        for (int i = 0; i < MR; ++i) r[i] = _mm256_loadu_ps(p.A + row[i] + pc + k0);
        r[6] = r[7] = _mm256_setzero_ps();
        transpose8(r);
        // step k's 8 lanes hold its 6 values and 2 zeros; the next store overwrites the zeros
        for (int k = 0; k < 8; ++k) _mm256_storeu_ps(dst + (k0 + k) * MR, r[k]);
    }
    for (int64_t k = k0; k < kc; ++k)
        for (int i = 0; i < MR; ++i) dst[k * MR + i] = p.A[row[i] + pc + k];
}

// C rows m0 .. m1, columns n0 .. n1 (n0 a multiple of NR), on the calling thread: blocks of NC columns, K blocks of
// KC steps, blocks of MC rows of op(A) (packed into MR-row micro-panels when the column block has kPackAPanels
// panels or more), then each micro-panel against every 16-column panel of the column block.
void compute_block(const Operands& p, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    thread_local PanelBuffer a_buffer;   // the packed block of op(A), MC x KC (+ pack_a_panel's 2-float overrun)
    float* a_pack = a_buffer.get(MC * KC + 8);
    // op(B) read in place: row k of the K block at B + b_off[k]; a last panel narrower than NR copied once per K
    // block, zero-padded to NR columns.
    int64_t b_off[KC];
    alignas(32) float edge_panel[KC * NR];
    for (int64_t jc = n0; jc < n1; jc += NC) {
        const int64_t nc = std::min(NC, n1 - jc), edge = nc % NR, edge_j = jc + nc - edge;
        for (int64_t pc = 0; pc < p.K; pc += KC) {
            const int64_t kc = std::min(KC, p.K - pc);
            const float alpha = p.alpha, beta = pc == 0 ? p.beta : 1.f;   // beta == 0 never reads C
            if (!p.b_packed) {
                for (int64_t k = 0; k < kc; ++k) b_off[k] = p.b_row(pc + k);
                if (edge)
                    for (int64_t k = 0; k < kc; ++k) {
                        std::memcpy(edge_panel + k * NR, p.B + b_off[k] + edge_j, sizeof(float) * edge);
                        std::fill(edge_panel + k * NR + edge, edge_panel + (k + 1) * NR, 0.f);
                    }
            }
            // op(A) in place: op(A)(i, k) at A[row[i] + k * a_step] (A stored (K, M), or (M, K))
            const float* a_block = p.A + pc * (p.trans_a ? p.lda : 1);
            const int64_t a_row = p.trans_a ? 1 : p.lda, a_step = p.trans_a ? p.lda : 1;
            const bool pack_a = (nc + NR - 1) / NR >= kPackAPanels;
            for (int64_t ic = m0; ic < m1; ic += MC) {
                const int64_t mc = std::min(MC, m1 - ic);
                if (pack_a)
                    for (int64_t ir = 0; ir < mc; ir += MR)
                        pack_a_panel(p, ic + ir, static_cast<int>(std::min<int64_t>(MR, mc - ir)), pc, kc,
                                     a_pack + ir * kc);
                for (int64_t ir = 0; ir < mc; ir += MR) {
                    const int m = static_cast<int>(std::min<int64_t>(MR, mc - ir));
                    int64_t row[MR];
                    if (!pack_a) tile_rows<MR>(p, ic + ir, m, a_row, row);
                    for (int64_t j = jc; j < jc + nc; j += NR) {
                        const int n = static_cast<int>(std::min<int64_t>(NR, jc + nc - j));
                        const float* b = p.b_packed ? p.b_packed + (j / NR) * p.K * NR + pc * NR
                                         : n == NR  ? p.B + j
                                                    : edge_panel;
                        float* c = p.C + (ic + ir) * p.ldc + j;
                        if (pack_a) {
                            const float* a = a_pack + ir * kc;
                            if (n < NR) edge_tile<true>(kc, a, nullptr, 0, b, c, p.ldc, m, n, alpha, beta);
                            else if (p.b_packed) tile<2, true, true>(kc, a, nullptr, 0, b, nullptr, c, p.ldc, m, alpha, beta);
                            else tile<2, true, false>(kc, a, nullptr, 0, b, b_off, c, p.ldc, m, alpha, beta);
                        } else {
                            if (n < NR) edge_tile<false>(kc, a_block, row, a_step, b, c, p.ldc, m, n, alpha, beta);
                            else if (p.b_packed)
                                tile<2, false, true>(kc, a_block, row, a_step, b, nullptr, c, p.ldc, m, alpha, beta);
                            else tile<2, false, false>(kc, a_block, row, a_step, b, b_off, c, p.ldc, m, alpha, beta);
                        }
                    }
                }
            }
        }
    }
}

}  // namespace

void gemm_avx2(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int threads, const int64_t* a_rows,
               const int64_t* b_rows) {
    Operands p{trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr, a_rows, b_rows};
    const int64_t panels = (N + NR - 1) / NR;
    thread_local PanelBuffer b_buffer;   // the calling thread's; shared with the team through p.b_packed
    // op(B) stored (K, N) is read in place for short products and packed (copied into contiguous panels) from
    // kPackRows rows of C on: in place, a tile's 16 columns of kc rows lie ldb floats apart, and measured
    // (razor_gemm_bench --cpu-time, Zen 3) that made the NN and TN conv products with M >= 32 run below Eigen
    // (0.83-0.97x) while the copy costs little next to M / 6 passes over each panel.
    p.b_packed = trans_b || M >= kPackRows ? b_buffer.get(panels * K * NR) : nullptr;
    split_over_threads<MR, NR>(
        p, threads,
        [&](int64_t jp, float* dst) { trans_b ? pack_b_panel(p, jp, dst) : copy_b_panel(p, jp, dst); },
        [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) { compute_block(p, m0, m1, n0, n1); });
}

}  // namespace razor::detail

#endif  // __AVX2__ && __FMA__
