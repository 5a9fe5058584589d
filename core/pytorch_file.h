// core/pytorch_file.h -- read the state dict out of a torch.save file (.pth, .pt, .bin): weights, never code.
//
// reference: torch.save's zip format (PyTorch >= 1.6, torch/serialization.py): a zip archive of stored entries
//   <prefix>/data.pkl      a pickle of the saved object (protocol 2)
//   <prefix>/data/<key>    the raw little-endian bytes of each storage the pickle names by key
//   <prefix>/version, <prefix>/byteorder (newer versions)
// docs: docs/models.md "Checkpoint formats".
//
// The zip container is read with libzip (Debian's libzip-dev); the pickle with razor's restricted unpickler
// (core/pickle.h), which builds tensors and plain containers and refuses every other Python global. The saved object
// may be a state dict itself or a dict holding one under "state_dict", "model" or "model_state_dict" (training
// checkpoints); other top-level entries (epoch, optimizer state) are then ignored. Float storages of any precision
// load as F32, integer ones as I64 (num_batches_tracked), uint8/bool as U8.
//
// Refused with an error naming the file and a hint: the legacy pre-1.6 format (with the one-line Python command that
// re-saves it), TorchScript archives, a pickled nn.Module (re-save model.state_dict()), truncated or corrupt archives,
// a storage entry whose size does not match the pickle, big-endian files.
#pragma once

#include <string>

#include "core/safetensors.h"

namespace razor {

// True when `bytes` starts like a zip archive ("PK\3\4").
bool looks_like_zip(std::string_view bytes);

// tensors: the state dict by key; metadata: {"format": "pytorch", "state_dict_key": "" | "state_dict" | ...}.
SafeTensors load_pytorch(const std::string& path);
SafeTensors parse_pytorch(const std::string& bytes, const std::string& source_name);   // for fuzzing and tests

// Any weights file razor reads, told apart by its content (not its name): safetensors or torch.save's zip format.
// Anything else (not a zip, no '{' after the 8-byte safetensors length) is refused naming the file and both formats.
SafeTensors load_weights_file(const std::string& path);

}  // namespace razor
