// apps/bench.cpp -- `razor bench`: time razor's full training step on synthetic data.
//
// reference: the step a PyTorch benchmark times: opt.zero_grad(); loss = F.cross_entropy(model(x), y);
// loss.backward(); opt.step() with SGD (momentum 0.9, Nesterov, weight decay 5e-4). docs: docs/cli.md "razor bench".
//
// The images are N(0, 1) noise and the labels uniform: speed and memory do not depend on the values. After --warmup
// untimed steps (first-touch allocations, thread start-up), each of --steps steps is timed on its own and the median
// is reported. Memory figures: saved_bytes / saved_dense_bytes are the tape accounting's peak within a step (what the
// tape stored, and what a dense tape would have stored); peak_tensor_bytes is the tracking allocator's peak over the
// timed steps (weights, gradients, optimizer state, activations, tape); os_bytes what the allocator holds from the
// OS at the end (live blocks and its cache); peak_rss_bytes is the process's VmHWM, and rss_split splits it (below).
//
// The steps are the training loop's own (train/steps.h: DenseStep, VrpgeStep), timed on one synthetic batch.
// --keep K times one VR-PGE phase-A iteration instead (train/vrpge_trainer.h; both sampled passes, estimator, joint
// clip, Adam on s, SGD on w, projection), every s at K and rho = K, compact channel execution; the same fields plus
// keep, variant, align, stream_masks and flops_ratio (MACs of the sampled subnets over dense, per pass, averaged).
// --keep K --resample-every N (the seed's strategy, train/vrpge_trainer.h) times whole intervals: a timed unit is N
// consecutive steps starting at a resample (the reference iteration, then N - 1 w-only steps on the interval's
// subnetwork), --warmup and --steps count such units, and step_ms is the median unit's time / N -- the mean step over
// a whole interval. The JSON line says so: "timed_unit" is "interval" (else "step"), with resample_every and
// interval_ms (the median unit).
// --razor R [--razor-values V] times the same step under Back Razor's save policy (apps/razor_flags.h,
// razor_policy_from_flags); the JSON line has the same fields plus "razor" and "razor_values", so a script compares
// rows of a dense and a razor run directly (bench/backrazor/compare.py).
// --from FILE starts from pretrained weights (the head re-initialised for --classes) and --freeze-bn freezes BatchNorm,
// both as razor finetune does, so bench/finetune_vs_torch.py times the fine-tuning step on the file PyTorch loads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/finetune.h"
#include "apps/threads.h"
#include "apps/razor_flags.h"
#include "apps/run_flags.h"
#include "core/core.h"
#include "models/registry.h"
#include "optim/sgd.h"
#include "train/steps.h"
#include "train/tape_meter.h"

