// models/summary.h -- a per-layer summary of a model: output shapes, parameters, forward FLOPs, tape bytes.
//
// reference: the layer tables of torchinfo / fvcore's FLOP counter (ideas only). docs: docs/models.md.
//
// summarize(model, input_shape) runs ONE training-mode forward (grad on, so the tape records what a training
// step would keep) on seeded N(0, 1) input, watching every module call through nn::ForwardObserverGuard, and
// then reads the current tape's records of that forward grouped by module path. BN buffers are restored after, so
// the model is left as it was.
//
// Counting conventions (docs/baselines.md §4): MAC = multiply-accumulate, FLOPs = 2 MACs; only the products are
// counted:
//   Conv2d               output elements x IC/groups x K x K
//   Linear               output elements x in_features
//   MultiheadAttention   its in-projection (B N x 3D x D) + the two attention products (2 B N^2 D); its
//                        out_proj is a child Linear and counted there
// Normalisation, activations, pooling, adds and softmax count 0.
// A Conv2d row also names the kernel conv2d ran it with (select_algorithm, core/ops/conv2d.h): one name when the
// forward, gx and gW share it, else the forward's and then "(gx ..., gW ...)".
// Each row reports what the module itself owns or does, not its children ("own"): a container's row holds only
// its inline ops (a residual add, a ReLU called as an op) and any parameters registered on it directly
// (ViT's cls_token). The totals are the sums over all rows.
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"

namespace razor::models {

struct LayerSummary {
    std::string path;          // "layer1.0.conv1"; "" for the model itself
    std::string type;          // "Conv2d"
    int depth = 0;             // 0 for the model, 1 for its children, ...
    bool called = false;       // false when forward never ran it
    Shape output;              // of its last call
    std::string kernel;        // Conv2d: conv2d's kernel for its last call ("winograd-f2x3"); "" for other modules
    int64_t params = 0;        // own parameters (elements)
    int64_t macs = 0;          // own forward MACs for the whole batch
    int64_t saved_bytes = 0;   // tape bytes attributed to exactly this path (as stored: masks at 1 bit)
    int64_t saved_dense_bytes = 0;   // what a dense fp32 tape would hold for the same items
};

// One (module path, op) node's saved items, as the tape recorded them (parameters held by reference, 0 bytes,
// are left out). `saved` lists them as "name:format", e.g. "x:bitmap+f32 r=0.90 mean:dense rstd:dense".
struct TapeRow {
    std::string path;          // module path ("layer1.0.conv1"; "" for ops called by the model itself)
    std::string op;            // "conv2d"
    std::string saved;         // items and their stored forms
    Shape shape;               // the first item's shape (the activation)
    int64_t items = 0;
    int64_t stored_bytes = 0;  // as stored (a deduplicated copy counts 0)
    int64_t dense_bytes = 0;   // what a dense fp32 tape would hold
};

struct ModelSummary {
    Shape input, output;
    std::vector<LayerSummary> layers;   // module tree in pre-order (registration order)
    int64_t params = 0;                 // == model.num_parameters()
    int64_t buffer_elements = 0;        // BN running statistics etc. (num_batches_tracked counted as 1)
    int64_t macs = 0;                   // whole batch
    int64_t saved_bytes = 0;            // the tape after the forward, all paths
    int64_t saved_dense_bytes = 0;
    int64_t saved_items = 0;
    std::vector<TapeRow> tape;          // per (module path, op) in save order
};

ModelSummary summarize(nn::Module& model, const Shape& input_shape, uint64_t seed = 0);

// The table razor info prints: one row per module, indented by depth, then the totals (per batch and per image).
std::string format_summary(const ModelSummary& summary);

// The tape breakdown razor info --razor prints: one row per (module path, op) with what it saved, stored and
// dense-equivalent bytes and their ratio, then the totals.
std::string format_tape(const ModelSummary& summary);

}  // namespace razor::models
