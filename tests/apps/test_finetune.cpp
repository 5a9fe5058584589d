// tests/apps/test_finetune.cpp -- razor finetune end to end on a tiny fake CIFAR-10 (pretrain on the six animal
// classes, fine-tune on the four vehicles): the backbone is loaded, the head is new and sized to the new classes,
// --freeze-bn leaves BN untouched, the Back Razor tape shows in the log; resume is bit-exact under the razor tape;
// errors (no --from, bad --razor / --razor-values, a checkpoint of another model). razor info --razor: the tape
// breakdown, CSV and SVG, and the acceptance ratios; razor bench --razor: the same JSON fields.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/apps_support.h"
#include "train/checkpoint.h"
#include "apps/commands.h"
#include "apps/razor_flags.h"
#include "core/core.h"
#include "models/registry.h"
#include "models/summary.h"
#include "sparse/razor_policy.h"

using namespace razor;
using doctest::Contains;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
    if (a.dtype() == DType::I64) return a.to_vector_i64() == b.to_vector_i64();
    const auto x = a.to_vector(), y = b.to_vector();
    return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

const auto run = &test::run_ok;   // stdout captured; a failure fails the test

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

const char* kAnimals = "bird,cat,deer,dog,frog,horse";
const char* kVehicles = "airplane,automobile,ship,truck";

}  // namespace

