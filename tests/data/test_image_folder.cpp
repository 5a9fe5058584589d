// tests/data/test_image_folder.cpp -- image folders (stb_image): layout, class order, decoding, resizing, header
// checks and corrupt files, in memory and on disk; the shared CIFAR-10 JPEG sample when present.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include "core/check.h"
#include "data/image_folder.h"
#include "data/test_support.h"

using namespace razor;
using doctest::Contains;

namespace {
doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

std::string be32(uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}
// A PNG signature and IHDR chunk declaring w x h RGB, and nothing else (stb_image does not check CRCs).
std::string png_header(uint32_t w, uint32_t h) {
    return std::string("\x89PNG\r\n\x1a\n", 8) + be32(13) + "IHDR" + be32(w) + be32(h) + std::string("\x08\x02\x00\x00\x00", 5) +
           be32(0);
}
// A valid JPEG cut right after its frame header (SOF0), followed by junk: the header parses, the data does not.
std::string corrupt_jpeg() {
    const std::string jpg = test::encode_jpg(test::pattern_image(3, 16, 16, 0), 3, 16, 16);
    const size_t sof = jpg.find("\xff\xc0");
    REQUIRE(sof != std::string::npos);
    const size_t len = (static_cast<uint8_t>(jpg[sof + 2]) << 8) | static_cast<uint8_t>(jpg[sof + 3]);
    return jpg.substr(0, sof + 2 + len) + std::string(64, '\x55');
}

// ROOT/train/{cat,ant,bee}/..., deliberately created out of order; PNGs 6x5 (W x H) with known pixels.
void write_folder(const test::TempDir& root) {
    test::write_bytes(root / "train/cat/b.png", test::encode_png(test::pattern_image(3, 5, 6, 1), 3, 5, 6));
    test::write_bytes(root / "train/cat/a.PNG", test::encode_png(test::pattern_image(3, 5, 6, 2), 3, 5, 6));
    test::write_bytes(root / "train/ant/x.jpg", test::encode_jpg(test::pattern_image(3, 5, 6, 3), 3, 5, 6));
    test::write_bytes(root / "train/ant/notes.txt", "not an image");
    test::write_bytes(root / "train/bee/grey.png", test::encode_png(test::pattern_image(1, 5, 6, 4), 1, 5, 6));
}
}  // namespace

TEST_CASE("image folder: classes sorted, files sorted, PNG pixels exact as (C, H, W), grey to RGB") {
    test::TempDir root("imgf_ok");
    write_folder(root);
    data::ImageDataset ds = data::load_image_folder(root.path(), "train");
    CHECK(ds.classes == std::vector<std::string>{"ant", "bee", "cat"});
    CHECK(ds.num_classes == 3);
    CHECK(ds.size() == 4);
    CHECK(ds.labels.to_vector_i64() == std::vector<int64_t>{0, 1, 2, 2});
    CHECK(ds.images.shape() == Shape{4, 3, 5, 6});
    CHECK(ds.files[2] == root / "train/cat/a.PNG");   // "a.PNG" < "b.png"; the extension's case does not matter
    const std::vector<uint8_t> a = test::pattern_image(3, 5, 6, 2), b = test::pattern_image(3, 5, 6, 1);
    CHECK(std::memcmp(ds.images.data<uint8_t>() + 2 * 90, a.data(), 90) == 0);
    CHECK(std::memcmp(ds.images.data<uint8_t>() + 3 * 90, b.data(), 90) == 0);
    // grey: the one plane repeated in R, G and B
    const std::vector<uint8_t> g = test::pattern_image(1, 5, 6, 4);
    for (int c = 0; c < 3; ++c) CHECK(std::memcmp(ds.images.data<uint8_t>() + 90 + c * 30, g.data(), 30) == 0);
    // the JPEG is lossy: close, not exact
    const std::vector<uint8_t> x = test::pattern_image(3, 5, 6, 3);
    int worst = 0;
    for (int i = 0; i < 90; ++i) worst = std::max(worst, std::abs(int(ds.images.data<uint8_t>()[i]) - int(x[i])));
    CHECK(worst < 40);
    // one channel requested
    data::ImageFolderOptions grey;
    grey.decode.channels = 1;
    CHECK(data::load_image_folder(root.path(), "train", grey).images.shape() == Shape{4, 1, 5, 6});
}

