// train/vrpge_trainer.h -- VR-PGE phase A on a zoo model with compact channel execution: what razor sparse-train and
// razor bench --keep share. docs: docs/vr-pge.md §8-§9.
//
// The model's convs are scored (models::ChannelPrunable::scored_layers(): every conv, first conv and projection
// shortcuts included, the classifier excluded by its flag); s starts at a constant. One step is
// sparse::vrpge_step (spec §6 order: zero grads, two sampled passes on the same minibatch, estimator into s.grad,
// joint clip, Adam on s, SGD on w, projection), each pass running the model compact on the sampled kept channels
// (models/channel_plan.h, true-sparse BN) inside an nn::ChannelSubsetScope that ends with the pass.
//
// --resample-every N (resample_every; 1 = the reference, every step as above). The seed's strategy, labelled
// wherever used (docs/vr-pge.md "Resampling every N steps"): step t (counted from 0 over phase A) with t % N == 0 is
// the reference iteration above, and afterwards (N > 1 only) the interval's mask m ~ Bernoulli(s) is drawn from the
// same mask generator, from s after the projection; the other N - 1 steps of the interval train w alone: one compact
// forward+backward on m (train/subnet.h SubnetScope, as phase B's fine-tune), the clip over w, SGD on w; s, its Adam
// state and its gradient are not touched. The dense optimiser update is the reference's: dropped channels get a zero
// gradient, so SGD's momentum and weight decay still move them.
#pragma once

#include <memory>

#include "models/channel_plan.h"
#include "nn/module.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "sparse/vrpge_step.h"

namespace razor::train {

struct VrpgeTrainerOptions {
    float s_init = 0.5f;                 // every s starts here (the reference: 0.5)
    optim::AdamOptions adam;             // on s (reference: lr 12e-3)
    optim::SGDOptions sgd;               // on w (reference: lr 0.1, momentum 0.9, weight decay 5e-4)
    sparse::VrpgeStepOptions step;       // rho, clip, score norm, projection, variant, align
    int64_t resample_every = 1;          // N >= 1: the structure update and a fresh mask every N-th step (above)
    // --stream-masks (deviation, labelled): one mask per residual stream, shared by every conv that writes it
    // (sparse::share_stream_masks); false = the reference, one independent mask per conv.
    bool stream_masks = false;
};

class VrpgeTrainer {
public:
    VrpgeTrainer(std::shared_ptr<nn::Module> model, const VrpgeTrainerOptions& options);

    struct Step {
        bool resampled = true;    // the reference iteration ran (s updated; with N > 1 a new interval mask drawn)
        sparse::VrpgeStepResult result;   // the reference iteration's (resampled steps only)
        double loss = 0;          // the mean of the passes' full losses
        double grad_norm = 0;     // before the clip: the joint norm over w and s (resampled), else w's alone
        Tensor logits;            // pass 1's (N, classes), for the running accuracy
        double cost_ratio = 1;    // MACs of the step's sampled subnets over dense, averaged over its passes
    };
    // One phase-A step on (x, labels): the reference iteration when resamples_next(), else the w-only step on the
    // interval's mask. Each pass runs compact in its own SubnetScope; none is left current afterwards. `gen` draws
    // the masks (the two passes', then the interval's).
    Step step(const Tensor& x, const Tensor& labels, Generator& gen);

    // E[kept fraction] = Σ s / n.
    double expected_keep() const;

    // Where the resampling schedule stands: phase-A steps taken, and the current interval's mask (empty before the
    // first resample and when N = 1). A checkpoint keeps both (apps/sparse_state.h); resume_at puts them back.
    int64_t steps_done() const { return steps_done_; }
    bool resamples_next() const { return steps_done_ % resample_every == 0; }
    const models::ChannelPlan& interval() const { return interval_; }
    void resume_at(int64_t steps_done, models::ChannelPlan interval);

    std::shared_ptr<nn::Module> model;
    models::ChannelPrunable& prunable;
    sparse::ChannelScores scores;
    optim::Adam opt_s;
    optim::SGD opt_w;
    sparse::VrpgeStepOptions options;
    const int64_t resample_every;

private:
    Step reference_step(const Tensor& x, const Tensor& labels, Generator& gen);
    Step weights_step(const Tensor& x, const Tensor& labels);

    int64_t steps_done_ = 0;
    models::ChannelPlan interval_;
};

std::string variant_name(sparse::VrpgeVariant v);   // "two-backward (reference)" / "one-backward (cheaper variant)"

}  // namespace razor::train
