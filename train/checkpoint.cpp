// train/checkpoint.cpp -- see checkpoint.h.
#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/anomaly.h"
#include "core/check.h"
#include "core/pytorch_file.h"
#include "core/safetensors.h"
#include "train/run_folder.h"

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

FsStepHook& fs_step_hook() {
    static FsStepHook hook;
    return hook;
}

// The pid of a temporary folder ".NAME.tmp.<pid>" (0 when the name does not end in a number).
long tmp_pid(const std::string& filename, const std::string& prefix) {
    char* end = nullptr;
    const long pid = std::strtol(filename.c_str() + prefix.size(), &end, 10);
    return end && *end == '\0' ? pid : 0;
}

void remove_step(const fs::path& p) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(p))) return;
    fs_step("remove " + p.string());
    fs::remove_all(p, ec);
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs_step("rename " + from.string() + " -> " + to.string());
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

}  // namespace

void set_fs_step_hook_for_testing(FsStepHook hook) { fs_step_hook() = std::move(hook); }

void fs_step(const std::string& step) {
    if (const FsStepHook& hook = fs_step_hook()) hook(step);
}

void save_checkpoint(const std::string& root, const std::string& name, const Checkpoint& checkpoint) {
    const fs::path dir = fs::path(root) / name, old = fs::path(root) / (name + ".old"),
                   tmp = fs::path(root) / fmt(".", name, ".tmp.", ::getpid());
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw Error(fmt("checkpoint: cannot create ", root, " (", ec.message(), "); hint: check --out"));
    // Temporary folders of earlier writers of NAME that were killed mid-save (dead pids): nobody reads them. A live
    // pid's is another process's save in progress (the run lock keeps razor runs apart; a library user may not).
    const std::string tmp_prefix = fmt(".", name, ".tmp.");
    for (const auto& entry : fs::directory_iterator(root, ec)) {
        const std::string f = entry.path().filename().string();
        if (f.rfind(tmp_prefix, 0) != 0) continue;
        const long pid = tmp_pid(f, tmp_prefix);
        if (pid != ::getpid() && pid_alive(pid)) continue;
        remove_step(entry.path());
    }
    remove_step(tmp);
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
    //    by an earlier crash is only removed once NAME was read back whole (pair ids, sizes, finite values), i.e.
    //    never while it is the only good copy; an incomplete NAME next to it is the one removed. Without a NAME.old
    //    (every save but the one after a crash) nothing is read back and nothing is removed before the switch.
    if (fs::exists(old)) {
        bool whole = false;
        if (fs::exists(dir)) {
            try {
                load_checkpoint_folder(dir.string());
                whole = true;
            } catch (const Error&) {
            }
        }
        remove_step(whole ? old : dir);
    }
    if (fs::exists(dir)) rename_or_throw(dir, old);
    rename_or_throw(tmp, dir);
    fsync_folder(root);
    remove_step(old);
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
    std::string aside;
    for (const std::string& a : stale_asides(root)) aside += fmt("; ", a, " holds the run an interrupted --overwrite "
                                                                 "was replacing (run with --overwrite again to start "
                                                                 "over, or move its folders back to resume it)");
    throw Error(fmt("checkpoint: no checkpoint in ", root, " (neither ", dir.string(), " nor ", old.string(),
                    " exists)", aside, "; hint: pass the folder a run wrote with --out"));
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
