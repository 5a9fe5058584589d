// data/idx.cpp -- IDX reader (see idx.h).
#include "data/idx.h"

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "core/check.h"

namespace razor::data {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 30;

// A gzip-or-plain byte stream (zlib's gzread passes plain files through unchanged).
class ByteStream {
public:
    explicit ByteStream(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
        if (!file_)
            throw Error(fmt(path, ": cannot open (", std::strerror(errno), "); hint: check the path, or install "
                            "Debian's dataset-fashion-mnist (bash scripts/setup.sh does)"));
    }
    ~ByteStream() {
        if (file_) gzclose(file_);
    }
    // Reads up to n bytes; returns how many were read. Throws on a corrupt gzip stream.
    int64_t read(void* dst, int64_t n) {
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

}  // namespace

Tensor read_idx(const std::string& path) {
    ByteStream in(path);
    unsigned char magic[4];
    if (in.read(magic, 4) != 4)
        throw Error(fmt(path, ": not an IDX file: shorter than its 4-byte magic; hint: the file is truncated"));
    if (magic[0] != 0 || magic[1] != 0)
        throw Error(fmt(path, ": not an IDX file: expected magic 00 00 08 0N, got ", int(magic[0]), " ", int(magic[1]),
                        " ", int(magic[2]), " ", int(magic[3])));
    if (magic[2] != 0x08)
        throw Error(fmt(path, ": IDX element type 0x", std::hex, int(magic[2]), std::dec,
                        " is not supported; expected 0x08 (unsigned byte), as MNIST-style datasets use"));
    const int ndim = magic[3];
    if (ndim < 1 || ndim > 4) throw Error(fmt(path, ": IDX rank ", ndim, " is out of range; expected 1 to 4"));
    Shape shape;
    int64_t numel = 1;
    for (int d = 0; d < ndim; ++d) {
        unsigned char b[4];
        if (in.read(b, 4) != 4) throw Error(fmt(path, ": IDX header truncated in dimension ", d));
        const int64_t size = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3];
        if (size == 0 || numel > kMaxElements / size)
            throw Error(fmt(path, ": IDX dimension ", d, " = ", size, " gives more than 2^30 elements (or zero); hint: "
                            "the header is corrupt"));
        numel *= size;
        shape.push_back(size);
    }
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
        throw Error(fmt(images_path, ": expected images (N, H, W), got ", shape_str(images.shape())));
    if (labels_u8.dim() != 1 || labels_u8.size(0) != images.size(0))
        throw Error(fmt(labels_path, ": expected ", images.size(0), " labels to match ", images_path, ", got ",
                        shape_str(labels_u8.shape())));
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
            throw Error(fmt(labels_path, ": label ", int(src[i]), " at index ", i, " is out of range for 10 classes"));
        ds.labels.i64()[i] = src[i];
    }
    return ds;
}

}  // namespace razor::data