TEST_CASE("image folder: resize to a size, or every image must share the first one's size") {
    test::TempDir root("imgf_sizes");
    write_folder(root);
    test::write_bytes(root / "train/cat/c.png", test::encode_png(test::pattern_image(3, 7, 7, 5), 3, 7, 7));
    CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train"),
                         has(root / "train/cat/c.png" + ": image is (3, 7, 7) (C, H, W), expected (3, 5, 6)"), Error);
    data::ImageFolderOptions opt;
    opt.decode.height = 8;
    opt.decode.width = 4;
    data::ImageDataset ds = data::load_image_folder(root.path(), "train", opt);
    CHECK(ds.images.shape() == Shape{5, 3, 8, 4});
    opt.in_memory = false;   // on disk: the header check sees the mismatch without decoding; with a size it is fine
    CHECK(data::load_image_folder(root.path(), "train", opt).image_shape() == Shape{3, 8, 4});
    opt.decode.height = opt.decode.width = 0;
    CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train", opt),
                         has(root / "train/cat/c.png" + ": image is (3, 7, 7) (C, H, W), expected (3, 5, 6)"), Error);
}

TEST_CASE("image folder: on disk, images decode when asked for, the same as in memory") {
    test::TempDir root("imgf_lazy");
    write_folder(root);
    data::ImageFolderOptions opt;
    opt.in_memory = false;
    data::ImageDataset lazy = data::load_image_folder(root.path(), "train", opt);
    data::ImageDataset eager = data::load_image_folder(root.path(), "train");
    CHECK_FALSE(lazy.in_memory());
    CHECK(lazy.files.size() == 4);
    CHECK(lazy.image_shape() == Shape{3, 5, 6});
    for (int64_t i = 0; i < 4; ++i) CHECK(lazy.image(i).to_string(1000) == eager.image(i).to_string(1000));
    CHECK_THROWS_WITH_AS(lazy.image(4), Contains("image index 4 is out of range for 4 images"), Error);
}

TEST_CASE("image folder: bad files and layouts name the file and what was expected") {
    test::TempDir root("imgf_bad");
    write_folder(root);
    const std::string bad = root / "train/bee/bad.jpg";
    SUBCASE("corrupt JPEG data after a valid header") {
        test::write_bytes(bad, corrupt_jpeg());
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train"),
                             has(bad + ": corrupt image data after a valid 16x16 header (stb_image: "), Error);
    }
    SUBCASE("not an image at all") {
        test::write_bytes(bad, "GIF89a this is no JPEG");
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train"),
                             has(bad + ": not a readable JPEG or PNG header"), Error);
        test::write_bytes(bad, "");
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train"), has(bad + ": not a readable"), Error);
    }
    SUBCASE("huge declared PNG dimensions are refused before decoding") {
        const std::string png = root / "train/bee/huge.png";
        test::write_bytes(png, png_header(10000, 9000));
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train"),
                             has(png + ": header declares 10000x9000 pixels (width x height); expected 1..8192"), Error);
        data::ImageFolderOptions lazy;
        lazy.in_memory = false;
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train", lazy), has(png + ": header declares 10000x9000"),
                             Error);
        test::write_bytes(png, png_header(100000, 100000));
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train"), has(png + ": header declares 100000x100000 pixels"),
                             Error);
        data::ImageFolderOptions small;
        small.decode.max_side = 5;
        std::filesystem::remove(png);
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train", small), Contains("expected 1..5 on each side"),
                             Error);
    }
    SUBCASE("missing split, no classes, empty class folder") {
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "val"),
                             has("image folder: " + (root / "val") + " is not a folder; expected ROOT/SPLIT/CLASS/*.jpg; splits in " +
                                 root.path() + ": train"),
                             Error);
        CHECK_THROWS_WITH_AS(data::load_image_folder("/nonexistent/root", "train"), Contains("(root missing)"), Error);
        std::filesystem::create_directories(root / "empty");
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "empty"), Contains("has no class folders"), Error);
        std::filesystem::create_directories(root / "train/dog");
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train"),
                             has("class folder " + (root / "train/dog") + " holds no .jpg, .jpeg or .png file"), Error);
    }
    SUBCASE("bad options") {
        data::ImageFolderOptions opt;
        opt.decode.channels = 4;
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train", opt), Contains("expected 1 (grey) or 3 (RGB)"), Error);
        opt.decode.channels = 3;
        opt.decode.height = 4;
        CHECK_THROWS_WITH_AS(data::load_image_folder(root.path(), "train", opt), Contains("expected both sides > 0 (resize) or both 0 (keep)"), Error);
    }
}

