// data/image_decode.cpp -- one JPEG/PNG to a (C, H, W) u8 tensor: header check, decode, resize (see image_folder.h).
//
// stb_image is compiled here, and only here: static (no symbol can clash with another copy, e.g. Debian's libstb.so
// if something else links it), JPEG and PNG only (less code that parses untrusted bytes). STBI_MAX_DIMENSIONS is
// stb's own backstop; razor's header check (read_image_info) runs first with its own, lower limit.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_NO_STDIO
#define STBI_MAX_DIMENSIONS (1 << 16)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

#include "core/check.h"
#include "core/safetensors.h"   // read_file
#include "data/functional.h"
#include "data/image_folder.h"

namespace razor::data {
namespace {
// An encoded image larger than this is refused before it is read into memory (a 8192x8192 PNG is well below).
constexpr int64_t kMaxFileBytes = int64_t{1} << 30;

int stb_length(const std::string& bytes, const std::string& source) {
    if (bytes.size() > static_cast<size_t>(kMaxFileBytes))
        throw Error(fmt(source, ": ", bytes.size(), " bytes is larger than the 1 GiB limit for one image file"));
    return static_cast<int>(bytes.size());
}
void check_size(int64_t w, int64_t h, const std::string& source, int64_t max_side) {
    if (w < 1 || h < 1 || w > max_side || h > max_side)
        throw Error(fmt(source, ": header declares ", w, "x", h, " pixels (width x height); expected 1..", max_side,
                        " on each side; hint: the header is corrupt, or the image is larger than razor decodes: downscale "
                        "it, or move it out of the --data folder"));
}

// Debian 12's stb_image (v2.27) trusts a JPEG Huffman table's 16 code counts: their sum (up to 16 x 255) indexes
// 257- and 256-entry arrays, so a table declaring more than 256 codes writes past them -- in stbi_info as well as
// in the decoder, since both read the tables before the frame header. (Upstream stb_image 2.28 added the same check.)
// razor walks the JPEG's marker segments first and refuses such a table, and a scan that uses a table no DHT defined
// (see SOS below); everything else is left to stb_image. All three were found by tests/fuzz/fuzz_image.
void check_jpeg_huffman_tables(const std::string& bytes, const std::string& source) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const size_t n = bytes.size();
    // SOI (FF D8), which stb_image, like every marker, finds after any number of 0xFF fill bytes.
    size_t at = 0;
    while (at < n && p[at] == 0xFF) ++at;
    if (at == 0 || at >= n || p[at] != 0xD8) return;   // not a JPEG
    ++at;
    bool defined[2][4] = {};   // [DC, AC][table id]: set by DHT segments
    bool progressive = false;  // SOF2: a scan holds either DC or AC coefficients
    while (at + 1 < n) {
        if (p[at] != 0xFF) {   // entropy-coded data after a scan: skip to the next real marker
            ++at;
            continue;
        }
        const unsigned char m = p[at + 1];
        if (m == 0xFF || m == 0x00 || (m >= 0xD0 && m <= 0xD7) || m == 0x01 || m == 0xD8) {
            at += (m == 0xFF) ? 1 : 2;   // fill byte, stuffed 0xFF00, RSTn, TEM, SOI: no length field
            continue;
        }
        if (m == 0xD9 || at + 4 > n) return;   // EOI, or a truncated segment stb_image reports itself
        const size_t length = (size_t{p[at + 2]} << 8) | p[at + 3];   // includes its own 2 bytes
        if (m == 0xC4) {
            // DHT: tables of (class/id byte, 16 counts, that many symbols), read the way stb_image reads them: a
            // table's 17 header bytes are read even when the segment length says fewer remain, and bytes past the
            // end of the input read as 0.
            const auto byte = [&](size_t i) -> size_t { return i < n ? p[i] : 0; };
            int64_t left = static_cast<int64_t>(length) - 2;
            for (size_t t = at + 4; left > 0 && t < n;) {
                size_t codes = 0;
                for (size_t i = 1; i <= 16; ++i) codes += byte(t + i);
                if (codes > 256)
                    throw Error(fmt(source, ": corrupt JPEG: a Huffman table at byte ", t, " declares ", codes,
                                    " codes; expected at most 256; hint: the file is damaged"));
                if ((byte(t) >> 4) <= 1 && (byte(t) & 15) <= 3) defined[byte(t) >> 4][byte(t) & 15] = true;
                left -= static_cast<int64_t>(17 + codes);
                t += 17 + codes;
            }
        }
        if (m == 0xC2) progressive = true;
        if (m == 0xDA && at + 5 < n) {
            // SOS: (component, DC table << 4 | AC table) pairs, then Ss, Se, Ah << 4 | Al. stb_image decodes with
            // whatever memory an undefined table holds (its tables are not zeroed), reading far out of bounds, so
            // every table the scan uses must have been defined before it.
            const size_t count = p[at + 4], tail = at + 5 + 2 * count;
            if (tail + 2 < n) {
                const int ss = p[tail], ah = p[tail + 2] >> 4;
                const bool uses_dc = ss == 0 && (!progressive || ah == 0), uses_ac = !progressive || ss > 0;
                for (size_t c = 0; c < count; ++c) {
                    const int dc = p[at + 6 + 2 * c] >> 4, ac = p[at + 6 + 2 * c] & 15;
                    if ((uses_dc && dc <= 3 && !defined[0][dc]) || (uses_ac && ac <= 3 && !defined[1][ac]))
                        throw Error(fmt(source, ": corrupt JPEG: the scan at byte ", at, " uses Huffman table ",
                                        uses_dc && dc <= 3 && !defined[0][dc] ? fmt("DC ", dc) : fmt("AC ", ac),
                                        ", which no DHT segment before it defines; hint: the file is damaged"));
                }
            }
        }
        at += 2 + length;
    }
}

// stb_image grows its buffer for a PNG's IDAT chunk to the chunk's declared length before it checks that the bytes
// are there, so a 150-byte file declaring a 2 GiB IDAT allocates 2 GiB. In a PNG stb_image can decode, every chunk
// before IEND holds its declared length (a truncated one fails anyway), so razor refuses any chunk that does not.
void check_png_chunks(const std::string& bytes, const std::string& source) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const size_t n = bytes.size();
    for (size_t at = 8; at + 8 <= n;) {   // after the signature: (length, type, data, CRC) chunks
        const size_t length = (size_t{p[at]} << 24) | (size_t{p[at + 1]} << 16) | (size_t{p[at + 2]} << 8) | p[at + 3];
        const std::string type(bytes, at + 4, 4);
        if (length > n - at - 8) {
            const bool letters = std::all_of(type.begin(), type.end(), [](char ch) {
                return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
            });
            const std::string name = letters ? "'" + type + "'" : std::string("of no valid type");
            throw Error(fmt(source, ": corrupt PNG: chunk ", name, " at byte ", at, " declares ", length, " bytes, the file "
                            "holds ", n - at - 8, " after its header; hint: the file is truncated or damaged"));
        }
        if (type == "IEND") return;
        at += 12 + length;
    }
}
}  // namespace

