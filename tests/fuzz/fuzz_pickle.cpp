// tests/fuzz/fuzz_pickle.cpp -- libFuzzer target: bytes -> pickle::unpickle (core/pickle.h) with a storage loader that
// serves zero bytes for any storage up to 1 MiB. Whatever is accepted must be a value tree the reader built itself.
#include "core/pickle.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace razor;
    const pickle::StorageLoader zeros = [](const pickle::StorageRef& ref) {
        const int64_t bytes = ref.numel * static_cast<int64_t>(pickle::storage_element_size(ref.type));
        if (bytes > (int64_t{1} << 20)) throw Error("fuzz: storage too large");
        return std::make_shared<const std::string>(static_cast<size_t>(bytes), '\0');
    };
    fuzz::accepts([&] {
        const pickle::Unpickled u = pickle::unpickle(fuzz::bytes(data, size), "fuzz.pkl", zeros);
        fuzz::require(u.root().kind_name()[0] != '?', "the root is a known kind");
    });
    return 0;
}
