// apps/resume.cpp -- see resume.h.
#include "apps/resume.h"

#include <cstdlib>
#include <filesystem>
#include <map>

#include "train/run_log.h"
#include "train/train_state.h"
#include "core/check.h"
#include "core/safetensors.h"

namespace razor::apps {
namespace fs = std::filesystem;

Args make_flag_args(const std::string& command, const std::string& summary, const std::vector<FlagSpec>& specs) {
    Args args(command, summary);
    for (const auto& f : specs) {
        if (f.boolean) args.boolean(f.name, f.help);
        else args.flag(f.name, f.value, f.help);
    }
    return args;
}

nlohmann::json run_config(const std::vector<FlagSpec>& specs, const Args& args) {
    nlohmann::json config = nlohmann::json::object();
    for (const auto& f : specs)
        if (std::string(f.name) != "resume") {
            train::require_utf8(fmt("--", f.name), args.str(f.name),
                                fmt("pass a path or name in UTF-8 (rename or link the file)"));
            config[f.name] = args.str(f.name);
        }
    return config;
}

bool same_flag_value(const std::string& a, const std::string& b) {
    if (a == b) return true;
    char *ea = nullptr, *eb = nullptr;
    const double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
    return !a.empty() && !b.empty() && *ea == '\0' && *eb == '\0' && x == y;
}

std::vector<std::string> reconcile_flags(const std::string& command, const std::vector<FlagSpec>& specs,
                                         const Args& given, const std::string& config_json,
                                         const std::string& resume, const std::string& root) {
    const std::map<std::string, std::string> stored = train::parse_run_config(config_json, fmt(command, ": ", resume));
    // A flag the run recorded that this command does not have: another command wrote the run (razor finetune's
    // --from and --freeze-bn), and continuing it here would silently drop what the flag did (BN frozen).
    std::string foreign;
    for (const auto& [name, value] : stored) {
        bool known = false;
        for (const auto& f : specs) known = known || name == f.name;
        if (!known) foreign += fmt(foreign.empty() ? "" : ", ", "--", name);
    }
    if (!foreign.empty())
        throw Error(fmt(command, ": ", resume, " was written by another command (its run has the flags ", foreign,
                        ", which ", command, " does not take); resuming here would drop them; hint: continue it with "
                        "the command that wrote it, e.g. ", stored.count("from") ? "razor finetune" : "razor train",
                        " --resume ", resume));
    std::vector<std::string> argv;
    for (const auto& f : specs) {
        const std::string name = f.name;
        if (name == "resume") continue;
        std::string value = stored.count(name) ? stored.at(name) : given.str(name);
        if (given.given(name)) {
            if (f.may_change_on_resume) value = given.str(name);
            else if (!same_flag_value(given.str(name), value))
                throw Error(fmt(command, ": --", name, " ", given.str(name), " differs from the resumed run's --", name,
                                " ", value.empty() ? "(empty)" : value,
                                "; hint: leave the flag out to continue the run as it was, or start a new run "
                                "with another --out"));
        } else if (name == "out") {
            value = root;   // continue writing where the checkpoint is
        } else if (name == "log" && !given.given("out")) {
            value = stored.count("log") ? stored.at("log") : "";
        }
        argv.push_back(fmt("--", name, "=", value));
    }
    argv.push_back(fmt("--resume=", resume));
    return argv;
}

ResumedRun resumed_run(const train::Checkpoint& checkpoint) {
    const auto config = checkpoint.train_metadata.find("config");
    const std::string root = std::filesystem::path(checkpoint.folder).parent_path().string();
    return {config == checkpoint.train_metadata.end() ? "" : config->second, root.empty() ? "." : root};
}

RunStart start_run(const std::string& command, const std::vector<FlagSpec>& specs, Args& parsed,
                   const std::string& written_by, const std::string& wrong_hint) {
    RunStart start;
    const std::string resume = parsed.str("resume");
    if (resume.empty()) return start;
    start.resuming = true;
    start.resumed = train::open_checkpoint(resume);
    if (!written_by.empty()) {
        auto it = start.resumed.train_metadata.find("command");
        if (it == start.resumed.train_metadata.end() || it->second != written_by)
            throw Error(fmt(command, ": ", start.resumed.folder, " was not written by razor ", written_by, wrong_hint));
    }
    const ResumedRun run = resumed_run(start.resumed);
    // --out B with --resume A continues A's run in B: only into A itself or an empty (or new) folder, never over
    // another run's files.
    if (parsed.given("out")) {
        const fs::path out(parsed.str("out"));
        std::error_code ec;
        const bool same = fs::exists(out, ec) && fs::equivalent(out, run.root, ec);
        if (!same && fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
            throw Error(fmt(command, ": --resume ", resume, " --out ", out.string(), ": ", out.string(),
                            " is not empty (it may hold another run); expected the resumed run's folder ", run.root,
                            " or an empty folder; hint: leave --out out to continue in ", run.root,
                            ", or pick an empty --out"));
    }
    const std::vector<std::string> argv = reconcile_flags(command, specs, parsed, run.config_json, resume, run.root);
    parsed.parse(argv);
    return start;
}

void refuse_used_out(const std::string& command, const std::string& out, bool overwrite,
                     const std::vector<std::string>& markers) {
    if (overwrite) return;
    for (const std::string& m : markers)
        if (fs::exists(fs::path(out) / m))
            throw Error(fmt(command, ": ", out, " already holds a run (", out, "/", m, "); hint: continue it with "
                            "--resume ", out, ", pick another --out, or pass --overwrite to start over"));
}

}  // namespace razor::apps
