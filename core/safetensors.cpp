// core/safetensors.cpp -- safetensors reader and atomic writer (see safetensors.h).
#include "core/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string_view>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/float16.h"

namespace razor {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;   // the format's own limit is 100 MB
constexpr const char* kCorrupt = "; hint: the file is corrupt or not a safetensors file";

const char* st_dtype(DType dtype) {
    switch (dtype) {
        case DType::F32: return "F32";
        case DType::I64: return "I64";
        case DType::U8: return "U8";
    }
    return "?";
}

// A dtype as stored in a file: razor's own three, and the float formats of published checkpoints, which are widened
// to F32 on load (PyTorch's model hubs ship F16 and BF16 weights).
struct FileDType {
    const char* name;
    DType dtype;      // what the tensor becomes
    size_t size;      // bytes per element in the file
};
constexpr FileDType kFileDTypes[] = {{"F32", DType::F32, 4}, {"I64", DType::I64, 8}, {"U8", DType::U8, 1},
                                     {"F16", DType::F32, 2}, {"BF16", DType::F32, 2}, {"F64", DType::F32, 8}};

const FileDType* parse_st_dtype(const std::string& s) {
    for (const FileDType& d : kFileDTypes)
        if (s == d.name) return &d;
    return nullptr;
}

// Widens `numel` elements of file type `from` at `src` into the F32 tensor data `dst`.
void widen_to_f32(const FileDType& from, const char* src, float* dst, uint64_t numel) {
    const std::string_view name = from.name;
    for (uint64_t i = 0; i < numel; ++i) {
        if (name == "F64") {
            double v;
            std::memcpy(&v, src + 8 * i, 8);
            dst[i] = static_cast<float>(v);
            continue;
        }
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        dst[i] = name == "F16" ? half_bits_to_float(bits) : bfloat16_bits_to_float(bits);
    }
}

}  // namespace

std::string read_file(const std::string& path) {
    // A folder opens like a file on Linux and fails only at the first read, with a less helpful message.
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw Error(fmt(path, ": is a folder, expected a file; hint: name the file inside it"));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt(path, ": cannot open for reading (", std::strerror(errno), "); hint: check the path"));
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad())
        throw Error(fmt(path, ": read error after ", bytes.size(), " bytes (", std::strerror(errno),
                        "); hint: check the disk and the file"));
    return bytes;
}

namespace {
WriteFaultHook& write_fault_hook() {
    static WriteFaultHook hook;
    return hook;
}
// The injected errno for this stage, or 0.
int injected_fault(const std::string& path, const char* stage, size_t done) {
    const WriteFaultHook& hook = write_fault_hook();
    return hook ? hook(path, stage, done) : 0;
}
const char* write_hint(int err) {
    switch (err) {
        case ENOSPC: case EDQUOT: return "free disk space or write elsewhere (--out)";
        case EACCES: case EPERM: case EROFS: return "check that the folder is writable by this user";
        case ENOENT: case ENOTDIR: return "check that the folder exists";
        default: return "check the disk and the folder";
    }
}
}  // namespace

void set_write_fault_hook_for_testing(WriteFaultHook hook) { write_fault_hook() = std::move(hook); }

void write_file_atomic(const std::string& path, const std::string& bytes) {
    const std::string tmp = fmt(path, ".tmp.", ::getpid());
    int fd = -1;
    if (const int err = injected_fault(path, "open", 0)) errno = err;
    else fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        const int err = errno;
        throw Error(fmt(path, ": cannot create temporary file ", tmp, " (", std::strerror(err),
                        "); the previous file, if any, is untouched; hint: ", write_hint(err)));
    }
    size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = -1;
        if (const int err = injected_fault(path, "write", done)) errno = err;
        else n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n == 0 ? EIO : errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            throw Error(fmt(path, ": write failed after ", done, " of ", bytes.size(), " bytes (", std::strerror(err),
                            "); the previous file, if any, is untouched; hint: ", write_hint(err)));
        }
        done += static_cast<size_t>(n);
    }
    // fsync makes the data durable before the rename publishes it; close runs whether or not fsync failed.
    int err = ::fsync(fd) == 0 ? 0 : errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err) {
        ::unlink(tmp.c_str());
        throw Error(fmt(path, ": fsync/close failed (", std::strerror(err),
                        "); the previous file, if any, is untouched; hint: ", write_hint(err)));
    }
    int rename_err = injected_fault(path, "rename", done);
    if (!rename_err && ::rename(tmp.c_str(), path.c_str()) != 0) rename_err = errno;
    if (rename_err) {
        ::unlink(tmp.c_str());
        throw Error(fmt(path, ": rename from ", tmp, " failed (", std::strerror(rename_err),
                        "); the previous file, if any, is untouched; hint: ", write_hint(rename_err)));
    }
    // Make the rename itself durable.
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    if (dir.empty()) dir = "/";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

