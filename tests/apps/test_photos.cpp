// tests/apps/test_photos.cpp -- fine-tuning on a folder of photos, round trip at small scale: a generated image folder
// of mixed sizes (train/ + test/; then one with train/ only and --val-split), razor train -> razor finetune ->
// `razor eval --checkpoint RUN` run as the razor binary with nothing else: class names, resolution, crop and
// statistics come from the checkpoint, and eval's accuracy is the run's last validation accuracy; razor predict on
// photos of the folder prints the classes by name with their probabilities. Also the CIFAR
// case that used to fail ("linear.bias: expected (10) f32, got (4)"): a fine-tune on a class subset evaluates on it.
#include <doctest/doctest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/apps_support.h"
#include "apps/commands.h"
#include "core/check.h"
#include "train/checkpoint.h"

using namespace razor;
using json = nlohmann::json;

namespace {

#ifdef RAZOR_CLI
// Runs the razor binary with `args`; returns its stdout, requiring exit status 0.
std::string run_cli(const std::string& args) {
    const std::string cmd = test::razor_cli() + " " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = ::pclose(p);
    INFO(cmd << "\n" << out);
    REQUIRE(status == 0);
    return out;
}
// The last line of `out` (the --json object; anything printed before it is progress).
json last_json(const std::string& out) {
    const size_t end = out.find_last_not_of('\n');
    const size_t start = out.rfind('\n', end);
    return json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1));
}
#endif

// ROOT/<split>/<class>/<i>.jpg, sizes cycling through three shapes; each class has its own mean colour.
void write_photos(const test::TempDir& root, const std::string& split, const std::vector<std::string>& classes, int per_class) {
    const std::pair<int, int> sizes[] = {{27, 19}, {18, 30}, {24, 24}};
    int k = 0;
    for (size_t c = 0; c < classes.size(); ++c)
        for (int i = 0; i < per_class; ++i, ++k) {
            const auto [h, w] = sizes[k % 3];
            std::vector<uint8_t> img = test::pattern_image(3, h, w, k);
            for (int ch = 0; ch < 3; ++ch)
                for (int p = 0; p < h * w; ++p)
                    img[ch * h * w + p] = static_cast<uint8_t>(img[ch * h * w + p] / 4 + (ch == int(c % 3) ? 160 : 20));
            test::write_bytes(root / (split + "/" + classes[c] + "/" + std::to_string(i) + ".jpg"),
                              test::encode_jpg(img, 3, h, w));
        }
}

}  // namespace

