// data/image_folder.cpp -- ROOT/SPLIT/CLASS/*.{jpg,jpeg,png} listing and loading (see image_folder.h).
#include "data/image_folder.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "core/safetensors.h"   // read_file

namespace razor::data {
namespace fs = std::filesystem;
namespace {

bool is_image_file(const fs::path& p) {
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::vector<std::string> sorted_entries(const fs::path& dir, bool want_dirs) {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
        if (want_dirs ? e.is_directory() : (e.is_regular_file() && is_image_file(e.path())))
            names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());   // byte order, as Python's sorted() on names
    return names;
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? "(none)" : s;
}

// The first `limit` bytes of a file (enough for a JPEG/PNG header unless large metadata segments come first).
std::string read_prefix(const std::string& path, size_t limit) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt(path, ": cannot open (", std::strerror(errno), ")"));
    std::string bytes(limit, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(limit));
    bytes.resize(static_cast<size_t>(in.gcount()));
    return bytes;
}

// Header check of one file without decoding it: the first 256 KiB, or the whole file when its header lies further in.
ImageInfo file_info(const std::string& path, int64_t max_side) {
    constexpr size_t kPrefix = 256 << 10;
    const std::string prefix = read_prefix(path, kPrefix);
    if (prefix.size() == kPrefix) {
        try {
            return read_image_info(prefix, path, max_side);
        } catch (const Error&) {
            std::error_code ec;
            if (fs::file_size(path, ec) > (uintmax_t{1} << 30)) throw;   // not worth reading: report the prefix's error
            return read_image_info(read_file(path), path, max_side);
        }
    }
    return read_image_info(prefix, path, max_side);
}

}  // namespace

ImageDataset load_image_folder(const std::string& root, const std::string& split, const ImageFolderOptions& options) {
    const ImageDecode& decode = options.decode;
    const fs::path dir = fs::path(root) / split;
    if (decode.channels != 1 && decode.channels != 3)
        throw Error(fmt("image folder ", dir.string(), ": ImageDecode.channels = ", decode.channels,
                        "; expected 1 (grey) or 3 (RGB)"));
    if ((decode.height > 0) != (decode.width > 0) || decode.height < 0 || decode.width < 0 || decode.max_side < 1)
        throw Error(fmt("image folder ", dir.string(), ": ImageDecode size ", decode.height, "x", decode.width,
                        ", max_side ", decode.max_side, "; expected both sides > 0 (resize) or both 0 (keep), "
                        "max_side >= 1; a size with only one side set is not supported"));
    if (options.any_size && options.in_memory)
        throw Error(fmt("image folder ", dir.string(), ": ImageFolderOptions.any_size needs in_memory = false (images "
                        "of different sizes do not fit one tensor)"));
    if (!fs::is_directory(dir)) {
        const std::string found = fs::is_directory(root) ? join(sorted_entries(root, true)) : std::string("(root missing)");
        throw Error(fmt("image folder: ", dir.string(), " is not a folder; expected ROOT/SPLIT/CLASS/*.jpg; splits in ",
                        root, ": ", found, "; hint: check the root and split names"));
    }
    ImageDataset ds;
    ds.name = "image-folder:" + dir.string();
    ds.classes = sorted_entries(dir, true);
    if (ds.classes.empty())
        throw Error(fmt("image folder: ", dir.string(), " has no class folders; expected ", dir.string(),
                        "/CLASS/*.{jpg,jpeg,png}, one folder per class"));
    ds.num_classes = static_cast<int64_t>(ds.classes.size());
    std::vector<int64_t> labels;
    for (int64_t c = 0; c < ds.num_classes; ++c) {
        const std::vector<std::string> files = sorted_entries(dir / ds.classes[c], false);
        if (files.empty())
            throw Error(fmt("image folder: class folder ", (dir / ds.classes[c]).string(),
                            " holds no .jpg, .jpeg or .png file; hint: remove the folder or add its images"));
        for (const std::string& f : files) {
            ds.files.push_back((dir / ds.classes[c] / f).string());
            labels.push_back(c);
        }
    }
    const int64_t n = static_cast<int64_t>(labels.size());
    ds.labels = Tensor::from_vector_i64({n}, labels);
    ds.decode = decode;

    if (!options.in_memory) {
        // Check every header now, so a bad file fails the load rather than a batch deep into training.
        for (int64_t i = 0; i < n; ++i) {
            const ImageInfo info = file_info(ds.files[i], decode.max_side);
            const Shape shape = {decode.channels, decode.height > 0 ? decode.height : info.height,
                                 decode.width > 0 ? decode.width : info.width};
            if (i == 0) ds.file_image_shape = shape;
            else if (shape != ds.file_image_shape && options.any_size)
                ds.file_image_shape = {decode.channels, 0, 0};   // sizes vary: each image keeps its own
            else if (shape != ds.file_image_shape && !options.any_size)
                throw Error(fmt(ds.files[i], ": image is ", shape_str(shape), " (C, H, W), expected ",
                                shape_str(ds.file_image_shape), " like ", ds.files[0],
                                "; hint: set ImageDecode height and width to resize every image"));
        }
        return ds;
    }

    // In memory: the first image fixes the shape, the rest decode in parallel; the lowest-index error is rethrown.
    const Tensor first = decode_image_file(ds.files[0], decode);
    const Shape shape = first.shape();   // (C, H, W)
    const int64_t bytes = shape_numel(shape);
    ds.images = Tensor::empty({n, shape[0], shape[1], shape[2]}, DType::U8);
    std::memcpy(ds.images.data<uint8_t>(), first.data<uint8_t>(), bytes);
    std::vector<std::exception_ptr> errors(n);
    uint8_t* dst = ds.images.data<uint8_t>();
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 1; i < n; ++i) {
        try {
            const Tensor img = decode_image_file(ds.files[i], decode, shape);
            std::memcpy(dst + i * bytes, img.data<uint8_t>(), bytes);
        } catch (...) {
            errors[i] = std::current_exception();
        }
    }
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
    // ds.files stays: image i's path, for messages. The pixels are in ds.images; no file is read again.
    return ds;
}

}  // namespace razor::data
