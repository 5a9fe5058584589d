// tests/apps/test_finetune_torchvision.cpp -- the whole fine-tuning path of docs/recipes.md at small scale: a
// generated folder of photos of mixed sizes (train/ and val/), razor finetune from a `.pth` torchvision wrote
// (tests/fixtures/pretrained/resnet18_tv.pth: torch.save of torchvision.models.resnet18's state dict,
// scripts/fixtures/make_pretrained_files.py) with Back Razor, a frozen stem and a faster head; the loss falls, the
// epoch line names the validation split; razor eval and razor predict work from the run folder alone; and the
// fine-tuned model.safetensors loads into torchvision's resnet18 and gives razor's logits (scripts/check_interop.py,
// scale-relative 1e-4). That last part needs Debian's /usr/bin/python3 with torch and torchvision: without them it is
// skipped with a message, and the rest still runs.
#include <doctest/doctest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "core/core.h"
#include "train/checkpoint.h"

using namespace razor;
using json = nlohmann::json;

namespace {

const std::vector<std::string> kClasses = {"blue", "green", "red"};

// ROOT/<split>/<class>/<i>.jpg: sizes cycle through a landscape, a portrait and a square shape; class c's images
// are bright in channel 2 - c (blue, green, red) over a pattern.
void write_photos(const std::string& root, const std::string& split, int per_class) {
    const std::pair<int, int> sizes[] = {{30, 44}, {48, 34}, {40, 40}};
    int k = 0;
    for (size_t c = 0; c < kClasses.size(); ++c)
        for (int i = 0; i < per_class; ++i, ++k) {
            const auto [h, w] = sizes[k % 3];
            std::vector<uint8_t> img = test::pattern_image(3, h, w, 11 * k);
            for (int ch = 0; ch < 3; ++ch)
                for (int p = 0; p < h * w; ++p)
                    img[ch * h * w + p] = static_cast<uint8_t>(img[ch * h * w + p] / 4 + (ch == 2 - int(c) ? 170 : 30));
            test::write_bytes(root + "/" + split + "/" + kClasses[c] + "/" + std::to_string(i) + ".jpg",
                              test::encode_jpg(img, 3, h, w));
        }
}

json last_json(const std::string& out) {
    const size_t end = out.find_last_not_of('\n');
    const size_t start = out.rfind('\n', end);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    return json::parse(out.substr(from, end - from + 1));
}

// 0 when /usr/bin/python3 imports torch and torchvision.
bool have_torchvision() {
    return std::system("/usr/bin/python3 -c 'import torch, torchvision' > /dev/null 2>&1") == 0;
}

}  // namespace

TEST_CASE("fine-tune a torchvision .pth on a folder of photos: Back Razor, frozen stem; eval and predict from the "
          "run folder; the result loads in PyTorch with the same logits" * doctest::test_suite("cli-run")) {
    test::TempDir tmp("finetune_tv");
    const std::string photos = tmp / "photos", run = tmp / "run", io = tmp / "io.safetensors";
    write_photos(photos, "train", 6);
    write_photos(photos, "val", 2);
    const std::string pth = std::string(RAZOR_FIXTURE_DIR) + "/pretrained/resnet18_tv.pth";
    const std::string out = test::run_ok(apps::run_finetune, {
        "--from", pth, "--dataset", "folder", "--data", photos, "--image-size", "32", "--epochs", "4", "--batch", "6",
        "--lr", "0.005", "--razor", "0.9", "--freeze", "conv1,bn1", "--head-lr-mult", "5", "--threads", "1",
        "--out", run});
    INFO(out);
    CHECK(out.find("120 tensors loaded (torchvision names)") != std::string::npos);
    CHECK(out.find("head re-initialised for 3 classes (checkpoint has 6)") != std::string::npos);
    CHECK(out.find("frozen 3 of 62 parameter tensors") != std::string::npos);   // conv1.weight, bn1.weight, bn1.bias
    CHECK(out.find("evaluating on val") != std::string::npos);
    CHECK(out.find("  val ") != std::string::npos);   // the epoch line names the split it evaluated
    const auto log = test::read_jsonl(run + "/log.jsonl");
    REQUIRE(log.size() == 4);
    CHECK(log[0]["eval_split"] == "val");
    MESSAGE("loss per epoch: " << log[0]["loss"] << " " << log[1]["loss"] << " " << log[2]["loss"] << " "
                               << log[3]["loss"]);
    CHECK(log[3]["loss"].get<double>() < 0.75 * log[0]["loss"].get<double>());   // it learns

    // razor eval and predict with nothing but the run folder
    const json e = last_json(test::run_ok(apps::run_eval, {"--checkpoint", run, "--json", "--threads", "1",
                                                           "--save-logits", io}));
    CHECK(e["images"] == 6);   // val/: 2 per class
    CHECK(e["accuracy"].get<double>() == log[3]["test_acc"].get<double>());   // the last epoch's val accuracy
    REQUIRE(e["per_class"].size() == 3);
    CHECK(e["per_class"][2]["class"] == "red");
    const std::string photo = photos + "/val/green/0.jpg";
    const json p = last_json(test::run_ok(apps::run_predict, {"--checkpoint", run, "--json", "--threads", "1", photo}));
    REQUIRE(p["predictions"].size() == 1);
    CHECK(p["predictions"][0]["top"].size() == 3);
    double total = 0;
    for (const json& t : p["predictions"][0]["top"]) total += t["probability"].get<double>();
    CHECK(total == doctest::Approx(1.0).epsilon(1e-6));

    // PyTorch: torchvision's resnet18 with 3 classes loads the fine-tuned weights strictly and agrees on the logits
    if (!have_torchvision()) {
        MESSAGE("skipped the PyTorch check: /usr/bin/python3 cannot import torch and torchvision (Debian: "
                "python3-torch, python3-torchvision)");
        return;
    }
    const std::string cmd = "/usr/bin/python3 " + std::string(RAZOR_FIXTURE_DIR) + "/../../scripts/check_interop.py " +
                            run + " --logits " + io + " > " + tmp / "interop.txt" + " 2>&1";
    const int status = std::system(cmd.c_str());
    const std::string said = test::read_bytes(tmp / "interop.txt");
    INFO(said);
    CHECK(status == 0);
    CHECK(said.find("check_interop: resnet18 (torchvision) from ") != std::string::npos);
    CHECK(said.find("logits agree") != std::string::npos);
}
