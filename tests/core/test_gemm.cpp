// tests/core/test_gemm.cpp -- core/gemm.h against a naive triple loop: every trans_a/trans_b combination,
// padded leading dimensions, beta 0 (C not read), 1 and other, and sizes that take the per-thread split
// along rows and along columns of C.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/core.h"
#include "core/gemm.h"

using namespace razor;

namespace {
std::vector<float> random_vector(size_t n, Generator& gen) {
    std::vector<float> v(n);
    for (float& x : v) x = gen.normal();
    return v;
}
}  // namespace

TEST_CASE("gemm: matches a naive product for every transpose, leading dimension, beta and split") {
    Generator gen(11);
    struct Size {
        int64_t M, N, K;
    };
    // small (one Eigen call), tall (split along rows), wide (split along columns), and K = 0
    for (Size s : {Size{5, 7, 3}, Size{150, 24, 40}, Size{24, 150, 40}, Size{4, 6, 0}}) {
        for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb)
                for (float beta : {0.f, 1.f, 0.5f}) {
                    INFO("M ", s.M, " N ", s.N, " K ", s.K, " trans_a ", ta, " trans_b ", tb, " beta ", beta);
                    const int64_t lda = (ta ? s.M : s.K) + 3, ldb = (tb ? s.K : s.N) + 2, ldc = s.N + 5;
                    const std::vector<float> A = random_vector(static_cast<size_t>((ta ? s.K : s.M) * lda), gen);
                    const std::vector<float> B = random_vector(static_cast<size_t>((tb ? s.N : s.K) * ldb), gen);
                    std::vector<float> C = random_vector(static_cast<size_t>(s.M * ldc), gen);
                    std::vector<float> expected = C;
                    if (beta == 0.f)   // beta 0 must not read C: NaN there must not leak into the result
                        for (int64_t i = 0; i < s.M; ++i)
                            for (int64_t j = 0; j < s.N; ++j) C[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
                    const float alpha = 1.5f;
                    for (int64_t i = 0; i < s.M; ++i)
                        for (int64_t j = 0; j < s.N; ++j) {
                            double acc = 0;
                            for (int64_t k = 0; k < s.K; ++k)
                                acc += static_cast<double>(ta ? A[k * lda + i] : A[i * lda + k]) *
                                       (tb ? B[j * ldb + k] : B[k * ldb + j]);
                            float& e = expected[i * ldc + j];
                            e = static_cast<float>(alpha * acc + (beta == 0.f ? 0.0 : beta * static_cast<double>(e)));
                        }
                    gemm(ta, tb, s.M, s.N, s.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
                    double worst = 0;
                    bool padding_untouched = true;
                    for (int64_t i = 0; i < s.M; ++i) {
                        for (int64_t j = 0; j < s.N; ++j)
                            worst = std::max(worst, std::abs(static_cast<double>(C[i * ldc + j]) - expected[i * ldc + j]) /
                                                        (1.0 + std::abs(expected[i * ldc + j])));
                        for (int64_t j = s.N; j < ldc; ++j) padding_untouched &= C[i * ldc + j] == expected[i * ldc + j];
                    }
                    CHECK(worst < 1e-5);
                    CHECK(padding_untouched);
                }
    }
}
