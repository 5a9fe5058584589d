// apps/sparse_records.h -- what razor sparse-train prints and logs per epoch of each phase: the stdout line and the
// JSONL entry (docs/cli.md "razor sparse-train", docs/vr-pge.md). The loop (train/fit.h) calls them through FitHooks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "train/fit.h"
#include "train/vrpge_trainer.h"

namespace razor::apps {

// Phase A (joint training of w and s): loss, training accuracy, the logging-only test accuracy of one sampled
// subnetwork, E[keep], the sampled subnets' FLOPs, both lrs, the gradient norms and the clip fraction.
nlohmann::json phase_a_record(const train::EpochSummary& r, const train::VrpgeTrainer& trainer);
std::string phase_a_line(const train::EpochSummary& r, const train::VrpgeTrainer& trainer);

// Phase B (the fixed subnetwork's fine-tune): loss, training and test accuracy, lr, skipped non-finite steps.
nlohmann::json phase_b_record(const train::EpochSummary& r);
std::string phase_b_line(const train::EpochSummary& r);

}  // namespace razor::apps