TEST_CASE("razor finetune: backbone loaded, new head for the new classes, frozen BN, razor tape; resume; errors" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("finetune");
    const std::string d = tmp / "cifar", pre = tmp / "pre";
    test::write_fake_cifar10(d, 8, 20);
    run(apps::run_train, {"--model", "resnet20", "--data", d, "--classes", kAnimals, "--out", pre, "--batch", "8",
                          "--epochs", "1", "--steps-per-epoch", "2", "--threads", "1", "--eval-batch", "10", "--sched", "cosine"});
    const std::vector<std::string> tune = {"--from", pre, "--data", d, "--classes", kVehicles, "--batch", "8",
                                           "--epochs", "2", "--steps-per-epoch", "2", "--threads", "1",
                                           "--eval-batch", "10", "--razor", "0.9", "--freeze-bn"};
    const std::string out = run(apps::run_finetune, plus(tune, {"--out", tmp / "a"}));
    CHECK(out.find("head re-initialised for 4 classes (checkpoint has 6)") != std::string::npos);
    CHECK(out.find("freeze 19 BatchNorm2d layers") != std::string::npos);
    CHECK(out.find("save policy razor r=0.90 values=f16") != std::string::npos);   // the default

    const train::Checkpoint p = train::load_checkpoint(pre), a = train::load_checkpoint(tmp / "a");
    CHECK(a.model.at("linear.weight").shape() == Shape{4, 64});
    CHECK(a.model_metadata.at("model") == "resnet20");   // taken from the checkpoint (--model not given)
    CHECK(a.model_metadata.at("finetuned_from") == pre);
    // frozen BN: running statistics, counters and affine parameters are the pretrained ones, bit for bit
    for (const char* key : {"bn1.running_mean", "bn1.running_var", "bn1.weight", "bn1.bias", "layer3.2.bn2.running_var",
                            "layer3.2.bn2.weight", "bn1.num_batches_tracked"})
        CHECK_MESSAGE(same_bits(a.model.at(key), p.model.at(key)), key);
    CHECK_FALSE(same_bits(a.model.at("conv1.weight"), p.model.at("conv1.weight")));   // the backbone trained
    CHECK(a.train_state.count("optimizer.conv1.weight.momentum_buffer"));
    CHECK_FALSE(a.train_state.count("optimizer.bn1.weight.momentum_buffer"));       // frozen: not optimised
    const auto log = test::read_jsonl(tmp / "a/log.jsonl");
    REQUIRE(log.size() == 2);
    CHECK(log[1]["tape_ratio"].get<double>() > 5.0);   // conv inputs razored, ReLU masks, BN saves nothing

    // the same run stopped after epoch 1 and resumed is bit-identical (the razor tape and frozen BN included)
    run(apps::run_finetune, plus(tune, {"--out", tmp / "b", "--stop-after", "1"}));
    // razor train --resume of a finetune run would drop --freeze-bn (and --from): refused, naming the command to use
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_train, {"--resume", tmp / "b", "--data", d, "--threads", "1"}),
                         Contains(fmt("hint: continue it with the command that wrote it, e.g. razor finetune --resume ",
                                      tmp / "b").c_str()),
                         Error);
    run(apps::run_finetune, {"--resume", tmp / "b", "--data", d, "--threads", "1"});
    const train::Checkpoint b = train::load_checkpoint(tmp / "b");
    REQUIRE(b.model.size() == a.model.size());
    for (const auto& [key, t] : a.model) CHECK_MESSAGE(same_bits(t, b.model.at(key)), key);

    // without --freeze-bn the BN statistics move; dense tape (--razor 0): the ratio is the dense tape's own
    run(apps::run_finetune, {"--from", pre + "/last/model.safetensors", "--data", d, "--classes", kVehicles, "--batch",
                             "8", "--epochs", "1", "--steps-per-epoch", "1", "--threads", "1", "--out", tmp / "c"});
    const train::Checkpoint c = train::load_checkpoint(tmp / "c");
    CHECK_FALSE(same_bits(c.model.at("bn1.running_mean"), p.model.at("bn1.running_mean")));
    CHECK(test::read_jsonl(tmp / "c/log.jsonl")[0]["tape_ratio"].get<double>() < 5.0);

    // errors name the flag and give a hint
    auto fails = [&](const std::vector<std::string>& args, const std::string& what) {
        CHECK_THROWS_WITH_AS(test::run_command(apps::run_finetune, plus(args, {"--out", tmp / "err", "--threads", "1"})),
                             Contains(what.c_str()), Error);
    };
    fails({"--data", d}, "razor finetune: --from is required");
    fails(plus(tune, {"--razor-values", "fp8"}), "--razor-values must be one of fp32 | fp16 | int8; got 'fp8'");
    fails(plus(tune, {"--razor", "1.5"}), "--razor must be in [0, 1)");
    fails(plus(tune, {"--model", "resnet32"}), "missing in the checkpoint: layer1.3.bn1.bias");
    fails(plus(tune, {"--model", "resnet32"}), "hint: the checkpoint's model is resnet20");
    fails(plus(tune, {"--from", tmp / "nowhere"}), "nowhere");
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_train, {"--data", d, "--razor", "-0.1", "--out", tmp / "err"}),
                         Contains("razor train: --razor must be in [0, 1)"), Error);
}

TEST_CASE("razor info --razor: per-layer tape table, totals, CSV and SVG") {
    test::TempDir tmp("info_razor");
    const std::string out = run(apps::run_info, {"--model", "resnet20", "--batch", "4", "--razor", "0.9",
                                                 "--razor-values", "int8", "--threads", "1", "--out", tmp.path()});
    CHECK(out.find("tape breakdown, razor r=0.90 values=i8") != std::string::npos);
    CHECK(out.find("layer1.0.conv1") != std::string::npos);
    CHECK(out.find("x:bitmap+i8 r=0.90") != std::string::npos);
    CHECK(out.find("tape total") != std::string::npos);
    const std::string stem = tmp / "tape-resnet20-b4-r0.90-int8";
    REQUIRE(fs::exists(stem + ".csv"));
    REQUIRE(fs::exists(stem + ".svg"));
    std::ifstream csv(stem + ".csv");
    std::string header, first;
    std::getline(csv, header);
    std::getline(csv, first);
    CHECK(header == "module,op,shape,items,stored_bytes,dense_bytes,ratio,saved");
    CHECK(first.rfind("conv1,conv2d,", 0) == 0);
    // the dense tape's breakdown on request
    const std::string dense = run(apps::run_info, {"--model", "lenet5", "--image-size", "28", "--channels", "1",
                                                   "--tape", "--threads", "1", "--out", tmp.path()});
    CHECK(dense.find("tape breakdown, dense") != std::string::npos);
    CHECK(fs::exists(tmp / "tape-lenet5-b1-dense.svg"));
}

