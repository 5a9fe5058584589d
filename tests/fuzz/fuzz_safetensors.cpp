// tests/fuzz/fuzz_safetensors.cpp -- libFuzzer target: bytes -> parse_safetensors (core/safetensors.h).
// Accepted input must survive a round trip: serialize what was parsed, parse it again, get the same tensors.
#include <cstring>

#include "core/safetensors.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace razor;
    SafeTensors st;
    if (!fuzz::accepts([&] { st = parse_safetensors(fuzz::bytes(data, size), "fuzz.safetensors"); })) return 0;
    SafeTensors again;
    fuzz::require(fuzz::accepts([&] { again = parse_safetensors(serialize_safetensors(st.tensors, st.metadata), "rt"); }),
                  "serialize_safetensors output parses");
    fuzz::require(again.metadata == st.metadata, "round trip keeps __metadata__");
    fuzz::require(again.tensors.size() == st.tensors.size(), "round trip keeps every tensor");
    for (const auto& [name, t] : st.tensors) {
        auto it = again.tensors.find(name);
        fuzz::require(it != again.tensors.end(), "round trip keeps tensor names");
        const Tensor& u = it->second;
        fuzz::require(u.shape() == t.shape() && u.dtype() == t.dtype(), "round trip keeps shape and dtype");
        fuzz::require(t.nbytes() == 0 || std::memcmp(u.storage()->data, t.storage()->data, t.nbytes()) == 0,
                      "round trip keeps the bytes");
    }
    return 0;
}
