// apps/sparse_state.h -- what razor sparse-train keeps in its checkpoint and reads back on --resume: where the run
// stands (phase, epochs done, phase A's resampling position and interval mask, the chosen subnetwork, phase B's test
// accuracies) and the state of s, both optimisers and the three generators. docs: docs/cli.md "razor sparse-train", docs/reliability.md.
#pragma once

#include <map>
#include <string>

#include "apps/sparse_options.h"
#include "optim/sgd.h"
#include "train/checkpoint.h"
#include "train/vrpge_trainer.h"

namespace razor::apps {

// Where the run stands: phase A after a_done epochs, or phase B (the subnetwork chosen) after b_done fine-tune epochs.
struct SparsePosition {
    int64_t a_done = 0, b_done = 0, best_epoch = 0;
    bool in_b = false;
    models::ChannelPlan plan;               // phase B: the chosen subnetwork
    double best_acc = -1, last_acc = -1;    // phase B test accuracy: best over the fine-tune epochs, and the last
};

// Restores the model, s, the optimisers of the phase and the generators from a checkpoint sparse-train wrote
// (every entry checked; errors name the file and entry). Returns where the run stands.
SparsePosition restore_sparse_state(const train::Checkpoint& ck, const SparseOptions& o, nn::Module& model,
                                    train::VrpgeTrainer& trainer, optim::SGD& ft, Generator& gen, Generator& masks);

// The checkpoint of the run at `p`: phase A: s, Adam on s, SGD on w, the steps taken ("vrpge.steps") and inside a
// --resample-every interval its mask ("interval.*"); phase B: s (frozen), the chosen subnetwork, the
// fine-tune SGD, the test accuracies so far; both: the RNG states (init, masks, default) and the weights.
train::Checkpoint sparse_checkpoint(const SparsePosition& p, const SparseOptions& o, nn::Module& model,
                                    const train::VrpgeTrainer& trainer, const optim::SGD& ft, const Generator& gen,
                                    const Generator& masks, const std::map<std::string, std::string>& meta,
                                    const std::string& config_json);

}  // namespace razor::apps
