// apps/checkpoint_info.h -- `razor info --checkpoint PATH`: what a weights file or a razor run folder holds, and
// whether it fits a zoo model, without training or evaluating.
//
// Prints the file and its format, the tensor count with the dtypes as loaded (F16 / BF16 / F64 storages load as F32)
// and their total size, the model (recorded in razor's own files, else read off the keys: models/pretrained.h) with
// the dialect its keys use, whether every tensor fits that model (it is built, and the file fitted to it exactly as
// razor finetune --from does), the classifier head's class count, the image size, and razor's recorded metadata.
// docs: docs/models.md "Pretrained weights", docs/cli.md.
#pragma once

#include <string>

namespace razor::apps {

// The report's lines. Throws naming `path` when it cannot be read (load_weights_file, train::open_checkpoint).
std::string describe_checkpoint(const std::string& path);

}  // namespace razor::apps
