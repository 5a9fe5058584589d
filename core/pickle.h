// core/pickle.h -- a restricted reader for the pickles inside PyTorch checkpoints: data, never code.
//
// reference: Python's pickle protocol 2-5 opcodes (Lib/pickletools.py documents each), as torch.save writes them
// (protocol 2: a state dict is an OrderedDict of tensors built by torch._utils._rebuild_tensor_v2 over storages that
// arrive as persistent ids). docs: docs/models.md "Checkpoint formats".
//
// Python's own unpickler imports and calls whatever a file names, so loading an untrusted .pth in Python can run any
// code. This reader builds only values: None, booleans, integers, floats, strings, bytes, tuples, lists and dicts, plus
// the handful of callables a state dict needs, evaluated here by razor code and never imported:
//
//   collections.OrderedDict             -> an ordered dict
//   torch._utils._rebuild_tensor_v2      -> a tensor (a strided view of a storage, copied out contiguous)
//   torch._utils._rebuild_parameter      -> the tensor it wraps (nn.Parameter)
//   torch.<Float|Half|BFloat16|...>Storage  only as the storage type inside a persistent id
//
// Any other global (os.system, builtins.eval, a model class, a numpy scalar) is refused with an error naming it, as
// are the opcodes that construct arbitrary objects (NEWOBJ, INST, OBJ, EXT*). Tensors are converted on the way out:
// float16, bfloat16, float32 and float64 become F32; int8/16/32/64 become I64; uint8 and bool become U8.
//
// Every read is bounds-checked; the memo, the stack and nesting depth are bounded; a tensor's view is checked
// against its storage before a byte is copied. Errors name the source, the byte offset and the opcode.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace razor::pickle {

// The element types a PyTorch storage can hold (those razor reads).
enum class StorageType : uint8_t { F32, F64, F16, BF16, I64, I32, I16, I8, U8, Bool };
const char* storage_type_name(StorageType t);   // "FloatStorage", ...
size_t storage_element_size(StorageType t);

// One persistent id ('storage', torch.FloatStorage, key, location, numel): the caller's loader returns its bytes.
struct StorageRef {
    StorageType type;
    std::string key;        // the archive entry "<prefix>/data/<key>"
    std::string location;   // "cpu", "cuda:0" (ignored: razor loads to the CPU)
    int64_t numel;
};
// Returns exactly numel * element_size bytes (the loader checks the entry's size and throws otherwise).
using StorageLoader = std::function<std::shared_ptr<const std::string>(const StorageRef&)>;

// One unpickled value. Values live in their Unpickled's arena and point at each other with plain pointers: a pickle
// may nest a million lists deep or put a list inside itself, and neither may recurse or leak when it is freed.
struct Value {
    enum class Kind : uint8_t { None, Bool, Int, Float, String, Bytes, Tuple, List, Dict, Global, Storage, Tensor };
    Kind kind = Kind::None;
    bool boolean = false;
    int64_t integer = 0;
    double real = 0;
    std::string text;                                   // String, Bytes; Global: "module.name"
    std::vector<Value*> items;                          // Tuple, List
    std::vector<std::pair<Value*, Value*>> entries;     // Dict, in insertion order (a repeated key overwrites)
    StorageRef storage;                                 // Storage
    std::shared_ptr<const std::string> storage_bytes;   // Storage
    Tensor tensor;                                      // Tensor

    const char* kind_name() const;
};

// The result of a parse: the root value and the arena that owns every value.
class Unpickled {
public:
    const Value& root() const { return *root_; }
    Value* make(Value::Kind kind);   // a new value owned by this arena

private:
    friend Unpickled unpickle(std::string_view, const std::string&, const StorageLoader&);
    std::vector<std::unique_ptr<Value>> values_;
    Value* root_ = nullptr;
};

// Parses a whole pickle. Throws razor::Error naming `source` on anything it does not accept.
Unpickled unpickle(std::string_view bytes, const std::string& source, const StorageLoader& load_storage);

}  // namespace razor::pickle
