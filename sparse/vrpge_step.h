// sparse/vrpge_step.h -- one phase-A VR-PGE iteration (spec §6), for any forward that can run with channel masks.
//
// reference: the official VRPGE code (trainers/default.py, the training loop). docs: docs/vr-pge.md §5.
//
// Header-only on purpose: the sparse floor links only core (CMakeLists.txt), and this is the one VR-PGE piece that
// also needs optim (clip_grad_norm_, Optimizer). Whoever includes it (models/, apps/, tests) links razor_optim.
//
// The order is fixed (spec §14 item 5):
//   1. zero every gradient (w and s)
//   2. for j in {1, 2}: m⁽ʲ⁾ = scores.sample(gen)                     one mask per layer per pass, batch-shared
//                       [--align: m⁽ʲ⁾ = align_kept(m⁽ʲ⁾), labelled; the estimator uses the applied mask]
//                       L_j = forward(m⁽ʲ⁾)                             full mean loss on the SAME minibatch
//                       backward of L_j / 2 → w.grad                    the weight gradient is the two-pass average
//   3. s.grad += ½ (L₁ − L₂)(g⁽¹⁾ − g⁽²⁾)                               accumulate_vrpge_grad (full losses)
//      [Estimator::Pge, the ablation: s.grad += ½ (L₁ g⁽¹⁾ + L₂ g⁽²⁾), no baseline]
//   4. clip the global L2 norm of ALL gradients, w and s together, to max_norm (3)   one joint clip
//   5. opt_s.step() (Adam on s); opt_w.step() (SGD on w)               the optimiser updates are dense
//   6. s ← P_S(s), K = ρ·n                                              global projection; Adam state is kept
// VrpgeVariant::OneBackward replaces step 2's backwards by one backward of L₁ (pass 2 forward only, no tape).
// `forward` owns everything model-specific: how the masks act (emulated by multiplying, or compact execution through
// the kept-index lists), BN semantics, the data. It must return a scalar loss tensor with autograd history into w
// and none into s (s gets no chain-rule gradient: the sampler's masks are plain tensors).
#pragma once

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "optim/clip_grad.h"
#include "optim/optimizer.h"
#include "sparse/vrpge_estimator.h"
#include "sparse/vrpge_projection.h"

namespace razor::sparse {

// TwoBackward is the reference (both passes backward with loss/2). OneBackward is the cheaper variant of spec §11.3
// (NOT the reference, labelled wherever used): both passes forward, only pass 1 backward with its full loss L₁, so
// w.grad comes from one sample; pass 2 runs under no-grad and serves only the estimator.
enum class VrpgeVariant { TwoBackward, OneBackward };

struct VrpgeStepOptions {
    double rho = 0.5;         // channel KEEP ratio: Σ s ≤ ρ·n after the step
    double max_norm = 3.0;    // the joint gradient clip (reference: 3)
    ScoreNorm score_norm = ScoreNorm::Sqrt;
    Estimator estimator = Estimator::VrPge;   // Pge: the vanilla ablation (no baseline), labelled wherever used
    ProjectionMethod projection = ProjectionMethod::Bisection;
    VrpgeVariant variant = VrpgeVariant::TwoBackward;
    int64_t align = 0;        // > 0: align_kept(multiple = align) on every sampled mask (changes the algorithm)
};

struct VrpgeStepResult {
    double loss1 = 0, loss2 = 0;        // the two passes' full losses
    double grad_norm = 0;               // the joint norm before clipping (clip_grad_norm_'s return)
    double s_grad_norm = 0;             // of that, the norm of the structure gradient alone (s.grad, before clipping):
                                        // when it dominates grad_norm, the joint clip scales w's step down too
    ChannelMasks masks1, masks2;        // what was sampled (for logging and tests)
    ProjectionResult projection;
};

// opt_s must hold exactly scores.named_parameters() (checked); opt_w every other trainable parameter.
template <class Forward>
VrpgeStepResult vrpge_step(const ChannelScores& scores, optim::Optimizer& opt_s, optim::Optimizer& opt_w,
                           Forward&& forward, Generator& gen, const VrpgeStepOptions& options = {}) {
    VrpgeStepResult r;
    const std::vector<Tensor> s = scores.parameters();
    const optim::NamedParameters s_params = opt_s.params();
    bool same = s_params.size() == s.size();
    for (size_t i = 0; same && i < s.size(); ++i) same = s_params[i].second.same_storage(s[i]);
    if (!same)
        throw Error(fmt("vrpge_step: opt_s holds ", s_params.size(), " tensors that are not this ChannelScores' ",
                        s.size(), " s tensors; hint: build it as Adam(scores.named_parameters(), ...)"));
    // 1. zero gradients (set_to_none, as razor's Optimizer::zero_grad)
    opt_w.zero_grad();
    opt_s.zero_grad();
    scores.zero_grad();
    // 2. two sparse passes on the same minibatch, independent masks, loss/2 each
    const bool one_backward = options.variant == VrpgeVariant::OneBackward;
    auto pass = [&](ChannelMasks& masks, bool backward, float weight) {
        masks = scores.sample(gen);
        if (options.align > 0) masks = align_kept(scores, std::move(masks), options.align);
        std::optional<NoGradGuard> no_grad;
        if (!backward) no_grad.emplace();
        const Tensor loss = forward(static_cast<const ChannelMasks&>(masks));
        if (loss.numel() != 1)
            throw Error(fmt("vrpge_step: expected forward to return a scalar loss, got ", shape_str(loss.shape()),
                            "; hint: return the mean cross-entropy over the minibatch"));
        const double value = loss.item();
        if (backward) mul(loss, weight).backward();
        return value;
    };
    r.loss1 = pass(r.masks1, true, one_backward ? 1.f : 0.5f);
    r.loss2 = pass(r.masks2, !one_backward, 0.5f);
    // 3. the VR-PGE term (full losses, not halved)
    accumulate_vrpge_grad(scores, r.masks1, r.masks2, r.loss1, r.loss2, options.score_norm, options.estimator);
    double s_sq = 0;
    for (const Tensor& si : s)
        if (si.grad().defined())
            for (float g : si.grad().to_vector()) s_sq += double(g) * g;
    r.s_grad_norm = std::sqrt(s_sq);
    // 4. one joint clip over w and s
    optim::NamedParameters all = opt_w.params();
    for (const auto& p : s_params) all.push_back(p);
    r.grad_norm = optim::clip_grad_norm_(all, options.max_norm);
    // 5. the optimiser steps
    opt_s.step();
    opt_w.step();
    // 6. the global projection, after the step; the optimisers' state is not touched
    r.projection = project_scores_(s, scores.budget(options.rho), options.projection);
    return r;
}

}  // namespace razor::sparse
