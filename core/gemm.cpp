// core/gemm.cpp -- C = alpha op(A) op(B) + beta C: the engine choice, and the Eigen engine (see gemm.h).
//
// Engine choice (issue 6, measured; docs/bench-ops.md "GEMM engine"): the active kernel family (core/isa.h) picks it:
// avx512 razor's AVX-512 kernel (gemm_avx512.cpp), avx2 razor's AVX2+FMA kernel (gemm_avx2.cpp), generic Eigen 3.4. On a quiet 2-core Zen 4, `razor_gemm_bench --threads 2` measured the
// AVX-512 kernel at 1.04-2.51x Eigen on every conv, ViT, MLP and attention shape of the table (e.g. conv 32->32
// forward 76.7 -> 107.9 GFLOP/s per thread, ViT fc1 forward 75.5 -> 189.1 on two threads), and at or above
// Debian's OpenBLAS on most of them (not on ViT qkv forward: 101.7 against 171.6).
#include "core/gemm.h"

// GCC 12 reports false "may be used uninitialized" warnings inside Eigen's AVX-512 packing kernels
// (avx512fintrin.h unpack intrinsics); they are not about this file's code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <Eigen/Core>
#include <algorithm>

#include "core/check.h"
#include "core/isa.h"
#include "core/runtime.h"

#ifdef _OPENMP
#include <omp.h>
#endif

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

// One Eigen product on the calling thread's terms (Eigen runs it single-threaded inside a parallel region).
void eigen_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    Map c(C, M, N, Eigen::OuterStride<>(ldc));
    ConstMap a(A, trans_a ? K : M, trans_a ? M : K, Eigen::OuterStride<>(lda));
    ConstMap b(B, trans_b ? N : K, trans_b ? K : N, Eigen::OuterStride<>(ldb));
    if (!trans_a && !trans_b) product(a, b, alpha, beta, c);
    else if (!trans_a && trans_b) product(a, b.transpose(), alpha, beta, c);
    else if (trans_a && !trans_b) product(a.transpose(), b, alpha, beta, c);
    else product(a.transpose(), b.transpose(), alpha, beta, c);
}

bool in_parallel_region() {
#ifdef _OPENMP
    return omp_in_parallel() != 0;
#else
    return true;
#endif
}

// Threads gemm may use for one product: 1 inside a parallel region or for a small product (a team costs more than
// it saves under 2^17 multiply-adds).
int gemm_threads(int64_t M, int64_t N, int64_t K) {
    if (in_parallel_region() || M * N * K < (int64_t{1} << 17)) return 1;
    return num_threads();
}

// The Eigen engine's threading: outside a parallel region, a product of at least 2^17 multiply-adds is cut
// into one block of C per thread (rows of C, or columns when C is wide), each an independent single-threaded
// Eigen product. That runs as fast as Eigen's own OpenMP GEMM on an idle machine (measured on the linear shapes
// of a ViT-tiny), but Eigen's threads busy-wait on each other's packed panels many times per product, which
// made it up to 20x slower when another process shared the cores; independent blocks only meet at the end.
void eigen_threaded(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    const int64_t threads = gemm_threads(M, N, K);
    const bool split_rows = M >= N;
    const int64_t extent = split_rows ? M : N;
    // Blocks are multiples of 16 rows/columns (one AVX-512 register of floats), at least 2 of them.
    const int64_t block = ((extent + threads - 1) / threads + 15) / 16 * 16;
    if (threads < 2 || block >= extent) {
        eigen_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const int64_t blocks = (extent + block - 1) / block;
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(std::min(blocks, threads)))
    for (int64_t t = 0; t < blocks; ++t) {
        const int64_t lo = t * block, n = std::min(block, extent - lo);
        if (split_rows)   // rows lo.. of C and of op(A): A stored (M, K) -> row lo; stored (K, M) -> column lo
            eigen_gemm(trans_a, trans_b, n, N, K, alpha, trans_a ? A + lo : A + lo * lda, lda, B, ldb, beta,
                       C + lo * ldc, ldc);
        else              // columns lo.. of C and of op(B): B stored (K, N) -> column lo; stored (N, K) -> row lo
            eigen_gemm(trans_a, trans_b, M, n, K, alpha, A, lda, trans_b ? B + lo * ldb : B + lo, ldb, beta, C + lo,
                       ldc);
    }
}

