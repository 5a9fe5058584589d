// bench/sparse_grad_bench.cpp -- weight gradients from a pruned x, expanded against sparse, per shape and kept
// fraction f. conv2d: unpack one image at a time, then the dense gW kernel select_algorithm chose, against
// core/conv_sparse_input.h; linear: unpack, then the GEMM, against core/linear_sparse_input.h. Sets
// kSparseWeightGradMaxKept (core/ops/conv2d.h) and kLinearSparseWeightGradMaxKept (core/ops/linear.h).
//
// docs: docs/back-razor.md "Sparse weight gradients".
//
// Workload: the distinct convs of a CIFAR ResNet-20 at batch 128, some of a torchvision ResNet-50 and the 1x1 convs of
// several MobileNetV2 stages at 224 px, batch 32;
// the Linears of a ViT-tiny (batch 128 x 65 tokens) and a ViT-B/16 (batch 16 x 197 tokens). x = relu(N(0, 1)) pruned per image to the kept fraction f (top-k by magnitude) with --values (default f16, the
// CLI's); gy = N(0, 1). Each cell: the median of --reps runs after one warm-up, the two kernels alternating.
//
//   ./build/bench/backrazor/razor_sparse_grad_bench [--reps 5] [--threads 2] [--values f16|f32|i8] [--only resnet20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/conv_sparse_input.h"
#include "core/gemm.h"
#include "core/linear_sparse_input.h"
#include "core/core.h"
#include "sparse/back_razor.h"

using namespace razor;
using namespace razor::sparse;

