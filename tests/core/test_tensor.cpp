// tests/core/test_tensor.cpp -- storage, views, allocator accounting, RNG, safetensors round trip.
#include <unistd.h>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("tensor: factories, views and contiguous copies") {
    Tensor t = Tensor::arange(6);
    Tensor v = t.as_strided({3, 2}, {1, 3}, 0);   // a transposed view of a (2, 3) matrix
    CHECK_FALSE(v.is_contiguous());
    CHECK(v.to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
    CHECK(v.same_storage(t));
    Tensor c = v.contiguous();
    CHECK(c.is_contiguous());
    CHECK_FALSE(c.same_storage(t));
    CHECK(Tensor::full({2}, 3.f).to_vector() == std::vector<float>{3, 3});
    CHECK_THROWS_AS(Tensor::from_vector({2, 2}, {1, 2, 3}), Error);
}

TEST_CASE("tensor: clone copies every element, packed (in pieces above 1 MiB) or strided") {
    for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{300'001}}) {   // 300,001 floats: 1.2 MB, copied in 8 pieces
        INFO("n = ", n);
        Tensor t = Tensor::arange(n);
        Tensor c = t.clone();
        CHECK_FALSE(c.same_storage(t));
        CHECK(c.to_vector() == t.to_vector());
        // a view at an offset (its storage is larger than the view): only the view's elements
        Tensor tail = Tensor::arange(n + 5).as_strided({n}, {1}, 5);
        const std::vector<float> got = tail.clone().to_vector();
        REQUIRE(static_cast<int64_t>(got.size()) == n);
        CHECK(got.front() == 5.f);
        CHECK(got.back() == static_cast<float>(n + 4));
    }
    Tensor v = Tensor::arange(6).as_strided({3, 2}, {1, 3}, 0);   // strided: element by element
    CHECK(v.clone().to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("tensor: the tracking allocator counts live and peak bytes") {
    const MemoryStats before = memory_stats();
    reset_peak_memory();
    {
        Tensor a = Tensor::empty({1024});      // 4 KiB
        Tensor b = Tensor::empty({256}, DType::I64);   // 2 KiB
        CHECK(memory_stats().live_bytes - before.live_bytes == 6144);
    }
    CHECK(memory_stats().live_bytes == before.live_bytes);
    CHECK(memory_stats().peak_bytes - before.live_bytes == 6144);
}

TEST_CASE("rng: deterministic streams and restorable state") {
    Generator a(42), b(42);
    for (int i = 0; i < 10; ++i) CHECK(a.next_u64() == b.next_u64());
    auto state = a.state();
    const float x = a.normal();
    a.set_state(state);
    CHECK(a.normal() == x);
    Generator c(0);
    CHECK(c.next_u64() != 0);
    double mean = 0;
    for (int i = 0; i < 10000; ++i) mean += c.uniform();
    CHECK(mean / 10000 == doctest::Approx(0.5).epsilon(0.02));
}

TEST_CASE("safetensors: round trip, and corrupt files give errors that name the file") {
    const std::string path = "/tmp/razor_test_" + std::to_string(::getpid()) + ".safetensors";
    std::map<std::string, Tensor> tensors = {{"w", Tensor::arange(5)},
                                             {"idx", Tensor::from_vector_i64({2}, {7, -1})}};
    save_safetensors(path, tensors, {{"epoch", "3"}});
    SafeTensors back = load_safetensors(path);
    CHECK(back.tensors.at("w").to_vector() == std::vector<float>{0, 1, 2, 3, 4});
    CHECK(back.tensors.at("idx").to_vector_i64() == std::vector<int64_t>{7, -1});
    CHECK(back.metadata.at("epoch") == "3");

    std::string bytes = read_file(path);
    CHECK_THROWS_WITH_AS(parse_safetensors(bytes.substr(0, bytes.size() - 4), "ckpt.st"),
                         doctest::Contains("ckpt.st: tensor"), Error);
    CHECK_THROWS_WITH_AS(parse_safetensors("abc", "x.st"), doctest::Contains("truncated"), Error);
    std::string bad = bytes;
    bad[6] = '\x7f';   // header length beyond the file
    CHECK_THROWS_WITH_AS(parse_safetensors(bad, "y.st"), doctest::Contains("header length"), Error);
    CHECK_THROWS_WITH_AS(load_safetensors("/nonexistent/file.safetensors"),
                         doctest::Contains("/nonexistent/file.safetensors: cannot open"), Error);
    ::unlink(path.c_str());
}

TEST_CASE("safetensors: an empty tensor may have dimensions larger than the data section (found by fuzzing)") {
    using doctest::Contains;
    // Minimised from fuzz_safetensors: shape [0, 3] F32 next to one U8 byte. The reader used to bound every
    // dimension by the data size (1 byte here) and refused this valid file, which PyTorch writes and reads.
    const std::string header = R"({"e":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
                               R"("s":{"dtype":"U8","shape":[],"data_offsets":[0,1]}})";
    const std::string file = std::string(1, char(header.size())) + std::string(7, '\0') + header + "\x05";
    SafeTensors st = parse_safetensors(file, "empty.st");
    CHECK(st.tensors.at("e").shape() == Shape{0, 3});
    CHECK(st.tensors.at("s").data<uint8_t>()[0] == 5);
    CHECK(parse_safetensors(serialize_safetensors(st.tensors), "rt").tensors.at("e").shape() == Shape{0, 3});
    // Dimensions whose product (without the zeros) passes 2^62 are refused, so no stride can overflow int64 ...
    const std::string huge = R"({"h":{"dtype":"U8","shape":[0,4611686018427387904,2],"data_offsets":[0,0]}})";
    CHECK_THROWS_WITH_AS(parse_safetensors(std::string(1, char(huge.size())) + std::string(7, '\0') + huge, "h.st"),
                         Contains("h.st: tensor 'h': shape [0,4611686018427387904,2] has more than 2^62 elements"), Error);
    // ... and a non-empty tensor still needs its bytes.
    const std::string big = R"({"b":{"dtype":"U8","shape":[2,3],"data_offsets":[0,1]}})";
    CHECK_THROWS_WITH_AS(parse_safetensors(std::string(1, char(big.size())) + std::string(7, '\0') + big + "x", "b.st"),
                         Contains("b.st: tensor 'b': shape [2,3] is larger than the file's data (1 bytes)"), Error);
}

TEST_CASE("safetensors: an empty file round-trips, and a NUL byte in the header is refused (found by fuzzing)") {
    using doctest::Contains;
    // serialize_safetensors({}) wrote the header "null", which its own reader refuses; now "{}".
    SafeTensors empty = parse_safetensors(serialize_safetensors({}), "empty.st");
    CHECK(empty.tensors.empty());
    CHECK(empty.metadata.empty());
    CHECK(parse_safetensors(serialize_safetensors({}, {{"k", "v"}}), "meta.st").metadata.at("k") == "v");
    // Minimised from fuzz_safetensors: nlohmann::json ends its input at a NUL, so "{}\0<anything>" parsed as {}.
    const std::string header("{} \0{\"x\":1}   ", 14);
    CHECK_THROWS_WITH_AS(parse_safetensors(std::string(1, char(header.size())) + std::string(7, '\0') + header, "nul.st"),
                         Contains("nul.st: safetensors header contains a NUL byte at offset 11"), Error);
}

TEST_CASE("safetensors: a key twice in the header (a tensor or a metadata key) is refused, not last-one-wins") {
    using doctest::Contains;
    auto file = [](const std::string& header) {
        std::string len(8, '\0');
        for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
        return len + header + std::string(8, '\0');
    };
    const std::string t0 = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})",
                      t1 = R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})";
    CHECK(parse_safetensors(file("{\"a\":" + t0 + ",\"b\":" + t1 + "}"), "ok.st").tensors.size() == 2);
    CHECK_THROWS_WITH_AS(parse_safetensors(file("{\"a\":" + t0 + ",\"a\":" + t1 + "}"), "dup.st"),
                         Contains("dup.st: safetensors header has the key 'a' twice"), Error);
    CHECK_THROWS_WITH_AS(
        parse_safetensors(file(R"({"__metadata__":{"pair":"1","pair":"2"},"a":)" + t0 + "}"), "meta.st"),
        Contains("the key 'pair' twice"), Error);
}