// Sizes and leading dimensions are checked once here; K == 0 or alpha == 0 leaves C = beta C for every engine.
bool trivial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, int64_t lda, int64_t ldb,
             float beta, float* C, int64_t ldc) {
    RAZOR_CHECK(M >= 0 && N >= 0 && K >= 0) << "gemm sizes " << M << " " << N << " " << K;
    RAZOR_CHECK(ldc >= N && lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N))
        << "gemm leading dimensions lda " << lda << " ldb " << ldb << " ldc " << ldc << " for M " << M << " N " << N
        << " K " << K;
    if (M == 0 || N == 0) return true;
    if (K == 0 || alpha == 0.f) {   // no product: C = beta C
        Map c(C, M, N, Eigen::OuterStride<>(ldc));
        if (beta == 0.f) c.setZero();
        else if (beta != 1.f) c *= beta;
        return true;
    }
    return false;
}

}  // namespace

bool gemm_engine_available(GemmEngine engine) {
    switch (engine) {
        case GemmEngine::Eigen: return true;
        case GemmEngine::Avx2: return isa_supported(Isa::Avx2);
        case GemmEngine::Avx512: return isa_supported(Isa::Avx512);
    }
    return false;
}

GemmEngine gemm_engine() {
    static const GemmEngine engine = [] {
        switch (active_isa()) {
            case Isa::Avx512: return GemmEngine::Avx512;
            case Isa::Avx2: return GemmEngine::Avx2;
            case Isa::Generic: break;
        }
        return GemmEngine::Eigen;
    }();
    return engine;
}

const char* gemm_engine_name(GemmEngine engine) {
    constexpr const char* names[] = {"Eigen", "razor AVX2", "razor AVX-512"};   // indexed by GemmEngine
    return names[static_cast<int>(engine)];
}

const char* gemm_engine_name() { return gemm_engine_name(gemm_engine()); }

namespace {
// razor's own engines: the same contract, the family's kernel file. Only called once the engine is available.
void razor_engine(GemmEngine engine, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                  const int64_t* a_rows, const int64_t* b_rows) {
#if defined(RAZOR_X86_KERNELS)
    const int threads = gemm_threads(M, N, K);
    if (engine == GemmEngine::Avx512)
        return detail::gemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads, a_rows,
                                   b_rows);
    if (engine == GemmEngine::Avx2)
        return detail::gemm_avx2(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads, a_rows,
                                 b_rows);
#endif
    RAZOR_CHECK(false) << "gemm: no kernel for engine " << gemm_engine_name(engine);
}

void require(GemmEngine engine, const char* what) {
    if (!gemm_engine_available(engine))
        throw Error(fmt(what, ": engine ", gemm_engine_name(engine), " needs ISA family ",
                        engine == GemmEngine::Avx512 ? "avx512" : "avx2", ", but this CPU runs at most ",
                        isa_name(cpu_isa()), "; hint: check gemm_engine_available() first"));
}
}  // namespace

void gemm_with(GemmEngine engine, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    require(engine, "gemm_with");
    if (trivial(trans_a, trans_b, M, N, K, alpha, lda, ldb, beta, C, ldc)) return;
    if (engine == GemmEngine::Eigen) return eigen_threaded(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    razor_engine(engine, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr, nullptr);
}

bool gemm_rows_available(GemmEngine engine) { return engine != GemmEngine::Eigen && gemm_engine_available(engine); }

bool gemm_rows_available() { return gemm_rows_available(gemm_engine()); }

void gemm_rows_with(GemmEngine engine, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const int64_t* a_rows, const float* B, int64_t ldb, const int64_t* b_rows,
                    float beta, float* C, int64_t ldc) {
    RAZOR_CHECK(engine != GemmEngine::Eigen) << "gemm_rows: the Eigen engine has no row tables (check "
                                                "gemm_rows_available())";
    require(engine, "gemm_rows");
    // With a row table the stride is unused; any value that satisfies the common size checks will do.
    if (a_rows) lda = K;
    if (b_rows) ldb = trans_b ? K : N;
    if (trivial(false, trans_b, M, N, K, alpha, lda, ldb, beta, C, ldc)) return;
    razor_engine(engine, false, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, a_rows, b_rows);
}

void gemm_rows(bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const int64_t* a_rows, const float* B, int64_t ldb, const int64_t* b_rows, float beta, float* C,
               int64_t ldc) {
    gemm_rows_with(gemm_engine(), trans_b, M, N, K, alpha, A, lda, a_rows, B, ldb, b_rows, beta, C, ldc);
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
    gemm_with(gemm_engine(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace razor
