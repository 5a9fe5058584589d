// train/vrpge_trainer.h -- VR-PGE phase A on a zoo model with compact channel execution: what razor sparse-train and
// razor bench --keep share. docs: docs/vr-pge.md §8-§9.
//
// The model's convs are scored (models::ChannelPrunable::scored_layers(): every conv, first conv and projection
// shortcuts included, the classifier excluded by its flag); s starts at a constant. One step is
// sparse::vrpge_step (spec §6 order: zero grads, two sampled passes on the same minibatch, estimator into s.grad,
// joint clip, Adam on s, SGD on w, projection), each pass running the model compact on the sampled kept channels
// (models/channel_plan.h, true-sparse BN) inside an nn::ChannelSubsetScope that ends with the pass.
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
};

class VrpgeTrainer {
public:
    VrpgeTrainer(std::shared_ptr<nn::Module> model, const VrpgeTrainerOptions& options);

    struct Step {
        sparse::VrpgeStepResult result;
        Tensor logits;            // pass 1's (N, classes), for the running accuracy
        double cost_ratio = 1;    // MACs of the two sampled subnets over dense, averaged over the passes
    };
    // One phase-A iteration on (x, labels). Each sampled pass runs compact in its own ChannelSubsetScope; none is
    // left current afterwards.
    Step step(const Tensor& x, const Tensor& labels, Generator& gen);

    // E[kept fraction] = Σ s / n.
    double expected_keep() const;

    std::shared_ptr<nn::Module> model;
    models::ChannelPrunable& prunable;
    sparse::ChannelScores scores;
    optim::Adam opt_s;
    optim::SGD opt_w;
    sparse::VrpgeStepOptions options;
};

std::string variant_name(sparse::VrpgeVariant v);   // "two-backward (reference)" / "one-backward (cheaper variant)"

}  // namespace razor::train