TEST_CASE("razor tape ratios against razor's own dense tape: >= 6.5x with fp32 values and >= 12x with int8 at r = 0.9") {
    // The acceptance figures are for batch 128 (docs/back-razor.md, measured with razor info); the per-sample
    // selection makes the ratio nearly independent of the batch, so batch 4 checks the same thing quickly.
    // The baseline is the dense tape of the same step, deduplicated by storage as stored bytes are (at batch 4:
    // resnet20 6.9x fp32 / 13.9x int8, vit_tiny 7.6x / 13.6x). resnet20 with its train-mode BN inputs razored too
    // (--razor-bn razored). By default they stay dense (--razor-bn dense: BN inputs are then most of the tape) and
    // the CNN fine-tune recipe freezes BN (--freeze-bn: BN saves nothing); docs/back-razor.md has the batch-128
    // figures of all three.
    for (const std::string name : {"resnet20", "vit_tiny"}) {
        for (const auto& [values, floor] : {std::pair<std::string, double>{"fp32", 6.5}, {"int8", 12.0}}) {
            INFO(name << " " << values);
            Generator gen(0);
            auto model = models::make_model(name, 10, gen);
            SavePolicyGuard guard(apps::razor_policy_from_flags(
                "test", {.ratio = 0.9, .values = values, .gelu = "d4", .bn = "razored", .attn = "razored"}));
            const models::ModelSummary s = models::summarize(*model, {4, 3, 32, 32});
            const double ratio = double(s.saved_dense_bytes) / double(s.saved_bytes);
            MESSAGE(name << " r=0.9 " << values << ": " << s.saved_bytes << " B stored, " << s.saved_dense_bytes
                         << " B dense, " << ratio << "x");
            CHECK(ratio >= floor);
        }
    }
}

TEST_CASE("razor CLI: attention operands default to dense int8, other items to the documented defaults") {
    // The CLI's recipe departs from RazorConfig's reference defaults where a measured fine-tune did
    // (docs/back-razor.md "Transfer"): razored Q, K, V and P cost the vit_tiny fine-tune 2.0 points (5 seeds).
    const auto policy = apps::razor_policy_from_flags("test", {.ratio = 0.9});
    const auto* razor = dynamic_cast<const sparse::RazorSavePolicy*>(policy.get());
    REQUIRE(razor != nullptr);
    CHECK(razor->config().attention == sparse::AttentionSave::DenseI8);
    CHECK(razor->config().gelu == sparse::GeluSave::Derivative4);
    CHECK(razor->config().batch_norm == sparse::BatchNormSave::ChannelI8);   // docs/experiments/2026-12-02-bn-inputs.md
    CHECK(sparse::RazorConfig{}.batch_norm == sparse::BatchNormSave::Dense);
    CHECK(sparse::RazorConfig{}.attention == sparse::AttentionSave::Razored);   // the library keeps the reference's
}

namespace {
// What the tape records for the x of every conv2d and linear (op, format), in order, after one training-mode forward
// of `name` on 32-px images under the --razor-* `flags`, with keep_layers_dense applied; `kept`: the layers it kept.
std::vector<std::pair<std::string, std::string>> saved_layer_inputs(const std::string& name,
                                                                    const apps::RazorFlags& flags,
                                                                    apps::DenseLayers* kept) {
    Generator gen(0);
    auto model = models::make_model(name, 10, gen);
    SavePolicyGuard guard(apps::razor_policy_from_flags("test", flags));
    *kept = apps::keep_layers_dense(*model, flags);
    TapeScope scope;
    Tensor logits = (*model)(Tensor::randn({2, 3, 32, 32}, gen));
    std::vector<std::pair<std::string, std::string>> inputs;
    for (const SavedRecord& r : scope.tape().records())
        if (r.name == "x" && (r.op == "conv2d" || r.op == "linear")) inputs.emplace_back(r.op, r.format);
    return inputs;
}

bool razored(const std::string& format) { return format.rfind("bitmap+", 0) == 0; }
}  // namespace

