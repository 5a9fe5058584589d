// tests/fuzz/fuzz_image.cpp -- libFuzzer target: bytes -> data::read_image_info + data::decode_image (razor's
// header checks, then stb_image's JPEG/PNG decoder, then the resize). The first byte picks the options: channels
// 1 or 3, keep the size or resize to a small one; the rest is the encoded file. max_side is 1024 here so that a
// valid-looking huge header is refused quickly (the default 8192 would spend the fuzzer's time on allocations).
#include "data/image_folder.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace razor;
    if (size < 1) return 0;
    data::ImageDecode decode;
    decode.channels = (data[0] & 1) ? 3 : 1;
    if (data[0] & 2) decode.height = decode.width = 1 + (data[0] >> 4);   // 1..16
    decode.max_side = 1024;
    const std::string in = fuzz::bytes(data + 1, size - 1);
    data::ImageInfo info;
    const bool header_ok = fuzz::accepts([&] { info = data::read_image_info(in, "fuzz.img", decode.max_side); });
    Tensor img;
    const bool ok = fuzz::accepts([&] { img = data::decode_image(in, "fuzz.img", decode); });
    if (ok) {
        fuzz::require(header_ok, "a decodable image has a readable header");
        const int64_t h = decode.height ? decode.height : info.height, w = decode.width ? decode.width : info.width;
        fuzz::require(img.shape() == Shape{decode.channels, h, w}, "decoded shape is (C, H, W) as declared/requested");
    }
    return 0;
}
