// train/nonfinite.cpp -- see nonfinite.h.
#include "train/nonfinite.h"

#include <cstdio>

#include "core/anomaly.h"
#include "core/rng.h"

namespace razor::train {

NonFiniteGuard::NonFiniteGuard(nn::Module& model, NonFiniteOptions options) : model_(model), options_(options) {}

void NonFiniteGuard::begin_step() {
    rng_before_ = default_generator().state();
    if (!options_.skip) return;
    const auto buffers = model_.named_buffers();
    buffers_before_.resize(buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i) {
        const Tensor& b = buffers[i].second;
        if (!buffers_before_[i].defined() || buffers_before_[i].shape() != b.shape() ||
            buffers_before_[i].dtype() != b.dtype())
            buffers_before_[i] = b.clone();
        else
            buffers_before_[i].copy_(b);   // reuse the snapshot's storage: no allocation per step
    }
}

void NonFiniteGuard::on_nonfinite(const std::string& what, const std::string& where, const std::string& stopped,
                                  const std::function<void()>& forward_backward) {
    const auto rng_after = default_generator().state();
    default_generator().set_state(rng_before_);
    model_.zero_grad();
    const std::optional<NonFiniteReport> first = detect_anomaly(forward_backward, model_.named_parameters());
    model_.zero_grad();
    const std::string found =
        first ? fmt("first non-finite value: ", first->describe())
              : std::string("a re-run of the step under anomaly mode found no non-finite value in the forward or "
                            "backward pass (the fault did not reproduce, or lies outside autograd: the gradient "
                            "norm's sum of squares overflowed, or the optimizer state)");
    if (!options_.skip)
        throw Error(fmt(what, " ", where, "; ", found, "; stopped, ", stopped,
                        "; hint: lower --lr, clip gradients with --clip 1, check the inputs and weights named above, "
                        "or pass --skip-nonfinite to skip such steps"));

    // Skip: undo what the step (and the re-run) changed besides the gradients just dropped.
    auto buffers = model_.named_buffers();
    for (size_t i = 0; i < buffers.size() && i < buffers_before_.size(); ++i)
        buffers[i].second.copy_(buffers_before_[i]);
    default_generator().set_state(rng_after);
    ++skipped_, ++consecutive_;
    std::fprintf(stderr, "%s %s; %s; skipped this step (--skip-nonfinite, %lld in a row)\n", what.c_str(),
                 where.c_str(), found.c_str(), static_cast<long long>(consecutive_));
    if (consecutive_ >= options_.max_consecutive_skips)
        throw Error(fmt(what, " ", where, "; ", found, "; gave up after ", consecutive_,
                        " non-finite steps in a row (--skip-nonfinite skips at most ", options_.max_consecutive_skips,
                        " in a row); stopped, ", stopped, "; hint: the weights or the data are broken, not one "
                        "batch: lower --lr or check the inputs named above"));
}

}  // namespace razor::train
