// bench/op_bench.cpp -- forward+backward timings of razor's GEMM ops at the shapes razor's models train at.
//
// Shapes: the convs of a CIFAR ResNet-20 at batch 128 and the Linears of a ViT-tiny at 128 x 65 tokens (the same
// list bench/op_bench.py times in PyTorch). One "run" is y = op(x, W[, b]); y.backward(g) with a fixed random g,
// the gradients dropped (zero_grad) before each run, outside the timed region.
//
//   razor_op_bench [--threads N] [--reps R] [--warmup W]   razor alone: a markdown table on stdout
//   razor_op_bench --sgemm S [--threads N] [--reps R]      one (S, S) x (S, S) float32 product through razor's gemm
//                                                          (core/gemm.h), R timed after one warm-up: one JSON line
//                                                          {"n", "threads", "ms", "gflops"} (median); bench/vs_torch.py
//                                                          takes it as the machine's sgemm peak
//   razor_op_bench --serve [--threads N]                   driven by bench/op_bench.py over stdin/stdout:
//       list        one line per case: id kind N C H W OC K stride pad x_grad (conv) | id kind M in out (linear),
//                   then "end"
//       case <id>   set the case up; answers "ok <forward flops>"
//       run         one timed forward+backward; answers "<wall ms> <process CPU ms>"
//       banner      razor's runtime banner
//       quit
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/core.h"
#include "core/gemm.h"

using namespace razor;

namespace {

struct BenchCase {
    std::string kind;   // "conv2d" or "linear"
    std::string name;
    // conv2d: x (N, C, H, W), W (OC, C, K, K), stride, padding; linear: x (M, in), W (out, in)
    int64_t N = 0, C = 0, H = 0, W = 0, OC = 0, K = 0, stride = 1, pad = 0;
    bool x_grad = true;
    int64_t M = 0, in = 0, out = 0;

    double forward_flops() const {
        if (kind == "linear") return 2.0 * M * in * out;
        const int64_t OH = (H + 2 * pad - K) / stride + 1, OW = (W + 2 * pad - K) / stride + 1;
        return 2.0 * N * OC * OH * OW * C * K * K;
    }
};

std::vector<BenchCase> cases() {
    std::vector<BenchCase> list;
    auto conv = [&](std::string name, int64_t C, int64_t H, int64_t OC, int64_t K, int64_t stride, int64_t pad,
                    bool x_grad) {
        BenchCase c;
        c.kind = "conv2d", c.name = std::move(name);
        c.N = 128, c.C = C, c.H = H, c.W = H, c.OC = OC, c.K = K, c.stride = stride, c.pad = pad, c.x_grad = x_grad;
        list.push_back(c);
    };
    auto lin = [&](std::string name, int64_t in, int64_t out) {
        BenchCase c;
        c.kind = "linear", c.name = std::move(name);
        c.M = 128 * 65, c.in = in, c.out = out;
        list.push_back(c);
    };
    conv("stem 3->16 32x32 3x3", 3, 32, 16, 3, 1, 1, false);
    conv("16->16 32x32 3x3", 16, 32, 16, 3, 1, 1, true);
    conv("16->32 32x32 3x3 s2", 16, 32, 32, 3, 2, 1, true);
    conv("32->32 16x16 3x3", 32, 16, 32, 3, 1, 1, true);
    conv("32->64 16x16 3x3 s2", 32, 16, 64, 3, 2, 1, true);
    conv("64->64 8x8 3x3", 64, 8, 64, 3, 1, 1, true);
    conv("proj 16->32 32x32 1x1 s2", 16, 32, 32, 1, 2, 0, true);
    conv("proj 32->64 16x16 1x1 s2", 32, 16, 64, 1, 2, 0, true);
    lin("qkv 192->576", 192, 576);
    lin("proj 192->192", 192, 192);
    lin("fc1 192->768", 192, 768);
    lin("fc2 768->192", 768, 192);
    return list;
}

// The tensors of one case and one timed forward+backward over them.
struct Runner {
    BenchCase c;
    Tensor x, W, b, g;
    Conv2dOptions options;

    explicit Runner(const BenchCase& bc) : c(bc) {
        Generator gen(42);
        if (c.kind == "conv2d") {
            x = Tensor::randn({c.N, c.C, c.H, c.W}, gen);
            W = Tensor::randn({c.OC, c.C, c.K, c.K}, gen).mul_(0.1f);
            options.stride = {c.stride, c.stride};
            options.padding = {c.pad, c.pad};
        } else {
            x = Tensor::randn({c.M, c.in}, gen);
            W = Tensor::randn({c.out, c.in}, gen).mul_(0.05f);
            b = Tensor::randn({c.out}, gen).requires_grad_();
        }
        if (c.x_grad) x.requires_grad_();
        W.requires_grad_();
        NoGradGuard no_grad;
        g = Tensor::randn(forward().shape(), gen);
    }