TEST_CASE("image folder: the shared CIFAR-10 JPEG sample, when present") {
    const std::string root = std::string(RAZOR_SHARED_DIR) + "/datasets/cifar10-jpg-sample";
    if (!std::filesystem::exists(root + "/train")) {
        MESSAGE("skipped: " << root << " not present");
        return;
    }
    data::ImageDataset train = data::load_image_folder(root, "train");
    data::ImageDataset test = data::load_image_folder(root, "test");
    CHECK(train.size() == 200);
    CHECK(test.size() == 100);
    CHECK(train.images.shape() == Shape{200, 3, 32, 32});
    CHECK(train.classes == std::vector<std::string>{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog",
                                                    "horse", "ship", "truck"});
    CHECK(train.labels.i64()[0] == 0);
    CHECK(train.labels.i64()[199] == 9);
    // real photos: not blank
    double sum = 0;
    for (int64_t i = 0; i < train.images.numel(); ++i) sum += train.images.data<uint8_t>()[i];
    const double mean = sum / static_cast<double>(train.images.numel());
    CHECK(mean > 60);
    CHECK(mean < 200);
}

TEST_CASE("image decode: a JPEG Huffman table with more than 256 codes is refused before stb_image reads it") {
    // Found by tests/fuzz/fuzz_image (UBSan: index 257 out of bounds for stbi_uc[257] in stbi__build_huffman):
    // Debian's stb_image 2.27 sums a DHT table's 16 counts (here 16 x 17 = 272) and writes that many entries into
    // 257- and 256-entry arrays. Minimised input: SOI, then one DHT segment.
    const std::string table = std::string("\x00", 1) + std::string(16, '\x11');
    const std::string dht = std::string("\xFF\xD8\xFF\xC4\x00\x13", 6) + table;
    CHECK_THROWS_WITH_AS(data::read_image_info(dht, "h.jpg"),
                         Contains("h.jpg: corrupt JPEG: a Huffman table at byte 6 declares 272 codes; expected at most 256"),
                         Error);
    CHECK_THROWS_WITH_AS(data::decode_image(dht + std::string(300, '\x01'), "h.jpg", {}), Contains("272 codes"), Error);
    // stb_image skips 0xFF fill bytes before any marker, SOI included (found by the fuzzer after the first fix).
    CHECK_THROWS_WITH_AS(data::read_image_info(std::string(40, '\xFF') + dht.substr(1), "f.jpg"),
                         Contains("f.jpg: corrupt JPEG: a Huffman table at byte 45 declares 272 codes"), Error);
    // stb_image reads a table's 17 header bytes even when the segment length (3 here) says fewer follow.
    const std::string short_segment = std::string("\xFF\xD8\xFF\xC4\x00\x03", 6) + table;
    CHECK_THROWS_WITH_AS(data::read_image_info(short_segment, "s.jpg"), Contains("s.jpg: corrupt JPEG"), Error);
    // A table after fill bytes, an APP0 segment and a second (valid) table is found too.
    const std::string app0 = std::string("\xFF\xE0\x00\x04\xFF\xC4", 6);   // APP0 whose 2 payload bytes look like DHT
    const std::string ok_table = std::string("\x00\x01", 2) + std::string(15, '\0') + "\x07";
    const std::string later = std::string("\xFF\xD8\xFF\xFF", 4) + app0 + std::string("\xFF\xC4\x00\x14", 4) + ok_table +
                              std::string("\xFF\xC4\x00\x13", 4) + table;
    CHECK_THROWS_WITH_AS(data::read_image_info(later, "l.jpg"), Contains("at byte 36 declares 272 codes"), Error);
    // Real JPEGs pass the check (the whole suite decodes them); stb_image's own error for a header without a frame.
    CHECK_THROWS_WITH_AS(data::read_image_info(std::string("\xFF\xD8\xFF\xC4\x00\x14", 6) + ok_table, "v.jpg"),
                         Contains("v.jpg: not a readable JPEG or PNG header"), Error);
    const std::string jpg = test::encode_jpg(test::pattern_image(3, 4, 5, 1), 3, 4, 5);
    CHECK(data::decode_image(jpg, "ok.jpg", {}).shape() == Shape{3, 4, 5});
}

