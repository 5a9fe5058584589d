// apps/param_groups.cpp -- see param_groups.h.
#include "apps/param_groups.h"

#include <set>

#include "core/check.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace razor::apps {

bool skips_weight_decay(const std::string& name, const Tensor& p) {
    static const std::set<std::string> embeddings = {"cls_token", "class_token", "pos_embed", "pos_embedding",
                                                     "dist_token"};
    const size_t dot = name.rfind('.');
    const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
    return p.dim() <= 1 || last == "bias" || embeddings.count(last) > 0;
}

std::vector<GroupPlan> plan_param_groups(const nn::Module& model, const std::string& head, double head_lr_mult,
                                         bool decay_all) {
    const bool split_head = !head.empty() && head_lr_mult != 1;
    // [head?][no decay?]
    GroupPlan g[2][2];
    if (split_head) {
        g[0][0].role = "backbone", g[0][1].role = "backbone.no_decay", g[1][0].role = "head",
        g[1][1].role = "head.no_decay";
    } else {
        g[0][0].role = decay_all ? "all" : "decay", g[0][1].role = "no_decay";
    }
    g[1][0].lr_mult = g[1][1].lr_mult = head_lr_mult;
    g[0][1].decay = g[1][1].decay = false;
    for (const auto& [name, p] : model.named_parameters()) {
        if (!p.requires_grad()) continue;
        const bool in_head = split_head && name.rfind(head + ".", 0) == 0;
        const bool no_decay = !decay_all && skips_weight_decay(name, p);
        g[in_head][no_decay].params.emplace_back(name, p);
    }
    std::vector<GroupPlan> out;
    for (auto& h : g)
        for (auto& plan : h)
            if (!plan.params.empty()) out.push_back(std::move(plan));
    return out;
}

namespace {

template <class Options>
std::vector<optim::ParamGroup<Options>> groups_of(const std::vector<GroupPlan>& plans, const Options& base,
                                                  double lr, double wd) {
    std::vector<optim::ParamGroup<Options>> out;
    for (const GroupPlan& p : plans) {
        Options o = base;
        o.lr = lr * p.lr_mult;
        o.weight_decay = p.decay ? wd : 0.0;
        out.push_back({p.params, o});
    }
    return out;
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const OptimiserFlags& c, const std::vector<GroupPlan>& groups) {
    if (c.opt == "sgd")
        return std::make_unique<optim::SGD>(groups_of(
            groups, optim::SGDOptions{.lr = c.lr, .momentum = c.momentum, .weight_decay = c.wd, .nesterov = c.nesterov},
            c.lr, c.wd));
    if (c.opt == "adam") {
        optim::AdamOptions o;
        o.betas = {c.momentum, 0.999};
        return std::make_unique<optim::Adam>(groups_of(groups, o, c.lr, c.wd));
    }
    optim::AdamWOptions o;
    o.betas = {c.momentum, 0.999};
    return std::make_unique<optim::AdamW>(groups_of(groups, o, c.lr, c.wd));
}

std::string groups_text(const std::vector<GroupPlan>& groups, const OptimiserFlags& flags) {
    std::string s;
    for (const GroupPlan& g : groups)
        s += fmt(s.empty() ? "" : " | ", g.role, " ", g.params.size(), " tensor", g.params.size() == 1 ? "" : "s",
                 " lr ", flags.lr * g.lr_mult, " wd ", g.decay ? flags.wd : 0.0);
    return s;
}

std::string groups_record(const std::vector<GroupPlan>& groups) {
    std::string s;
    for (const GroupPlan& g : groups) s += fmt(s.empty() ? "" : ",", g.role, ":", g.params.size());
    return s;
}

void check_resumed_groups(const std::string& command, const std::map<std::string, Tensor>& train_state,
                          const std::map<std::string, std::string>& train_metadata,
                          const std::vector<GroupPlan>& groups, const std::string& where) {
    const std::string now = groups_record(groups);
    std::string stored;
    if (auto it = train_metadata.find("param_groups"); it != train_metadata.end()) {
        stored = it->second;
        if (stored == now) return;
    } else {
        // A checkpoint from before the record: only its group count can be compared.
        size_t count = 0;
        while (train_state.count(fmt("optimizer.param_groups.", count, ".lr"))) ++count;
        if (count == groups.size()) return;
        stored = fmt(count, " group", count == 1 ? "" : "s");
    }
    throw Error(fmt(command, ": ", where, " holds the optimiser parameter groups ", stored, ", but this run builds ",
                    now, " (from --freeze, --train-only, --freeze-bn, --head-lr-mult and --wd-all); the resume would "
                    "not continue the same optimisation; hint: a run recorded before weight decay skipped biases and "
                    "norms resumes with --wd-all; else resume with the flags the run was started with"));
}

}  // namespace razor::apps
