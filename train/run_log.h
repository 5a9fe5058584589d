// train/run_log.h -- a run's JSONL log (one JSON object per epoch or event) and the SVG curves drawn from it.
//
// reference: the log half of a PyTorch script that resumes (the log truncated to the saved epoch, then appended).
// docs: docs/cli.md "Checkpoints".
//
// A resumed run keeps the entries its checkpoint covers and drops the rest (an epoch a kill interrupted after its log
// line but before its checkpoint is redone and logged again, identically); a fresh run starts an empty log. Every
// write is flushed, so a killed run leaves at most a torn last line, which the next trim drops.
#pragma once

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/plot.h"

namespace razor::train {

// Rewrites the JSONL log at `path` (atomically) keeping only the entries `keep` accepts, in order, and returns them;
// `keep` empty (a fresh run) leaves an empty log. Unparsable lines (a torn last line of a killed run) are dropped.
std::vector<nlohmann::json> trim_log(const std::string& path, const std::function<bool(const nlohmann::json&)>& keep);

// Refuses (razor::Error naming the flag and the line) a `path` razor must not rewrite: a folder, or a file that is
// not a razor run log (a complete line that is not a JSON object; a torn last line is a killed run's and fine). With
// `fresh` (a new run), a non-empty log is refused unless `overwrite` (the caller then moves it aside). RunLog trims
// what it opens, so this is called before it: razor never truncates a file it did not write.
void check_log_path(const std::string& command, const std::string& path, bool fresh, bool overwrite);

// Refuses `text` that is not valid UTF-8, which JSON (the log, the checkpoints' metadata) cannot hold: razor::Error
// "WHAT '<text, bad bytes as \xNN>' is not valid UTF-8 (byte N); ... hint: HINT". Called at start-up on every flag
// value and class name a run writes, so a bad name stops the run before its first step, not at its first save.
void require_utf8(const std::string& what, const std::string& text, const std::string& hint);

// The curves of a run's entries against the epoch (fractional within an epoch), one panel each for
//   loss:      the smoothed per-step training loss (an entry's "curve", train/step_curve.h), the epoch means, and
//              "test_loss";
//   accuracy:  the same for training accuracy, and "test_acc" (sparse-train phase A: "test_acc_sampled");
//   lr:        the per-step lr (else the epoch's "lr"), on an axis from 0;
//   kept:      sparse-train's "expected_keep" (E[keep] of s) per phase A epoch, when any entry has one.
// Entries need "epoch" and "loss"; others (sparse-train's selection and export) are left out. Entries with a
// "phase" follow each other: phase B's epoch 1 comes after phase A's last.
class Curves {
public:
    void add(const nlohmann::json& entry);
    void write(const std::string& path) const;
    std::vector<Panel> panels() const;

private:
    Series loss_step_{"train (smoothed)", {}, {}}, loss_{"train (epoch)", {}, {}, true},
        test_loss_{"test", {}, {}, true}, acc_step_{"train (smoothed)", {}, {}}, train_{"train (epoch)", {}, {}, true},
        test_{"test", {}, {}, true}, lr_{"lr", {}, {}}, keep_{"E[keep]", {}, {}, true};
    std::string phase_;              // of the last entry
    double offset_ = 0, last_x_ = 0;   // epochs of earlier phases; the last entry's end
};

class RunLog {
public:
    // Trims `path` with `keep` (see trim_log) and opens it for appending. `plot_path` "" draws no curves; else every
    // write() redraws them there from the entries kept and written. `command` prefixes errors.
    RunLog(const std::string& command, const std::string& path, const std::function<bool(const nlohmann::json&)>& keep,
           const std::string& plot_path = "");
    void write(const nlohmann::json& entry);
    const std::string& path() const { return path_; }
    const std::string& plot_path() const { return plot_path_; }

private:
    std::string path_, plot_path_;
    std::ofstream out_;
    Curves curves_;
};

}  // namespace razor::train
