// train/checkpoint.cpp -- see checkpoint.h.
#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "core/anomaly.h"
#include "core/check.h"
#include "core/pytorch_file.h"
#include "core/safetensors.h"

namespace razor::train {
namespace fs = std::filesystem;

namespace {

// Makes the renames inside `folder` durable (a directory's entries are flushed by fsync on the directory).
void fsync_folder(const fs::path& folder) {
    int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

// A fresh id per written pair: process, clock and a counter, so two saves in one second still differ.
std::string new_pair_id() {
    static std::atomic<uint64_t> counter{0};
    const auto ns = std::chrono::system_clock::now().time_since_epoch() / std::chrono::nanoseconds(1);
    return fmt(::getpid(), "-", ns, "-", counter++);
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs::rename(from, to, ec);
    if (ec)
        throw Error(fmt("checkpoint: cannot rename ", from.string(), " to ", to.string(), " (", ec.message(),
                        "); hint: check that ", to.parent_path().string(), " is writable"));
}

// A checkpoint is only written from finite weights (razor train stops, or skips the step, before a NaN reaches them),
// so a NaN or Inf here means a damaged or foreign file; training or evaluating from it would be silently wrong.
void check_finite(const std::map<std::string, Tensor>& tensors, const std::string& file) {
    for (const auto& [name, t] : tensors) {
        const NonFiniteCount c = count_nonfinite(t);
        if (c.any())
            throw Error(fmt("checkpoint: ", file, ": tensor '", name, "' ", shape_str(t.shape()),
                            ": expected finite values, got ", c.nan, " NaN and ", c.inf,
                            " Inf; hint: the run that wrote it diverged or the file was edited; use an earlier "
                            "checkpoint (last.old, best/) or train again with a lower --lr"));
    }
}

bool has_pair(const fs::path& folder) {
    return fs::is_regular_file(folder / kModelFile) && fs::is_regular_file(folder / kTrainStateFile);
}

}  // namespace

void save_checkpoint(const std::string& root, const std::string& name, const Checkpoint& checkpoint) {
    const fs::path dir = fs::path(root) / name, old = fs::path(root) / (name + ".old"),
                   tmp = fs::path(root) / fmt(".", name, ".tmp.", ::getpid());
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw Error(fmt("checkpoint: cannot create ", root, " (", ec.message(), "); hint: check --out"));
    // Temporary folders of earlier writers of NAME that were killed mid-save (other pids): nobody reads them.
    const std::string tmp_prefix = fmt(".", name, ".tmp.");
    for (const auto& entry : fs::directory_iterator(root, ec))
        if (entry.path().filename().string().rfind(tmp_prefix, 0) == 0) fs::remove_all(entry.path(), ec);
    fs::remove_all(tmp, ec);
    fs::create_directory(tmp, ec);
    if (ec)
        throw Error(fmt("checkpoint: cannot create ", tmp.string(), " (", ec.message(), "); ", dir.string(),
                        " is untouched; hint: check that --out is writable and the disk not full"));

    // 1. Both files, complete and fsynced, in a folder nobody reads.
    auto model_meta = checkpoint.model_metadata, train_meta = checkpoint.train_metadata;
    const std::string pair = new_pair_id();
    model_meta["pair"] = train_meta["pair"] = pair;
    try {
        write_file_atomic((tmp / kModelFile).string(), serialize_safetensors(checkpoint.model, model_meta));
        write_file_atomic((tmp / kTrainStateFile).string(), serialize_safetensors(checkpoint.train_state, train_meta));
    } catch (const Error& e) {
        fs::remove_all(tmp, ec);
        throw Error(fmt("checkpoint: cannot write ", dir.string(), ": ", e.what(), " [", dir.string(),
                        ", the previous checkpoint, is untouched]"));
    }
    fsync_folder(tmp);

    // 2. The switch. Until tmp -> NAME lands, NAME.old (or an untouched NAME) holds the previous pair. A NAME.old left
    //    by an earlier crash is only removed while NAME is complete, i.e. never while it is the only good copy.
    if (fs::exists(dir)) {
        if (has_pair(dir)) fs::remove_all(old, ec);
        if (!fs::exists(old)) rename_or_throw(dir, old);
        else fs::remove_all(dir, ec);   // an incomplete NAME next to a good NAME.old: drop the broken one
    }
    rename_or_throw(tmp, dir);
    fsync_folder(root);
    fs::remove_all(old, ec);
}

Checkpoint load_checkpoint_folder(const std::string& folder) {
    Checkpoint c;
    c.folder = folder;
    const fs::path f(folder);
    if (!fs::is_directory(f))
        throw Error(fmt("checkpoint: ", folder, " is not a folder; hint: pass the run folder given to --out"));
    for (const char* file : {kModelFile, kTrainStateFile})
        if (!fs::is_regular_file(f / file))
            throw Error(fmt("checkpoint: ", folder, " has no ", file, " (expected ", kModelFile, " and ",
                            kTrainStateFile, "); hint: pass the run folder given to --out"));
    SafeTensors model = load_safetensors((f / kModelFile).string());
    SafeTensors train = load_safetensors((f / kTrainStateFile).string());
    const std::string a = model.metadata.count("pair") ? model.metadata.at("pair") : "(none)";
    const std::string b = train.metadata.count("pair") ? train.metadata.at("pair") : "(none)";
    if (a != b)
        throw Error(fmt("checkpoint: ", folder, ": ", kModelFile, " and ", kTrainStateFile,
                        " were not written together (pair ids ", a, " and ", b,
                        "); hint: the files were copied or edited by hand; use a folder razor wrote"));
    check_finite(model.tensors, (f / kModelFile).string());
    check_finite(train.tensors, (f / kTrainStateFile).string());
    c.model = std::move(model.tensors);
    c.model_metadata = std::move(model.metadata);
    c.train_state = std::move(train.tensors);
    c.train_metadata = std::move(train.metadata);
    return c;
}

Checkpoint load_checkpoint(const std::string& root, const std::string& name) {
    const fs::path dir = fs::path(root) / name, old = fs::path(root) / (name + ".old");
    std::string first_error;
    if (fs::exists(dir)) {
        try {
            return load_checkpoint_folder(dir.string());
        } catch (const Error& e) {
            if (!fs::exists(old)) throw;
            first_error = e.what();
        }
    }
    if (fs::exists(old)) {
        Checkpoint c = load_checkpoint_folder(old.string());
        std::fprintf(stderr, "razor: note: %s %s; using %s (written before an interrupted save)\n",
                     dir.string().c_str(), first_error.empty() ? "is missing" : "is incomplete", old.string().c_str());
        return c;
    }
    throw Error(fmt("checkpoint: no checkpoint in ", root, " (neither ", dir.string(), " nor ", old.string(),
                    " exists); hint: pass the folder a run wrote with --out"));
}

Checkpoint open_checkpoint(const std::string& path, bool model_only) {
    const fs::path p(path);
    if (!fs::exists(p))
        throw Error(fmt("checkpoint: ", path, " does not exist; hint: pass a run folder (--out of razor train), its "
                        "last/ or best/ folder, or a model.safetensors file"));
    if (fs::is_regular_file(p)) {
        if (!model_only)
            throw Error(fmt("checkpoint: ", path, " is a file; resuming needs a run folder (with last/); hint: pass "
                            "the folder given to --out"));
        SafeTensors st = load_weights_file(path);   // safetensors, or torch.save's .pth / .pt / .bin
        check_finite(st.tensors, path);
        Checkpoint c;
        c.model = std::move(st.tensors);
        c.model_metadata = std::move(st.metadata);
        c.folder = p.parent_path().string();
        return c;
    }
    if (fs::exists(p / "last") || fs::exists(p / "last.old")) return load_checkpoint(path, "last");
    if (model_only && fs::is_regular_file(p / kModelFile) && !fs::is_regular_file(p / kTrainStateFile))
        return open_checkpoint((p / kModelFile).string(), true);
    // A checkpoint folder itself (runs/x/last, runs/x/best): its .old sibling is the fallback.
    const fs::path norm = p.lexically_normal();
    const fs::path folder = norm.has_filename() ? norm : norm.parent_path();
    return load_checkpoint(folder.parent_path().empty() ? "." : folder.parent_path().string(), folder.filename().string());
}

}  // namespace razor::train
