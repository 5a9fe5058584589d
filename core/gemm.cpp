// core/gemm.cpp -- C = alpha op(A) op(B) + beta C over Eigen (see gemm.h).
#include "core/gemm.h"

// GCC 12 reports false "may be used uninitialized" warnings inside Eigen's AVX-512 packing kernels
// (avx512fintrin.h unpack intrinsics); they are not about this file's code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <Eigen/Core>

#include "core/check.h"

namespace razor {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;

// C = alpha a b + beta C, with a (M, K) and b (K, N) Eigen expressions (maps or transposed maps).
template <class OpA, class OpB>
void product(const OpA& a, const OpB& b, float alpha, float beta, Map& c) {
    if (beta == 0.f) {
        c.noalias() = alpha * (a * b);
    } else {
        if (beta != 1.f) c *= beta;
        c.noalias() += alpha * (a * b);
    }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    RAZOR_CHECK(M >= 0 && N >= 0 && K >= 0) << "gemm sizes " << M << " " << N << " " << K;
    RAZOR_CHECK(ldc >= N && lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N))
        << "gemm leading dimensions lda " << lda << " ldb " << ldb << " ldc " << ldc << " for M " << M << " N " << N
        << " K " << K;
    if (M == 0 || N == 0) return;
    Map c(C, M, N, Eigen::OuterStride<>(ldc));
    if (K == 0 || alpha == 0.f) {   // no product: C = beta C
        if (beta == 0.f) c.setZero();
        else if (beta != 1.f) c *= beta;
        return;
    }
    // A stored (M, K) or (K, M); B stored (K, N) or (N, K). Row strides lda, ldb (at least 1 for Eigen).
    ConstMap a(A, trans_a ? K : M, trans_a ? M : K, Eigen::OuterStride<>(lda));
    ConstMap b(B, trans_b ? N : K, trans_b ? K : N, Eigen::OuterStride<>(ldb));
    if (!trans_a && !trans_b) product(a, b, alpha, beta, c);
    else if (!trans_a && trans_b) product(a, b.transpose(), alpha, beta, c);
    else if (trans_a && !trans_b) product(a.transpose(), b, alpha, beta, c);
    else product(a.transpose(), b.transpose(), alpha, beta, c);
}

}  // namespace razor
