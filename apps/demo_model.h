// apps/demo_model.h -- razor demo's two models, by the names its checkpoint records ("demo-cnn", "demo-mlp" with its
// "hidden" width), so that razor eval and razor predict rebuild them from runs/demo alone. They are not in the zoo
// (models/registry.h): they exist for the demo and have no PyTorch fixture. docs: docs/cli.md "razor demo".
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/rng.h"
#include "nn/module.h"

namespace razor::apps {

// Whether `name` is one of the demo's models.
bool is_demo_model(const std::string& name);

// "demo-cnn": conv(C->32) BN ReLU pool -> conv(32->64) BN ReLU pool -> linear(64*(S/4)^2 -> classes).
// "demo-mlp": flatten -> linear(C*S*S -> hidden) ReLU -> linear(hidden -> classes).
// Keys are nn::Sequential's: 0.weight, 1.running_mean, ... Throws naming the model for another name or geometry.
std::shared_ptr<nn::Module> make_demo_model(const std::string& name, int64_t classes, int64_t in_channels,
                                            int64_t image_size, int64_t hidden, Generator& gen);

// The "hidden" entry of a checkpoint's metadata (demo-mlp's width); `fallback` when absent.
int64_t demo_hidden(const std::map<std::string, std::string>& metadata, int64_t fallback);

}  // namespace razor::apps
