// apps/bench.cpp -- `razor bench`: time razor's full training step on synthetic data.
//
// reference: the step a PyTorch benchmark times: opt.zero_grad(); loss = F.cross_entropy(model(x), y);
// loss.backward(); opt.step() with SGD (momentum 0.9, Nesterov, weight decay 5e-4). docs: docs/cli.md "razor bench".
//
// The images are N(0, 1) noise and the labels uniform: speed and memory do not depend on the values. After --warmup
// untimed steps (first-touch allocations, thread start-up), each of --steps steps is timed on its own and the median
// is reported. Memory figures: saved_bytes / saved_dense_bytes are the tape accounting's peak within a step (what the
// tape stored, and what a dense tape would have stored); peak_tensor_bytes is the tracking allocator's peak over the
// timed steps (weights, gradients, optimizer state, activations, tape); peak_rss_bytes is the process's VmHWM.
//
// --keep K times one VR-PGE phase-A iteration instead (apps/vrpge_common.h; both sampled passes, estimator, joint
// clip, Adam on s, SGD on w, projection), every s at K and rho = K, compact channel execution; the same fields plus
// keep, variant, align and flops_ratio (MACs of the sampled subnets over dense, per pass, averaged).
// --razor R [--razor-values V] times the same step under Back Razor's save policy (apps/finetune.h,
// razor_policy_from_flags); the JSON line has the same fields plus "razor" and "razor_values", so a script compares
// rows of a dense and a razor run directly (bench/backrazor/compare.py).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/args.h"
#include "apps/commands.h"
#include "apps/finetune.h"
#include "apps/vrpge_common.h"
#include "core/core.h"
#include "models/registry.h"
#include "optim/sgd.h"

