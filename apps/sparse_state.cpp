// apps/sparse_state.cpp -- see sparse_state.h.
#include "apps/sparse_state.h"

#include <limits>

#include "core/core.h"
#include "train/subnet.h"
#include "train/train_state.h"

namespace razor::apps {
namespace {

constexpr const char* kCmd = "razor sparse-train";

// Phase A's resampling position: "vrpge.steps" (the phase-A steps taken) and, inside an interval (--resample-every
// N > 1, steps % N != 0), its mask in "interval.counts" / "interval.kept". A checkpoint written before
// --resample-every existed has no "vrpge.steps"; it can only be a run with N = 1, where every step resamples and the
// count decides nothing.
void restore_interval(train::VrpgeTrainer& trainer, const std::map<std::string, Tensor>& state,
                      const std::string& where) {
    if (!state.count("vrpge.steps") && trainer.resample_every == 1) return;
    const int64_t steps =
        train::state_i64(state, "vrpge.steps", where, 0, std::numeric_limits<int64_t>::max());
    models::ChannelPlan interval;
    if (steps % trainer.resample_every != 0)
        interval = train::unpack_plan(state, where, trainer.scores.layers(), "interval");
    trainer.resume_at(steps, std::move(interval));
}

}  // namespace

SparsePosition restore_sparse_state(const train::Checkpoint& ck, const SparseOptions& o, nn::Module& model, train::VrpgeTrainer& trainer,
                 optim::SGD& ft, Generator& gen, Generator& masks) {
    const std::string where = ck.folder + "/" + train::kTrainStateFile;
    const auto& state = ck.train_state;
    try {
        model.load_state_dict(ck.model);
    } catch (const Error& e) {
        throw Error(fmt(kCmd, ": ", ck.folder, "/", train::kModelFile, " does not fit --model ", o.model, ": ", e.what()));
    }
    SparsePosition p;
    p.in_b = train::state_i64(state, "phase", where, 0, 1) == 1;
    p.a_done = train::state_i64(state, "epoch", where, p.in_b ? o.epochs : 0, o.epochs);
    train::restore_scores(trainer.scores, state, where);
    try {
        if (p.in_b) {
            p.b_done = train::state_i64(state, "finetune_epoch", where, 0, o.finetune_epochs);
            p.best_epoch = train::state_i64(state, "best_epoch", where, 0, p.b_done);
            p.best_acc = optim::unpack_f64(train::state_entry(state, "best_test_acc", where), where + ": best_test_acc");
            p.last_acc = optim::unpack_f64(train::state_entry(state, "last_test_acc", where), where + ": last_test_acc");
            p.plan = train::unpack_plan(state, where, trainer.scores.layers());
            ft.load_state_dict(train::state_with_prefix(state, "optimizer_ft."));
        } else {
            trainer.opt_s.load_state_dict(train::state_with_prefix(state, "optimizer_s."));
            trainer.opt_w.load_state_dict(train::state_with_prefix(state, "optimizer_w."));
            restore_interval(trainer, state, where);
        }
    } catch (const Error& e) {
        throw Error(fmt(where, ": ", e.what()));
    }
    default_generator().set_state(train::state_generator(state, "rng.default", where));
    gen.set_state(train::state_generator(state, "rng.init", where));
    masks.set_state(train::state_generator(state, "rng.masks", where));
    return p;
}

train::Checkpoint sparse_checkpoint(const SparsePosition& p, const SparseOptions& o, nn::Module& model,
                                    const train::VrpgeTrainer& trainer, const optim::SGD& ft, const Generator& gen,
                                    const Generator& masks, const std::map<std::string, std::string>& meta,
                                    const std::string& config_json) {
    train::Checkpoint ck;
    const int64_t position = p.in_b ? o.epochs + p.b_done : p.a_done;   // epochs of the run done
    ck.model = model.state_dict();
    ck.model_metadata = meta;
    ck.model_metadata["epoch"] = fmt(position);
    auto& st = ck.train_state;
    for (const auto& [k, s] : trainer.scores.named_parameters()) st["scores." + k] = s.detach();
    if (p.in_b) {
        for (const auto& [k, v] : ft.state_dict()) st["optimizer_ft." + k] = v;
        train::pack_plan(p.plan, trainer.scores.layers(), st);
        st["finetune_epoch"] = train::i64_scalar(p.b_done);
        st["best_epoch"] = train::i64_scalar(p.best_epoch);
        st["best_test_acc"] = optim::pack_f64(p.best_acc);
        st["last_test_acc"] = optim::pack_f64(p.last_acc);
    } else {
        for (const auto& [k, v] : trainer.opt_s.state_dict()) st["optimizer_s." + k] = v;
        for (const auto& [k, v] : trainer.opt_w.state_dict()) st["optimizer_w." + k] = v;
        st["vrpge.steps"] = train::i64_scalar(trainer.steps_done());
        if (!trainer.resamples_next()) train::pack_plan(trainer.interval(), trainer.scores.layers(), st, "interval");
    }
    st["phase"] = train::i64_scalar(p.in_b ? 1 : 0);
    st["epoch"] = train::i64_scalar(p.a_done);
    st["rng.default"] = train::pack_generator_state(default_generator().state());
    st["rng.init"] = train::pack_generator_state(gen.state());
    st["rng.masks"] = train::pack_generator_state(masks.state());
    ck.train_metadata = {{"command", "sparse-train"}, {"config", config_json}, {"epoch", fmt(position)},
                         {"phase", p.in_b ? "B" : "A"}};
    return ck;
}

}  // namespace razor::apps
