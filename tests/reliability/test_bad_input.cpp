// tests/reliability/test_bad_input.cpp -- one table of malformed inputs, each refused with a razor::Error whose message
// names the file (or op), says what was expected and what was found, and gives a hint. docs/reliability.md "Bad input".
//
// Covered: truncated files, wrong magic, wrong sizes, huge declared dimensions (refused before any allocation they
// would drive), NaN weights, labels out of range, a checkpoint that does not fit the model, unreadable paths and a
// missing dataset -- for CIFAR, IDX (plain and gzip), PNG/JPEG, safetensors, checkpoints and train states.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "apps/apps_support.h"
#include "train/checkpoint.h"
#include "apps/commands.h"
#include "train/data_splits.h"
#include "train/train_state.h"
#include "core/core.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "models/registry.h"
#include "optim/sgd.h"

using namespace razor;
namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& bytes) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
}

std::string be32(uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// IDX: magic 00 00 08 rank, big-endian dims, data.
std::string idx(const std::vector<uint32_t>& dims, const std::string& data) {
    std::string s = {0, 0, 8, static_cast<char>(dims.size())};
    for (uint32_t d : dims) s += be32(d);
    return s + data;
}

std::string gzip(const std::string& bytes) {
    // A stored (uncompressed) deflate block inside a gzip member: enough for a reader test, no zlib needed here.
    std::string out = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, '\x03'};
    out += '\x01';
    const uint16_t n = static_cast<uint16_t>(bytes.size());
    out += static_cast<char>(n & 0xff), out += static_cast<char>(n >> 8);
    out += static_cast<char>(~n & 0xff), out += static_cast<char>((~n >> 8) & 0xff);
    out += bytes;
    return out;   // CRC and size trailer left out: a truncated member
}

// A minimal PNG header (signature + IHDR) declaring width x height RGB, no image data.
std::string png_header(uint32_t width, uint32_t height) {
    std::string ihdr = "IHDR" + be32(width) + be32(height) + std::string{8, 2, 0, 0, 0};
    return std::string("\x89PNG\r\n\x1a\n", 8) + be32(13) + ihdr + be32(0);
}

std::string safetensors_with_header(const std::string& json, const std::string& data) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
    return s + json + data;
}

struct Case {
    const char* name;
    std::function<void(const std::string& dir)> run;       // must throw razor::Error
    std::vector<std::string> expect;                        // substrings of the message ({dir} = the temp folder)
};

std::string expand(std::string s, const std::string& dir) {
    for (size_t p; (p = s.find("{dir}")) != std::string::npos;) s.replace(p, 5, dir);
    return s;
}

// A run folder with a real lenet5 checkpoint, for the checkpoint cases.
train::Checkpoint lenet_checkpoint() {
    Generator gen(0);
    train::Checkpoint c;
    c.model = models::make_model("lenet5", 10, gen)->state_dict();
    c.model_metadata = {{"model", "lenet5"}};
    return c;
}

