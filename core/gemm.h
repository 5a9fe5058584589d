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
// Implementation: Eigen::Map (RowMajor, OuterStride) over the pointers, one .noalias() product, so Eigen's
// blocked GEMM runs straight on the caller's memory with no temporaries. A large product called outside an
// OpenMP parallel region is cut into one block of C per thread (see gemm.cpp for why not Eigen's own
// threading); called from inside a parallel region (conv2d's batch loop) it runs on the calling thread only,
// which is what a per-thread GEMM wants.
#pragma once

#include <cstdint>

namespace razor {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace razor