    Tensor forward() const { return c.kind == "conv2d" ? conv2d(x, W, Tensor(), options) : linear(x, W, b); }

    // Wall-clock ms of one forward+backward; *cpu_ms gets the process CPU time it took (all threads).
    double run_ms(double* cpu_ms = nullptr) {
        for (const Tensor* t : {&x, &W, &b})
            if (t->defined() && t->requires_grad()) t->zero_grad();
        const std::clock_t cpu_start = std::clock();
        const auto start = std::chrono::steady_clock::now();
        Tensor y = forward();
        y.backward(g);
        const auto stop = std::chrono::steady_clock::now();
        if (cpu_ms) *cpu_ms = 1e3 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
        return std::chrono::duration<double, std::milli>(stop - start).count();
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int serve() {
    std::unique_ptr<Runner> runner;
    std::string line;
    const std::vector<BenchCase> list = cases();
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string cmd;
        in >> cmd;
        if (cmd == "list") {
            for (size_t i = 0; i < list.size(); ++i) {
                const BenchCase& c = list[i];
                if (c.kind == "conv2d")
                    std::printf("%zu\tconv2d\t%s\t%lld %lld %lld %lld %lld %lld %lld %lld %d\n", i, c.name.c_str(),
                                (long long)c.N, (long long)c.C, (long long)c.H, (long long)c.W, (long long)c.OC,
                                (long long)c.K, (long long)c.stride, (long long)c.pad, c.x_grad ? 1 : 0);
                else
                    std::printf("%zu\tlinear\t%s\t%lld %lld %lld\n", i, c.name.c_str(), (long long)c.M,
                                (long long)c.in, (long long)c.out);
            }
            std::printf("end\n");
        } else if (cmd == "case") {
            size_t id = 0;
            in >> id;
            if (id >= list.size()) {
                std::printf("error: no case %zu\n", id);
            } else {
                runner.reset();
                runner = std::make_unique<Runner>(list[id]);
                std::printf("ok %.0f\n", list[id].forward_flops());
            }
        } else if (cmd == "run") {
            if (!runner) std::printf("error: no case set\n");
            else {
                double cpu = 0;
                const double wall = runner->run_ms(&cpu);
                std::printf("%.4f %.4f\n", wall, cpu);
            }
        } else if (cmd == "banner") {
            std::printf("%s\n", runtime_banner().c_str());
        } else if (cmd == "quit") {
            break;
        } else {
            std::printf("error: unknown command '%s'\n", cmd.c_str());
        }
        std::fflush(stdout);
    }
    return 0;
}

// The sgemm peak: C = A B with A, B (S, S), 2 S^3 FLOPs per product; prints the median of `reps` products.
int sgemm(int64_t S, int reps) {
    Generator gen(1);
    const Tensor A = Tensor::randn({S, S}, gen), B = Tensor::randn({S, S}, gen);
    Tensor C = Tensor::empty({S, S});
    auto once = [&] {
        const auto start = std::chrono::steady_clock::now();
        gemm(false, false, S, S, S, 1.0f, A.f32(), S, B.f32(), S, 0.0f, C.f32(), S);
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    };
    once();   // warm-up: first touch of C, thread start-up
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) ms.push_back(once());
    const double m = median(ms);
    std::printf("{\"n\": %lld, \"threads\": %d, \"ms\": %.4f, \"gflops\": %.3f}\n", static_cast<long long>(S),
                num_threads(), m, 2.0 * S * S * S / m / 1e6);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 2, reps = 7, warmup = 2;
    bool serve_mode = false;
    int64_t sgemm_size = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--serve") serve_mode = true;
        else if (a == "--sgemm" && i + 1 < argc) sgemm_size = std::max(1, std::atoi(argv[++i]));
        else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
        else if (a == "--warmup" && i + 1 < argc) warmup = std::max(0, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: razor_op_bench [--serve | --sgemm S] [--threads N] [--reps R] [--warmup W]\n");
            return 2;
        }
    }
    set_num_threads(threads);
    if (serve_mode) return serve();
    if (sgemm_size > 0) return sgemm(sgemm_size, reps);

    std::printf("%s\n\n| op | shape | fwd+bwd ms (median of %d) | GFLOP/s (3x fwd FLOPs) |\n|---|---|---:|---:|\n",
                runtime_banner().c_str(), reps);
    for (const BenchCase& c : cases()) {
        Runner r(c);
        for (int i = 0; i < warmup; ++i) r.run_ms();
        std::vector<double> ms;
        for (int i = 0; i < reps; ++i) ms.push_back(r.run_ms());
        const double m = median(ms);
        std::printf("| %s | %s | %.2f | %.1f |\n", c.kind.c_str(), c.name.c_str(), m, 3 * c.forward_flops() / m / 1e6);
        std::fflush(stdout);
    }
    return 0;
}
