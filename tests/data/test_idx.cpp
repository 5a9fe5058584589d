// tests/data/test_idx.cpp -- IDX reader: plain and gzip files, every malformed header gets a clear error.
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "core/safetensors.h"   // read_file
#include "data/batch.h"
#include "data/idx.h"
#include "support/gradcheck.h"

using namespace razor;

namespace {
std::string write_bytes(const std::string& name, const std::string& bytes, bool gzip = false) {
    const std::string path = "/tmp/razor_idx_test_" + name;
    if (gzip) {
        gzFile f = gzopen(path.c_str(), "wb");
        gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
        gzclose(f);
    } else {
        std::ofstream(path, std::ios::binary) << bytes;
    }
    return path;
}
std::string idx_header(std::vector<uint32_t> dims, unsigned char type = 0x08) {
    std::string h = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
    for (uint32_t d : dims)
        for (int s = 24; s >= 0; s -= 8) h += static_cast<char>((d >> s) & 0xff);
    return h;
}
}  // namespace

TEST_CASE("IDX: plain and gzip files read to the declared shape") {
    std::string bytes = idx_header({2, 3}) + std::string("\x01\x02\x03\x04\x05\x06", 6);
    for (bool gz : {false, true}) {
        Tensor t = data::read_idx(write_bytes(gz ? "ok.gz" : "ok", bytes, gz));
        CHECK(t.shape() == Shape{2, 3});
        CHECK(t.data<uint8_t>()[5] == 6);
    }
}

TEST_CASE("IDX: malformed files name the file and what was expected") {
    using doctest::Contains;
    CHECK_THROWS_WITH_AS(data::read_idx(write_bytes("short", "\x00\x00", false)), Contains("truncated"), Error);
    CHECK_THROWS_WITH_AS(data::read_idx(write_bytes("magic", "PK\x03\x04zip", false)), Contains("expected magic 00 00 08"),
                         Error);
    CHECK_THROWS_WITH_AS(data::read_idx(write_bytes("type", idx_header({1}, 0x0d) + "abcd")),
                         Contains("not supported; expected 0x08"), Error);
    CHECK_THROWS_WITH_AS(data::read_idx(write_bytes("huge", idx_header({65535, 65535, 65535}))), Contains("2^30"), Error);
    CHECK_THROWS_WITH_AS(data::read_idx(write_bytes("trunc", idx_header({2, 3}) + "abc")),
                         Contains("declares (2, 3) = 6 bytes, the file holds 3"), Error);
    CHECK_THROWS_WITH_AS(data::read_idx(write_bytes("long", idx_header({2}) + "abc")), Contains("longer than"), Error);
    CHECK_THROWS_WITH_AS(data::read_idx("/nonexistent/x-idx3-ubyte"), Contains("/nonexistent/x-idx3-ubyte: cannot open"),
                         Error);
    CHECK_THROWS_WITH_AS(data::load_fashion_mnist("/nonexistent", true), Contains("dataset-fashion-mnist"), Error);
}

TEST_CASE("IDX: Fashion-MNIST from Debian, when installed") {
    if (!std::filesystem::exists(data::kFashionMnistDir)) {
        MESSAGE("skipped: " << data::kFashionMnistDir << " not installed");
        return;
    }
    data::ImageDataset test = data::load_fashion_mnist(data::kFashionMnistDir, false);
    CHECK(test.size() == 10000);
    CHECK(test.images.shape() == Shape{10000, 1, 28, 28});
    std::vector<int64_t> order = {0, 1, 2, 3};
    data::Batch b = data::make_batch(test, order, 0, 4, {0.2860f}, {0.3530f});
    CHECK(b.images.shape() == Shape{4, 1, 28, 28});
    CHECK(b.labels.i64()[0] == 9);   // the first Fashion-MNIST test image is an ankle boot
}

TEST_CASE("IDX: parse_idx reads bytes in memory, plain or gzip, like read_idx reads files") {
    using doctest::Contains;
    const std::string bytes = idx_header({2, 3}) + std::string("\x01\x02\x03\x04\x05\x06", 6);
    const std::string path = write_bytes("mem.gz", bytes, true);
    const std::string gz = read_file(path);
    REQUIRE(gz.size() > 2);
    for (const std::string& in : {bytes, gz}) {
        Tensor t = data::parse_idx(in, "mem");
        CHECK(t.shape() == Shape{2, 3});
        CHECK(t.data<uint8_t>()[5] == 6);
    }
    // Two gzip members one after the other are one stream (as gzread reads them); trailing non-gzip bytes end it.
    const std::string gz_head = read_file(write_bytes("head.gz", bytes.substr(0, 7), true));
    const std::string gz_tail = read_file(write_bytes("tail.gz", bytes.substr(7), true));
    CHECK(data::parse_idx(gz_head + gz_tail, "two").shape() == Shape{2, 3});
    CHECK(data::parse_idx(gz + "junk", "trailing").shape() == Shape{2, 3});
    // A header declaring more data than the input can hold is refused before the allocation it would drive.
    CHECK_THROWS_WITH_AS(data::parse_idx(idx_header({1 << 14, 1 << 14}), "big"),
                         Contains("big: IDX data truncated: the header declares (16384, 16384) = 268435456 bytes, "
                                  "the input holds at most 0"), Error);
    CHECK_THROWS_WITH_AS(data::parse_idx(gz.substr(0, gz.size() - 6), "cut.gz"), Contains("cut.gz: corrupt gzip data"),
                         Error);
    std::string bad_crc = gz;
    bad_crc[bad_crc.size() - 5] ^= 0x55;
    CHECK_THROWS_WITH_AS(data::parse_idx(bad_crc, "crc.gz"), Contains("crc.gz: corrupt gzip data"), Error);
    CHECK_THROWS_WITH_AS(data::parse_idx("", "empty"), Contains("empty: not an IDX file"), Error);
}
