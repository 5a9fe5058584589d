// train/train_state.cpp -- see train_state.h.
#include "train/train_state.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/rng.h"

namespace razor::train {
namespace {

constexpr const char* kHint = "hint: resume from a folder razor train, finetune or sparse-train wrote";

}  // namespace

const Tensor& state_entry(const std::map<std::string, Tensor>& state, const std::string& key, const std::string& where) {
    auto it = state.find(key);
    if (it == state.end()) throw Error(fmt(where, ": no entry '", key, "'; ", kHint));
    return it->second;
}

int64_t state_i64(const std::map<std::string, Tensor>& state, const std::string& key, const std::string& where,
               int64_t lo, int64_t hi) {
    const Tensor& t = state_entry(state, key, where);
    if (t.dtype() != DType::I64 || t.numel() != 1)
        throw Error(fmt(where, ": entry '", key, "' must be one i64 value, got ", dtype_name(t.dtype()), " ",
                        shape_str(t.shape()), "; ", kHint));
    const int64_t v = t.to_vector_i64()[0];
    if (v < lo || v > hi)
        throw Error(fmt(where, ": entry '", key, "' must be in [", lo, ", ", hi, "], got ", v, "; ", kHint));
    return v;
}

std::array<uint64_t, 4> state_generator(const std::map<std::string, Tensor>& state, const std::string& key,
                                        const std::string& where) {
    const Tensor& t = state_entry(state, key, where);
    if (t.dtype() != DType::I64 || t.numel() != 4)
        throw Error(fmt(where, ": entry '", key, "' must be a generator state (4 x i64), got ", dtype_name(t.dtype()),
                        " ", shape_str(t.shape()), "; ", kHint));
    std::array<uint64_t, 4> s{};
    const auto v = t.to_vector_i64();
    for (int i = 0; i < 4; ++i) s[i] = static_cast<uint64_t>(v[i]);
    if (s == std::array<uint64_t, 4>{})
        throw Error(
            fmt(where, ": entry '", key, "' is an all-zero generator state (xoshiro cannot leave it); ", kHint));
    return s;
}

std::map<std::string, Tensor> state_with_prefix(const std::map<std::string, Tensor>& state, const std::string& prefix) {
    std::map<std::string, Tensor> out;
    for (const auto& [k, v] : state)
        if (k.rfind(prefix, 0) == 0) out.emplace(k.substr(prefix.size()), v);
    return out;
}

std::map<std::string, std::string> parse_run_config(const std::string& json_text, const std::string& where) {
    nlohmann::json stored;
    try {
        stored = nlohmann::json::parse(json_text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(fmt(where, ": the run config (metadata 'config') is not JSON (", e.what(), "); ", kHint));
    }
    if (!stored.is_object())
        throw Error(fmt(where, ": the run config (metadata 'config') must be a JSON object, got ", stored.type_name(),
                        "; ", kHint));
    std::map<std::string, std::string> flags;
    for (const auto& [name, value] : stored.items()) {
        if (!value.is_string())
            throw Error(fmt(where, ": the run config's flag '", name, "' must be a string, got ", value.type_name(),
                            "; ", kHint));
        flags[name] = value.get<std::string>();
    }
    return flags;
}

ResumePoint restore_train_state(const std::map<std::string, Tensor>& state, const std::string& where,
                                optim::Optimizer& opt, optim::LRScheduler* sched, Generator& init_gen) {
    // Everything but the optimizer's and scheduler's entries is checked first; those two check their own entries
    // before they change anything.
    constexpr int64_t kMax = int64_t{1} << 53;   // positions beyond this are no real run's
    ResumePoint p;
    p.epoch = state_i64(state, "epoch", where, 0, kMax);
    p.step = state_i64(state, "step", where, 0, kMax);
    p.best_epoch = state_i64(state, "best_epoch", where, 0, p.epoch);
    p.best_test_acc = optim::unpack_f64(state_entry(state, "best_test_acc", where), where + ": best_test_acc");
    if (!(p.best_test_acc == -1 || (p.best_test_acc >= 0 && p.best_test_acc <= 1)))
        throw Error(fmt(where, ": entry 'best_test_acc' must be -1 (none yet) or an accuracy in [0, 1], got ",
                        p.best_test_acc, "; ", kHint));
    const auto rng_default = state_generator(state, "rng.default", where);
    const auto rng_init = state_generator(state, "rng.init", where);
    try {
        opt.load_state_dict(state_with_prefix(state, "optimizer."));
        if (sched) sched->load_state_dict(state_with_prefix(state, "scheduler."));
    } catch (const Error& e) {
        throw Error(fmt(where, ": ", e.what()));
    }
    default_generator().set_state(rng_default);
    init_gen.set_state(rng_init);
    return p;
}

void check_resumed_optimizer(const std::map<std::string, Tensor>& state,
                             const std::map<std::string, std::string>& train_metadata, const optim::Optimizer& opt,
                             const std::string& where) {
    constexpr const char* kBad = "hint: the checkpoint was edited or damaged; resume from last.old/ or best/, or "
                                 "start a new run with another --out";
    for (size_t g = 0; g < opt.num_groups(); ++g) {
        for (const std::string& field : opt.option_names()) {
            const double v = opt.option(g, field);
            if (!std::isfinite(v))
                throw Error(fmt(where, ": optimizer option param_groups.", g, ".", field, " is ", v,
                                "; expected a finite value; ", kBad));
        }
        if (opt.lr(g) < 0)
            throw Error(fmt(where, ": optimizer lr (param_groups.", g, ".lr) is ", opt.lr(g), "; expected >= 0 for "
                            "a run that trains on (--lr sets it for a new run); ", kBad));
        const std::string m = opt.momentum_option();
        if (!m.empty() && !(opt.momentum(g) >= 0 && opt.momentum(g) <= 1))
            throw Error(fmt(where, ": optimizer ", m, " (param_groups.", g, ".", m, ") is ", opt.momentum(g),
                            "; expected a value in [0, 1] (--momentum for a new run); ", kBad));
    }
    // "<param>.<slot>" entries: every parameter with state holds every slot any parameter holds.
    std::map<std::string, std::set<std::string>> slots_of;   // slot -> parameters
    std::set<std::string> params;
    int64_t entries = 0;
    for (const auto& [key, t] : state) {
        if (key.rfind("optimizer.", 0) != 0) continue;
        ++entries;
        const std::string k = key.substr(10);
        if (k.rfind("param_groups.", 0) == 0) continue;
        const size_t dot = k.rfind('.');
        if (dot == std::string::npos) continue;
        slots_of[k.substr(dot + 1)].insert(k.substr(0, dot));
        params.insert(k.substr(0, dot));
    }
    for (const auto& [slot, have] : slots_of)
        for (const std::string& p : params)
            if (!have.count(p))
                throw Error(fmt(where, ": optimizer state 'optimizer.", p, ".", slot, "' is missing (", have.size(),
                                " of ", params.size(), " parameters hold a ", slot, "); a missing buffer would "
                                "restart at zero and the resume would not be exact; ", kBad));
    if (auto it = train_metadata.find("optimizer_entries"); it != train_metadata.end()) {
        char* end = nullptr;
        const long long saved = std::strtoll(it->second.c_str(), &end, 10);
        if (it->second.empty() || *end != '\0' || saved != entries)
            throw Error(fmt(where, ": holds ", entries, " optimizer entries, but the run saved ", it->second,
                            " (metadata optimizer_entries); optimizer state is missing (momentum buffers would "
                            "restart at zero and the resume would not be exact); ", kBad));
    }
}

Tensor pack_generator_state(const std::array<uint64_t, 4>& s) {
    std::vector<int64_t> v;
    for (uint64_t x : s) v.push_back(static_cast<int64_t>(x));
    return Tensor::from_vector_i64({4}, v);
}

Tensor i64_scalar(int64_t v) { return Tensor::from_vector_i64({}, {v}); }

Checkpoint dense_checkpoint(const FitPosition& p, const DenseRun& run) {
    Checkpoint ck;
    ck.model = run.model.state_dict();
    ck.model_metadata = run.model_metadata;
    ck.model_metadata["epoch"] = fmt(p.epoch);
    const auto opt_state = run.opt.state_dict();
    for (const auto& [k, v] : opt_state) ck.train_state["optimizer." + k] = v;
    if (run.sched)
        for (const auto& [k, v] : run.sched->state_dict()) ck.train_state["scheduler." + k] = v;
    ck.train_state["epoch"] = i64_scalar(p.epoch);
    ck.train_state["step"] = i64_scalar(p.global_step);
    ck.train_state["rng.default"] = pack_generator_state(default_generator().state());
    ck.train_state["rng.init"] = pack_generator_state(run.init_gen.state());
    ck.train_state["loader.seed"] = i64_scalar(run.loader_seed);
    ck.train_state["loader.epoch"] = i64_scalar(p.epoch);   // the next (or running) epoch's index, 0-based
    ck.train_state["best_test_acc"] = optim::pack_f64(p.best_acc);
    ck.train_state["best_epoch"] = i64_scalar(p.best_epoch);
    ck.train_metadata = {{"config", run.config_json}, {"epoch", fmt(p.epoch)}, {"step", fmt(p.global_step)},
                         {"optimizer", run.opt.type_name()},
                         {"scheduler", run.sched ? run.sched->type_name() : "none"},
                         {"optimizer_entries", fmt(opt_state.size())}};
    if (!run.param_groups.empty()) ck.train_metadata["param_groups"] = run.param_groups;
    return ck;
}

}  // namespace razor::train
