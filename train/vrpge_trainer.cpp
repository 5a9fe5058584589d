// train/vrpge_trainer.cpp -- see vrpge_trainer.h.
#include "train/vrpge_trainer.h"

#include "core/check.h"
#include "optim/clip_grad.h"
#include "train/subnet.h"

namespace razor::train {

VrpgeTrainer::VrpgeTrainer(std::shared_ptr<nn::Module> m, const VrpgeTrainerOptions& o)
    : model(std::move(m)),
      prunable(models::channel_prunable(*model)),
      scores(o.stream_masks ? sparse::share_stream_masks(prunable.scored_layers()) : prunable.scored_layers(),
             o.s_init),
      opt_s(scores.named_parameters(), o.adam),
      opt_w(model->named_parameters(), o.sgd),
      options(o.step),
      resample_every(o.resample_every) {
    if (resample_every < 1)
        throw Error(fmt("VrpgeTrainer: resample_every must be >= 1, got ", resample_every,
                        "; hint: 1 resamples every step (the reference), N > 1 every N-th step"));
}

VrpgeTrainer::Step VrpgeTrainer::step(const Tensor& x, const Tensor& labels, Generator& gen) {
    Step out = resamples_next() ? reference_step(x, labels, gen) : weights_step(x, labels);
    ++steps_done_;
    return out;
}

void VrpgeTrainer::resume_at(int64_t steps_done, models::ChannelPlan interval) {
    if (steps_done < 0 || (steps_done % resample_every != 0 && interval.size() == 0))
        throw Error(fmt("VrpgeTrainer: cannot resume at step ", steps_done, " of an interval of ", resample_every,
                        " without the interval's mask; hint: resume from the checkpoint the run wrote"));
    steps_done_ = steps_done;
    interval_ = std::move(interval);
}

VrpgeTrainer::Step VrpgeTrainer::reference_step(const Tensor& x, const Tensor& labels, Generator& gen) {
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
    out.loss = 0.5 * (out.result.loss1 + out.result.loss2);
    out.grad_norm = out.result.grad_norm;
    out.cost_ratio = cost / std::max(passes, 1);
    // The interval's mask: drawn after the passes' masks from the same generator (a resumed run draws the same), from
    // s after the projection, aligned as the passes' masks are. N = 1 draws nothing: the reference iteration exactly.
    if (resample_every > 1) {
        sparse::ChannelMasks m = scores.sample(gen);
        if (options.align > 0) m = sparse::align_kept(scores, std::move(m), options.align);
        interval_ = models::ChannelPlan::from_masks(scores.layers(), m);
    }
    return out;
}

// Between resamples: w alone on the interval's mask. The loss is the full mean loss of the one pass (the reference's
// w.grad is the two passes' average, the same scale); the clip covers w only, as s has no gradient in this step.
VrpgeTrainer::Step VrpgeTrainer::weights_step(const Tensor& x, const Tensor& labels) {
    RAZOR_CHECK(interval_.size() > 0) << "a step between resamples needs the interval's mask (step " << steps_done_
                                      << ", resample every " << resample_every << ")";
    Step out;
    out.resampled = false;
    opt_w.zero_grad();
    Tensor loss;
    {
        SubnetScope subnet(interval_);   // this forward only; the backward replays the compact tape
        const Tensor logits = (*model)(x);   // (N, classes), compact
        out.cost_ratio = subnet.cost_ratio();
        out.logits = logits.detach();
        loss = cross_entropy(logits, labels);
    }
    out.loss = loss.item();
    loss.backward();
    out.grad_norm = optim::clip_grad_norm_(opt_w.params(), options.max_norm);
    opt_w.step();
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