ImageInfo read_image_info(const std::string& bytes, const std::string& source, int64_t max_side) {
    int w = 0, h = 0, c = 0;
    const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
    // A PNG's size is at a fixed place (the IHDR chunk right after the signature): razor reads it itself, because
    // stb_image's header scan refuses PNGs over 2^30 pixel bytes with a reason that stbi_info then overwrites.
    const bool png = bytes.size() >= 24 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0 && bytes.compare(12, 4, "IHDR") == 0;
    if (png) {
        const auto be32 = [&](size_t at) {
            return (int64_t{data[at]} << 24) | (int64_t{data[at + 1]} << 16) | (int64_t{data[at + 2]} << 8) | data[at + 3];
        };
        check_size(be32(16), be32(20), source, max_side);
        check_png_chunks(bytes, source);
    }
    check_jpeg_huffman_tables(bytes, source);   // before stb_image reads a table (see above)
    if (!stbi_info_from_memory(data, stb_length(bytes, source), &w, &h, &c))
        throw Error(fmt(source, ": not a readable JPEG or PNG header (stb_image: ", stbi_failure_reason(),
                        "); hint: the file is corrupt, empty, or another format"));
    check_size(w, h, source, max_side);
    if (c < 1 || c > 4)
        throw Error(fmt(source, ": header declares ", c, " channels; expected 1 to 4 (grey, grey+alpha, RGB, RGBA)"));
    return {w, h, c};
}

Tensor decode_image(const std::string& bytes, const std::string& source, const ImageDecode& decode, const Shape& expect) {
    if (decode.channels != 1 && decode.channels != 3)
        throw Error(fmt(source, ": ImageDecode.channels = ", decode.channels, "; expected 1 (grey) or 3 (RGB)"));
    if ((decode.height > 0) != (decode.width > 0))
        throw Error(fmt(source, ": ImageDecode size ", decode.height, "x", decode.width,
                        " sets only one side; expected both (resize) or neither (keep)"));
    const ImageInfo info = read_image_info(bytes, source, decode.max_side);
    int w = 0, h = 0, c = 0;
    const int channels = static_cast<int>(decode.channels);
    std::unique_ptr<stbi_uc, void (*)(void*)> pixels(   // (H, W, C) interleaved
        stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), static_cast<int>(bytes.size()), &w, &h,
                              &c, channels),
        &stbi_image_free);
    if (!pixels)
        throw Error(fmt(source, ": corrupt image data after a valid ", info.width, "x", info.height,
                        " header (stb_image: ", stbi_failure_reason(), "); hint: the file is damaged, re-create it"));
    RAZOR_CHECK(w == info.width && h == info.height) << source << ": stb_image decoded " << w << "x" << h
                                                     << " from a " << info.width << "x" << info.height << " header";
    // (H, W, C) -> (C, H, W): planes, as razor's images are channels-first.
    Tensor img = Tensor::empty({channels, h, w}, DType::U8);
    uint8_t* out = img.data<uint8_t>();
    const int64_t hw = static_cast<int64_t>(h) * w;
    for (int64_t i = 0; i < hw; ++i)
        for (int ch = 0; ch < channels; ++ch) out[ch * hw + i] = pixels.get()[i * channels + ch];
    if (decode.height > 0 && (decode.height != h || decode.width != w))
        img = resize_bilinear(img, decode.height, decode.width);
    if (!expect.empty() && img.shape() != expect)
        throw Error(fmt(source, ": image is ", shape_str(img.shape()), " (C, H, W), expected ", shape_str(expect),
                        " like the first image of the set; hint: set ImageDecode height and width to resize every image"));
    return img;
}

Tensor decode_image_file(const std::string& path, const ImageDecode& decode, const Shape& expect) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw Error(fmt(path, ": cannot read (", ec.message(), "); hint: check the path"));
    if (size > static_cast<uintmax_t>(kMaxFileBytes))
        throw Error(fmt(path, ": ", size, " bytes is larger than the 1 GiB limit for one image file"));
    return decode_image(read_file(path), path, decode, expect);
}

}  // namespace razor::data