SafeTensors parse_safetensors(const std::string& bytes, const std::string& file) {
    if (bytes.size() < 8)
        throw Error(fmt(file, ": not a safetensors file: expected at least 8 bytes (header length), got ",
                        bytes.size(), "; hint: the file is truncated or of another format"));
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
    if (header_len > kMaxHeaderBytes || header_len > bytes.size() - 8)
        throw Error(fmt(file, ": safetensors header length ", header_len, " exceeds the file (", bytes.size(),
                        " bytes) or the 100 MB limit; hint: the file is truncated or not a safetensors file"));
    // nlohmann::json stops at a NUL byte as if the input ended there; the format pads the header with spaces only,
    // so a NUL means the header is damaged (and would otherwise hide whatever follows it).
    if (const size_t nul = std::string_view(bytes).substr(8, header_len).find('\0'); nul != std::string_view::npos)
        throw Error(fmt(file, ": safetensors header contains a NUL byte at offset ", 8 + nul,
                        "; hint: the file is corrupt"));
    // A key twice in one object (a tensor name, a metadata key): JSON leaves the meaning open and the parser would
    // keep the last, so a file could say two things; the keys of each object are collected while parsing.
    std::vector<std::set<std::string>> keys_of_open;   // one set per object being parsed
    std::string duplicate;
    const nlohmann::json::parser_callback_t note_keys = [&](int, nlohmann::json::parse_event_t event,
                                                            nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (event == E::object_start) keys_of_open.emplace_back();
        else if (event == E::object_end && !keys_of_open.empty()) keys_of_open.pop_back();
        else if (event == E::key && !keys_of_open.empty() && !keys_of_open.back().insert(parsed.get<std::string>()).second &&
                 duplicate.empty())
            duplicate = parsed.get<std::string>();
        return true;
    };
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(header_len),
                                       note_keys);
    } catch (const nlohmann::json::exception& e) {
        throw Error(fmt(file, ": safetensors header is not valid JSON (", e.what(), ")", kCorrupt));
    }
    if (!duplicate.empty())
        throw Error(fmt(file, ": safetensors header has the key '", duplicate, "' twice; expected each tensor name "
                        "and metadata key once", kCorrupt));
    if (!header.is_object())
        throw Error(fmt(file, ": safetensors header must be a JSON object, got ", header.type_name(), kCorrupt));

    const uint64_t data_begin = 8 + header_len;
    const uint64_t data_size = bytes.size() - data_begin;
    SafeTensors out;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object())
                throw Error(
                    fmt(file, ": __metadata__ must be an object of strings, got ", entry.type_name(), kCorrupt));
            for (const auto& [k, v] : entry.items()) {
                if (!v.is_string())
                    throw Error(fmt(file, ": __metadata__[", k, "] must be a string, got ", v.type_name(), kCorrupt));
                out.metadata[k] = v.get<std::string>();
            }
            continue;
        }
        const std::string where = fmt(file, ": tensor '", name, "'");
        if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
            !entry.contains("data_offsets"))
            throw Error(fmt(where, ": expected {dtype, shape, data_offsets}, got ", entry.dump().substr(0, 200),
                            kCorrupt));
        const auto& jd = entry["dtype"];
        const FileDType* file_dtype = jd.is_string() ? parse_st_dtype(jd.get<std::string>()) : nullptr;
        if (!file_dtype)
            throw Error(fmt(where, ": unsupported dtype ", jd.dump(), "; hint: razor reads F32, F16, BF16, F64 (as "
                            "F32), I64 and U8 (save other tensors as float32 or int64)"));
        const DType dtype = file_dtype->dtype;
        const auto& js = entry["shape"];
        if (!js.is_array() || js.size() > 8)
            throw Error(fmt(where, ": shape must be an array of at most 8 dims, got ", js.dump().substr(0, 200),
                            kCorrupt));
        // A zero-sized dimension makes the tensor empty whatever the others are (PyTorch writes shape [0, 3] in a
        // file of a few bytes), so the data-size bound applies to the element count, not to each dimension; the
        // non-zero dimensions are bounded by 2^62 so that every stride stays an int64.
        constexpr uint64_t kMaxElementsAnyShape = uint64_t{1} << 62;
        Shape shape;
        uint64_t nonzero = 1;
        bool empty = false;
        for (const auto& d : js) {
            if (!d.is_number_unsigned())
                throw Error(fmt(where, ": shape ", js.dump(), " has a non-integer entry; expected non-negative integers",
                                kCorrupt));
            const uint64_t v = d.get<uint64_t>();
            if (v == 0) {
                empty = true;
            } else {
                if (v > kMaxElementsAnyShape || nonzero > kMaxElementsAnyShape / v)
                    throw Error(fmt(where, ": shape ", js.dump(), " has more than 2^62 elements without its zero "
                                    "dimensions; hint: the header is corrupt"));
                nonzero *= v;
            }
            shape.push_back(static_cast<int64_t>(v));
        }
        const uint64_t numel = empty ? 0 : nonzero;
        if (numel > data_size)
            throw Error(fmt(where, ": shape ", js.dump(), " is larger than the file's data (", data_size,
                            " bytes); hint: the header is corrupt or the file truncated"));
        const auto& jo = entry["data_offsets"];
        if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
            throw Error(fmt(where, ": data_offsets must be [begin, end], got ", jo.dump().substr(0, 200), kCorrupt));
        const uint64_t begin = jo[0].get<uint64_t>(), end = jo[1].get<uint64_t>();
        const uint64_t expected = numel * file_dtype->size;
        if (begin > end || end > data_size)
            throw Error(fmt(where, ": data_offsets [", begin, ", ", end, "] fall outside the data section of ",
                            data_size, " bytes; hint: the file is truncated"));
        if (end - begin != expected)
            throw Error(fmt(where, ": shape ", shape_str(shape), " ", file_dtype->name, " needs ", expected,
                            " bytes, data_offsets give ", end - begin, "; hint: the header is corrupt"));
        ranges.emplace_back(begin, end);
        Tensor t = Tensor::empty(shape, dtype);
        const char* src = bytes.data() + data_begin + begin;
        if (file_dtype->size != dtype_size(dtype)) widen_to_f32(*file_dtype, src, t.f32(), numel);
        else if (expected) std::memcpy(t.storage()->data, src, expected);
        out.tensors.emplace(name, std::move(t));
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second && ranges[i].first != ranges[i].second)
            throw Error(fmt(file, ": two tensors' data_offsets overlap at byte ", ranges[i].first,
                            "; hint: the file is corrupt"));
    return out;
}

SafeTensors load_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

std::string serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();   // "{}" when empty, not "null"
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    std::vector<Tensor> packed;
    for (const auto& [name, t] : tensors) {
        Tensor c = t.contiguous();
        header[name] = {{"dtype", st_dtype(c.dtype())}, {"shape", c.shape()}, {"data_offsets", {offset, offset + c.nbytes()}}};
        offset += c.nbytes();
        packed.push_back(c);
    }
    std::string json = header.dump();
    while ((json.size() + 8) % 8 != 0) json += ' ';   // align the data section to 8 bytes
    std::string out(8, '\0');
    uint64_t len = json.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    out += json;
    for (const Tensor& c : packed)
        out.append(static_cast<const char*>(c.storage()->data) + c.offset() * dtype_size(c.dtype()), c.nbytes());
    return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

}  // namespace razor
