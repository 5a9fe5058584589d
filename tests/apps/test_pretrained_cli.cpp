// tests/apps/test_pretrained_cli.cpp -- razor finetune --from a torchvision / timm file and razor info --checkpoint,
// end to end on a tiny fake CIFAR-10 (32 px). The resnet18 run (~5 s: an 11M-parameter model built, trained a step,
// checkpointed) is in the "slow" suite; the 1-block ViT run (~2 s) in "cli-run" (left out under the sanitizers); the
// errors are fast. Fixtures: tests/fixtures/pretrained/ (scripts/fixtures/
// make_pretrained_files.py): resnet18_tv.pth (torchvision's resnet18, 6 classes, stored in ~60 KB as strided views),
// vit_s_16_timm.pth (a 1-block ViT-S/16 at 224 px in timm's names, 5 classes).
#include <doctest/doctest.h>

#include <fstream>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "apps/finetune.h"
#include "core/core.h"
#include "core/pytorch_file.h"
#include "models/registry.h"
#include "train/checkpoint.h"

using namespace razor;
using doctest::Contains;

namespace {

const std::string kDir = std::string(RAZOR_FIXTURE_DIR) + "/pretrained/";

using test::run_ok;

size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

const std::vector<std::string> kTiny = {"--batch", "8", "--epochs", "1", "--steps-per-epoch", "1", "--threads", "1",
                                        "--eval-batch", "10"};

}  // namespace

TEST_CASE("razor finetune --from a timm ViT at another image size: model inferred, position embedding resized, head "
          "re-initialised or loaded; razor info --checkpoint" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("pretrained_vit");
    const std::string d = tmp / "cifar", vit = kDir + "vit_s_16_timm.pth";
    test::write_fake_cifar10(d, 8, 20);
    const std::string out =
        run_ok(apps::run_finetune, plus(kTiny, {"--from", vit, "--data", d, "--classes", "cat,dog", "--out", tmp / "v"}));
    CHECK(out.find("18 tensors loaded (timm names; position embedding 14x14 -> 2x2 (bicubic))") != std::string::npos);
    CHECK(count(out, "head re-initialised for 2 classes (checkpoint has 5)\n") == 1);
    CHECK(count(out, "re-initialised") == 1);
    // a timm file records no preprocessing: timm's own (mean = std = 0.5, bicubic), not statistics of the new folder
    CHECK(out.find("bicubic), normalise mean (0.5,0.5,0.5) std (0.5,0.5,0.5)") != std::string::npos);
    const SafeTensors v = load_safetensors(tmp / "v/last/model.safetensors");
    CHECK(v.metadata.at("model") == "vit_s_16");   // from the keys: --model was not given
    CHECK(v.tensors.at("encoder.pos_embedding").shape() == Shape{1, 5, 384});
    CHECK(v.tensors.at("heads.head.weight").shape() == Shape{2, 384});
    CHECK(v.metadata.at("depth") == "1");   // the file's block count, which the model name alone does not give

    // razor eval rebuilds the 1-block model from the run's metadata alone (12 blocks would not fit its keys)
    const nlohmann::json e = nlohmann::json::parse(test::capture_stdout(
        [&] { test::run_command(apps::run_eval, {"--checkpoint", tmp / "v", "--threads", "1", "--json"}); }));
    CHECK(e["images"].get<int64_t>() == 4);   // the fake test split's cats and dogs
    // and so does --resume: a 2-epoch run stopped after epoch 1 continues from its checkpoint (--from not reopened)
    run_ok(apps::run_finetune, {"--from", vit, "--data", d, "--classes", "cat,dog", "--batch", "8", "--epochs", "2",
                                "--steps-per-epoch", "1", "--threads", "1", "--eval-batch", "10", "--stop-after", "1",
                                "--out", tmp / "r"});
    run_ok(apps::run_finetune, {"--resume", tmp / "r", "--data", d, "--threads", "1"});
    CHECK(test::read_jsonl(tmp / "r/log.jsonl").size() == 2);
    CHECK(load_safetensors(tmp / "r/last/model.safetensors").metadata.at("depth") == "1");

    // the same class count: the head loads too (load_pretrained itself, as razor finetune calls it)
    train::Checkpoint ck;
    ck.model = load_pytorch(vit).tensors;
    Generator gen(0);
    auto model = models::make_model("vit_s_16", 5, gen, {.image_size = 224, .depth = 1});
    const apps::PretrainedLoad same = apps::load_pretrained("razor finetune", vit, *model, ck);
    CHECK(same.head_loaded);
    CHECK(same.resized.empty());   // trained at 224 px, loaded at 224 px
    CHECK(apps::pretrained_lines(vit, same, 5) ==
          "from   " + vit + ": 20 tensors loaded (timm names)\nhead   'heads.head' loaded from the checkpoint (5 classes)\n");
    CHECK(model->state_dict().at("heads.head.weight").to_vector() == ck.model.at("head.weight").to_vector());
    CHECK(model->state_dict().at("encoder.pos_embedding").to_vector() == ck.model.at("pos_embed").to_vector());

    // another depth: every missing key listed, the hint names the file's architecture
    auto deeper = models::make_model("vit_s_16", 5, gen, {.image_size = 32, .depth = 2});
    CHECK_THROWS_WITH_AS(apps::load_pretrained("razor finetune", vit, *deeper, ck),
                         Contains("missing in the checkpoint: encoder.layers.encoder_layer_1.ln_1.bias"), Error);
    CHECK_THROWS_WITH_AS(apps::load_pretrained("razor finetune", vit, *deeper, ck),
                         Contains("hint: the checkpoint's model is vit_s_16"), Error);

    const std::string info = run_ok(apps::run_info, {"--checkpoint", vit});
    CHECK(info.find("(torch.save zip, the state dict at its top level, ") != std::string::npos);
    CHECK(info.find("tensors     20 (20 f32 as loaded): ") != std::string::npos);
    CHECK(info.find("model       vit_s_16 (from the keys: ViT width 384, patch 16, 1 blocks), timm names; 20 tensors "
                    "fit it") != std::string::npos);
    CHECK(info.find("head        'heads.head': 5 classes (weight (5, 384))") != std::string::npos);
    CHECK(info.find("image size  224 px") != std::string::npos);
    // a razor run folder: the model is the recorded one
    const std::string run = run_ok(apps::run_info, {"--checkpoint", tmp / "v"});
    CHECK(run.find("model       vit_s_16 (recorded in the file), torchvision names; 20 tensors fit it") !=
          std::string::npos);
    CHECK(run.find("metadata    finetuned_from = " + vit) != std::string::npos);
}

