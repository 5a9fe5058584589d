// core/pickle.cpp -- the restricted unpickler (see pickle.h): a stack machine over the opcodes torch.save emits.
#include "core/pickle.h"

#include <cstring>
#include <unordered_map>

#include "core/check.h"
#include "core/float16.h"

namespace razor::pickle {
namespace {

// Bounds: far above any real state dict (ResNet-50's pickle has ~1,300 memo entries), far below what would exhaust
// memory on a malicious file.
constexpr size_t kMaxStack = 1u << 20;
constexpr size_t kMaxMemo = 1u << 22;
constexpr int64_t kMaxDims = 16;

struct StorageTypeName {
    const char* global;
    StorageType type;
};
constexpr StorageTypeName kStorageTypes[] = {
    {"torch.FloatStorage", StorageType::F32}, {"torch.DoubleStorage", StorageType::F64},
    {"torch.HalfStorage", StorageType::F16},  {"torch.BFloat16Storage", StorageType::BF16},
    {"torch.LongStorage", StorageType::I64},  {"torch.IntStorage", StorageType::I32},
    {"torch.ShortStorage", StorageType::I16}, {"torch.CharStorage", StorageType::I8},
    {"torch.ByteStorage", StorageType::U8},   {"torch.BoolStorage", StorageType::Bool},
};
constexpr const char* kOrderedDict = "collections.OrderedDict";
constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kRebuildParameter = "torch._utils._rebuild_parameter";

bool allowed_global(const std::string& name) {
    if (name == kOrderedDict || name == kRebuildTensor || name == kRebuildParameter) return true;
    for (const auto& s : kStorageTypes)
        if (name == s.global) return true;
    return false;
}

template <class T>
T load(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Element i of a storage as the razor dtype it converts to.
float element_f32(StorageType t, const char* p) {
    switch (t) {
        case StorageType::F32: return load<float>(p);
        case StorageType::F64: return static_cast<float>(load<double>(p));
        case StorageType::F16: return half_bits_to_float(load<uint16_t>(p));
        case StorageType::BF16: return bfloat16_bits_to_float(load<uint16_t>(p));
        default: return 0;
    }
}
int64_t element_i64(StorageType t, const char* p) {
    switch (t) {
        case StorageType::I64: return load<int64_t>(p);
        case StorageType::I32: return load<int32_t>(p);
        case StorageType::I16: return load<int16_t>(p);
        case StorageType::I8: return load<int8_t>(p);
        default: return 0;
    }
}

DType razor_dtype(StorageType t) {
    switch (t) {
        case StorageType::F32: case StorageType::F64: case StorageType::F16: case StorageType::BF16: return DType::F32;
        case StorageType::I64: case StorageType::I32: case StorageType::I16: case StorageType::I8: return DType::I64;
        case StorageType::U8: case StorageType::Bool: return DType::U8;
    }
    return DType::F32;
}

class Machine {
public:
    Machine(std::string_view bytes, const std::string& source, const StorageLoader& load, Unpickled& out)
        : in_(bytes), source_(source), load_(load), out_(out) {}

    Value* run();

private:
    [[noreturn]] void fail(const std::string& what, const std::string& hint = "the file is corrupt or truncated") const {
        throw Error(fmt(source_, ": pickle byte ", op_at_, " (opcode 0x", hex(op_), "): ", what, "; hint: ", hint));
    }
    static std::string hex(uint8_t b) {
        const char* digits = "0123456789abcdef";
        return {digits[b >> 4], digits[b & 15]};
    }
    const char* take(uint64_t n) {
        if (n > in_.size() - pos_) fail(fmt("needs ", n, " more bytes, the pickle has ", in_.size() - pos_));
        const char* p = in_.data() + pos_;
        pos_ += n;
        return p;
    }
    uint64_t take_uint(int bytes) {
        const auto* p = reinterpret_cast<const unsigned char*>(take(static_cast<uint64_t>(bytes)));
        uint64_t v = 0;
        for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
        return v;
    }
    std::string take_line() {
        const size_t end = in_.find('\n', pos_);
        if (end == std::string_view::npos) fail("a GLOBAL name is not terminated by a newline");
        std::string line(in_.substr(pos_, end - pos_));
        pos_ = end + 1;
        return line;
    }

    Value* make(Value::Kind kind) { return out_.make(kind); }
    void push(Value* v) {
        if (stack_.size() >= kMaxStack) fail(fmt("the stack holds more than ", kMaxStack, " values"));
        stack_.push_back(v);
    }
    Value* pop() {
        if (stack_.size() <= floor()) fail("pops from an empty stack");
        Value* v = stack_.back();
        stack_.pop_back();
        return v;
    }
    Value* top() {
        if (stack_.size() <= floor()) fail("reads an empty stack");
        return stack_.back();
    }
    size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
    // The values above the innermost MARK, which is removed.
    std::vector<Value*> pop_mark() {
        if (marks_.empty()) fail("needs a MARK and there is none");
        const size_t at = marks_.back();
        marks_.pop_back();
        std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(at), stack_.end());
        stack_.resize(at);
        return items;
    }
    void memo_put(uint64_t index) {
        if (index >= kMaxMemo) fail(fmt("memo index ", index, " is beyond ", kMaxMemo));
        if (memo_.size() <= index) memo_.resize(index + 1, nullptr);
        memo_[index] = top();
    }
    Value* memo_get(uint64_t index) {
        if (index >= memo_.size() || memo_[index] == nullptr) fail(fmt("memo entry ", index, " was never stored"));
        return memo_[index];
    }

    Value* make_string(Value::Kind kind, uint64_t n) {
        Value* v = make(kind);
        v->text.assign(take(n), n);
        return v;
    }
    Value* make_int(int64_t i) {
        Value* v = make(Value::Kind::Int);
        v->integer = i;
        return v;
    }
    Value* make_tuple(std::vector<Value*> items) {
        Value* v = make(Value::Kind::Tuple);
        v->items = std::move(items);
        return v;
    }
    // LONG1/LONG4: little-endian two's complement of n bytes; razor keeps what fits in 64 bits.
    Value* make_long(uint64_t n) {
        if (n > 8) fail(fmt("an integer of ", n, " bytes does not fit in 64 bits"), "a state dict holds no such number");
        const auto* p = reinterpret_cast<const unsigned char*>(take(n));
        uint64_t v = 0;
        for (uint64_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
        if (n > 0 && n < 8 && (p[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);   // sign-extend
        return make_int(static_cast<int64_t>(v));
    }
    void set_item(Value* dict, Value* key, Value* value) {
        if (dict->kind != Value::Kind::Dict) fail(fmt("sets an item on a ", dict->kind_name(), ", expected a dict"));
        for (auto& [k, v] : dict->entries)
            if (same_key(k, key)) {
                v = value;
                return;
            }
        dict->entries.emplace_back(key, value);
    }
    static bool same_key(const Value* a, const Value* b) {
        if (a->kind != b->kind) return false;
        switch (a->kind) {
            case Value::Kind::String: case Value::Kind::Bytes: return a->text == b->text;
            case Value::Kind::Int: return a->integer == b->integer;
            case Value::Kind::Bool: return a->boolean == b->boolean;
            case Value::Kind::None: return true;
            default: return a == b;
        }
    }
    void global(const std::string& module, const std::string& name) {
        const std::string full = module + "." + name;
        if (!allowed_global(full))
            fail(fmt("the pickle asks for the Python global '", full, "', which razor never imports or calls: a "
                     "checkpoint may hold only tensors, dicts, lists, tuples, numbers, strings and None"),
                 "if you trust the file, re-save only its weights in Python: torch.save(model.state_dict(), "
                 "'weights.pth') -- or export them with safetensors");
        Value* v = make(Value::Kind::Global);
        v->text = full;
        push(v);
    }
    Value* persistent_load(Value* pid);
    Value* reduce(Value* callable, Value* args);
    Value* rebuild_tensor(const std::vector<Value*>& args);

    std::string_view in_;
    const std::string& source_;
    const StorageLoader& load_;
    Unpickled& out_;
    size_t pos_ = 0, op_at_ = 0;
    uint8_t op_ = 0;
    std::vector<Value*> stack_;
    std::vector<size_t> marks_;
    std::vector<Value*> memo_;
    std::unordered_map<std::string, Value*> storages_;   // by key: tensors sharing a storage share its bytes
};

Value* Machine::persistent_load(Value* pid) {
    const auto& t = pid->items;
    if (pid->kind != Value::Kind::Tuple || t.size() != 5 || t[0]->kind != Value::Kind::String ||
        t[0]->text != "storage" || t[1]->kind != Value::Kind::Global || t[2]->kind != Value::Kind::String ||
        t[3]->kind != Value::Kind::String || t[4]->kind != Value::Kind::Int)
        fail("a persistent id is not ('storage', torch.<Type>Storage, key, location, numel)",
             "razor reads state dicts that torch.save wrote (PyTorch 1.6 or later)");
    const StorageTypeName* type = nullptr;
    for (const auto& s : kStorageTypes)
        if (t[1]->text == s.global) type = &s;
    if (!type) fail(fmt("a persistent id names '", t[1]->text, "', expected a torch.<Type>Storage"));
    if (t[4]->integer < 0) fail(fmt("storage '", t[2]->text, "' has ", t[4]->integer, " elements"));
    if (auto it = storages_.find(t[2]->text); it != storages_.end()) {
        if (it->second->storage.type != type->type || it->second->storage.numel != t[4]->integer)
            fail(fmt("storage '", t[2]->text, "' is named twice with different types or sizes"));
        return it->second;
    }
    Value* v = make(Value::Kind::Storage);
    v->storage = StorageRef{type->type, t[2]->text, t[3]->text, t[4]->integer};
    v->storage_bytes = load_(v->storage);
    RAZOR_CHECK(v->storage_bytes && static_cast<int64_t>(v->storage_bytes->size()) ==
                                        t[4]->integer * static_cast<int64_t>(storage_element_size(type->type)))
        << "storage loader returned the wrong size for '" << t[2]->text << "'";
    storages_.emplace(t[2]->text, v);
    return v;
}

// _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]):
// the tensor is the view element (offset + sum_d i_d stride_d) of the storage for every index i < size.
Value* Machine::rebuild_tensor(const std::vector<Value*>& a) {
    auto ints = [&](const Value* tuple, const char* what) {
        if (tuple->kind != Value::Kind::Tuple) fail(fmt("a tensor's ", what, " is a ", tuple->kind_name(), ", expected a tuple"));
        if (static_cast<int64_t>(tuple->items.size()) > kMaxDims)
            fail(fmt("a tensor has ", tuple->items.size(), " dimensions, razor reads up to ", kMaxDims));
        std::vector<int64_t> v;
        for (const Value* x : tuple->items) {
            if (x->kind != Value::Kind::Int || x->integer < 0)
                fail(fmt("a tensor's ", what, " holds a ", x->kind_name(), " ", x->integer, ", expected integers >= 0"));
            v.push_back(x->integer);
        }
        return v;
    };
    if ((a.size() != 6 && a.size() != 7) || a[0]->kind != Value::Kind::Storage || a[1]->kind != Value::Kind::Int)
        fail(fmt("_rebuild_tensor_v2 got ", a.size(), " arguments, expected (storage, offset, size, stride, "
                 "requires_grad, hooks[, metadata])"));
    const Value& storage = *a[0];
    const int64_t offset = a[1]->integer;
    const Shape size = ints(a[2], "size");
    const std::vector<int64_t> stride = ints(a[3], "stride");
    if (size.size() != stride.size()) fail(fmt("a tensor has ", size.size(), " sizes but ", stride.size(), " strides"));
    // The last element the view reads must lie inside the storage (computed without overflow).
    __int128 numel = 1, last = offset;
    for (size_t d = 0; d < size.size(); ++d) {
        numel *= size[d];
        if (numel > (__int128{1} << 48)) fail("a tensor has more than 2^48 elements");
        if (size[d] > 0) last += static_cast<__int128>(size[d] - 1) * stride[d];
    }
    if (offset < 0 || (numel > 0 && last >= storage.storage.numel))
        fail(fmt("a tensor ", shape_str(size), " at offset ", offset, " reads past the end of storage '",
                 storage.storage.key, "' (", storage.storage.numel, " elements)"));

    const StorageType type = storage.storage.type;
    const size_t es = storage_element_size(type);
    const DType dtype = razor_dtype(type);
    Tensor t = Tensor::empty(size, dtype);
    const char* base = storage.storage_bytes->data();
    const int64_t n = static_cast<int64_t>(numel);
    std::vector<int64_t> index(size.size(), 0);
    int64_t at = offset;   // storage element of the current index
    const bool contiguous = stride == contiguous_strides(size);
    if (contiguous && type == StorageType::F32) {   // the common case: a straight copy
        if (n > 0) std::memcpy(t.f32(), base + offset * 4, static_cast<size_t>(n) * 4);
        Value* v = make(Value::Kind::Tensor);
        v->tensor = t;
        return v;
    }
    for (int64_t i = 0; i < n; ++i) {
        const char* p = base + (contiguous ? offset + i : at) * static_cast<int64_t>(es);
        if (dtype == DType::F32) t.f32()[i] = element_f32(type, p);
        else if (dtype == DType::I64) t.i64()[i] = element_i64(type, p);
        else t.data<uint8_t>()[i] = type == StorageType::Bool ? (*p != 0) : static_cast<uint8_t>(*p);
        if (contiguous) continue;
        for (int64_t d = static_cast<int64_t>(size.size()) - 1; d >= 0; --d) {   // next index, last dim fastest
            at += stride[d];
            if (++index[d] < size[d]) break;
            at -= stride[d] * size[d];
            index[d] = 0;
        }
    }
    Value* v = make(Value::Kind::Tensor);
    v->tensor = t;
    return v;
}

Value* Machine::reduce(Value* callable, Value* args) {
    if (callable->kind != Value::Kind::Global)
        fail(fmt("REDUCE calls a ", callable->kind_name(), ", expected one of razor's allowed globals"));
    if (args->kind != Value::Kind::Tuple) fail(fmt("REDUCE's arguments are a ", args->kind_name(), ", expected a tuple"));
    const std::string& f = callable->text;
    if (f == kOrderedDict) {
        Value* d = make(Value::Kind::Dict);
        if (args->items.empty()) return d;
        const Value* pairs = args->items[0];
        if (args->items.size() != 1 || (pairs->kind != Value::Kind::List && pairs->kind != Value::Kind::Tuple))
            fail("OrderedDict(...) takes one list of (key, value) pairs");
        for (Value* p : pairs->items) {
            if ((p->kind != Value::Kind::Tuple && p->kind != Value::Kind::List) || p->items.size() != 2)
                fail("OrderedDict(...) takes (key, value) pairs");
            set_item(d, p->items[0], p->items[1]);
        }
        return d;
    }
    if (f == kRebuildTensor) return rebuild_tensor(args->items);
    if (f == kRebuildParameter) {   // nn.Parameter(data, requires_grad, backward_hooks): the data
        if (args->items.empty() || args->items[0]->kind != Value::Kind::Tensor)
            fail("_rebuild_parameter expects a tensor first");
        return args->items[0];
    }
    fail(fmt("'", f, "' is only allowed as a storage type, not called"));
}

Value* Machine::run() {
    using K = Value::Kind;
    while (true) {
        op_at_ = pos_;
        op_ = static_cast<uint8_t>(*take(1));
        switch (op_) {
            case 0x80: {   // PROTO
                const uint64_t proto = take_uint(1);
                if (proto < 2 || proto > 5) fail(fmt("pickle protocol ", proto, ", razor reads 2 to 5"));
                break;
            }
            case 0x95: take_uint(8); break;   // FRAME: a length prefix; the opcodes follow as usual
            case '.': {                        // STOP
                Value* result = pop();
                if (!stack_.empty() || !marks_.empty()) fail("STOP leaves values on the stack");
                return result;
            }
            case '(': marks_.push_back(stack_.size()); break;   // MARK
            case '0': pop(); break;                              // POP
            case '1': pop_mark(); break;                         // POP_MARK
            case '2': push(top()); break;                        // DUP
            case 'N': push(make(K::None)); break;
            case 0x88: case 0x89: {   // NEWTRUE, NEWFALSE
                Value* v = make(K::Bool);
                v->boolean = op_ == 0x88;
                push(v);
                break;
            }
            case 'J': push(make_int(static_cast<int32_t>(take_uint(4)))); break;   // BININT
            case 'K': push(make_int(static_cast<int64_t>(take_uint(1)))); break;   // BININT1
            case 'M': push(make_int(static_cast<int64_t>(take_uint(2)))); break;   // BININT2
            case 0x8a: push(make_long(take_uint(1))); break;                       // LONG1
            case 0x8b: push(make_long(take_uint(4))); break;                       // LONG4
            case 'G': {   // BINFLOAT: big-endian double
                const uint64_t bits = [&] {
                    const auto* p = reinterpret_cast<const unsigned char*>(take(8));
                    uint64_t b = 0;
                    for (int i = 0; i < 8; ++i) b = (b << 8) | p[i];
                    return b;
                }();
                Value* v = make(K::Float);
                std::memcpy(&v->real, &bits, 8);
                push(v);
                break;
            }
            case 'X': push(make_string(K::String, take_uint(4))); break;   // BINUNICODE
            case 0x8c: push(make_string(K::String, take_uint(1))); break;  // SHORT_BINUNICODE
            case 0x8d: push(make_string(K::String, take_uint(8))); break;  // BINUNICODE8
            case 'T': push(make_string(K::String, take_uint(4))); break;   // BINSTRING (Python 2 str)
            case 'U': push(make_string(K::String, take_uint(1))); break;   // SHORT_BINSTRING
            case 'B': push(make_string(K::Bytes, take_uint(4))); break;    // BINBYTES
            case 'C': push(make_string(K::Bytes, take_uint(1))); break;    // SHORT_BINBYTES
            case 0x8e: push(make_string(K::Bytes, take_uint(8))); break;   // BINBYTES8
            case 0x96: push(make_string(K::Bytes, take_uint(8))); break;   // BYTEARRAY8
            case ')': push(make_tuple({})); break;                         // EMPTY_TUPLE
            case 't': push(make_tuple(pop_mark())); break;                 // TUPLE
            case 0x85: case 0x86: case 0x87: {                             // TUPLE1..3
                std::vector<Value*> items(static_cast<size_t>(op_ - 0x84));
                for (size_t i = items.size(); i-- > 0;) items[i] = pop();
                push(make_tuple(std::move(items)));
                break;
            }
            case ']': push(make(K::List)); break;   // EMPTY_LIST
            case 'l': {                             // LIST
                Value* v = make(K::List);
                v->items = pop_mark();
                push(v);
                break;
            }
            case 'a': {   // APPEND
                Value* item = pop();
                Value* list = top();
                if (list->kind != K::List) fail(fmt("appends to a ", list->kind_name(), ", expected a list"));
                list->items.push_back(item);
                break;
            }
            case 'e': {   // APPENDS
                std::vector<Value*> items = pop_mark();
                Value* list = top();
                if (list->kind != K::List) fail(fmt("appends to a ", list->kind_name(), ", expected a list"));
                list->items.insert(list->items.end(), items.begin(), items.end());
                break;
            }
            case '}': push(make(K::Dict)); break;   // EMPTY_DICT
            case 'd': case 'u': {                   // DICT, SETITEMS
                std::vector<Value*> kv = pop_mark();
                if (kv.size() % 2) fail("a dict's keys and values do not pair up");
                Value* dict = op_ == 'd' ? make(K::Dict) : top();
                for (size_t i = 0; i < kv.size(); i += 2) set_item(dict, kv[i], kv[i + 1]);
                if (op_ == 'd') push(dict);
                break;
            }
            case 's': {   // SETITEM
                Value* value = pop();
                Value* key = pop();
                set_item(top(), key, value);
                break;
            }
            case 'c': {   // GLOBAL "module\nname\n"
                std::string module = take_line();
                global(module, take_line());
                break;
            }
            case 0x93: {   // STACK_GLOBAL
                Value* name = pop();
                Value* module = pop();
                if (module->kind != K::String || name->kind != K::String) fail("STACK_GLOBAL needs two strings");
                global(module->text, name->text);
                break;
            }
            case 'R': {   // REDUCE
                Value* args = pop();
                Value* callable = pop();
                push(reduce(callable, args));
                break;
            }
            case 'b': {   // BUILD: an OrderedDict's attributes (state_dict()._metadata) or a Parameter's; not kept
                Value* state = pop();
                Value* object = top();
                const bool attributes = state->kind == K::Dict || state->kind == K::None || state->kind == K::Tuple;
                if (!attributes || (object->kind != K::Dict && object->kind != K::Tensor))
                    fail(fmt("BUILD sets the state of a ", object->kind_name(), " from a ", state->kind_name(),
                             "; razor accepts it only on dicts and tensors"));
                break;
            }
            case 'Q': push(persistent_load(pop())); break;   // BINPERSID
            case 'h': push(memo_get(take_uint(1))); break;    // BINGET
            case 'j': push(memo_get(take_uint(4))); break;    // LONG_BINGET
            case 'q': memo_put(take_uint(1)); break;          // BINPUT
            case 'r': memo_put(take_uint(4)); break;          // LONG_BINPUT
            case 0x94: memo_put(memo_.size()); break;         // MEMOIZE
            case 0x81: case 0x92: case 'i': case 'o': case 0x82: case 0x83: case 0x84:
                fail("the pickle constructs a Python object (NEWOBJ/INST/OBJ/EXT), which razor never does",
                     "if you trust the file, re-save only its weights in Python: torch.save(model.state_dict(), "
                     "'weights.pth')");
            case 'I': case 'L': case 'F': case 'S': case 'V': case 'P': case 'g': case 'p':
                fail("a protocol 0 text opcode; razor reads the binary protocols 2 to 5 that torch.save writes");
            default: fail("unknown or unsupported opcode");
        }
    }
}

}  // namespace

const char* storage_type_name(StorageType t) {
    for (const auto& s : kStorageTypes)
        if (s.type == t) return s.global + 6;   // without "torch."
    return "?";
}

size_t storage_element_size(StorageType t) {
    switch (t) {
        case StorageType::F64: case StorageType::I64: return 8;
        case StorageType::F32: case StorageType::I32: return 4;
        case StorageType::F16: case StorageType::BF16: case StorageType::I16: return 2;
        case StorageType::I8: case StorageType::U8: case StorageType::Bool: return 1;
    }
    return 1;
}

const char* Value::kind_name() const {
    switch (kind) {
        case Kind::None: return "None";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::Bytes: return "bytes";
        case Kind::Tuple: return "tuple";
        case Kind::List: return "list";
        case Kind::Dict: return "dict";
        case Kind::Global: return "global";
        case Kind::Storage: return "storage";
        case Kind::Tensor: return "tensor";
    }
    return "?";
}

Value* Unpickled::make(Value::Kind kind) {
    values_.push_back(std::make_unique<Value>());
    values_.back()->kind = kind;
    return values_.back().get();
}

Unpickled unpickle(std::string_view bytes, const std::string& source, const StorageLoader& load_storage) {
    Unpickled out;
    Machine machine(bytes, source, load_storage, out);
    out.root_ = machine.run();
    return out;
}

}  // namespace razor::pickle
