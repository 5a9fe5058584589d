// apps/freeze.h -- razor finetune's --freeze and --train-only: which parameters train.
//
// reference: the PyTorch transfer-learning recipe (`for name, p in model.named_parameters(): p.requires_grad =
// False`), timm's freeze(model, submodules) by module name, and BitFit / TinyTL-bias (train only the biases).
// docs: docs/cli.md "razor finetune".
//
// A pattern is a module path or parameter name with optional globs (`*` any run of characters, dots included; `?`
// one character). It selects a parameter when it matches
//   - the parameter's full name                        (`fc.bias`, `layer4.*.weight`),
//   - one of the module paths the name runs through    (`layer1` selects layer1.0.conv1.weight; `layer2.*` every
//                                                        parameter below layer2),
//   - or the name's last component                     (`bias`: every bias, as BitFit; `weight`).
// --freeze P,Q sets requires_grad false on the parameters any pattern selects; --train-only P,Q on all the others
// (both given: train-only first, then freeze). A frozen parameter gets no gradient and no optimiser state, and an op
// whose weight is frozen saves nothing for that weight's gradient (core/ops/linear.cpp, conv2d.cpp "Saves:"). A
// pattern that selects nothing is an error naming it, with the nearest names and the model's top-level modules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace razor::apps {

// "layer1, layer2.*,conv1" -> {"layer1", "layer2.*", "conv1"}; empty items are an error naming `flag`.
std::vector<std::string> parse_patterns(const std::string& command, const std::string& flag, const std::string& text);

// Whether `pattern` selects the parameter `name` (the rule above).
bool selects(const std::string& pattern, const std::string& name);

// `*` and `?` globbing over the whole of `text` (fnmatch without character classes; `*` crosses dots).
bool glob_match(const std::string& pattern, const std::string& text);

struct FreezeResult {
    int64_t frozen_tensors = 0, frozen_numel = 0;   // requires_grad false after the call (--freeze-bn's too)
    int64_t total_tensors = 0, total_numel = 0;
};

// Applies --train-only `train_only` then --freeze `freeze` (comma-separated patterns; "" = none) to `model`'s
// parameters. Throws razor::Error naming `command`, the flag and the pattern when a pattern selects nothing, or when
// nothing is left to train. Counts every parameter with requires_grad false afterwards.
FreezeResult apply_freeze(const std::string& command, nn::Module& model, const std::string& freeze,
                          const std::string& train_only);

// "frozen 20 of 62 parameter tensors (683072 of 11178564 values): no gradient, no optimiser state".
std::string freeze_line(const FreezeResult& r);

}  // namespace razor::apps
