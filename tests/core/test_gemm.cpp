// tests/core/test_gemm.cpp -- core/gemm.h against a naive triple loop: every engine this CPU runs (Eigen, razor's
// AVX2 kernel on AVX2 machines and its AVX-512 kernel on AVX-512 ones, each called in-process with gemm_with), every trans_a/trans_b combination, padded leading dimensions, beta 0
// (C not read), 1 and other, sizes that take the per-thread split along rows and along columns of C, edge tiles
// of razor's kernels (M, N, K = 1, one past and one short of the AVX-512 8 x 48 and the AVX2 6 x 16 tile, past
// their K, row and column blocks), and products called from inside an OpenMP parallel region (conv2d's per-image GEMMs).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/core.h"
#include "core/gemm.h"
#include "core/isa.h"

using namespace razor;

namespace {
std::vector<float> random_vector(size_t n, Generator& gen) {
    std::vector<float> v(n);
    for (float& x : v) x = gen.normal();
    return v;
}

struct Size {
    int64_t M, N, K;
};

std::vector<GemmEngine> engines() {
    std::vector<GemmEngine> list{GemmEngine::Eigen};
    for (GemmEngine e : {GemmEngine::Avx2, GemmEngine::Avx512})
        if (gemm_engine_available(e)) list.push_back(e);
    return list;
}

// Every engine on every transpose and beta at size s; `call` runs one product (directly, or inside a parallel
// region). Relative error against a double-precision triple loop, and the padding columns of C untouched.
template <class Call>
void check_all(Size s, Generator& gen, Call call) {
    for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
            for (float beta : {0.f, 1.f, 0.5f}) {
                const int64_t lda = (ta ? s.M : s.K) + 3, ldb = (tb ? s.K : s.N) + 2, ldc = s.N + 5;
                const std::vector<float> A = random_vector(static_cast<size_t>((ta ? s.K : s.M) * lda), gen);
                const std::vector<float> B = random_vector(static_cast<size_t>((tb ? s.N : s.K) * ldb), gen);
                const std::vector<float> C0 = random_vector(static_cast<size_t>(s.M * ldc), gen);
                std::vector<float> expected = C0;
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
                for (GemmEngine engine : engines()) {
                    INFO("engine ", std::string(gemm_engine_name(engine)), " M ", s.M, " N ", s.N, " K ",
                         s.K, " trans_a ", ta, " trans_b ", tb, " beta ", beta);
                    std::vector<float> C = C0;
                    if (beta == 0.f)   // beta 0 must not read C: NaN there must not leak into the result
                        for (int64_t i = 0; i < s.M; ++i)
                            for (int64_t j = 0; j < s.N; ++j) C[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
                    call(engine, ta != 0, tb != 0, s, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
                    double worst = 0;
                    bool padding_untouched = true;
                    for (int64_t i = 0; i < s.M; ++i) {
                        for (int64_t j = 0; j < s.N; ++j)
                            worst = std::max(worst, std::abs(static_cast<double>(C[i * ldc + j]) - expected[i * ldc + j]) /
                                                        (1.0 + std::abs(expected[i * ldc + j])));
                        for (int64_t j = s.N; j < ldc; ++j) padding_untouched &= C[i * ldc + j] == C0[i * ldc + j];
                    }
                    // float rounding grows with K: both engines measured up to 2.1e-5 at K = 261-300
                    CHECK(worst < 1e-5 * std::max(1.0, static_cast<double>(s.K) / 64.0));
                    CHECK(padding_untouched);
                }
            }
}

void direct(GemmEngine engine, bool ta, bool tb, Size s, float alpha, const float* A, int64_t lda, const float* B,
            int64_t ldb, float beta, float* C, int64_t ldc) {
    gemm_with(engine, ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, beta, C, ldc);
}
}  // namespace

TEST_CASE("gemm: matches a naive product for every engine, transpose, leading dimension, beta and split") {
    Generator gen(11);
    // small (one thread), tall (split along rows), wide (split along columns), and K = 0
    for (Size s : {Size{5, 7, 3}, Size{150, 24, 40}, Size{24, 150, 40}, Size{4, 6, 0}}) check_all(s, gen, direct);
}

TEST_CASE("gemm: edge tiles and blocks of razor's kernels, every engine") {
    Generator gen(12);
    // M, N, K = 1; one short of / one past the 8 x 48 tile and a 16-column vector; K past one 256-step block;
    // M past a 128-row block and N past a 480-column block (with a split over the threads: > 2^17 products).
    // AVX2: 6 x 16 tiles with 4- and 2-row remainders (M = 5, 7, 10, 16, 17), N one short of / past 16, past the
    // 240-column block.
    for (Size s : {Size{1, 1, 1}, Size{1, 33, 5}, Size{9, 1, 7}, Size{7, 47, 1}, Size{9, 49, 17}, Size{8, 48, 16},
                   Size{3, 15, 300}, Size{17, 97, 257}, Size{137, 517, 261}, Size{64, 1000, 9}, Size{1000, 20, 9},
                   Size{5, 16, 9}, Size{6, 17, 8}, Size{10, 15, 33}, Size{16, 241, 19}, Size{17, 256, 70}})
        check_all(s, gen, direct);
}

TEST_CASE("gemm: called from inside a parallel region (conv2d's per-image products) on every thread at once") {
    Generator gen(13);
    for (Size s : {Size{16, 256, 144}, Size{144, 256, 16}, Size{33, 70, 300}})
        check_all(s, gen,
                  [](GemmEngine engine, bool ta, bool tb, Size s, float alpha, const float* A, int64_t lda,
                     const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
                      // Every thread computes the same product into its own copy; all copies must agree with C's.
                      const int threads = num_threads();
                      std::vector<std::vector<float>> copies(static_cast<size_t>(threads),
                                                             std::vector<float>(C, C + s.M * ldc));
#pragma omp parallel for schedule(static, 1) num_threads(threads)
                      for (int t = 0; t < threads; ++t)
                          gemm_with(engine, ta, tb, s.M, s.N, s.K, alpha, A, lda, B, ldb, beta,
                                    copies[static_cast<size_t>(t)].data(), ldc);
                      for (int t = 1; t < threads; ++t) CHECK(copies[static_cast<size_t>(t)] == copies[0]);
                      std::copy(copies[0].begin(), copies[0].end(), C);
                  });
}

TEST_CASE("gemm: razor's engines give the same bits on 1 and 2 threads") {
    Generator gen(14);
    const int64_t M = 300, N = 200, K = 520;
    const std::vector<float> A = random_vector(static_cast<size_t>(M * K), gen), B = random_vector(static_cast<size_t>(N * K), gen);
    for (GemmEngine engine : engines()) {
        if (engine == GemmEngine::Eigen) continue;
        INFO("engine ", std::string(gemm_engine_name(engine)));
        const int saved = num_threads();
        std::vector<float> one(static_cast<size_t>(M * N)), two(static_cast<size_t>(M * N));
        set_num_threads(1);
        gemm_with(engine, false, true, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f, one.data(), N);
        set_num_threads(2);
        gemm_with(engine, false, true, M, N, K, 1.f, A.data(), K, B.data(), K, 0.f, two.data(), N);
        set_num_threads(saved);
        CHECK(one == two);
    }
}

TEST_CASE("gemm: the engine gemm() runs is the active kernel family's, and unavailable engines are refused") {
    const GemmEngine expected = active_isa() == Isa::Avx512 ? GemmEngine::Avx512
                                : active_isa() == Isa::Avx2 ? GemmEngine::Avx2
                                                            : GemmEngine::Eigen;
    CHECK(gemm_engine() == expected);
    CHECK(gemm_rows_available() == (expected != GemmEngine::Eigen));
    float a = 1.f, b = 2.f, c = 0.f;
    for (GemmEngine engine : {GemmEngine::Avx2, GemmEngine::Avx512})
        if (!gemm_engine_available(engine))
            CHECK_THROWS_AS(gemm_with(engine, false, false, 1, 1, 1, 1.f, &a, 1, &b, 1, 0.f, &c, 1), Error);
}

TEST_CASE("gemm_rows: A or B given by row addresses (overlapping windows) equals gemm on the explicit matrix") {
    Generator gen(11);   // razor's engines only (the Eigen engine has no row tables; conv2d then builds im2col)
    // rows x len windows of a buffer: row r starts at offsets[r] (overlapping, unsorted, like conv2d's taps).
    struct Windows {
        std::vector<float> buffer, matrix;   // the buffer and the explicit (rows, len) matrix
        std::vector<int64_t> offsets;
    };
    auto windows = [&](int64_t rows, int64_t len) {
        Windows w{random_vector(static_cast<size_t>(rows * 3 + len + 7), gen), std::vector<float>(rows * len),
                  std::vector<int64_t>(rows)};
        for (int64_t r = 0; r < rows; ++r) w.offsets[r] = (r * 7 + 3) % (rows * 3 + 7);   // in range, overlapping
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < len; ++j) w.matrix[r * len + j] = w.buffer[w.offsets[r] + j];
        return w;
    };
    for (GemmEngine engine : engines()) {
      if (engine == GemmEngine::Eigen) continue;
      for (Size s : {Size{5, 37, 9}, Size{17, 100, 300}, Size{8, 48, 256}, Size{1, 1, 1}, Size{33, 130, 70},
                   Size{20, 150, 40}}) {
        for (int tb = 0; tb < 2; ++tb) {
            INFO("engine ", std::string(gemm_engine_name(engine)), " M ", s.M, " N ", s.N, " K ", s.K, " trans_b ", tb);
            const int64_t rows = tb ? s.N : s.K, len = tb ? s.K : s.N;   // B stored (rows, len)
            const Windows a = windows(s.M, s.K), b = windows(rows, len);
            for (float beta : {0.f, 1.f}) {
                std::vector<float> expected = random_vector(static_cast<size_t>(s.M * s.N), gen);
                std::vector<float> got_b = expected, got_a = expected;
                gemm_with(engine, false, tb, s.M, s.N, s.K, 0.5f, a.matrix.data(), s.K, b.matrix.data(), len, beta,
                          expected.data(), s.N);
                gemm_rows_with(engine, tb, s.M, s.N, s.K, 0.5f, a.matrix.data(), s.K, nullptr, b.buffer.data(), 0,
                               b.offsets.data(), beta, got_b.data(), s.N);
                gemm_rows_with(engine, tb, s.M, s.N, s.K, 0.5f, a.buffer.data(), 0, a.offsets.data(), b.matrix.data(),
                               len, nullptr, beta, got_a.data(), s.N);
                CHECK(got_b == expected);   // the same kernel, summation order and blocking: bit for bit
                CHECK(got_a == expected);
            }
        }
      }
    }
}
