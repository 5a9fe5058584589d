// core/pytorch_file.cpp -- torch.save zip archives through libzip and the restricted unpickler (see pytorch_file.h).
#include "core/pytorch_file.h"

#include <zip.h>

#include <cstring>
#include <fstream>
#include <memory>

#include "core/check.h"
#include "core/pickle.h"

namespace razor {
namespace {

constexpr uint64_t kMaxPickleBytes = 1ull << 30;

// torch.save before PyTorch 1.6 (and with _use_new_zipfile_serialization=False) starts with this pickled magic number.
constexpr char kLegacyMagic[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

std::string resave_hint(const std::string& source) {
    return fmt("if you trust the file, re-save it in the current format with Debian's python3-torch: python3 -c "
               "\"import torch; torch.save(torch.load('", source, "', map_location='cpu'), 'resaved.pth')\"");
}

struct ZipCloser {
    void operator()(zip_t* z) const { zip_discard(z); }
};
using Zip = std::unique_ptr<zip_t, ZipCloser>;

std::string zip_reason(zip_error_t* error) { return zip_error_strerror(error); }

// The bytes of entry `index`, which must hold exactly `expected` bytes (or any size when expected < 0).
std::string read_entry(zip_t* zip, zip_uint64_t index, int64_t expected, const std::string& source) {
    zip_stat_t st;
    zip_stat_init(&st);
    const char* name = zip_get_name(zip, index, ZIP_FL_ENC_RAW);
    const std::string entry = name ? name : "?";
    if (zip_stat_index(zip, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        throw Error(fmt(source, ": cannot read the size of archive entry '", entry, "' (",
                        zip_reason(zip_get_error(zip)), "); hint: the file is corrupt -- download it again"));
    if (expected >= 0 && st.size != static_cast<zip_uint64_t>(expected))
        throw Error(fmt(source, ": archive entry '", entry, "' holds ", st.size, " bytes, the pickle expects ", expected,
                        "; hint: the file is corrupt or was written by a tool razor does not know"));
    if (expected < 0 && st.size > kMaxPickleBytes)
        throw Error(fmt(source, ": archive entry '", entry, "' is ", st.size, " bytes, larger than any state dict's "
                        "pickle; hint: the file is not a torch.save checkpoint"));
    std::string bytes(st.size, '\0');
    zip_file_t* file = zip_fopen_index(zip, index, 0);
    if (!file)
        throw Error(fmt(source, ": cannot open archive entry '", entry, "' (", zip_reason(zip_get_error(zip)),
                        "); hint: the file is corrupt or truncated -- download it again"));
    zip_uint64_t done = 0;
    while (done < st.size) {
        const zip_int64_t n = zip_fread(file, bytes.data() + done, st.size - done);
        if (n <= 0) {
            const std::string reason = zip_reason(zip_file_get_error(file));
            zip_fclose(file);
            throw Error(fmt(source, ": archive entry '", entry, "' ends after ", done, " of ", st.size, " bytes (",
                            reason, "); hint: the file is truncated or corrupt -- download it again"));
        }
        done += static_cast<zip_uint64_t>(n);
    }
    zip_fclose(file);
    return bytes;
}

SafeTensors parse_archive(zip_t* zip, const std::string& source) {
    // The record prefix: the folder of "<prefix>/data.pkl" (torch.save names it after the file).
    const zip_int64_t entries = zip_get_num_entries(zip, 0);
    std::string prefix;
    zip_int64_t pickle_index = -1;
    bool torchscript = false;
    for (zip_int64_t i = 0; i < entries; ++i) {
        const char* raw = zip_get_name(zip, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
        if (!raw) continue;
        const std::string name = raw;
        const size_t slash = name.find('/');
        if (slash == std::string::npos) continue;
        const std::string rest = name.substr(slash + 1);
        if (rest == "constants.pkl" || rest.rfind("code/", 0) == 0) torchscript = true;
        if (rest == "data.pkl" && pickle_index < 0) pickle_index = i, prefix = name.substr(0, slash + 1);
    }
    if (torchscript)
        throw Error(fmt(source, ": a TorchScript archive (torch.jit.save), not a torch.save state dict; hint: load it "
                        "in Python and save the weights: python3 -c \"import torch; torch.save(torch.jit.load('", source,
                        "').state_dict(), 'weights.pth')\""));
    if (pickle_index < 0)
        throw Error(fmt(source, ": a zip archive without a '<name>/data.pkl' entry, so not a torch.save file; hint: "
                        "razor reads .pth/.pt/.bin files written by torch.save and .safetensors files"));
    if (zip_int64_t bo = zip_name_locate(zip, (prefix + "byteorder").c_str(), 0); bo >= 0) {
        const std::string order = read_entry(zip, static_cast<zip_uint64_t>(bo), -1, source);
        if (order != "little")
            throw Error(fmt(source, ": byte order '", order, "', razor reads little-endian files; hint: re-save it "
                            "on a little-endian machine"));
    }
    const std::string pickle_bytes = read_entry(zip, static_cast<zip_uint64_t>(pickle_index), -1, source);

    const pickle::StorageLoader load = [&](const pickle::StorageRef& ref) {
        const std::string entry = prefix + "data/" + ref.key;
        const zip_int64_t index = zip_name_locate(zip, entry.c_str(), 0);
        if (index < 0)
            throw Error(fmt(source, ": the pickle names storage '", ref.key, "' but the archive has no entry '", entry,
                            "'; hint: the file is truncated or corrupt -- download it again"));
        if (ref.numel > (int64_t{1} << 40))
            throw Error(fmt(source, ": storage '", ref.key, "' claims ", ref.numel, " elements; hint: the file is corrupt"));
        const int64_t bytes = ref.numel * static_cast<int64_t>(pickle::storage_element_size(ref.type));
        return std::make_shared<const std::string>(read_entry(zip, static_cast<zip_uint64_t>(index), bytes, source));
    };
    const pickle::Unpickled parsed = pickle::unpickle(pickle_bytes, source + " (" + prefix + "data.pkl)", load);

    // The state dict: the saved dict itself, or the one a training checkpoint keeps under a conventional key.
    const pickle::Value& root = parsed.root();
    if (root.kind != pickle::Value::Kind::Dict)
        throw Error(fmt(source, ": the saved object is a ", root.kind_name(), ", expected a state dict (a dict of "
                        "tensors); hint: save model.state_dict(), not the model"));
    const pickle::Value* dict = &root;
    std::string key_used;
    for (const char* key : {"state_dict", "model", "model_state_dict"}) {
        for (const auto& [k, v] : root.entries)
            if (k->kind == pickle::Value::Kind::String && k->text == key && v->kind == pickle::Value::Kind::Dict) {
                dict = v, key_used = key;
                break;
            }
        if (!key_used.empty()) break;
    }
    SafeTensors out;
    out.metadata = {{"format", "pytorch"}, {"state_dict_key", key_used}};
    for (const auto& [k, v] : dict->entries) {
        if (k->kind != pickle::Value::Kind::String)
            throw Error(fmt(source, ": a state-dict key is a ", k->kind_name(), ", expected a string; hint: razor reads "
                            "state dicts whose keys are parameter names"));
        if (v->kind != pickle::Value::Kind::Tensor)
            throw Error(fmt(source, ": state-dict entry '", k->text, "' is a ", v->kind_name(), ", expected a tensor",
                            key_used.empty() ? "" : fmt(" (in '", key_used, "')"),
                            "; hint: save model.state_dict(); a training checkpoint should keep it under 'state_dict'"));
        out.tensors[k->text] = v->tensor;
    }
    if (out.tensors.empty())
        throw Error(fmt(source, ": the state dict holds no tensors; hint: save model.state_dict() of a model with weights"));
    return out;
}

void check_not_legacy(std::string_view head, const std::string& source) {
    if (head.substr(0, sizeof kLegacyMagic - 1) == std::string_view(kLegacyMagic, sizeof kLegacyMagic - 1))
        throw Error(fmt(source, ": a PyTorch file in the legacy format (before PyTorch 1.6), which razor does not read; "
                        "hint: ", resave_hint(source)));
}

// The first bytes of a file (as many as the legacy magic number has), to tell the formats apart.
std::string file_head(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt(path, ": cannot open for reading (", std::strerror(errno), "); hint: check the path"));
    std::string head(sizeof kLegacyMagic - 1, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    return head;
}

}  // namespace

bool looks_like_zip(std::string_view bytes) { return bytes.substr(0, 4) == std::string_view("PK\x03\x04", 4); }

SafeTensors parse_pytorch(const std::string& bytes, const std::string& source) {
    check_not_legacy(bytes, source);
    if (!looks_like_zip(bytes))
        throw Error(fmt(source, ": not a zip archive, so not a torch.save file; hint: razor reads .pth/.pt/.bin files "
                        "written by torch.save (PyTorch >= 1.6) and .safetensors files"));
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
    if (!src) throw Error(fmt(source, ": ", zip_reason(&error)));
    Zip zip(zip_open_from_source(src, ZIP_RDONLY, &error));
    if (!zip) {
        zip_source_free(src);
        const std::string reason = zip_reason(&error);
        zip_error_fini(&error);
        throw Error(fmt(source, ": not a readable zip archive (", reason, "); hint: the file is truncated or corrupt "
                        "-- download it again"));
    }
    zip_error_fini(&error);
    return parse_archive(zip.get(), source);
}

SafeTensors load_pytorch(const std::string& path) {
    const std::string start = file_head(path);
    check_not_legacy(start, path);
    if (!looks_like_zip(start))
        throw Error(fmt(path, ": not a zip archive, so not a torch.save file; hint: razor reads .pth/.pt/.bin files "
                        "written by torch.save (PyTorch >= 1.6) and .safetensors files"));
    int code = 0;
    Zip zip(zip_open(path.c_str(), ZIP_RDONLY, &code));
    if (!zip) {
        zip_error_t error;
        zip_error_init_with_code(&error, code);
        const std::string reason = zip_reason(&error);
        zip_error_fini(&error);
        throw Error(fmt(path, ": not a readable zip archive (", reason, "); hint: the file is truncated or corrupt -- "
                        "download it again"));
    }
    return parse_archive(zip.get(), path);
}

SafeTensors load_weights_file(const std::string& path) {
    const std::string start = file_head(path);
    if (looks_like_zip(start) || start.substr(0, 2) == std::string_view("\x80\x02", 2)) return load_pytorch(path);
    // a safetensors file: an 8-byte header length, then the JSON header's '{'
    if (start.size() < 9 || start[8] != '{')
        throw Error(fmt(path, ": not a weights file razor reads: neither safetensors (8-byte length, then a JSON "
                        "header) nor torch.save's zip archive (.pth, .pt, .bin); hint: check that the file is complete "
                        "(an interrupted download, or an HTML page saved in its place) and is the weights file"));
    return load_safetensors(path);
}

}  // namespace razor
