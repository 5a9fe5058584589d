// train/vrpge_trainer.cpp -- see vrpge_trainer.h.
#include "train/vrpge_trainer.h"

#include "train/subnet.h"

namespace razor::train {

VrpgeTrainer::VrpgeTrainer(std::shared_ptr<nn::Module> m, const VrpgeTrainerOptions& o)
    : model(std::move(m)),
      prunable(models::channel_prunable(*model)),
      scores(prunable.scored_layers(), o.s_init),
      opt_s(scores.named_parameters(), o.adam),
      opt_w(model->named_parameters(), o.sgd),
      options(o.step) {}

VrpgeTrainer::Step VrpgeTrainer::step(const Tensor& x, const Tensor& labels, Generator& gen) {
    Step out;
    double cost = 0;
    int passes = 0;
    auto forward = [&](const sparse::ChannelMasks& masks) {
        SubnetScope subnet(models::ChannelPlan::from_masks(scores.layers(), masks));   // this pass's forward only
        const Tensor logits = (*model)(x);   // (N, classes), compact
        cost += subnet.cost_ratio();
        if (passes++ == 0) out.logits = logits.detach();
        return cross_entropy(logits, labels);
    };
    out.result = sparse::vrpge_step(scores, opt_s, opt_w, forward, gen, options);
    out.cost_ratio = cost / std::max(passes, 1);
    return out;
}

double VrpgeTrainer::expected_keep() const {
    double sum = 0;
    for (const Tensor& s : scores.parameters())
        for (float v : s.to_vector()) sum += v;
    return sum / static_cast<double>(scores.num_masked_channels());
}

std::string variant_name(sparse::VrpgeVariant v) {
    return v == sparse::VrpgeVariant::TwoBackward ? "two-backward (reference)" : "one-backward (cheaper variant)";
}

}  // namespace razor::train
