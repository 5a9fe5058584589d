// data/idx.cpp -- IDX reader (see idx.h).
#include "data/idx.h"

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "core/check.h"

namespace razor::data {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 30;

// Where the parser's bytes come from: a file (plain or gzip) or memory (plain or gzip).
class ByteSource {
public:
    virtual ~ByteSource() = default;
    // Reads up to n bytes; returns how many were read (fewer only at the end). Throws on a corrupt gzip stream.
    virtual int64_t read(void* dst, int64_t n) = 0;
    // An upper bound on the bytes still to come, so a header declaring more than the input can hold is refused
    // before the allocation it would drive (files: unknown, INT64_MAX).
    virtual int64_t max_remaining() const { return std::numeric_limits<int64_t>::max(); }
};

// A gzip-or-plain file (zlib's gzread passes plain files through unchanged).
class FileSource : public ByteSource {
public:
    explicit FileSource(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
        if (!file_)
            throw Error(fmt(path, ": cannot open (", std::strerror(errno), "); hint: check the path, or install "
                            "Debian's dataset-fashion-mnist (bash scripts/setup.sh does)"));
    }
    ~FileSource() override {
        if (file_) gzclose(file_);
    }
    FileSource(const FileSource&) = delete;
    FileSource& operator=(const FileSource&) = delete;
    int64_t read(void* dst, int64_t n) override {
        int64_t done = 0;
        while (done < n) {
            const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
            const int got = gzread(file_, static_cast<char*>(dst) + done, chunk);
            if (got < 0) {
                int err = 0;
                const char* msg = gzerror(file_, &err);
                throw Error(fmt(path_, ": corrupt gzip data (", msg, "); hint: the file is damaged, re-install or re-download it"));
            }
            if (got == 0) break;
            done += got;
        }
        return done;
    }

private:
    std::string path_;
    gzFile file_;
};

// Bytes in memory, inflated on the fly when they start with the gzip magic 1f 8b (like gzread: members
// concatenated one after another are read as one stream; anything else after a member ends the stream).
class MemorySource : public ByteSource {
public:
    MemorySource(const std::string& bytes, const std::string& source) : bytes_(bytes), source_(source) {
        gzip_ = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
                static_cast<unsigned char>(bytes[1]) == 0x8b;
        if (gzip_) {
            if (inflateInit2(&zs_, 15 + 16) != Z_OK) throw Error(fmt(source, ": zlib inflateInit2 failed"));
            zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
            zs_.avail_in = static_cast<uInt>(std::min<size_t>(bytes.size(), 1u << 30));
        }
    }
    int64_t max_remaining() const override {
        // deflate expands at most 1032:1 (zlib's own bound); +64 KiB covers what inflate already holds back
        if (gzip_) return ended_ ? 0 : static_cast<int64_t>(zs_.avail_in) * 1032 + (int64_t{1} << 16);
        return static_cast<int64_t>(bytes_.size() - pos_);
    }
    ~MemorySource() override {
        if (gzip_) inflateEnd(&zs_);
    }
    MemorySource(const MemorySource&) = delete;
    MemorySource& operator=(const MemorySource&) = delete;
    int64_t read(void* dst, int64_t n) override {
        if (!gzip_) {
            const int64_t got = std::min<int64_t>(n, static_cast<int64_t>(bytes_.size() - pos_));
            std::memcpy(dst, bytes_.data() + pos_, static_cast<size_t>(got));
            pos_ += static_cast<size_t>(got);
            return got;
        }
        int64_t done = 0;
        while (done < n && !ended_) {
            zs_.next_out = static_cast<Bytef*>(dst) + done;
            zs_.avail_out = static_cast<uInt>(std::min<int64_t>(n - done, 1 << 30));
            const uInt before = zs_.avail_out;
            const int rc = inflate(&zs_, Z_NO_FLUSH);
            done += before - zs_.avail_out;
            if (rc == Z_STREAM_END) {
                // Another gzip member follows: keep reading; otherwise the stream is over.
                const bool more = zs_.avail_in >= 2 && zs_.next_in[0] == 0x1f && zs_.next_in[1] == 0x8b;
                if (!more || inflateReset(&zs_) != Z_OK) ended_ = true;
            } else if (rc == Z_BUF_ERROR && zs_.avail_in == 0) {
                throw Error(fmt(source_, ": corrupt gzip data (unexpected end of file); hint: the file is truncated"));
            } else if (rc != Z_OK) {
                throw Error(fmt(source_, ": corrupt gzip data (", zs_.msg ? zs_.msg : "zlib error ", zs_.msg ? "" : std::to_string(rc),
                                "); hint: the file is damaged, re-install or re-download it"));
            }
        }
        return done;
    }

private:
    const std::string& bytes_;
    std::string source_;
    size_t pos_ = 0;
    bool gzip_ = false, ended_ = false;
    z_stream zs_{};
};

// The IDX parser proper: every header field is checked before it drives the one allocation.
Tensor parse_idx_stream(ByteSource& in, const std::string& path) {
    unsigned char magic[4];
    if (in.read(magic, 4) != 4)
        throw Error(fmt(path, ": not an IDX file: shorter than its 4-byte magic; hint: the file is truncated"));
    if (magic[0] != 0 || magic[1] != 0)
        throw Error(fmt(path, ": not an IDX file: expected magic 00 00 08 0N, got ", int(magic[0]), " ", int(magic[1]),
                        " ", int(magic[2]), " ", int(magic[3]), "; hint: the file is of another format (or gzip data "
                        "not named .gz)"));
    if (magic[2] != 0x08)
        throw Error(fmt(path, ": IDX element type 0x", std::hex, int(magic[2]), std::dec,
                        " is not supported; expected 0x08 (unsigned byte), as MNIST-style datasets use; hint: "
                        "convert the file to unsigned bytes"));
    const int ndim = magic[3];
    if (ndim < 1 || ndim > 4)
        throw Error(fmt(path, ": IDX rank ", ndim, " is out of range; expected 1 to 4; hint: the header is corrupt"));
    Shape shape;
    int64_t numel = 1;
    for (int d = 0; d < ndim; ++d) {
        unsigned char b[4];
        if (in.read(b, 4) != 4)
            throw Error(fmt(path, ": IDX header truncated in dimension ", d, ": expected ", ndim,
                            " dimensions of 4 bytes, got ", d, "; hint: the file is truncated"));
        const int64_t size = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3];
        if (size == 0 || numel > kMaxElements / size)
            throw Error(fmt(path, ": IDX dimension ", d, " = ", size, " gives more than 2^30 elements (or zero); hint: "
                            "the header is corrupt"));
        numel *= size;
        shape.push_back(size);
    }
    if (numel > in.max_remaining())
        throw Error(fmt(path, ": IDX data truncated: the header declares ", shape_str(shape), " = ", numel,
                        " bytes, the input holds at most ", in.max_remaining(), "; hint: the file is damaged"));
    Tensor out = Tensor::empty(shape, DType::U8);
    const int64_t got = in.read(out.data<uint8_t>(), numel);
    if (got != numel)
        throw Error(fmt(path, ": IDX data truncated: the header declares ", shape_str(shape), " = ", numel,
                        " bytes, the file holds ", got, "; hint: the file is damaged"));
    unsigned char extra;
    if (in.read(&extra, 1) != 0)
        throw Error(fmt(path, ": IDX file is longer than its header declares ", shape_str(shape), "; hint: wrong file?"));
    return out;
}

}  // namespace

