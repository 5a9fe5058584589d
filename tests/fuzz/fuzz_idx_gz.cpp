// tests/fuzz/fuzz_idx_gz.cpp -- libFuzzer target: gzip bytes -> data::parse_idx, i.e. zlib's inflate on hostile
// streams (bad headers, bad blocks, bad CRC, truncation, concatenated members, trailing garbage) feeding the IDX
// parser. The seeds are gzip files; input without the gzip magic gets it prepended so every run takes this path.
#include "data/idx.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace razor;
    std::string in = fuzz::bytes(data, size);
    if (!(size >= 2 && data[0] == 0x1f && data[1] == 0x8b)) in.insert(0, "\x1f\x8b", 2);
    fuzz::accepts([&] { data::parse_idx(in, "fuzz.idx.gz"); });
    return 0;
}
