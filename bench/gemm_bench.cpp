// bench/gemm_bench.cpp -- razor's GEMM engines side by side on the products razor's models run.
//
// Engines: Eigen 3.4 (the generic engine), razor's AVX2 (core/gemm_avx2.cpp) and AVX-512 (core/gemm_avx512.cpp)
// kernels where the CPU runs them (isa_supported; RAZOR_ISA does not hide them here) and, when CMake found
// Debian's OpenBLAS, its cblas_sgemm. Every case times the engines in turn, rep by rep (alternating, so a
// neighbour's load hits them alike), and reports medians as GFLOP/s; the ratios are the evidence on a shared machine.
//
// Shapes (batch 128):
//   conv   one image's im2col GEMMs of a CIFAR conv at a tile of T output positions, run the way conv2d.cpp runs
//          them: single-threaded, every thread of the team on its own product at once (--threads of them):
//            fwd  y (OC, T) = W (OC, C*9) . col (C*9, T)           NN
//            gW   gW (OC, C*9) += gy (OC, T) . col^T               NT, beta 1
//            gW^T gW^T (C*9, OC) += col (C*9, T) . gy^T             NT, beta 1 (what conv2d runs)
//            gcol gcol (C*9, T) = W^T . gy (OC, T)                 TN
//          ("compact" rows: VR-PGE's kept channel counts at keep 0.5, not multiples of 16)
//   linear ViT-tiny (d 192, 128 x 65 = 8320 tokens) and an MLP at batch 128: y = x W^T (NT), gx = gy W (NN),
//          gW = gy^T x (TN), one product split over --threads threads by the engine.
//          vit_b_16 at batch 8 (1576 tokens, d 768) the same way.
//   square 2048 x 2048 x 2048 NN, the usual sgemm yardstick, split like the linear rows.
//   attn   one head's scores (65 x 64) . (64 x 65)^T and values (65 x 65) . (65 x 64), single-threaded.
//
//   razor_gemm_bench [--threads N] [--reps R] [--filter SUBSTRING] [--cpu-time]
// Run with OMP_WAIT_POLICY=passive on a shared machine. --cpu-time (with --threads 1) times the calling thread's CPU
// time instead of the wall clock: on a crowded machine it leaves out the time the thread waited for a core.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "core/core.h"
#include "core/gemm.h"

#ifdef RAZOR_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace razor;