TEST_CASE("--razor-input: the first layer's input is kept dense by default, razored as the reference on request") {
    apps::DenseLayers kept;
    const auto first = [&](const apps::RazorFlags& flags, const std::string& name) {
        return saved_layer_inputs(name, flags, &kept).front().second;
    };
    for (const auto& [name, layer] : {std::pair<std::string, std::string>{"resnet20", "conv1"},
                                      {"vit_tiny", "patch_embed"}, {"mobilenet_v2", "features.0.0"}}) {
        INFO(name);
        CHECK(first({.ratio = 0.9}, name) == "dense");
        CHECK(kept.input == layer);
        CHECK(razored(first({.ratio = 0.9, .input = "razored"}, name)));
        CHECK(kept.input.empty());
        CHECK(first({.ratio = 0}, name) == "dense");   // the dense tape: nothing to override
        CHECK(kept.input.empty());
    }
    CHECK_THROWS_WITH_AS(apps::razor_policy_from_flags("razor train", {.ratio = 0.9, .input = "sparse"}),
                         doctest::Contains("--razor-input must be one of dense | razored; got 'sparse'"), Error);
}

TEST_CASE("--razor-head: the classifier head's input is kept dense by default, razored as the reference on request") {
    apps::DenseLayers kept;
    const auto head = [&](const apps::RazorFlags& flags, const std::string& name) {
        const auto inputs = saved_layer_inputs(name, flags, &kept);
        const auto last = std::find_if(inputs.rbegin(), inputs.rend(), [](const auto& i) { return i.first == "linear"; });
        REQUIRE(last != inputs.rend());
        return last->second;
    };
    for (const auto& [name, layer] : {std::pair<std::string, std::string>{"resnet20", "linear"}, {"vit_tiny", "head"},
                                      {"mobilenet_v2", "classifier.1"}, {"resnet18", "fc"}}) {
        INFO(name);
        CHECK(head({.ratio = 0.9}, name) == "dense");
        CHECK(kept.head == layer);
        CHECK(razored(head({.ratio = 0.9, .head = "razored"}, name)));
        CHECK(kept.head.empty());
        CHECK(head({.ratio = 0}, name) == "dense");
        CHECK(kept.head.empty());
    }
    // Only the two ends change: resnet20's other 18 convs keep razored inputs (the reference's form for all of them).
    int razored_convs = 0;
    for (const auto& [op, format] : saved_layer_inputs("resnet20", {.ratio = 0.9, .after_bn = "razored"}, &kept))
        razored_convs += op == "conv2d" && razored(format);
    CHECK(razored_convs == 18);
    CHECK_THROWS_WITH_AS(apps::razor_policy_from_flags("razor train", {.ratio = 0.9, .head = "sparse"}),
                         doctest::Contains("--razor-head must be one of dense | razored; got 'sparse'"), Error);
}

