// core/safetensors.h -- read and write .safetensors files (the checkpoint and fixture format).
//
// reference: the safetensors format (huggingface/safetensors): 8-byte little-endian header length N, N bytes of
// JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}, then the
// raw little-endian data. Files written here load in Python with safetensors.torch.load_file, and files written
// by PyTorch load here.
//
// Loading validates everything before it allocates: header length against the file size, JSON syntax, dtype,
// shape (non-negative, product within the data), offsets (in bounds, size = numel x dtype size, no overlaps).
// Every error names the file, the entry, what was expected and what was found.
//
// Writing is atomic: the file is written to "<path>.tmp.<pid>", flushed with fsync, then renamed over <path>,
// so a crash leaves either the old file or the new one, never a torn one.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace razor {

struct SafeTensors {
    std::map<std::string, Tensor> tensors;            // sorted by name
    std::map<std::string, std::string> metadata;      // "__metadata__"
};

SafeTensors load_safetensors(const std::string& path);
SafeTensors parse_safetensors(const std::string& bytes, const std::string& source_name);   // for fuzzing/tests
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
std::string serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

// Writes `bytes` to `path` atomically (temp file + fsync + rename). Throws razor::Error naming the path, the system's
// reason and a hint; the previous file at `path`, if any, is then untouched and the temporary file removed.
void write_file_atomic(const std::string& path, const std::string& bytes);

// Test-only fault injection into write_file_atomic (ENOSPC, EACCES, EIO without a full disk or a non-root user).
// The hook is called with the destination path and a stage -- "open" before the temporary file is created, "write"
// before each write(2) with the bytes written so far, "rename" before the final rename -- and a non-zero return is
// taken as that system call's errno. An empty hook (the default) turns injection off. Process-wide; not for
// concurrent use.
using WriteFaultHook = std::function<int(const std::string& path, const char* stage, size_t bytes_done)>;
void set_write_fault_hook_for_testing(WriteFaultHook hook);
// Reads a whole file; throws razor::Error naming the path when it cannot.
std::string read_file(const std::string& path);

}  // namespace razor