TEST_CASE("photos: folder of mixed sizes -> train -> finetune (--val-split) -> razor eval --checkpoint RUN alone" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("photos");
    const test::TempDir src("photos_src"), photos("photos_mine");
    write_photos(src, "train", {"ant", "bee", "cow"}, 4);
    write_photos(src, "test", {"ant", "bee", "cow"}, 1);
    write_photos(photos, "train", {"cat", "dog"}, 6);   // no val/, no test/: --val-split carves one
    const std::string pre = tmp / "pre", ft = tmp / "ft";
    const std::string trained = test::run_ok(apps::run_train, {"--dataset", "folder", "--data", src.path(), "--model", "resnet20",
        "--image-size", "16", "--epochs", "1", "--batch", "6", "--threads", "1", "--eval-batch", "4", "--sched", "cosine", "--out", pre});
    CHECK(trained.find("rrc+flip at 16 px (eval crop_pct 0.875, bilinear)") != std::string::npos);
    const std::string tuned = test::run_ok(apps::run_finetune, {"--from", pre, "--dataset", "folder", "--data", photos.path(),
        "--val-split", "0.34", "--epochs", "2", "--batch", "4", "--threads", "1", "--eval-batch", "3", "--out", ft});
    CHECK(tuned.find("8 train, 4 val, 0 test images, 2 classes; rrc+flip at 16 px") != std::string::npos);   // --from's size
    const train::Checkpoint p = train::load_checkpoint(pre), f = train::load_checkpoint(ft);
    CHECK(f.model_metadata.at("class_names") == R"(["cat","dog"])");
    CHECK(f.model_metadata.at("normalize_mean") == p.model_metadata.at("normalize_mean"));   // the backbone's statistics
    CHECK(f.model_metadata.at("image_size") == "16");
    CHECK(f.model_metadata.at("val_split") == "0.34");
    const auto log = test::read_jsonl(ft + "/log.jsonl");
    REQUIRE(log.size() == 2);
#ifdef RAZOR_CLI
    // the razor binary, with nothing but the run folder
    const json e = last_json(run_cli("eval --checkpoint " + ft + " --json --threads 1"));
    CHECK(e["images"] == 4);   // 2 of each class: the carved validation split, redrawn from the recorded fraction and seed
    REQUIRE(e["per_class"].size() == 2);
    CHECK(e["per_class"][0]["class"] == "cat");
    CHECK(e["per_class"][1]["class"] == "dog");
    CHECK(e["accuracy"].get<double>() == log[1]["test_acc"].get<double>());   // the same images, preprocessed the same
    // razor predict: the top classes by name, probabilities summing to 1 over the 2 classes, highest first
    const std::string cat0 = photos / "train/cat/0.jpg", dog1 = photos / "train/dog/1.jpg";
    const json pr = last_json(run_cli("predict --checkpoint " + ft + " " + cat0 + " --json --threads 1 " + dog1));
    REQUIRE(pr["predictions"].size() == 2);
    CHECK(pr["predictions"][1]["image"] == dog1);
    for (const json& r : pr["predictions"]) {
        REQUIRE(r["top"].size() == 2);   // --top 5 is capped at the 2 classes
        const double p0 = r["top"][0]["probability"], p1 = r["top"][1]["probability"];
        CHECK(p0 >= p1);
        CHECK(p0 + p1 == doctest::Approx(1.0).epsilon(1e-9));
        CHECK((r["top"][0]["class"] == "cat" || r["top"][0]["class"] == "dog"));
    }
    const std::string table = run_cli("predict --checkpoint " + ft + " --top 1 " + cat0);
    CHECK(table.find("predict resnet20 from " + ft + "/last: 2 classes at 16 px") != std::string::npos);
    CHECK(table.find(cat0 + "\n") != std::string::npos);
    const json t = last_json(run_cli("eval --checkpoint " + pre + " --json --threads 1"));
    CHECK(t["images"] == 3);   // a folder with test/: evaluated on it
    CHECK(t["per_class"][2]["class"] == "cow");
#endif
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_predict, {"--checkpoint", ft}),
                         doctest::Contains("razor predict: expected --checkpoint RUN and at least one image, got no image"),
                         Error);
    CHECK_THROWS_WITH_AS(test::run_command(apps::run_predict, {"--checkpoint", ft, tmp / "missing.jpg"}),
                         doctest::Contains("missing.jpg: cannot read"), Error);
}

TEST_CASE("photos: a fine-tune on a CIFAR class subset evaluates with razor eval --checkpoint RUN alone" *
          doctest::test_suite("cli-run")) {
    test::TempDir tmp("photos_cifar");
    const std::string d = tmp / "cifar", pre = tmp / "pre", ft = tmp / "ft";
    test::write_fake_cifar10(d, 4, 20);
    test::run_ok(apps::run_train, {"--model", "resnet20", "--data", d, "--classes", "bird,cat,deer,dog,frog,horse", "--out",
                                     pre, "--batch", "8", "--epochs", "1", "--steps-per-epoch", "1", "--threads", "1", "--sched", "cosine"});
    test::run_ok(apps::run_finetune, {"--from", pre, "--data", d, "--classes", "airplane,automobile,ship,truck", "--out",
                                        ft, "--batch", "8", "--epochs", "1", "--steps-per-epoch", "1", "--threads", "1"});
#ifdef RAZOR_CLI
    const json e = last_json(run_cli("eval --checkpoint " + ft + " --json --threads 1"));
    CHECK(e["images"] == 8);   // 2 test images of each of the 4 vehicle classes
    REQUIRE(e["per_class"].size() == 4);
    CHECK(e["per_class"][3]["class"] == "truck");
#endif
}