namespace razor::apps {

int run_bench(const std::vector<std::string>& argv) {
    Args args("bench", "time the training step (forward, backward, SGD momentum) on synthetic data");
    args.flag("model", "resnet20", models::model_names_joined())
        .flag("batch", "128", "images per step")
        .flag("steps", "10", "timed steps (the median is reported)")
        .flag("warmup", "2", "untimed steps first")
        .flag("threads", "0", "OpenMP threads (0 = all cores)")
        .flag("classes", "10", "number of classes")
        .flag("channels", "3", "input channels")
        .flag("image-size", "32", "input height = width")
        .flag("seed", "0", "seed for init and the synthetic batch")
        .flag("keep", "0", "VR-PGE: time the sparse-training iteration at this channel keep ratio (0 = dense step)")
        .boolean("one-backward", "VR-PGE: the cheaper variant (two forwards, one backward; not the reference)")
        .flag("align", "0", "VR-PGE: round kept counts up to a multiple of this (changes the algorithm)")
        .flag("razor", "0", kRazorHelp)
        .flag("razor-values", "fp32", kRazorValuesHelp)
        .flag("razor-gelu", "d4", kRazorGeluHelp)
        .flag("razor-bn", "dense", kRazorBnHelp)
        .flag("razor-attn", "int8", kRazorAttnHelp)
        .boolean("json", "print one JSON line (for scripts) instead of the table");
    args.parse(argv);
    if (args.help_requested()) {
        std::printf("%s", args.usage().c_str());
        return 0;
    }
    const int64_t batch = args.integer("batch"), steps = args.integer("steps"), warmup = args.integer("warmup");
    const int64_t threads = args.integer("threads"), classes = args.integer("classes");
    if (batch < 1 || steps < 1 || warmup < 0 || threads < 0 || classes < 1)
        throw Error(fmt("razor bench: expected --batch >= 1, --steps >= 1, --warmup >= 0, --threads >= 0, --classes "
                        ">= 1; got ", batch, ", ", steps, ", ", warmup, ", ", threads, ", ", classes));
    const double razor = args.real("razor");
    SavePolicyGuard save_policy(razor_policy_from_flags("razor bench", razor_flags(args)));
    set_num_threads(static_cast<int>(threads));

    const std::string name = args.str("model");
    models::ModelOptions options{.in_channels = args.integer("channels"), .image_size = args.integer("image-size")};
    Generator gen(static_cast<uint64_t>(args.integer("seed")));
    auto model = models::make_model(name, classes, gen, options);
    optim::SGD opt(model->named_parameters(), {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
    const double keep = args.real("keep");
    if (keep < 0 || keep > 1) throw Error(fmt("razor bench: --keep must be in (0, 1] (0 = dense), got ", keep));
    if (keep > 0 && razor > 0)
        throw Error(fmt("razor bench: --keep ", keep, " and --razor ", razor, " time two different steps; hint: pass one of them"));
    std::unique_ptr<VrpgeTrainer> vrpge;
    if (keep > 0) {
        VrpgeTrainerOptions o;
        o.s_init = static_cast<float>(keep);
        o.adam.lr = 12e-3;
        o.sgd = {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4};
        o.step.rho = keep;
        o.step.variant = args.on("one-backward") ? sparse::VrpgeVariant::OneBackward : sparse::VrpgeVariant::TwoBackward;
        o.step.align = args.integer("align");
        vrpge = std::make_unique<VrpgeTrainer>(model, o);
    }
    double flops_ratio = 0;
    const Tensor x = Tensor::randn({batch, options.in_channels, options.image_size, options.image_size}, gen);
    std::vector<int64_t> y(batch);
    for (auto& v : y) v = static_cast<int64_t>(gen.randint(static_cast<uint64_t>(classes)));
    const Tensor labels = Tensor::from_vector_i64({batch}, y);

    std::vector<double> ms;
    TapeTotals tape;
    int64_t os_allocations_at_warm = 0;   // tensor blocks the caching allocator had to take from the OS
    for (int64_t s = 0; s < warmup + steps; ++s) {
        if (s == warmup) reset_peak_memory(), os_allocations_at_warm = memory_stats().os_allocations;
        current_tape().reset_peak();
        const auto t0 = std::chrono::steady_clock::now();
        if (vrpge) {
            const double ratio = vrpge->step(x, labels, gen).cost_ratio;
            if (s >= warmup) flops_ratio += ratio / steps;
        } else {
            opt.zero_grad();
            Tensor loss = cross_entropy((*model)(x), labels);
            loss.backward();
            opt.step();
        }
        const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (s < warmup) continue;
        ms.push_back(elapsed);
        const TapeTotals t = current_tape().peak();
        if (t.stored_bytes > tape.stored_bytes) tape = t;
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    const double img_per_s = batch / (median / 1000);

    nlohmann::json j = {{"model", name},
                              {"batch", batch},
                              {"threads", num_threads()},
                              {"steps", steps},
                              {"warmup", warmup},
                              {"step_ms", median},
                              {"step_ms_min", sorted.front()},
                              {"step_ms_max", sorted.back()},
                              {"img_per_s", img_per_s},
                              {"params", model->num_parameters()},
                              {"saved_bytes", tape.stored_bytes},
                              {"saved_dense_bytes", tape.dense_bytes},
                              {"peak_tensor_bytes", memory_stats().peak_bytes},
                              {"timed_os_allocations", memory_stats().os_allocations - os_allocations_at_warm},
                              {"cached_bytes", memory_stats().cached_bytes},
                              {"peak_rss_bytes", peak_rss_bytes()},
                              {"build", build_type()},
                              {"razor", razor},
                              {"razor_values", args.str("razor-values")},
                              {"razor_gelu", args.str("razor-gelu")},
                              {"razor_bn", args.str("razor-bn")},
                              {"razor_attn", args.str("razor-attn")},
                              {"save_policy", active_save_policy().name()}};
    if (vrpge) {
        j["keep"] = keep, j["variant"] = variant_name(vrpge->options.variant), j["align"] = vrpge->options.align;
        j["flops_ratio"] = flops_ratio;
    }
    if (args.on("json")) {
        std::printf("%s\n", j.dump().c_str());
        return 0;
    }
    std::printf("%s\n", runtime_banner().c_str());
    std::printf("bench  %s, batch %lld, input (%lld, %lld, %lld, %lld), %lld timed steps after %lld warm-up\n\n",
                name.c_str(), static_cast<long long>(batch), static_cast<long long>(batch),
                static_cast<long long>(options.in_channels), static_cast<long long>(options.image_size),
                static_cast<long long>(options.image_size), static_cast<long long>(steps),
                static_cast<long long>(warmup));
    if (vrpge)
        std::printf("  VR-PGE iteration    keep %g, %s%s, sampled subnet MACs %.3fx dense per pass\n", keep,
                    variant_name(vrpge->options.variant).c_str(),
                    vrpge->options.align ? fmt(", --align ", vrpge->options.align, " (changes the algorithm)").c_str() : "",
                    flops_ratio);
    std::printf("  step (median)       %.1f ms   (min %.1f, max %.1f)\n", median, sorted.front(), sorted.back());
    std::printf("  throughput          %.0f img/s on %d threads\n", img_per_s, num_threads());
    std::printf("  parameters          %lld (%s)\n", static_cast<long long>(model->num_parameters()),
                format_bytes(model->num_parameters() * 4).c_str());
    std::printf("  tape peak           %s (dense %s, %.1fx)\n", format_bytes(tape.stored_bytes).c_str(),
                format_bytes(tape.dense_bytes).c_str(),
                tape.stored_bytes ? double(tape.dense_bytes) / tape.stored_bytes : 0.0);
    std::printf("  tensor peak         %s (allocator: %lld OS allocations in the timed steps, %s cached)\n",
                format_bytes(memory_stats().peak_bytes).c_str(),
                static_cast<long long>(memory_stats().os_allocations - os_allocations_at_warm),
                format_bytes(memory_stats().cached_bytes).c_str());
    std::printf("  peak RSS            %s\n", format_bytes(peak_rss_bytes()).c_str());
    return 0;
}

}  // namespace razor::apps