TEST_CASE("razor finetune --from: a file that is no weights file, or whose keys match no dialect, is named") {
    test::TempDir tmp("pretrained_errors");
    const std::string garbage = tmp / "garbage.pth", odd = tmp / "odd.safetensors";
    std::ofstream(garbage) << "<html><body>404 not found</body></html>\n";
    save_safetensors(odd, {{"backbone.stem.w", Tensor::zeros({2})}, {"backbone.fc.w", Tensor::zeros({2})}});
    auto fails = [&](const std::vector<std::string>& args, const std::string& what) {
        CHECK_THROWS_WITH_AS(test::run_command(apps::run_finetune, plus(args, {"--data", tmp / "cifar", "--out",
                                                                               tmp / "err"})),
                             Contains(what.c_str()), Error);
    };
    fails({"--from", garbage, "--model", "resnet18"}, garbage + ": not a weights file razor reads");
    fails({"--from", odd}, "razor finetune: --from " + odd + " does not record its model, and its keys name no "
                           "architecture razor knows");
    fails({"--from", odd}, "hint: pass --model");
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_info, {"--checkpoint", tmp / "nowhere.pth"}),
                         Contains("nowhere.pth"), Error);
    CHECK(run_ok(apps::run_info, {"--checkpoint", odd}).find("model       none razor can tell from the keys") !=
          std::string::npos);

    train::Checkpoint ck;
    ck.model = load_safetensors(odd).tensors;
    Generator gen(0);
    auto model = models::make_model("vit_s_16", 5, gen, {.image_size = 32, .depth = 1});
    CHECK_THROWS_WITH_AS(apps::load_pretrained("razor finetune", odd, *model, ck),
                         Contains(("razor finetune: --from " + odd + ": its keys match 0 of the model's").c_str()), Error);
    CHECK_THROWS_WITH_AS(apps::load_pretrained("razor finetune", odd, *model, ck),
                         Contains("'backbone.fc.w' (nearest expected:"), Error);
}

TEST_CASE("razor finetune --from a torchvision resnet18 .pth: model inferred, one tiny epoch; razor info --checkpoint" *
          doctest::test_suite("slow")) {
    test::TempDir tmp("pretrained_resnet18");
    const std::string d = tmp / "cifar", pth = kDir + "resnet18_tv.pth";
    test::write_fake_cifar10(d, 8, 20);
    // lr 1e-30: one step moves no float32 weight, so what was loaded can be compared bit for bit
    const std::string out = run_ok(apps::run_finetune, plus(kTiny, {"--from", pth, "--data", d, "--classes",
                                                                    "airplane,automobile,ship,truck", "--lr", "1e-30",
                                                                    "--wd", "0", "--out", tmp / "a"}));
    CHECK(count(out, "head re-initialised for 4 classes (checkpoint has 6)\n") == 1);
    CHECK(count(out, "re-initialised") == 1);
    CHECK(out.find("120 tensors loaded (torchvision names)") != std::string::npos);   // all 122 but fc's 2
    CHECK(out.find("bilinear), normalise mean (0.485,0.456,0.406) std (0.229,0.224,0.225)") != std::string::npos);
    const SafeTensors file = load_pytorch(pth);
    const SafeTensors a = load_safetensors(tmp / "a/last/model.safetensors");
    CHECK(a.metadata.at("model") == "resnet18");
    CHECK(a.tensors.at("fc.weight").shape() == Shape{4, 512});
    for (const char* key : {"conv1.weight", "layer4.1.conv2.weight", "layer2.0.downsample.0.weight"})
        CHECK_MESSAGE(a.tensors.at(key).to_vector() == file.tensors.at(key).to_vector(), key);

    const std::string rn = run_ok(apps::run_info, {"--checkpoint", pth});
    CHECK(rn.find("tensors     122 (102 f32, 20 i64 as loaded): ") != std::string::npos);
    CHECK(rn.find("model       resnet18 (from the keys: basic blocks 2-2-2-2), torchvision names; 122 tensors fit "
                  "it") != std::string::npos);
    CHECK(rn.find("head        'fc': 6 classes (weight (6, 512))") != std::string::npos);
    CHECK(rn.find("image size  any") != std::string::npos);
}