Tensor read_idx(const std::string& path) {
    FileSource in(path);
    return parse_idx_stream(in, path);
}

Tensor parse_idx(const std::string& bytes, const std::string& source) {
    MemorySource in(bytes, source);
    return parse_idx_stream(in, source);
}

ImageDataset load_fashion_mnist(const std::string& dir, bool train) {
    const std::string prefix = train ? "train" : "t10k";
    auto find = [&](const std::string& stem) {
        for (const char* ext : {"", ".gz"}) {
            std::string p = dir + "/" + stem + ext;
            if (std::filesystem::exists(p)) return p;
        }
        throw Error(fmt("Fashion-MNIST: ", dir, "/", stem, "[.gz] not found; hint: install Debian's "
                        "dataset-fashion-mnist (bash scripts/setup.sh does) or pass --data DIR"));
    };
    const std::string images_path = find(prefix + "-images-idx3-ubyte");
    const std::string labels_path = find(prefix + "-labels-idx1-ubyte");
    Tensor images = read_idx(images_path);
    Tensor labels_u8 = read_idx(labels_path);
    if (images.dim() != 3)
        throw Error(fmt(images_path, ": expected images (N, H, W), got ", shape_str(images.shape()),
                        "; hint: the images and labels files are swapped or of another dataset"));
    if (labels_u8.dim() != 1 || labels_u8.size(0) != images.size(0))
        throw Error(fmt(labels_path, ": expected ", images.size(0), " labels to match ", images_path, ", got ",
                        shape_str(labels_u8.shape()), "; hint: the two files belong to different datasets or splits"));
    ImageDataset ds;
    ds.name = "fashion-mnist/" + prefix;
    ds.num_classes = 10;
    ds.classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
    ds.images = images.as_strided({images.size(0), 1, images.size(1), images.size(2)},
                                  {images.size(1) * images.size(2), images.size(1) * images.size(2), images.size(2), 1}, 0);
    ds.labels = Tensor::empty({labels_u8.size(0)}, DType::I64);
    const uint8_t* src = labels_u8.data<uint8_t>();
    for (int64_t i = 0; i < labels_u8.size(0); ++i) {
        if (src[i] >= 10)
            throw Error(fmt(labels_path, ": label ", int(src[i]), " at index ", i, " is out of range for 10 classes "
                            "(expected 0..9); hint: the file is damaged, or not Fashion-MNIST"));
        ds.labels.i64()[i] = src[i];
    }
    return ds;
}

}  // namespace razor::data