TEST_CASE("--razor-after-bn: a block's second conv reads relu(bn1(.)) from bn1's int8 codes by default") {
    // Counts of each conv input form: (derived from BN codes, razored) per model and flags.
    apps::DenseLayers kept;
    const auto forms = [&](const std::string& name, const apps::RazorFlags& flags) {
        std::pair<int, int> n{0, 0};
        for (const auto& [op, format] : saved_layer_inputs(name, flags, &kept)) {
            n.first += format == "relu(channel+i8)";
            n.second += razored(format);
        }
        return n;
    };
    // resnet20: 9 basic blocks, each conv2 reads relu(bn1(conv1(.))); the first block's conv1 reads the stem's
    // relu(bn1(.)); the other conv1s read a block's output, a residual sum (the stem conv's input is the image).
    CHECK(forms("resnet20", {.ratio = 0.9}) == std::pair{10, 8});
    // resnet18: 8 blocks; the conv1s and the 3 downsample convs read a block's input (the first a max pool's output).
    CHECK(forms("resnet18", {.ratio = 0.9}) == std::pair{8, 11});
    CHECK(forms("resnet20", {.ratio = 0.9, .after_bn = "razored"}) == std::pair{0, 18});
    CHECK(forms("resnet20", {.ratio = 0.9, .bn = "dense"}) == std::pair{0, 18});   // no codes to derive from
    CHECK(forms("vit_tiny", {.ratio = 0.9}).first == 0);                              // no BatchNorm
    const auto policy = apps::razor_policy_from_flags("test", {.ratio = 0.9});
    CHECK(policy->name().find("after-bn=derived") != std::string::npos);
    CHECK_FALSE(sparse::RazorConfig{}.derive_after_batch_norm);   // the library keeps the reference's
    CHECK_THROWS_WITH_AS(apps::razor_policy_from_flags("razor train", {.ratio = 0.9, .after_bn = "dense"}),
                         doctest::Contains("--razor-after-bn must be one of derived | razored; got 'dense'"), Error);
}

TEST_CASE("razor bench --razor: the dense bench's JSON fields, with the razor tape") {
    const std::string out = run(apps::run_bench, {"--model", "lenet5", "--channels", "1", "--image-size", "28",
                                                  "--batch", "4", "--steps", "2", "--warmup", "1", "--threads", "1",
                                                  "--razor", "0.9", "--razor-values", "fp16", "--razor-input",
                                                  "razored", "--json"});   // lenet5's image is a third of its tape
    const json j = json::parse(out);
    for (const char* key : {"model", "batch", "threads", "steps", "step_ms", "step_ms_min", "step_ms_max", "img_per_s",
                            "params", "saved_bytes", "saved_dense_bytes", "peak_tensor_bytes", "peak_rss_bytes"})
        CHECK_MESSAGE(j.contains(key), key);
    CHECK(j["razor"].get<double>() == 0.9);
    CHECK(j["razor_values"] == "fp16");
    CHECK(j["razor_input"] == "razored");
    CHECK(j["save_policy"].get<std::string>().rfind("razor r=0.90 values=f16", 0) == 0);
    CHECK(j["saved_bytes"].get<int64_t>() * 3 < j["saved_dense_bytes"].get<int64_t>());
    // The peak RSS split (apps/bench.cpp split_peak): the tape part is the stored peak, the parts are non-negative and
    // add up to the peak RSS, or more where a residual part was floored at 0.
    const json& split = j["rss_split"];
    int64_t parts = 0;
    for (const char* key : {"model_state", "tape", "transient", "allocator_cache", "other"}) {
        REQUIRE_MESSAGE(split.contains(key), key);
        CHECK(split[key].get<int64_t>() >= 0);
        parts += split[key].get<int64_t>();
    }
    CHECK(split["tape"] == j["saved_bytes"]);
    CHECK(split["model_state"].get<int64_t>() >= 3 * 4 * j["params"].get<int64_t>());   // weights, grads, momentum
    CHECK(parts >= j["peak_rss_bytes"].get<int64_t>());
    MESSAGE("lenet5 b4 split: " << split.dump() << ", peak RSS " << j["peak_rss_bytes"]);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_bench, {"--razor-values", "bf16"}), Contains("bf16"), Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_bench, {"--razor-bn", "sparse"}),
                         Contains("--razor-bn must be one of dense | f16 | int8 | razored; got 'sparse'"), Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_bench, {"--razor-bn", "fp16"}),
                         Contains("got 'fp16'; did you mean 'f16'?"), Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_bench, {"--razor-attn", "fp16"}),
                         Contains("--razor-attn must be one of razored | int8 | fp32; got 'fp16'"), Error);
}
