// train/run_folder.h -- a run folder (--out) is owned by one run: an exclusive lock for the whole run, and
// --overwrite that keeps the old run until the new one has its first checkpoint.
//
// reference: the lock file of git (index.lock) and of dlib's trainer sync file, done with an advisory flock(2) so a
// killed run releases it with its last file descriptor. docs: docs/cli.md "Run folders", docs/reliability.md.
//
//   OUT/.razor.lock            flock(LOCK_EX) held while the run lives; holds the owner's pid (for messages)
//   OUT/.overwritten.<pid>/    the run an --overwrite run replaces, moved aside until its first checkpoint lands
//
// Every filesystem problem (OUT is a file, a read-only folder, a symlink loop) is a razor::Error naming the path and
// a flag to change.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace razor::train {

constexpr const char* kLockFile = ".razor.lock";
constexpr const char* kAsidePrefix = ".overwritten.";

// Creates OUT when missing and holds its lock until destroyed. A second RunLock on OUT (this or another process)
// throws naming the holder's pid. `command` prefixes errors ("razor train"), `flag` names the folder's flag.
class RunLock {
public:
    RunLock(const std::string& command, const std::string& out, const std::string& flag = "--out");
    ~RunLock();
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;

private:
    int fd_ = -1;
};

// Whether process `pid` is alive (a pid of this machine).
bool pid_alive(long pid);

// What --overwrite moved aside: deleted by finish() (after the new run's first checkpoint). A run that fails before
// (an exception: a bad flag found late, a NaN loss) puts it back when destroyed, replacing what it wrote itself; a
// killed one leaves it in OUT/.overwritten.<pid>/ (checkpoints and log untouched), which the next --overwrite run
// takes over.
class OverwrittenRun {
public:
    OverwrittenRun() = default;
    ~OverwrittenRun();
    OverwrittenRun(OverwrittenRun&& other) noexcept { *this = std::move(other); }
    OverwrittenRun& operator=(OverwrittenRun&& other) noexcept;
    // Moves each of `paths` that exists (the old run's checkpoints, log and curves) into OUT/.overwritten.<pid>/.
    // An aside left by a killed --overwrite run is taken over when OUT holds no checkpoint (it is then the only copy
    // of the old run), else deleted.
    OverwrittenRun(const std::string& command, const std::string& out, const std::vector<std::string>& paths);
    void finish();   // deletes the aside (idempotent)
    const std::string& aside() const { return aside_; }

private:
    std::string command_, aside_;
    std::vector<std::pair<std::string, std::string>> moved_;   // (where it was, where it is in the aside)
};

// The asides of OUT whose --overwrite run is gone (for messages: "no checkpoint in OUT; OUT/.overwritten.123 holds
// the run an interrupted --overwrite replaced").
std::vector<std::string> stale_asides(const std::string& out);

}  // namespace razor::train
