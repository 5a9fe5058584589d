// apps/resume.h -- what the commands that continue a killed or stopped run share (razor train, finetune and
// sparse-train --resume): a flag table that says which flags may change on resume, reconciling the flags given now
// with the ones the checkpoint recorded, and the run-folder preamble (resume, or refuse a used --out). The log's
// trim is train/run_log.h.
//
// reference: a PyTorch script's resume block (args from the checkpoint, then the log truncated to the saved epoch).
// docs: docs/cli.md "Checkpoints", docs/reliability.md. The checkpoint files themselves: train/checkpoint.h (atomic
// writes) and train/train_state.h (checked readers).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/args.h"
#include "train/checkpoint.h"

namespace razor::apps {

struct FlagSpec {
    const char* name;
    const char* value;   // default
    const char* help;
    bool boolean = false;
    bool may_change_on_resume = false;   // does not change the computation (paths, threads, logging, stopping)
};

// The Args of `command` with every flag of `specs`, in order.
Args make_flag_args(const std::string& command, const std::string& summary, const std::vector<FlagSpec>& specs);

// The run's flags as metadata "config": every flag of `specs` but "resume", as strings.
nlohmann::json run_config(const std::vector<FlagSpec>& specs, const Args& args);

// On --resume: the argv to parse again -- the checkpoint's flags (config_json, metadata "config"), except those given
// now that may change; --out is the folder the checkpoint lies in (`root`), --resume=resume is kept. A given flag that
// may not change must equal the stored one (numbers compared by value: 0.10 == 0.1), else razor::Error names both
// values and a hint. `command` prefixes errors ("razor train").
std::vector<std::string> reconcile_flags(const std::string& command, const std::vector<FlagSpec>& specs,
                                         const Args& given, const std::string& config_json,
                                         const std::string& resume, const std::string& root);

// What --resume takes from the checkpoint it opened, for reconcile_flags: the flags the run recorded (metadata
// "config"; "" in a checkpoint without it) and the folder the checkpoint lies in ("." for a bare name).
struct ResumedRun {
    std::string config_json, root;
};
ResumedRun resumed_run(const train::Checkpoint& checkpoint);

// Whether two flag values are the same: equal strings, or the same number.
bool same_flag_value(const std::string& a, const std::string& b);

// The run-folder preamble of razor train, finetune and sparse-train, declared once. With --resume (in `parsed`):
// opens the checkpoint, refuses one another command wrote (`written_by` non-empty: its train metadata "command" must
// equal it, else the error says `wrong_hint`), and re-parses the checkpoint's flags reconciled with those given
// (reconcile_flags) into `parsed`. Without: refuses an `out` that holds any of `markers` (last/, last.old/, ...)
// unless `overwrite`. `command` prefixes errors ("razor train").
struct RunStart {
    bool resuming = false;
    train::Checkpoint resumed;   // what --resume opened
};
RunStart start_run(const std::string& command, const std::vector<FlagSpec>& specs, Args& parsed,
                   const std::string& written_by = "", const std::string& wrong_hint = "");
void refuse_used_out(const std::string& command, const std::string& out, bool overwrite,
                     const std::vector<std::string>& markers = {"last", "last.old"});

}  // namespace razor::apps