namespace razor::apps {

namespace {

struct BenchOptions {
    ModelInputFlags input;
    int64_t batch = 128, steps = 10, warmup = 2, threads = 0, seed = 0;
    int64_t align = 0, resample_every = 1;
    double keep = 0;
    bool one_backward = false, json = false, freeze_bn = false, stream_masks = false, step_in_backward = false;
    std::string from;
    RazorFlags razor;
};

constexpr const char* kSummary = "time the training step (forward, backward, SGD momentum) on synthetic data";

const FlagTable<BenchOptions>& bench_flags() {
    using O = BenchOptions;
    static const FlagTable<O> table =
        FlagTable<O>()
            .family(model_input_flag_family(), &O::input)
            .integer("batch", "128", "images per step", &O::batch)
            .integer("steps", "10", "timed steps (the median is reported; with --resample-every N: timed intervals)",
                     &O::steps)
            .integer("warmup", "2", "untimed steps first (with --resample-every N: intervals)", &O::warmup)
            .integer("threads", "0", "OpenMP threads (0 = OMP_NUM_THREADS if set, else all cores)", &O::threads)
            .integer("seed", "0", "seed for init and the synthetic batch", &O::seed)
            .real("keep", "0", "VR-PGE: time the sparse-training iteration at this channel keep ratio (0 = dense "
                  "step)", &O::keep)
            .boolean("one-backward", "VR-PGE: the cheaper variant (two forwards, one backward; not the reference)",
                     &O::one_backward)
            .integer("align", "0", "VR-PGE: round kept counts up to a multiple of this (changes the algorithm)",
                     &O::align)
            .boolean("stream-masks", "VR-PGE on a ResNet: one mask per residual stream, shared by its writers (not "
                     "the reference)", &O::stream_masks)
            .integer("resample-every", "1", "VR-PGE: structure update and a fresh subnetwork every N steps (the "
                     "seed's strategy); --steps and --warmup then count whole intervals of N steps", &O::resample_every)
            .family(razor_flag_family(), &O::razor)
            .text("from", "", "start from these weights (a run, or a torchvision / timm / Hugging Face .pth or "
                  ".safetensors file; the head re-initialised for --classes), as razor finetune --from does", &O::from)
            .boolean("freeze-bn", "BatchNorm layers in eval mode, weight and bias not trained (as razor finetune "
                     "--freeze-bn)", &O::freeze_bn)
            .boolean("step-in-backward", "the optimizer updates each parameter inside backward and frees its "
                     "gradient (as razor train --step-in-backward)", &O::step_in_backward)
            .boolean("json", "print one JSON line (for scripts) instead of the table", &O::json);
    return table;
}

// The process peak, split (each part in bytes; they add up to peak_rss_bytes when no part is floored):
//   model_state      parameters, buffers, gradients and optimizer state (SGD's momentum): alive across steps
//   tape             the tape's stored peak within a step
//   transient        the rest of the tensor peak: forward outputs not yet consumed, gradients in flight, backward's
//                    unpacked copies and workspaces. Gradients are dropped at each step's start (zero_grad sets them
//                    to none), so at the tensor peak some are not alive yet: model_state counts them all, and
//                    transient is low by as much, at most the parameter bytes. With --step-in-backward no gradient
//                    outlives backward: model_state holds none, and those alive at the peak are transient
//   allocator_cache  what the caching allocator kept resident beyond the tensor peak: free space in segments whose
//                    pages it has not given back, and the rounding of blocks up to their size class
//                    (core/allocator.h): its highest resident bytes over the timed steps (peak_resident_bytes, an
//                    upper bound) minus the tensor peak
//   other            what the process holds outside tensor storage: code, libraries, thread stacks, Eigen's GEMM
//                    packing buffers, std::vector temporaries, and whatever an earlier phase (model construction, the
//                    warm-up) left resident: peak RSS minus the allocator's bytes, floored at 0
struct PeakSplit {
    int64_t model_state = 0, tape = 0, transient = 0, allocator_cache = 0, other = 0;
};

PeakSplit split_peak(const nn::Module& model, const optim::Optimizer& opt, int64_t tape_peak, int64_t peak_rss) {
    PeakSplit s;
    for (const Tensor& p : model.parameters()) {
        s.model_state += static_cast<int64_t>(p.nbytes());
        if (p.grad().defined()) s.model_state += static_cast<int64_t>(p.grad().nbytes());
    }
    for (const auto& [name, b] : model.named_buffers()) s.model_state += static_cast<int64_t>(b.nbytes());
    for (const auto& [key, t] : opt.state_dict())
        if (!key.starts_with("param_groups.")) s.model_state += static_cast<int64_t>(t.nbytes());
    const int64_t peak = memory_stats().peak_bytes;
    s.tape = tape_peak;
    s.transient = std::max<int64_t>(0, peak - s.model_state - s.tape);
    const int64_t resident = memory_stats().peak_resident_bytes;
    s.allocator_cache = std::max<int64_t>(0, resident - peak);
    s.other = std::max<int64_t>(0, peak_rss - std::max(resident, peak));
    return s;
}

int bench(const BenchOptions& o) {
    const int64_t batch = o.batch, steps = o.steps, warmup = o.warmup, classes = o.input.classes;
    if (batch < 1 || steps < 1 || warmup < 0 || o.threads < 0 || classes < 1)
        throw Error(fmt("razor bench: expected --batch >= 1, --steps >= 1, --warmup >= 0, --threads >= 0, --classes "
                        ">= 1; got ", batch, ", ", steps, ", ", warmup, ", ", o.threads, ", ", classes));
    SavePolicyGuard save_policy(razor_policy_from_flags("razor bench", o.razor));
    apply_threads("razor bench", o.threads);

    const std::string& name = o.input.model;
    models::ModelOptions options{.in_channels = o.input.channels, .image_size = o.input.image_size};
    Generator gen(static_cast<uint64_t>(o.seed));
    std::shared_ptr<nn::Module> model;
    if (o.from.empty()) {
        model = models::make_model(name, classes, gen, options);
    } else {   // the file's tensors are released once copied into the model, as razor finetune does
        const train::Checkpoint pretrained = train::open_checkpoint(o.from, true);
        options.depth = pretrained_model("razor bench", o.from, name, pretrained).depth;
        model = models::make_model(name, classes, gen, options);
        load_pretrained("razor bench", o.from, *model, pretrained);
    }
    if (o.freeze_bn) freeze_batchnorm(*model);
    keep_layers_dense(*model, o.razor);
    optim::NamedParameters trained;   // all but frozen ones, as razor finetune
    for (const auto& [param_name, p] : model->named_parameters())
        if (p.requires_grad()) trained.emplace_back(param_name, p);
    optim::SGD opt(trained, {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
    const double keep = o.keep;
    if (keep < 0 || keep > 1) throw Error(fmt("razor bench: --keep must be in (0, 1] (0 = dense), got ", keep));
    if (keep > 0 && o.razor.ratio > 0)
        throw Error(fmt("razor bench: --keep ", keep, " and --razor ", o.razor.ratio,
                        " time two different steps; hint: pass one of them"));
    if (o.resample_every < 1)
        throw Error(fmt("razor bench: --resample-every must be >= 1, got ", o.resample_every,
                        "; hint: 1 times the reference iteration, N > 1 whole intervals of N steps"));
    if (o.resample_every > 1 && keep == 0)
        throw Error(fmt("razor bench: --resample-every ", o.resample_every, " needs the VR-PGE iteration; hint: pass "
                        "--keep K (the dense step has no subnetwork to resample)"));
    if (o.stream_masks && keep == 0)
        throw Error("razor bench: --stream-masks shapes VR-PGE's masks; hint: pass --keep K as well");
    if (keep > 0 && o.step_in_backward)
        throw Error("razor bench: --step-in-backward changes the dense step; VR-PGE (--keep) steps its own optimizers; "
                    "hint: pass one of them");
    if (keep > 0 && o.freeze_bn)
        throw Error(fmt("razor bench: --keep ", keep, " samples BatchNorm channels, which --freeze-bn freezes; hint: "
                        "pass one of them"));
    std::unique_ptr<train::VrpgeTrainer> vrpge;
    std::unique_ptr<train::Step> step;
    if (keep > 0) {
        train::VrpgeTrainerOptions v;
        v.s_init = static_cast<float>(keep);
        v.adam.lr = 12e-3;
        v.sgd = {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4};
        v.step.rho = keep;
        v.step.variant = o.one_backward ? sparse::VrpgeVariant::OneBackward : sparse::VrpgeVariant::TwoBackward;
        v.step.align = o.align;
        v.resample_every = o.resample_every;
        v.stream_masks = o.stream_masks;
        vrpge = std::make_unique<train::VrpgeTrainer>(model, v);
        step = std::make_unique<train::VrpgeStep>(*vrpge, gen);
    } else {
        step = std::make_unique<train::DenseStep>(*model, opt, nullptr,
                                                  train::DenseStepOptions{.step_in_backward = o.step_in_backward});
    }
    double flops_ratio = 0;
    data::Batch b;
    b.images = Tensor::randn({batch, options.in_channels, options.image_size, options.image_size}, gen);
    std::vector<int64_t> y(batch);
    for (auto& v : y) v = static_cast<int64_t>(gen.randint(static_cast<uint64_t>(classes)));
    b.labels = Tensor::from_vector_i64({batch}, y);

    // A timed unit: one step, or with --resample-every N one whole interval (every unit starts at a resample).
    const int64_t unit = vrpge ? vrpge->resample_every : 1;
    std::vector<double> ms;   // per unit, divided by `unit`: the mean step of the unit
    TapeTotals tape;
    train::TapeMeter meter;
    int64_t os_allocations_at_warm = 0;   // tensor blocks the caching allocator had to take from the OS
    int64_t refaulted_at_warm = 0;        // released memory it had taken again when the timed steps began
    for (int64_t s = 0; s < warmup + steps; ++s) {
        if (s == warmup)
            reset_peak_memory(), os_allocations_at_warm = memory_stats().os_allocations,
                                 refaulted_at_warm = memory_stats().refaulted_bytes;
        double elapsed = 0;
        for (int64_t i = 0; i < unit; ++i) {
            meter.begin_step();
            const auto t0 = std::chrono::steady_clock::now();
            const train::StepResult r = step->run(b);
            step->update();
            elapsed += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (s < warmup) continue;
            flops_ratio += r.metric("flops_ratio") / static_cast<double>(steps * unit);
            tape = train::larger(tape, meter.end_step());
        }
        if (s >= warmup) ms.push_back(elapsed / static_cast<double>(unit));
    }
    // One reading of the peak RSS for the split and the JSON, so the parts add up to exactly the figure reported
    // (read twice, building the JSON in between could raise the second reading).
    const int64_t peak_rss = peak_rss_bytes();
    const PeakSplit split = split_peak(*model, opt, tape.stored_bytes, peak_rss);
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    const double img_per_s = batch / (median / 1000);

    nlohmann::json j = {{"model", name},
                              {"batch", batch},
                              {"threads", num_threads()},
                              {"isa", isa_name(active_isa())},
                              {"steps", steps},
                              {"warmup", warmup},
                              {"step_ms", median},
                              {"step_ms_min", sorted.front()},
                              {"step_ms_max", sorted.back()},
                              {"img_per_s", img_per_s},
                              {"params", model->num_parameters()},
                              {"from", o.from},
                              {"freeze_bn", o.freeze_bn},
                              {"step_in_backward", o.step_in_backward},
                              {"saved_bytes", tape.stored_bytes},
                              {"saved_dense_bytes", tape.dense_bytes},
                              {"peak_tensor_bytes", memory_stats().peak_bytes},
                              {"timed_os_allocations", memory_stats().os_allocations - os_allocations_at_warm},
                              {"cached_bytes", memory_stats().cached_bytes},
                              {"os_bytes", memory_stats().os_bytes},
                              {"released_bytes", memory_stats().released_bytes},
                              {"gives_back_pages", memory_stats().gives_back_pages},
                              {"timed_refaulted_bytes", memory_stats().refaulted_bytes - refaulted_at_warm},
                              {"peak_rss_bytes", peak_rss},
                              {"rss_split",
                               {{"model_state", split.model_state},
                                {"tape", split.tape},
                                {"transient", split.transient},
                                {"allocator_cache", split.allocator_cache},
                                {"other", split.other}}},
                              {"build", build_type()},
                              {"razor", o.razor.ratio},
                              {"razor_values", o.razor.values},
                              {"razor_gelu", o.razor.gelu},
                              {"razor_bn", o.razor.bn},
                              {"razor_attn", o.razor.attn},
                              {"razor_input", o.razor.input},
                              {"razor_head", o.razor.head},
                              {"save_policy", active_save_policy().name()},
                              {"timed_unit", unit > 1 ? "interval" : "step"}};
    if (vrpge) {
        j["keep"] = keep, j["variant"] = train::variant_name(vrpge->options.variant), j["align"] = vrpge->options.align;
        j["flops_ratio"] = flops_ratio;
        j["resample_every"] = unit;
        j["stream_masks"] = o.stream_masks;
        if (unit > 1) j["interval_ms"] = median * static_cast<double>(unit);
    }
    if (o.json) {
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
        std::printf("  VR-PGE iteration    keep %g, %s%s%s, sampled subnet MACs %.3fx dense per pass\n", keep,
                    train::variant_name(vrpge->options.variant).c_str(),
                    vrpge->options.align ? fmt(", --align ", vrpge->options.align, " (changes the algorithm)").c_str() : "",
                    o.stream_masks ? ", one mask per residual stream (not the reference)" : "", flops_ratio);
    if (unit > 1)
        std::printf("  resample every      %lld steps (the seed's strategy): each timed unit is one whole interval, "
                    "the step time is its mean\n  interval (median)   %.1f ms\n",
                    static_cast<long long>(unit), median * static_cast<double>(unit));
    std::printf("  step (median)       %.1f ms   (min %.1f, max %.1f)\n", median, sorted.front(), sorted.back());
    std::printf("  throughput          %.0f img/s on %d thread%s\n", img_per_s, num_threads(), num_threads() == 1 ? "" : "s");
    std::printf("  parameters          %lld (%s)\n", static_cast<long long>(model->num_parameters()),
                format_bytes(model->num_parameters() * 4).c_str());
    std::printf("  tape peak           %s (dense %s, %.1fx)\n", format_bytes(tape.stored_bytes).c_str(),
                format_bytes(tape.dense_bytes).c_str(),
                tape.stored_bytes ? double(tape.dense_bytes) / tape.stored_bytes : 0.0);
    std::printf("  tensor peak         %s (allocator: %lld OS allocations in the timed steps, %s cached)\n",
                format_bytes(memory_stats().peak_bytes).c_str(),
                static_cast<long long>(memory_stats().os_allocations - os_allocations_at_warm),
                format_bytes(memory_stats().cached_bytes).c_str());
    std::printf("  peak RSS            %s = model state %s + tape %s + transient %s + allocator cache %s + "
                "other %s\n",
                format_bytes(peak_rss).c_str(), format_bytes(split.model_state).c_str(),
                format_bytes(split.tape).c_str(), format_bytes(split.transient).c_str(),
                format_bytes(split.allocator_cache).c_str(), format_bytes(split.other).c_str());
    return 0;
}

}  // namespace

int run_bench(const std::vector<std::string>& argv) {
    return run_with_flags(bench_flags(), "bench", kSummary, argv, bench);
}

}  // namespace razor::apps
