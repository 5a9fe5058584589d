// core/gemm.h -- the one matrix-multiply primitive razor's matmul, linear and conv2d are built on.
//
// reference: BLAS sgemm (same argument order and meaning, but row-major). docs: docs/architecture.md "core".
//
//   C(M, N) = alpha * op(A) * op(B) + beta * C
//
//   op(A) is (M, K): A itself, stored (M, K) with row stride lda >= K, or (trans_a) A^T with A stored (K, M),
//   lda >= M. The same for B: op(B) is (K, N); B stored (K, N), ldb >= N, or (trans_b) stored (N, K), ldb >= K.
//   C is stored (M, N) with row stride ldc >= N. All float32, row-major. beta == 0 never reads C (it may hold
//   garbage, e.g. a fresh Tensor::empty).
//
// Implementation (gemm.cpp): the engine of the active kernel family (core/isa.h): razor's own packed GEMM for
// AVX-512 (gemm_avx512.cpp) and for AVX2+FMA (gemm_avx2.cpp), Eigen's for generic. Called outside an OpenMP
// parallel region, a large product is split over the threads; called from inside one (conv2d's batch loop) it runs
// on the calling thread only, which is what a per-thread GEMM wants.
#pragma once

#include <cstdint>

namespace razor {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The engines behind gemm, callable one by one for tests and bench/gemm_bench.cpp (same contract as gemm).
enum class GemmEngine { Eigen, Avx2, Avx512 };
bool gemm_engine_available(GemmEngine engine);   // compiled in and run by this CPU (isa_supported); Eigen: always
void gemm_with(GemmEngine engine, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
GemmEngine gemm_engine();                         // what gemm() uses: the active family's (active_isa())
const char* gemm_engine_name(GemmEngine engine);  // "Eigen", "razor AVX2", "razor AVX-512"
const char* gemm_engine_name();                   // gemm_engine()'s, for the banner

// gemm (trans_a = false) with either operand given by row addresses: row i of A (M, K) starts at A + a_rows[i],
// and stored row r of B -- row k of op(B) = B (K, N), or row j of B (N, K) under trans_b -- at B + b_rows[r]. A null
// table means the usual rows (A + i * lda, B + r * ldb). Rows may overlap: conv2d passes shifted windows of a
// zero-padded image as the rows of its im2col matrix, which is then never built. Only razor's own engines (AVX2,
// AVX-512) have it: gemm_rows runs gemm_engine(), gemm_rows_with a given one.
bool gemm_rows_available();                       // gemm_engine() has row tables
bool gemm_rows_available(GemmEngine engine);
void gemm_rows(bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const int64_t* a_rows, const float* B, int64_t ldb, const int64_t* b_rows, float beta, float* C,
               int64_t ldc);
void gemm_rows_with(GemmEngine engine, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const int64_t* a_rows, const float* B, int64_t ldb, const int64_t* b_rows,
                    float beta, float* C, int64_t ldc);

namespace detail {
// gemm_avx512.cpp and gemm_avx2.cpp (x86-64 builds; call only where isa_supported says so); threads > 1 splits the
// product over an OpenMP team; a_rows (only without trans_a) and b_rows as in gemm_rows, or null.
void gemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int threads,
                 const int64_t* a_rows = nullptr, const int64_t* b_rows = nullptr);
void gemm_avx2(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int threads,
               const int64_t* a_rows = nullptr, const int64_t* b_rows = nullptr);
}  // namespace detail

}  // namespace razor
