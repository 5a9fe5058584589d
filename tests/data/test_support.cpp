// tests/data/test_support.cpp -- see test_support.h. stb_image_write is compiled here, static, for the tests only.
#include "data/test_support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace razor::test {
namespace fs = std::filesystem;

TempDir::TempDir(const std::string& name) : path_("/tmp/razor_test_" + std::to_string(getpid()) + "_" + name) {
    fs::remove_all(path_);
    fs::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

void write_bytes(const std::string& path, const std::string& bytes) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
}

namespace {
void append(void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}
std::vector<uint8_t> interleave(const std::vector<uint8_t>& chw, int C, int H, int W) {
    std::vector<uint8_t> hwc(chw.size());
    for (int c = 0; c < C; ++c)
        for (int i = 0; i < H * W; ++i) hwc[static_cast<size_t>(i) * C + c] = chw[static_cast<size_t>(c) * H * W + i];
    return hwc;
}
}  // namespace

std::string encode_png(const std::vector<uint8_t>& chw, int C, int H, int W) {
    std::string out;
    const auto hwc = interleave(chw, C, H, W);
    stbi_write_png_to_func(append, &out, W, H, C, hwc.data(), W * C);
    return out;
}

std::string encode_jpg(const std::vector<uint8_t>& chw, int C, int H, int W, int quality) {
    std::string out;
    const auto hwc = interleave(chw, C, H, W);
    stbi_write_jpg_to_func(append, &out, W, H, C, hwc.data(), quality);
    return out;
}

std::vector<uint8_t> pattern_image(int C, int H, int W, int seed) {
    std::vector<uint8_t> v(static_cast<size_t>(C) * H * W);
    for (int c = 0; c < C; ++c)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) v[(static_cast<size_t>(c) * H + y) * W + x] = (c * 71 + y * 13 + x * 7 + seed) % 256;
    return v;
}

}  // namespace razor::test