namespace {

struct Case {
    std::string group, name;
    bool ta, tb;
    int64_t M, N, K;
    float beta;
    bool per_thread;   // conv/attn: each thread of the team runs its own single-threaded product
};

std::vector<Case> cases() {
    std::vector<Case> list;
    auto conv = [&](const char* name, int64_t C, int64_t OC, int64_t T, int64_t kk) {
        const int64_t ck = C * kk;
        list.push_back({"conv", std::string(name) + " fwd", false, false, OC, T, ck, 0.f, true});
        list.push_back({"conv", std::string(name) + " gW", false, true, OC, ck, T, 1.f, true});
        list.push_back({"conv", std::string(name) + " gW^T", false, true, ck, OC, T, 1.f, true});
        list.push_back({"conv", std::string(name) + " gcol", true, false, ck, T, OC, 0.f, true});
    };
    conv("stem 3->16 T256", 3, 16, 256, 9);
    conv("16->16 T256", 16, 16, 256, 9);
    conv("32->32 T256", 32, 32, 256, 9);
    conv("64->64 T64", 64, 64, 64, 9);
    conv("proj 16->32 1x1 T256", 16, 32, 256, 1);
    conv("vgg 128->128 T256", 128, 128, 256, 9);
    // VR-PGE compact convs (resnet32x2 at keep 0.5): kept counts are not multiples of 16
    conv("compact 32->17 T256", 32, 17, 256, 9);
    conv("compact 17->32 T256", 17, 32, 256, 9);
    conv("compact 64->29 T256", 64, 29, 256, 9);
    conv("compact 29->64 T256", 29, 64, 256, 9);
    conv("compact 128->67 T64", 128, 67, 64, 9);
    conv("compact 67->128 T64", 67, 128, 64, 9);
    conv("vgg 512->512 T16", 512, 512, 16, 9);
    // resnet50 at 224 px (batch 32): bottleneck 3x3 and 1x1 convs per image, T = the stage's positions capped at 256
    conv("r50 3x3 64->64 T256", 64, 64, 256, 9);
    conv("r50 3x3 128->128 T256", 128, 128, 256, 9);
    conv("r50 3x3 256->256 T196", 256, 256, 196, 9);
    conv("r50 3x3 512->512 T49", 512, 512, 49, 9);
    conv("r50 1x1 256->64 T256", 256, 64, 256, 1);
    conv("r50 1x1 64->256 T256", 64, 256, 256, 1);
    conv("r50 1x1 1024->256 T196", 1024, 256, 196, 1);
    conv("r50 1x1 512->2048 T49", 512, 2048, 49, 1);
    auto lin = [&](const char* name, int64_t M, int64_t in, int64_t out) {
        list.push_back({"linear", std::string(name) + " fwd", false, true, M, out, in, 0.f, false});
        list.push_back({"linear", std::string(name) + " gx", false, false, M, in, out, 0.f, false});
        list.push_back({"linear", std::string(name) + " gW", true, false, out, in, M, 0.f, false});
    };
    lin("vit qkv 192->576", 8320, 192, 576);
    lin("vit proj 192->192", 8320, 192, 192);
    lin("vit fc1 192->768", 8320, 192, 768);
    lin("vit fc2 768->192", 8320, 768, 192);
    // vit_b_16 at batch 8 (d 768, 8 x 197 = 1576 tokens)
    lin("vit_b qkv 768->2304", 1576, 768, 2304);
    lin("vit_b fc1 768->3072", 1576, 768, 3072);
    lin("vit_b fc2 3072->768", 1576, 3072, 768);
    lin("mlp 3072->1024", 128, 3072, 1024);
    lin("mlp 1024->1024", 128, 1024, 1024);
    // the classic sgemm yardstick
    list.push_back({"square", "2048^3", false, false, 2048, 2048, 2048, 0.f, false});
    list.push_back({"attn", "scores 65x64 . 64x65^T", false, true, 65, 65, 64, 0.f, true});
    list.push_back({"attn", "values 65x65 . 65x64", false, false, 65, 64, 65, 0.f, true});
    return list;
}

struct Engine {
    const char* name;
    int id;   // 0 Eigen, 1 AVX-512, 2 OpenBLAS, 3 AVX2
};

struct Operands {
    std::vector<float> A, B, C;
    int64_t lda, ldb, ldc;
};

Operands make(const Case& c, Generator& gen) {
    Operands o;
    o.lda = c.ta ? c.M : c.K;
    o.ldb = c.tb ? c.K : c.N;
    o.ldc = c.N;
    o.A.resize(static_cast<size_t>(c.M * c.K));
    o.B.resize(static_cast<size_t>(c.K * c.N));
    o.C.assign(static_cast<size_t>(c.M * c.N), 0.f);
    for (float& x : o.A) x = gen.normal();
    for (float& x : o.B) x = gen.normal();
    return o;
}

void call(const Engine& e, const Case& c, Operands& o) {
#ifdef RAZOR_BENCH_OPENBLAS
    if (e.id == 2) {
        cblas_sgemm(CblasRowMajor, c.ta ? CblasTrans : CblasNoTrans, c.tb ? CblasTrans : CblasNoTrans, c.M, c.N, c.K,
                    1.f, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, o.C.data(), o.ldc);
        return;
    }
#endif
    const GemmEngine engine = e.id == 0 ? GemmEngine::Eigen : e.id == 3 ? GemmEngine::Avx2 : GemmEngine::Avx512;
    gemm_with(engine, c.ta, c.tb, c.M, c.N, c.K, 1.f, o.A.data(), o.lda,
              o.B.data(), o.ldb, c.beta, o.C.data(), o.ldc);
}

// Seconds on the wall clock, or (cpu_time) on the calling thread's CPU-time clock.
double now_s(bool cpu_time) {
    if (cpu_time) {
        timespec t{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per product: `iters` products back to back. Per-thread cases run them on every thread at once, each on
// its own operands (per[t]), as conv2d's batch loop does.
double time_once(const Engine& e, const Case& c, std::vector<Operands>& per, int64_t iters, int threads,
                 bool cpu_time) {
#ifdef RAZOR_BENCH_OPENBLAS
    if (e.id == 2) openblas_set_num_threads(c.per_thread ? 1 : threads);
#endif
    const double t0 = now_s(cpu_time);
    if (c.per_thread) {
#pragma omp parallel num_threads(threads)
        {
#ifdef _OPENMP
            Operands& o = per[static_cast<size_t>(omp_get_thread_num())];
#else
            Operands& o = per[0];
#endif
            for (int64_t i = 0; i < iters; ++i) call(e, c, o);
        }
    } else {
        for (int64_t i = 0; i < iters; ++i) call(e, c, per[0]);
    }
    return (now_s(cpu_time) - t0) / static_cast<double>(iters);
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 2, reps = 7;
    bool cpu_time = false;
    std::string filter;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
        else if (a == "--cpu-time") cpu_time = true;
        else {
            std::fprintf(stderr, "usage: razor_gemm_bench [--threads N] [--reps R] [--filter SUBSTRING] [--cpu-time]\n");
            return 2;
        }
    }
    set_num_threads(threads);
    std::vector<Engine> engines = {{"Eigen", 0}};
    if (gemm_engine_available(GemmEngine::Avx2)) engines.push_back({"razor AVX2", 3});
    if (gemm_engine_available(GemmEngine::Avx512)) engines.push_back({"razor AVX-512", 1});
#ifdef RAZOR_BENCH_OPENBLAS
    engines.push_back({"OpenBLAS", 2});
#endif
    std::printf("%s\n%d threads; conv/attn rows: every thread runs its own single-threaded product (GFLOP/s are per "
                "thread); linear rows: one product over all threads. Median of %d alternating reps.\n\n",
                runtime_banner().c_str(), threads, reps);
    std::printf("| group | product | M x N x K | op |");
    for (const Engine& e : engines) std::printf(" %s GFLOP/s |", e.name);
    std::printf(" %s / Eigen |\n|---|---|---|---|", engines.size() > 1 ? engines[1].name : "Eigen");
    for (size_t e = 0; e < engines.size(); ++e) std::printf("---:|");
    std::printf("---:|\n");
    Generator gen(1);
    for (const Case& c : cases()) {
        if (!filter.empty() && (c.group + " " + c.name).find(filter) == std::string::npos) continue;
        std::vector<Operands> per;
        for (int t = 0; t < (c.per_thread ? threads : 1); ++t) per.push_back(make(c, gen));
        const double flops = 2.0 * c.M * c.N * c.K;
        // Iterations per rep: about 20 ms of Eigen work (warm-up call included).
        const double probe = time_once(engines[0], c, per, 1, threads, cpu_time);
        const int64_t iters = std::max<int64_t>(1, static_cast<int64_t>(0.02 / std::max(probe, 1e-7)));
        std::vector<std::vector<double>> times(engines.size());
        for (size_t e = 0; e < engines.size(); ++e) time_once(engines[e], c, per, std::max<int64_t>(1, iters / 4), threads, cpu_time);
        for (int r = 0; r < reps; ++r)
            for (size_t e = 0; e < engines.size(); ++e) times[e].push_back(time_once(engines[e], c, per, iters, threads, cpu_time));
        std::vector<double> gflops;
        for (auto& t : times) {
            std::sort(t.begin(), t.end());
            gflops.push_back(flops / t[t.size() / 2] * 1e-9);
        }
        std::printf("| %s | %s | %lld x %lld x %lld | %s%s |", c.group.c_str(), c.name.c_str(),
                    static_cast<long long>(c.M), static_cast<long long>(c.N), static_cast<long long>(c.K),
                    c.ta ? "T" : "N", c.tb ? "T" : "N");
        for (double g : gflops) std::printf(" %.1f |", g);
        std::printf(" %.2fx |\n", gflops.size() > 1 ? gflops[1] / gflops[0] : 1.0);
        std::fflush(stdout);
    }
    return 0;
}