const std::vector<Case>& cases() {
    static const std::vector<Case> table = {
        // ---- CIFAR ----
        {"cifar: truncated record",
         [](const std::string& d) {
             write(d + "/b.bin", std::string(3073 + 100, '\0'));
             data::read_cifar_files({d + "/b.bin"}, {});
         },
         {"{dir}/b.bin", "3173 bytes", "multiple of 3073", "hint"}},
        {"cifar: empty file",
         [](const std::string& d) {
             write(d + "/b.bin", "");
             data::read_cifar_files({d + "/b.bin"}, {});
         },
         {"{dir}/b.bin", "empty", "records of 3073 bytes", "hint"}},
        {"cifar: label out of range",
         [](const std::string& d) {
             write(d + "/b.bin", std::string(1, '\x0c') + std::string(3072, '\0'));
             data::read_cifar_files({d + "/b.bin"}, {});
         },
         {"{dir}/b.bin", "label 12", "expected 0..9", "hint"}},
        {"cifar: missing dataset",
         [](const std::string& d) { data::load_cifar10(d + "/nothing", true); },
         {"{dir}/nothing", "data_batch_1.bin", "hint"}},
        {"cifar: --data is not a folder",
         [](const std::string& d) { train::load_splits("razor train", "cifar10", d + "/nowhere", ""); },
         {"razor train", "{dir}/nowhere", "not a folder", "hint"}},
        // ---- IDX ----
        {"idx: wrong magic",
         [](const std::string& d) {
             write(d + "/x.idx", "GIF89a....");
             data::read_idx(d + "/x.idx");
         },
         {"{dir}/x.idx", "expected magic 00 00 08 0N", "got 71 73 70 56", "hint"}},
        {"idx: header truncated",
         [](const std::string& d) {
             write(d + "/x.idx", std::string{0, 0, 8, 3} + be32(2));
             data::read_idx(d + "/x.idx");
         },
         {"{dir}/x.idx", "truncated", "expected 3 dimensions", "got 1", "hint"}},
        {"idx: rank out of range",
         [](const std::string& d) {
             write(d + "/x.idx", std::string{0, 0, 8, 9});
             data::read_idx(d + "/x.idx");
         },
         {"{dir}/x.idx", "rank 9", "1 to 4", "hint"}},
        {"idx: huge declared dimensions",
         [](const std::string& d) {
             write(d + "/x.idx", idx({65536, 65536, 65536}, "abc"));
             data::read_idx(d + "/x.idx");
         },
         {"{dir}/x.idx", "65536", "2^30", "hint"}},
        {"idx: data shorter than declared",
         [](const std::string& d) {
             write(d + "/x.idx", idx({4, 5}, std::string(7, 'x')));
             data::read_idx(d + "/x.idx");
         },
         {"{dir}/x.idx", "(4, 5) = 20", "7", "hint"}},
        {"idx: data longer than declared",
         [](const std::string& d) {
             write(d + "/x.idx", idx({2}, std::string(5, 'x')));
             data::read_idx(d + "/x.idx");
         },
         {"{dir}/x.idx", "longer", "(2)", "hint"}},
        {"idx.gz: truncated gzip stream",
         [](const std::string& d) {
             write(d + "/x.idx.gz", gzip(idx({2, 2}, "abcd")).substr(0, 20));
             data::read_idx(d + "/x.idx.gz");
         },
         {"{dir}/x.idx.gz", "truncated", "hint"}},
        {"fashion-mnist: label out of range and missing files",
         [](const std::string& d) {
             write(d + "/f/train-images-idx3-ubyte", idx({2, 2, 2}, std::string(8, 'x')));
             write(d + "/f/train-labels-idx1-ubyte", idx({2}, std::string{1, 12}));
             write(d + "/f/t10k-images-idx3-ubyte", idx({1, 2, 2}, std::string(4, 'x')));
             write(d + "/f/t10k-labels-idx1-ubyte", idx({1}, std::string{1}));
             data::load_fashion_mnist(d + "/f", true);
         },
         {"{dir}/f/train-labels-idx1-ubyte", "label 12", "10 classes", "hint"}},
        {"fashion-mnist: labels do not match the images",
         [](const std::string& d) {
             write(d + "/g/train-images-idx3-ubyte", idx({2, 2, 2}, std::string(8, 'x')));
             write(d + "/g/train-labels-idx1-ubyte", idx({3}, std::string{1, 2, 3}));
             data::load_fashion_mnist(d + "/g", true);
         },
         {"{dir}/g/train-labels-idx1-ubyte", "expected 2 labels", "got", "hint"}},
        {"fashion-mnist: missing dataset",
         [](const std::string& d) { data::load_fashion_mnist(d + "/empty", true); },
         {"{dir}/empty", "not found", "hint"}},
        // ---- images ----
        {"image: wrong magic",
         [](const std::string& d) {
             write(d + "/a.png", "this is not an image");
             data::decode_image_file(d + "/a.png", {});
         },
         {"{dir}/a.png", "hint"}},
        {"image: truncated PNG",
         [](const std::string& d) {
             write(d + "/t.png", png_header(4, 4).substr(0, 20));
             data::decode_image_file(d + "/t.png", {});
         },
         {"{dir}/t.png", "hint"}},
        {"image: huge declared dimensions",
         [](const std::string& d) {
             write(d + "/h.png", png_header(100000, 100000));
             data::decode_image_file(d + "/h.png", {});
         },
         {"{dir}/h.png", "100000", "8192", "hint"}},
        {"image folder: missing split",
         [](const std::string& d) { data::load_image_folder(d + "/imgs", "train"); },
         {"{dir}/imgs", "train", "hint"}},
        // ---- safetensors ----
        {"safetensors: truncated",
         [](const std::string& d) {
             const std::string s = serialize_safetensors({{"w", Tensor::ones({4, 4})}});
             write(d + "/m.safetensors", s.substr(0, s.size() - 10));
             load_safetensors(d + "/m.safetensors");
         },
         {"{dir}/m.safetensors", "'w'", "[0, 64]", "54 bytes", "hint"}},
        {"safetensors: wrong magic (not a safetensors file)",
         [](const std::string& d) {
             write(d + "/m.safetensors", "PK\x03\x04 a zip file, as torch.save writes");
             load_safetensors(d + "/m.safetensors");
         },
         {"{dir}/m.safetensors", "header length", "exceeds the file (", "hint"}},
        {"safetensors: wrong sizes (offsets do not match the shape)",
         [](const std::string& d) {
             write(d + "/m.safetensors",
                   safetensors_with_header(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})",
                                           std::string(16, '\0')));
             load_safetensors(d + "/m.safetensors");
         },
         {"{dir}/m.safetensors", "'w'", "needs 16 bytes", "give 12", "hint"}},
        {"safetensors: huge declared dimensions",
         [](const std::string& d) {
             write(d + "/m.safetensors",
                   safetensors_with_header(
                       R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})",
                       std::string(16, '\0')));
             load_safetensors(d + "/m.safetensors");
         },
         {"{dir}/m.safetensors", "[4294967296,4294967296]", "more than 2^62 elements", "hint"}},
        {"safetensors: a folder where a file is expected",
         [](const std::string& d) {
             fs::create_directories(d + "/folder.safetensors");
             load_safetensors(d + "/folder.safetensors");
         },
         {"{dir}/folder.safetensors", "folder", "expected a file", "hint"}},
        {"safetensors: unreadable path",
         [](const std::string& d) { load_safetensors(d + "/no/such/file.safetensors"); },
         {"{dir}/no/such/file.safetensors", "No such file or directory", "hint"}},
        // ---- checkpoints ----
        {"checkpoint: NaN weights",
         [](const std::string& d) {
             train::Checkpoint c = lenet_checkpoint();
             Tensor w = c.model.at("conv1.weight").clone();
             w.f32()[3] = std::numeric_limits<float>::quiet_NaN();
             w.f32()[4] = std::numeric_limits<float>::infinity();
             c.model["conv1.weight"] = w;
             train::save_checkpoint(d + "/run", "last", c);
             train::open_checkpoint(d + "/run");
         },
         {"{dir}/run/last/model.safetensors", "'conv1.weight'", "expected finite values", "got 1 NaN and 1 Inf",
          "hint"}},
        {"checkpoint: does not fit the model",
         [](const std::string& d) {
             const std::string cifar = d + "/cifar";
             test::write_fake_cifar10(cifar, 2, 10);
             train::save_checkpoint(d + "/run2", "last", lenet_checkpoint());
             test::run_command(apps::run_eval, {"--checkpoint", d + "/run2", "--data", cifar, "--model", "mlp",
                                                "--threads", "1"});
         },
         {"{dir}/run2/last", "--model mlp", "missing keys", "unexpected keys", "hint"}},
        {"checkpoint: missing run folder",
         [](const std::string& d) { train::open_checkpoint(d + "/nope"); },
         {"{dir}/nope", "does not exist", "hint"}},
        {"checkpoint: files not written together",
         [](const std::string& d) {
             train::save_checkpoint(d + "/r1", "last", lenet_checkpoint());
             train::save_checkpoint(d + "/r2", "last", lenet_checkpoint());
             fs::copy_file(d + "/r2/last/model.safetensors", d + "/r1/last/model.safetensors",
                           fs::copy_options::overwrite_existing);
             train::open_checkpoint(d + "/r1");
         },
         {"{dir}/r1/last", "pair ids", "hint"}},
        // ---- train state (what --resume reads) ----
        {"train state: wrong dtype for the epoch",
         [](const std::string& d) {
             std::map<std::string, Tensor> st = {{"epoch", Tensor::scalar(3.f)}};
             optim::SGD opt({{"w", Tensor::zeros({2}).requires_grad_()}}, {});
             Generator gen(0);
             train::restore_train_state(st, d + "/train_state.safetensors", opt, nullptr, gen);
         },
         {"{dir}/train_state.safetensors", "'epoch'", "one i64 value", "got f32 ()", "hint"}},
        {"train state: negative step",
         [](const std::string& d) {
             std::map<std::string, Tensor> st = {{"epoch", Tensor::from_vector_i64({}, {2})},
                                                 {"step", Tensor::from_vector_i64({}, {-5})}};
             optim::SGD opt({{"w", Tensor::zeros({2}).requires_grad_()}}, {});
             Generator gen(0);
             train::restore_train_state(st, d + "/train_state.safetensors", opt, nullptr, gen);
         },
         {"{dir}/train_state.safetensors", "'step'", "must be in [0, ", "got -5", "hint"}},
        {"train state: config of the wrong type",
         [](const std::string& d) { train::parse_run_config(R"({"lr": 0.1})", d + "/train_state.safetensors"); },
         {"{dir}/train_state.safetensors", "'lr'", "must be a string", "got number", "hint"}},
    };
    return table;
}

}  // namespace

TEST_CASE("bad input: every malformed input is refused naming the file, expected vs got, and a hint") {
    test::TempDir tmp("bad_input");
    int n = 0;
    for (const Case& c : cases()) {
        const std::string dir = fmt(tmp.path(), "/case", n++);
        fs::create_directories(dir);
        std::string message;
        bool thrown = false;
        try {
            test::capture_stdout([&] { c.run(dir); });
        } catch (const Error& e) {
            thrown = true;
            message = e.what();
        }
        INFO("case: ", std::string(c.name));
        INFO("message: ", message);
        CHECK_MESSAGE(thrown, "no razor::Error");
        for (const std::string& want : c.expect)
            CHECK_MESSAGE(message.find(expand(want, dir)) != std::string::npos, want);
    }
    CHECK(n >= 30);
}
