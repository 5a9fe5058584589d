// apps/param_groups.h -- the optimiser's parameter groups of razor train and finetune: weight decay on weights only
// (timm's default for fine-tuning), and the classifier head at --head-lr-mult times the lr.
//
// reference: timm's param_groups_weight_decay (no decay for 1-D parameters, biases and the model's
// no_weight_decay() names such as pos_embed and cls_token) and torchvision's reference train.py
// (--norm-weight-decay, --bias-weight-decay, --transformer-embedding-decay); PyTorch's param_groups for a per-group
// lr. docs: docs/cli.md "razor finetune", docs/optim.md.
//
// Groups, in this order, each left out when empty:
//   razor train (and finetune --wd-all with --head-lr-mult 1):  "all"   every trained parameter, decayed
//   finetune, head at lr x 1:        "decay", "no_decay"
//   finetune, --head-lr-mult M != 1: "backbone", "backbone.no_decay", "head", "head.no_decay" (head: lr x M)
// with --wd-all the no_decay groups merge into their decayed neighbour. Only parameters with requires_grad enter a
// group (frozen ones have no optimiser state). Within a group, parameters keep named_parameters() order, so a run
// without any of these flags builds the single group razor train always built, bit for bit.
//
// Resume: the flags are part of the run's config and may not change, so a resumed run rebuilds the same groups; the
// checkpoint also records them (train metadata "param_groups", groups_record) and check_resumed_groups compares.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/train_options.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace razor::apps {

struct GroupPlan {
    std::string role;                // "all", "decay", "no_decay", "backbone", ..., "head.no_decay"
    optim::NamedParameters params;   // requires_grad ones only
    double lr_mult = 1;              // lr = --lr x lr_mult
    bool decay = true;               // weight_decay = --wd, else 0
};

// Whether timm leaves `p` (named `name`) out of weight decay: 1-D tensors (biases, BatchNorm / LayerNorm weights),
// any ".bias", and a ViT's class token and position embedding (cls_token, class_token, pos_embed, pos_embedding,
// dist_token).
bool skips_weight_decay(const std::string& name, const Tensor& p);

// The groups above over `model`'s trainable parameters. `head`: the classifier head's module path, split out when
// head_lr_mult != 1 ("" = none). decay_all: no no_decay groups.
std::vector<GroupPlan> plan_param_groups(const nn::Module& model, const std::string& head, double head_lr_mult,
                                         bool decay_all);

// The optimiser of --opt with one group per plan (lr and weight decay from `flags`, scaled as the plan says).
std::unique_ptr<optim::Optimizer> make_optimizer(const OptimiserFlags& flags, const std::vector<GroupPlan>& groups);

// For the start-up line: "decay 53 tensors lr 0.01 wd 0.0005 | no_decay 108 tensors lr 0.01 wd 0".
std::string groups_text(const std::vector<GroupPlan>& groups, const OptimiserFlags& flags);
// What the checkpoint records (train metadata "param_groups"): "decay:53,no_decay:108".
std::string groups_record(const std::vector<GroupPlan>& groups);

// On --resume: the checkpoint's groups (its "param_groups" record when it has one, else the number of groups its
// optimizer state holds) must be `groups`; else razor::Error naming `where`, both layouts and a hint.
void check_resumed_groups(const std::string& command, const std::map<std::string, Tensor>& train_state,
                          const std::map<std::string, std::string>& train_metadata,
                          const std::vector<GroupPlan>& groups, const std::string& where);

}  // namespace razor::apps