namespace {

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Case {
    std::string model, name;
    int64_t N, C, H, OC, K, stride, pad;   // conv2d; a Linear: K = 0, x (N, H tokens, C), W (OC, C)
};

std::vector<Case> cases() {
    return {
        {"resnet20", "16->16 32x32 3x3", 128, 16, 32, 16, 3, 1, 1},
        {"resnet20", "16->32 32x32 3x3 s2", 128, 16, 32, 32, 3, 2, 1},
        {"resnet20", "32->32 16x16 3x3", 128, 32, 16, 32, 3, 1, 1},
        {"resnet20", "64->64 8x8 3x3", 128, 64, 8, 64, 3, 1, 1},
        {"resnet20", "proj 16->32 32x32 1x1 s2", 128, 16, 32, 32, 1, 2, 0},
        {"resnet50", "stem 3->64 224 7x7 s2", 32, 3, 224, 64, 7, 2, 3},
        {"resnet50", "64->64 56x56 3x3", 32, 64, 56, 64, 3, 1, 1},
        {"resnet50", "256->64 56x56 1x1", 32, 256, 56, 64, 1, 1, 0},
        {"resnet50", "64->256 56x56 1x1", 32, 64, 56, 256, 1, 1, 0},
        {"resnet50", "128->128 56x56 3x3 s2", 32, 128, 56, 128, 3, 2, 1},
        {"resnet50", "128->128 28x28 3x3", 32, 128, 28, 128, 3, 1, 1},
        {"resnet50", "512->128 28x28 1x1", 32, 512, 28, 128, 1, 1, 0},
        {"resnet50", "256->256 14x14 3x3", 32, 256, 14, 256, 3, 1, 1},
        {"resnet50", "1024->256 14x14 1x1", 32, 1024, 14, 256, 1, 1, 0},
        {"resnet50", "512->512 7x7 3x3", 32, 512, 7, 512, 3, 1, 1},
        {"resnet50", "2048->512 7x7 1x1", 32, 2048, 7, 512, 1, 1, 0},
        {"mobilenet_v2", "32->16 112x112 1x1", 32, 32, 112, 16, 1, 1, 0},
        {"mobilenet_v2", "16->96 112x112 1x1", 32, 16, 112, 96, 1, 1, 0},
        {"mobilenet_v2", "144->24 56x56 1x1", 32, 144, 56, 24, 1, 1, 0},
        {"mobilenet_v2", "24->144 56x56 1x1", 32, 24, 56, 144, 1, 1, 0},
        {"mobilenet_v2", "192->32 28x28 1x1", 32, 192, 28, 32, 1, 1, 0},
        {"mobilenet_v2", "384->64 14x14 1x1", 32, 384, 14, 64, 1, 1, 0},
        {"mobilenet_v2", "960->160 7x7 1x1", 32, 960, 7, 160, 1, 1, 0},
        {"vit_tiny", "qkv 192->576", 128, 192, 65, 576, 0, 0, 0},
        {"vit_tiny", "proj 192->192", 128, 192, 65, 192, 0, 0, 0},
        {"vit_tiny", "fc1 192->768", 128, 192, 65, 768, 0, 0, 0},
        {"vit_tiny", "fc2 768->192", 128, 768, 65, 192, 0, 0, 0},
        {"vit_b_16", "qkv 768->2304", 16, 768, 197, 2304, 0, 0, 0},
        {"vit_b_16", "fc1 768->3072", 16, 768, 197, 3072, 0, 0, 0},
        {"vit_b_16", "fc2 3072->768", 16, 3072, 197, 768, 0, 0, 0},
    };
}

template <class F>
void time_into(std::vector<double>& t, const F& f) {
    const double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 5, threads = 2;
    std::string only, values = "f16";
    for (int i = 1; i < argc; i += 2) {
        const std::string flag = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "razor_sparse_grad_bench: %s needs a value\n", flag.c_str());
            return 2;
        }
        if (flag == "--reps") reps = std::atoi(argv[i + 1]);
        else if (flag == "--threads") threads = std::atoi(argv[i + 1]);
        else if (flag == "--only") only = argv[i + 1];
        else if (flag == "--values") values = argv[i + 1];
        else {
            std::fprintf(stderr, "razor_sparse_grad_bench: unknown flag %s; flags: --reps N --threads N --values "
                                 "f16|f32|i8 --only SUBSTRING\n", flag.c_str());
            return 2;
        }
    }
    const ValueCodec codec = values == "f32" ? ValueCodec::F32 : values == "i8" ? ValueCodec::I8 : ValueCodec::F16;
    set_num_threads(threads);
    std::printf("%s\n", runtime_banner().c_str());
    std::printf("gW of conv2d and linear from a pruned x, values %s, %d threads, median of %d (ms)\n\n", value_codec_name(codec),
                num_threads(), reps);
    std::printf("| model | conv | batch | gW kernel | f | expanded | sparse | expanded / sparse |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    const double fractions[] = {0.05, 0.1, 0.2, 0.3, 0.5};
    Generator gen(0);
    for (const Case& c : cases()) {
        if (!only.empty() && (c.model + " " + c.name).find(only) == std::string::npos) continue;
        const bool is_conv = c.K > 0;
        const ConvGeometry g = is_conv ? conv2d_geometry({c.N, c.C, c.H, c.H}, {c.OC, c.C, c.K, c.K},
                                                         {{c.stride, c.stride}, {c.pad, c.pad}, {1, 1}, 1})
                                       : ConvGeometry{};
        const Shape x_shape = is_conv ? Shape{c.N, c.C, c.H, c.H} : Shape{c.N, c.H, c.C};
        const Shape gy_shape = is_conv ? Shape{c.N, c.OC, g.OH, g.OW} : Shape{c.N, c.H, c.OC};
        const int64_t M = c.N * c.H;   // a Linear's rows
        Tensor x = Tensor::randn(x_shape, gen);
        float* px = x.f32();
        for (int64_t j = 0; j < x.numel(); ++j) px[j] = std::max(px[j], 0.f);
        Tensor gy = Tensor::randn(gy_shape, gen);
        Tensor gw = is_conv ? Tensor::empty({c.OC, c.C, c.K, c.K}) : Tensor::empty({c.OC, c.C});
        Tensor x_dense = is_conv ? Tensor() : Tensor::empty(x_shape);   // the Linear's unpacked x
        const ConvAlgorithm family = is_conv ? select_algorithm(g).weight_grad : ConvAlgorithm::Im2col;
        const char* dense_name = is_conv ? conv_algorithm_name(family) : "gemm";
        if (is_conv && !detail::conv2d_sparse_input_supports(g)) {
            std::printf("| %s | %s | %lld | %s | - | - | not run (depthwise) | - |\n",
                        c.model.c_str(), c.name.c_str(), static_cast<long long>(c.N), dense_name);
            continue;
        }
        for (double f : fractions) {
            RazorPackOptions o;
            o.ratio = 1.0 - f;
            o.values = codec;
            const std::unique_ptr<RazoredTensor> saved = RazoredTensor::pack(x, o);
            const SparseSamples sparse = *saved->sparse_samples();
            auto expanded = [&] {
                if (is_conv) {
                    detail::conv2d_backward_with(family, g, nullptr, saved.get(), nullptr, gy.f32(), nullptr,
                                                 gw.f32());
                } else {
                    saved->unpack_into(x_dense.f32());
                    gemm(true, false, c.OC, c.C, M, 1.f, gy.f32(), c.OC, x_dense.f32(), c.C, 0.f, gw.f32(), c.C);
                }
            };
            auto direct = [&] {
                if (is_conv) detail::conv2d_sparse_input_weight_grad(g, sparse, gy.f32(), gw.f32());
                else detail::linear_sparse_input_weight_grad(sparse, M, c.C, c.OC, gy.f32(), gw.f32());
            };
            expanded(), direct();   // warm-up
            std::vector<double> te, ts;
            for (int r = 0; r < reps; ++r) time_into(te, expanded), time_into(ts, direct);
            const double me = median(te), ms = median(ts);
            std::printf("| %s | %s | %lld | %s | %.2f | %.2f | %.2f | %.2f |\n", c.model.c_str(), c.name.c_str(),
                        static_cast<long long>(c.N), dense_name, sparse.kept_fraction(), me, ms,
                        me / ms);
            std::fflush(stdout);
        }
    }
    return 0;
}
