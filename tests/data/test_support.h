// tests/data/test_support.h -- small files for the data-floor tests: temp folders, raw bytes, PNG/JPEG writers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace razor::test {

// A fresh, empty folder /tmp/razor_test_<pid>_<name>, removed when the object is destroyed (every test floor uses it).
class TempDir {
public:
    explicit TempDir(const std::string& name);
    ~TempDir();
    const std::string& path() const { return path_; }
    std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

private:
    std::string path_;
};

// Writes bytes to path, creating parent folders.
void write_bytes(const std::string& path, const std::string& bytes);
std::string read_bytes(const std::string& path);

// Encodes an image given as (C, H, W) u8 planes (C = 1 or 3) with stb_image_write; returns the encoded bytes.
std::string encode_png(const std::vector<uint8_t>& chw, int C, int H, int W);
std::string encode_jpg(const std::vector<uint8_t>& chw, int C, int H, int W, int quality = 95);

// A deterministic test image (C, H, W): value at (c, y, x) = (c * 71 + y * 13 + x * 7 + seed) % 256.
std::vector<uint8_t> pattern_image(int C, int H, int W, int seed);

}  // namespace razor::test
