// tests/apps/test_finetune_controls.cpp -- razor finetune's fine-tuning controls: --freeze / --train-only patterns
// (apps/freeze.h), the optimiser's parameter groups (no weight decay on biases, norms and ViT embeddings; the head at
// --head-lr-mult; apps/param_groups.h), the epoch line's split label; then end to end on a tiny fake CIFAR-10: a
// linear probe leaves the backbone bit for bit, the groups are recorded and a stopped run resumes bit-exactly, the
// evaluation batch follows --batch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "apps/freeze.h"
#include "apps/param_groups.h"
#include "core/core.h"
#include "models/registry.h"
#include "optim/sgd.h"
#include "train/checkpoint.h"
#include "train/epoch_record.h"
#include "train/train_state.h"

using namespace razor;
using doctest::Contains;

namespace {

std::shared_ptr<nn::Module> resnet20() {
    Generator gen(0);
    return models::make_model("resnet20", 4, gen);
}

// The names of the parameters with requires_grad false.
std::set<std::string> frozen(const nn::Module& m) {
    std::set<std::string> out;
    for (const auto& [name, p] : m.named_parameters())
        if (!p.requires_grad()) out.insert(name);
    return out;
}

std::vector<std::string> names(const optim::NamedParameters& params) {
    std::vector<std::string> out;
    for (const auto& [name, p] : params) out.push_back(name);
    return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
    if (a.dtype() == DType::I64) return a.to_vector_i64() == b.to_vector_i64();
    const auto x = a.to_vector(), y = b.to_vector();
    return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("--freeze patterns: globs, module paths, last components") {
    CHECK(apps::glob_match("layer2.*", "layer2.0.conv1.weight"));
    CHECK(apps::glob_match("layer?.0", "layer3.0"));
    CHECK(apps::glob_match("*", ""));
    CHECK_FALSE(apps::glob_match("layer2.*", "layer2"));
    CHECK_FALSE(apps::glob_match("layer1", "layer10"));
    CHECK(apps::selects("layer1", "layer1.0.conv1.weight"));        // a module path the name runs through
    CHECK_FALSE(apps::selects("layer1", "layer10.conv.weight"));    // not a prefix at a dot
    CHECK(apps::selects("layer1.0", "layer1.0.bn1.bias"));
    CHECK(apps::selects("bias", "layer1.0.bn1.bias"));              // the last component (BitFit)
    CHECK(apps::selects("fc.bias", "fc.bias"));
    CHECK_FALSE(apps::selects("fc.bias", "fc.weight"));
    CHECK(apps::selects("*.conv?.weight", "layer4.1.conv2.weight"));
    CHECK(apps::parse_patterns("razor finetune", "freeze", " layer1, layer2.*,conv1") ==
          std::vector<std::string>{"layer1", "layer2.*", "conv1"});
    CHECK_THROWS_WITH_AS(apps::parse_patterns("razor finetune", "freeze", "layer1,,fc"),
                         Contains("razor finetune: --freeze 'layer1,,fc' has an empty pattern"), Error);
}

TEST_CASE("apply_freeze: --freeze, --train-only, both; a pattern that selects nothing names the nearest modules") {
    const auto all = resnet20()->named_parameters();
    SUBCASE("--freeze layer1,conv1: those parameters and nothing else") {
        auto m = resnet20();
        const apps::FreezeResult r = apps::apply_freeze("razor finetune", *m, "layer1,conv1", "");
        std::set<std::string> expected;
        int64_t numel = 0;
        for (const auto& [name, p] : all)
            if (name.rfind("layer1.", 0) == 0 || name.rfind("conv1.", 0) == 0) expected.insert(name), numel += p.numel();
        CHECK(frozen(*m) == expected);
        CHECK(r.frozen_tensors == static_cast<int64_t>(expected.size()));
        CHECK(r.frozen_numel == numel);
        CHECK(r.total_tensors == static_cast<int64_t>(all.size()));
        CHECK(apps::freeze_line(r).rfind(fmt("frozen ", expected.size(), " of ", all.size(), " parameter tensors"), 0) == 0);
    }
    SUBCASE("--train-only linear: a linear probe") {
        auto m = resnet20();
        apps::apply_freeze("razor finetune", *m, "", "linear");
        CHECK(frozen(*m).size() == all.size() - 2);
        CHECK_FALSE(frozen(*m).count("linear.weight"));
        CHECK_FALSE(frozen(*m).count("linear.bias"));
    }
    SUBCASE("--train-only bias (BitFit), then --freeze layer3: the biases outside layer3") {
        auto m = resnet20();
        apps::apply_freeze("razor finetune", *m, "layer3", "bias");
        for (const auto& [name, p] : m->named_parameters()) {
            const bool trains = name.size() > 5 && name.substr(name.size() - 5) == ".bias" && name.rfind("layer3.", 0) != 0;
            CHECK_MESSAGE(p.requires_grad() == trains, name);
        }
    }
    SUBCASE("errors") {
        auto m = resnet20();
        CHECK_THROWS_WITH_AS(apps::apply_freeze("razor finetune", *m, "layr1", ""),
                             Contains("razor finetune: --freeze pattern 'layr1' selects no parameter of the model; did "
                                      "you mean 'layer1'? its top-level modules: conv1, bn1, layer1, layer2, layer3, "
                                      "linear; hint:"),
                             Error);
        CHECK_THROWS_WITH_AS(apps::apply_freeze("razor finetune", *m, "", "layer2.7"),
                             Contains("--train-only pattern 'layer2.7' selects no parameter of the model; did you mean 'layer2.0'? the modules "
                                      "in layer2: layer2.0, layer2.1, layer2.2"),
                             Error);
        CHECK(frozen(*m).empty());   // a bad pattern changes nothing
        CHECK_THROWS_WITH_AS(apps::apply_freeze("razor finetune", *m, "*", ""),
                             Contains("leave no parameter to train"), Error);
    }
}

TEST_CASE("parameter groups: no weight decay on biases, norms and ViT embeddings; the head at --head-lr-mult") {
    auto m = resnet20();
    const auto all = m->named_parameters();
    // razor train: one group of every parameter, in named_parameters order (the optimiser it always built)
    const auto one = apps::plan_param_groups(*m, "", 1, true);
    REQUIRE(one.size() == 1);
    CHECK(one[0].role == "all");
    CHECK(names(one[0].params) == names(all));
    // timm's split: conv and linear weights decay; BN weights and biases, the linear bias do not
    const auto split = apps::plan_param_groups(*m, "linear", 1, false);
    REQUIRE(split.size() == 2);
    CHECK(split[0].role == "decay");
    CHECK(split[1].role == "no_decay");
    CHECK(split[0].params.size() + split[1].params.size() == all.size());
    for (const auto& [name, p] : split[0].params) CHECK_MESSAGE(p.dim() > 1, name);
    for (const auto& [name, p] : split[1].params) CHECK_MESSAGE(p.dim() == 1, name);
    CHECK(apps::groups_record(split) == fmt("decay:", split[0].params.size(), ",no_decay:", split[1].params.size()));
    // the head in its own groups at lr x 10, frozen parameters in none
    apps::apply_freeze("razor finetune", *m, "layer1", "");
    const auto head = apps::plan_param_groups(*m, "linear", 10, false);
    REQUIRE(head.size() == 4);
    CHECK(head[2].role == "head");
    CHECK(names(head[2].params) == std::vector<std::string>{"linear.weight"});
    CHECK(names(head[3].params) == std::vector<std::string>{"linear.bias"});
    for (const auto& g : head)
        for (const auto& [name, p] : g.params) CHECK_MESSAGE(name.rfind("layer1.", 0) != 0, name);
    auto opt = apps::make_optimizer({.opt = "sgd", .lr = 0.01, .momentum = 0.9, .wd = 5e-4}, head);
    const auto& sgd = dynamic_cast<const optim::SGD&>(*opt);
    CHECK(opt->lrs() == std::vector<double>{0.01, 0.01, 0.01 * 10, 0.01 * 10});
    CHECK(sgd.options(0).weight_decay == 5e-4);
    CHECK(sgd.options(1).weight_decay == 0);
    CHECK(sgd.options(2).weight_decay == 5e-4);
    CHECK(sgd.options(3).weight_decay == 0);
    CHECK(apps::groups_text(head, {.opt = "sgd", .lr = 0.01, .wd = 5e-4}).find("| head 1 tensor lr 0.1 wd 0.0005 |") !=
          std::string::npos);
    // a ViT: class token and position embedding are not decayed (3-D, but timm's no_weight_decay names)
    Generator gen(0);
    auto vit = models::make_model("vit_tiny", 4, gen);
    const auto v = apps::plan_param_groups(*vit, "head", 1, false);
    REQUIRE(v.size() == 2);
    const auto skipped = names(v[1].params);
    CHECK(std::find(skipped.begin(), skipped.end(), "cls_token") != skipped.end());
    CHECK(std::find(skipped.begin(), skipped.end(), "pos_embed") != skipped.end());
    // resume: the recorded groups must be the rebuilt ones; a checkpoint without the record is compared by count
    CHECK_NOTHROW(apps::check_resumed_groups("razor finetune", {}, {{"param_groups", apps::groups_record(v)}}, v, "x"));
    CHECK_THROWS_WITH_AS(apps::check_resumed_groups("razor finetune", {}, {{"param_groups", "all:40"}}, v, "x"),
                         Contains("x holds the optimiser parameter groups all:40, but this run builds decay:"), Error);
    const std::map<std::string, Tensor> old = {{"optimizer.param_groups.0.lr", optim::pack_f64(0.1)}};
    CHECK_THROWS_WITH_AS(apps::check_resumed_groups("razor finetune", old, {}, v, "x"),
                         Contains("hint: a run recorded before weight decay skipped biases and norms resumes with --wd-all"),
                         Error);
    CHECK_NOTHROW(apps::check_resumed_groups("razor finetune", old, {}, one, "x"));
}

TEST_CASE("the epoch line names the split it evaluated") {
    train::EpochSummary r;
    r.epoch = r.epochs = 1;
    r.eval = train::EvalResult{};
    r.eval->accuracy = 0.5;
    CHECK(train::epoch_line(r).find("  test 50.0%  ") != std::string::npos);
    CHECK_FALSE(train::epoch_json(r).contains("eval_split"));
    r.eval_split = "val";
    CHECK(train::epoch_line(r).find("  val 50.0%  ") != std::string::npos);
    CHECK(train::epoch_json(r)["eval_split"] == "val");
}

TEST_CASE("razor finetune: linear probe at --head-lr-mult, groups recorded, bit-exact resume, eval batch = --batch" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("finetune_controls");
    const std::string d = tmp / "cifar", pre = tmp / "pre";
    test::write_fake_cifar10(d, 8, 20);
    test::run_ok(apps::run_train, {"--model", "resnet20", "--data", d, "--classes", "bird,cat,deer,dog,frog,horse",
                                   "--out", pre, "--batch", "8", "--epochs", "1", "--steps-per-epoch", "2",
                                   "--threads", "1", "--sched", "cosine"});
    const std::vector<std::string> tune = {"--from", pre, "--data", d, "--classes", "airplane,automobile,ship,truck",
                                           "--batch", "8", "--epochs", "2", "--steps-per-epoch", "2", "--threads", "1",
                                           "--eval-steps", "1", "--lr", "0.01"};
    // a linear probe: the backbone frozen, the head at 10x the lr in its own groups
    const std::string out = test::run_ok(apps::run_finetune, plus(tune, {"--train-only", "linear", "--head-lr-mult",
                                                                         "10", "--out", tmp / "probe"}));
    const auto all = resnet20()->named_parameters();
    CHECK(out.find(fmt("frozen ", all.size() - 2, " of ", all.size(), " parameter tensors")) != std::string::npos);
    CHECK(out.find("groups head 1 tensor lr 0.1 wd 0.0005 | head.no_decay 1 tensor lr 0.1 wd 0\n") != std::string::npos);
    const train::Checkpoint p = train::load_checkpoint(pre), probe = train::load_checkpoint(tmp / "probe");
    for (const auto& [key, t] : probe.model)
        if (key.rfind("linear.", 0) != 0 && key.find("running_") == std::string::npos &&
            key.find("num_batches") == std::string::npos)
            CHECK_MESSAGE(same_bits(t, p.model.at(key)), key);   // frozen weights did not move
    CHECK(probe.train_metadata.at("param_groups") == "head:1,head.no_decay:1");
    for (const auto& [key, t] : probe.train_state)
        if (key.find("momentum_buffer") != std::string::npos)
            CHECK_MESSAGE(key.rfind("optimizer.linear.", 0) == 0, key);   // no state for frozen parameters
    // evaluation in batches of --batch: one batch (--eval-steps 1) scores 8 images
    CHECK(test::read_jsonl(tmp / "probe/log.jsonl")[0]["test_images"] == 8);

    // timm's weight decay split with a head group and a frozen stage: stopped after epoch 1 and resumed, it is the
    // run never stopped, bit for bit
    const std::vector<std::string> groups = plus(tune, {"--freeze", "layer1", "--head-lr-mult", "5", "--opt", "adamw"});
    test::run_ok(apps::run_finetune, plus(groups, {"--out", tmp / "a"}));
    test::run_ok(apps::run_finetune, plus(groups, {"--out", tmp / "b", "--stop-after", "1"}));
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_finetune, {"--resume", tmp / "b", "--head-lr-mult", "2"}),
                         Contains("--head-lr-mult 2 differs from the resumed run's --head-lr-mult 5"), Error);
    test::run_ok(apps::run_finetune, {"--resume", tmp / "b", "--threads", "1"});
    const train::Checkpoint a = train::load_checkpoint(tmp / "a"), b = train::load_checkpoint(tmp / "b");
    CHECK(a.train_metadata.at("param_groups").rfind("backbone:", 0) == 0);
    CHECK(test::same_tensors(a.model, b.model));
    CHECK(test::same_tensors(train::state_with_prefix(a.train_state, "optimizer."),
                             train::state_with_prefix(b.train_state, "optimizer.")));
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_finetune, plus(tune, {"--freeze", "layr2", "--out", tmp / "c"})),
                         Contains("--freeze pattern 'layr2' selects no parameter of the model; did you mean 'layer2'?"),
                         Error);
}
