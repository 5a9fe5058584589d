// models/dialects.h -- state dicts named by other libraries, renamed to razor's (torchvision's) key names.
//
// reference: the key names of timm's VisionTransformer (blocks.N.attn.qkv, norm1, patch_embed.proj, cls_token,
// pos_embed, head) and of Hugging Face transformers' ViTModel / ViTForImageClassification (vit.embeddings...,
// vit.encoder.layer.N.attention.attention.{query,key,value}, classifier). docs: docs/models.md "Checkpoint formats".
//
// razor's models carry torchvision's names; timm's ResNets already use them. A file in another dialect is renamed
// tensor by tensor; Hugging Face's separate q, k and v projections are stacked into torchvision's packed
// in_proj_weight (3D, D) = [W_q; W_k; W_v] (and the biases alike), the order torch.nn.MultiheadAttention and timm's
// qkv use. A "module." prefix on every key (nn.DataParallel) is dropped first. The dialect is the one whose renamed
// keys cover most of the model's keys; a file that covers under half of them in every dialect is refused with an
// error listing its first unmatched keys and, for each, the nearest name the model expects.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/module.h"

namespace razor::models {

struct RenamedState {
    std::string dialect;                      // "torchvision", "timm" or "huggingface"
    std::map<std::string, Tensor> state;      // in the model's key names (unknown keys kept as they were)
};

// `source` (the file's path) prefixes errors.
RenamedState to_model_keys(const std::map<std::string, Tensor>& state, const nn::Module& model,
                           const std::string& source);

// The expected key nearest to `key` by edit distance (for error messages).
std::string nearest_key(const std::string& key, const std::vector<std::string>& expected);

}  // namespace razor::models
