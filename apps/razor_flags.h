// apps/razor_flags.h -- the --razor-* flag family (razor train, finetune, bench, info): Back Razor's save policy
// chosen on the command line, declared once here.
//
// reference: BackRazor_Neurips22 (one global ratio r for the saved activations). docs: docs/back-razor.md, docs/cli.md.
//
// The CLI's defaults against the library's (sparse::RazorConfig, the reference's choices), the one place that says
// where and why they differ:
//
//   flag            CLI default   RazorConfig default           why the CLI differs
//   --razor         0 (dense)     ratio 0.9                     the dense tape unless asked; 0.9 is the paper's r
//   --razor-values  fp32          values / norm_values F32      same
//   --razor-gelu    d4            gelu DenseF16                 4-bit derivative code: smaller, trains like fp16
//   --razor-bn      int8          batch_norm Dense              per-channel int8 BN inputs: the tape 4.9x below dense
//                                                               (1.7x with them dense), same accuracy (3 seeds, docs/
//                                                               experiments/2026-12-02-bn-inputs.md); razored ones
//                                                               diverged (ResNet-20, r 0.9)
//   --razor-attn    int8          attention Razored             razored Q, K, V, P cost the vit_tiny fine-tune 2.0
//                                                               points (5 seeds); dense int8 trains like dense
//   --razor-input   dense         (no override: razored)        the first layer's input, the image batch, kept as
//                                                               the dense tape keeps it: the resnet20 transfer's gap
//                                                               to dense went from -0.49 to -0.26 points (3 seeds,
//                                                               docs/experiments/2026-12-06-resnet20-transfer-
//                                                               15-epochs.md), for 12 KiB a 32-px image
//   --razor-head    dense         (no override: razored)        the classifier head's input, one feature vector per
//                                                               image, kept dense: a new head's weight gradient
//                                                               then sees every feature, not the top 10 % (see
//                                                               docs/back-razor.md "Transfer on real data")
//   --razor-after-bn derived      derive_after_batch_norm false  a conv input that is relu(BN(x)) of an int8-kept BN
//                                                               input (a ResNet block's second conv) rebuilt from
//                                                               the BN's codes, dense, instead of a razored copy:
//                                                               the resnet20 transfer's gap to dense went from
//                                                               -0.52 to -0.20 points (5 seeds) and its tape from
//                                                               5.4x to 6.1x below dense (docs/experiments/
//                                                               2026-12-07-derived-after-bn.md)
#pragma once

#include <memory>
#include <string>

#include "apps/flag_table.h"
#include "core/saved.h"
#include "nn/module.h"

namespace razor::apps {

// The Back Razor flags as given: --razor R --razor-values V --razor-gelu G --razor-bn B --razor-attn A
// --razor-input I --razor-head H --razor-after-bn D.
struct RazorFlags {
    double ratio = 0;
    std::string values = "fp16", gelu = "d4", bn = "int8", attn = "int8", input = "dense", head = "dense";
    std::string after_bn = "derived";
};

// The family's table: --razor, --razor-values, --razor-gelu, --razor-bn, --razor-attn with the defaults above. Its
// help names no flag outside the family (razor finetune adds its --freeze-bn to --razor-bn's help itself).
const FlagTable<RazorFlags>& razor_flag_family();

// The save policy of those flags: nullptr (the dense tape) for R = 0, else a RazorSavePolicy with ratio R whose
// razored items (conv/linear inputs, BN/LN inputs) keep V values, and whose GELU input is kept as G: d4 (4-bit
// derivative code), fp16 (dense fp16, the reference), fp32 (dense), int8 (dense per-sample int8) or razored (pruned
// like the rest). B: train-mode BatchNorm inputs dense, f16 (dense fp16), int8 (dense int8 with a per-channel code)
// or razored (the segmentation variant); see BatchNormSave in sparse/razor_policy.h. A: matmul operands and softmax outputs (attention's Q, K, V, P) dense int8, razored (the
// reference) or dense fp32; see AttentionSave. Throws naming the flag for R outside [0, 1) or an unknown V, G, B, A,
// I, H.
std::shared_ptr<const SavePolicy> razor_policy_from_flags(const std::string& command, const RazorFlags& flags);

// With R > 0, the layers that save under the dense policy, so that what they read is kept by reference, as the dense
// tape keeps it, instead of a razored copy:
//   --razor-input dense: the model's first Conv2d or Linear (registration order: the stem conv, a ViT's patch
//                        projection, an MLP's first layer), which reads the image batch;
//   --razor-head dense:  its last Linear, the classifier head (as classifier_head in apps/finetune.h), which reads
//                        one feature vector per image.
// Returns their paths, "" where nothing was set (R = 0, razored, or a model without such a layer).
struct DenseLayers {
    std::string input, head;
};
DenseLayers keep_layers_dense(nn::Module& model, const RazorFlags& flags);

}  // namespace razor::apps
