// tests/fuzz/fuzz_idx.cpp -- libFuzzer target: bytes -> data::parse_idx (the parser read_idx uses).
// Differential check: the same bytes gzip-compressed must give the same answer (accepted with identical data, or
// rejected), which exercises the in-memory inflate path on every valid IDX the fuzzer finds.
#include <zlib.h>

#include <cstring>

#include "data/idx.h"
#include "fuzz_support.h"

namespace {
std::string gzip(const std::string& in) {
    z_stream zs{};
    deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&zs, in.size()) + 32, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&zs, Z_FINISH);
    razor::fuzz::require(rc == Z_STREAM_END, "zlib deflate finishes");
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace razor;
    const std::string in = fuzz::bytes(data, size);
    // Plain input that starts with the gzip magic would be read as gzip: that is the gzip target's job.
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) return 0;
    Tensor plain, packed;
    const bool ok = fuzz::accepts([&] { plain = data::parse_idx(in, "fuzz.idx"); });
    const bool ok_gz = fuzz::accepts([&] { packed = data::parse_idx(gzip(in), "fuzz.idx.gz"); });
    fuzz::require(ok == ok_gz, "plain and gzip-compressed IDX are accepted alike");
    if (ok) {
        fuzz::require(plain.dtype() == DType::U8 && plain.shape() == packed.shape(), "same shape through gzip");
        fuzz::require(std::memcmp(plain.data<uint8_t>(), packed.data<uint8_t>(), plain.numel()) == 0,
                      "same bytes through gzip");
        fuzz::require(static_cast<size_t>(plain.numel()) + 4 + 4 * plain.dim() == size, "header + data = input");
    }
    return 0;
}
