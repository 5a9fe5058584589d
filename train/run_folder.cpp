// train/run_folder.cpp -- see run_folder.h.
#include "train/run_folder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/check.h"
#include "train/checkpoint.h"

namespace razor::train {
namespace fs = std::filesystem;

namespace {

// "(No such file or directory)" etc. for errno `e`.
std::string reason(int e) { return std::error_code(e, std::generic_category()).message(); }

// OUT exists as a folder (created when missing), else a razor::Error naming what it is.
void ensure_folder(const std::string& command, const std::string& out, const std::string& flag) {
    std::error_code ec;
    const fs::file_status st = fs::status(out, ec);
    if (ec && ec.value() != ENOENT)
        throw Error(fmt(command, ": ", flag, " ", out, " cannot be read (", ec.message(), "); expected a folder; hint: "
                        "check the path (a symlink loop, a missing permission) or pick another ", flag));
    if (fs::exists(st) && !fs::is_directory(st))
        throw Error(fmt(command, ": ", flag, " ", out, " is a file; expected a run folder; hint: pick another ", flag,
                        " (a folder razor creates or one it wrote before)"));
    if (!fs::exists(st)) {
        fs::create_directories(out, ec);
        if (ec)
            throw Error(fmt(command, ": cannot create the run folder ", flag, " ", out, " (", ec.message(),
                            "); hint: pick a ", flag, " in a writable folder"));
    }
}

}  // namespace

bool pid_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

RunLock::RunLock(const std::string& command, const std::string& out, const std::string& flag) {
    ensure_folder(command, out, flag);
    const std::string path = (fs::path(out) / kLockFile).string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
        throw Error(fmt(command, ": cannot create ", path, " (", reason(errno), "); expected a writable run folder; "
                        "hint: pick a ", flag, " you can write to"));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char buf[32] = {};
        const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
        ::close(fd_);
        fd_ = -1;
        if (e != EWOULDBLOCK)
            throw Error(fmt(command, ": cannot lock ", path, " (", reason(e), "); hint: pick another ", flag));
        const std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("unknown");
        throw Error(fmt(command, ": ", out, " is in use by another razor run (pid ", holder.substr(0, holder.find('\n')),
                        "); one run writes a run folder at a time; hint: wait for that run to end, or pick another ",
                        flag));
    }
    const std::string pid = fmt(::getpid(), "\n");
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        const int e = errno;
        ::close(fd_);
        fd_ = -1;
        throw Error(fmt(command, ": cannot write ", path, " (", reason(e), "); hint: check that ", flag, " ", out,
                        " is writable and the disk not full"));
    }
}

RunLock::~RunLock() {
    if (fd_ >= 0) ::close(fd_);   // releases the flock; the file stays (removing it would race a new owner)
}

std::vector<std::string> stale_asides(const std::string& out) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind(kAsidePrefix, 0) != 0) continue;
        const long pid = std::strtol(name.c_str() + std::strlen(kAsidePrefix), nullptr, 10);
        if (pid != ::getpid() && !pid_alive(pid)) found.push_back(e.path().string());
    }
    return found;
}

OverwrittenRun::OverwrittenRun(const std::string& command, const std::string& out,
                               const std::vector<std::string>& paths)
    : command_(command), aside_((fs::path(out) / fmt(kAsidePrefix, ::getpid())).string()) {
    std::error_code ec;
    const bool has_checkpoint = fs::exists(fs::path(out) / "last") || fs::exists(fs::path(out) / "last.old");
    for (const std::string& stale : stale_asides(out)) {
        if (!has_checkpoint && !fs::exists(aside_)) {
            fs_step("overwrite: take over " + stale);
            fs::rename(stale, aside_, ec);
        } else {
            fs_step("overwrite: remove " + stale);
            fs::remove_all(stale, ec);
        }
        if (ec)
            throw Error(fmt(command, ": cannot clean up ", stale, " (", ec.message(), "); hint: remove it by hand"));
    }
    int i = 0;
    for (const std::string& p : paths) {
        ++i;
        if (!fs::exists(fs::symlink_status(p))) continue;
        if (!fs::exists(aside_)) {
            fs::create_directory(aside_, ec);
            if (ec)
                throw Error(fmt(command, ": --overwrite cannot create ", aside_, " (", ec.message(),
                                "); hint: check that --out is writable"));
        }
        const fs::path to = fs::path(aside_) / fmt(i, "-", fs::path(p).filename().string());
        if (fs::exists(fs::symlink_status(to))) {   // the taken-over aside holds the old run's; p is a killed
            fs_step("overwrite: remove " + p);       // --overwrite run's output from before its first checkpoint
            fs::remove_all(p, ec);
        } else {
            fs_step("overwrite: move " + p);
            fs::rename(p, to, ec);
        }
        if (ec)
            throw Error(fmt(command, ": --overwrite cannot move ", p, " aside into ", aside_, " (", ec.message(),
                            "); nothing was deleted; hint: keep --log inside --out, or remove the old run by hand"));
    }
    i = 0;
    for (const std::string& p : paths) {
        const fs::path to = fs::path(aside_) / fmt(++i, "-", fs::path(p).filename().string());
        if (fs::exists(fs::symlink_status(to))) moved_.emplace_back(p, to.string());
    }
}

OverwrittenRun& OverwrittenRun::operator=(OverwrittenRun&& other) noexcept {
    command_ = std::move(other.command_), aside_ = std::move(other.aside_), moved_ = std::move(other.moved_);
    other.aside_.clear(), other.moved_.clear();
    return *this;
}

OverwrittenRun::~OverwrittenRun() {
    if (aside_.empty() || moved_.empty()) return;
    // The new run failed before its first checkpoint: the old run goes back where it was.
    std::error_code ec;
    for (const auto& [from, to] : moved_) {
        fs::remove_all(from, ec);
        fs::rename(to, from, ec);
        if (ec)
            std::fprintf(stderr, "%s: note: cannot move %s back to %s (%s); the old run is kept in %s\n",
                         command_.c_str(), to.c_str(), from.c_str(), ec.message().c_str(), aside_.c_str());
    }
    if (!ec) fs::remove_all(aside_, ec);
}

void OverwrittenRun::finish() {
    if (aside_.empty()) return;
    std::error_code ec;
    if (fs::exists(aside_)) {
        fs_step("overwrite: remove " + aside_);
        fs::remove_all(aside_, ec);
        moved_.clear();
        if (ec)
            std::fprintf(stderr, "%s: note: cannot remove %s (%s); the old run is kept there\n", command_.c_str(),
                         aside_.c_str(), ec.message().c_str());
    }
    aside_.clear();
}

}  // namespace razor::train