TEST_CASE("image decode: a PNG chunk longer than the file is refused before stb_image allocates for it") {
    // Found by tests/fuzz/fuzz_image (libFuzzer out-of-memory: malloc(2147483648) in stbi__parse_png_file): stb_image
    // grows its IDAT buffer to the declared chunk length before reading the chunk. Minimised: a 2x2 IHDR, then an
    // IDAT declaring 0x7d000000 bytes.
    const std::string idat = be32(0x7d000000) + "IDAT" + std::string(16, '\0');
    CHECK_THROWS_WITH_AS(data::read_image_info(png_header(2, 2) + idat, "big.png"),
                         Contains("big.png: corrupt PNG: chunk 'IDAT' at byte 33 declares 2097152000 bytes, the file holds 16"),
                         Error);
    // A whole PNG passes, and so does one whose IEND has no CRC (stb_image stops reading at IEND).
    const std::string png = test::encode_png(test::pattern_image(3, 2, 3, 0), 3, 2, 3);
    CHECK(data::decode_image(png, "ok.png", {}).shape() == Shape{3, 2, 3});
    CHECK(data::decode_image(png.substr(0, png.size() - 4), "nocrc.png", {}).shape() == Shape{3, 2, 3});
}

TEST_CASE("image decode: a JPEG scan using an undefined Huffman table is refused") {
    // Found by tests/fuzz/fuzz_image (UBSan: index -16710884 out of bounds for stbi_uc[256] in stbi__jpeg_huff_decode):
    // stb_image's Huffman tables are not zeroed, so a scan using a table no DHT defined decodes with garbage.
    // Minimised: SOI, SOF (8x8 grey), DHT defining only DC table 0, SOS using DC 0 and AC 0.
    const std::string sof = std::string("\xFF\xC0\x00\x0B\x08\x00\x08\x00\x08\x01\x01\x11\x00", 13);
    const std::string dht = std::string("\xFF\xC4\x00\x14\x00\x00\x01", 7) + std::string(14, '\0') + std::string(1, '\0');
    const std::string sos = std::string("\xFF\xDA\x00\x08\x01\x01\x00\x00\x3F\x00", 10);
    const std::string soi("\xFF\xD8", 2);
    CHECK_THROWS_WITH_AS(data::read_image_info(soi + sof + dht + sos + std::string(8, '\x2a'), "u.jpg"),
                         Contains("u.jpg: corrupt JPEG: the scan at byte 37 uses Huffman table AC 0, which no DHT"), Error);
    // A progressive DC scan (SOF2, Ss = 0) uses no AC table: the same tables pass the check.
    std::string progressive_sof = sof;
    progressive_sof[1] = '\xC2';
    const data::ImageInfo info = data::read_image_info(soi + progressive_sof + dht + sos + std::string(8, '\x2a'), "p.jpg");
    CHECK(info.width == 8);
    CHECK(info.channels == 1);
}
