// tests/core/ops/test_index_select.cpp -- index_select / index_add: gradcheck, duplicates, PyTorch parity, errors,
// what is saved.
#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

TEST_CASE("index_select / index_add: gradcheck") {
    Tensor x = randn_leaf({3, 5, 4}, 31);
    const Tensor idx = Tensor::from_vector_i64({4}, {4, 0, 4, 2});   // a duplicate
    // Gather / scatter-add are linear: finite differences are exact up to float rounding.
    for (int64_t dim : {0, 1, 2, -1}) {
        const Tensor index = Tensor::from_vector_i64({3}, {2, 0, 2});
        gradcheck("index_select dim " + std::to_string(dim),
                  [dim, index](const std::vector<Tensor>& in) { return index_select(in[0], dim, index); }, {x});
    }
    gradcheck("index_select dup", [idx](const std::vector<Tensor>& in) { return index_select(in[0], 1, idx); }, {x});
    Tensor src = randn_leaf({3, 4, 4}, 32);
    gradcheck("index_add", [idx](const std::vector<Tensor>& in) { return index_add(in[0], 1, idx, in[1]); },
              {x, src});
}

TEST_CASE("index_select: duplicate indices add their gradients; index_add adds duplicates") {
    Tensor x = randn_leaf({2, 3}, 33);
    Tensor y = index_select(x, 1, Tensor::from_vector_i64({4}, {2, 2, 0, 2}));   // (2, 4)
    CHECK(y.shape() == Shape{2, 4});
    CHECK(y.to_vector()[0] == x.to_vector()[2]);
    y.backward(Tensor::ones({2, 4}));
    CHECK(x.grad().to_vector() == std::vector<float>{1, 0, 3, 1, 0, 3});

    Tensor base = Tensor::zeros({4});
    Tensor out = index_add(base, 0, Tensor::from_vector_i64({3}, {1, 1, 3}), Tensor::from_vector({3}, {1, 2, 5}));
    CHECK(out.to_vector() == std::vector<float>{0, 3, 0, 5});
    CHECK(base.to_vector() == std::vector<float>(4, 0.f));   // out-of-place
    // Empty index: empty output, zero gradient.
    Tensor x2 = randn_leaf({3, 2}, 34);
    Tensor e = index_select(x2, 0, Tensor::empty({0}, DType::I64));
    CHECK(e.shape() == Shape{0, 2});
    e.backward(Tensor::zeros({0, 2}));
    CHECK(x2.grad().to_vector() == std::vector<float>(6, 0.f));
    // A large, parallel scatter-add with many duplicates equals a serial reference.
    Generator gen(5);
    Tensor big = randn_leaf({8, 16, 300}, 35);
    std::vector<int64_t> iv(64);
    for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int64_t>(gen.randint(16));
    Tensor yb = index_select(big, 1, Tensor::from_vector_i64({64}, iv));
    Tensor gb = Tensor::randn(yb.shape(), gen);
    yb.backward(gb);
    std::vector<double> ref(8 * 16 * 300, 0.0);
    const auto gv = gb.to_vector();
    for (int64_t o = 0; o < 8; ++o)
        for (int64_t i = 0; i < 64; ++i)
            for (int64_t j = 0; j < 300; ++j) ref[(o * 16 + iv[i]) * 300 + j] += gv[(o * 64 + i) * 300 + j];
    const auto got = big.grad().to_vector();
    int64_t bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) bad += std::abs(got[i] - ref[i]) > 1e-5 * (1 + std::abs(ref[i]));
    CHECK(bad == 0);
}

TEST_CASE("index_select / index_add: errors name the index value and the dim size") {
    Tensor x = Tensor::zeros({2, 5, 3});
    CHECK_THROWS_WITH_AS(index_select(x, 1, Tensor::from_vector_i64({3}, {0, 7, 1})),
                         doctest::Contains("index_select: index value 7 (at position 1) is out of range for dim 1 of size 5"),
                         Error);
    CHECK_THROWS_WITH_AS(index_select(x, 1, Tensor::from_vector_i64({1}, {-1})),
                         doctest::Contains("index value -1 (at position 0) is out of range for dim 1 of size 5"), Error);
    CHECK_THROWS_WITH_AS(index_select(x, 1, Tensor::from_vector({1}, {1.f})),
                         doctest::Contains("index_select: expected index of dtype i64, got f32"), Error);
    CHECK_THROWS_WITH_AS(index_select(x, 1, Tensor::from_vector_i64({1, 1}, {1})),
                         doctest::Contains("index_select: expected a 1-D index, got shape (1, 1)"), Error);
    CHECK_THROWS_WITH_AS(index_select(x, 3, Tensor::from_vector_i64({1}, {1})),
                         doctest::Contains("index_select: dimension 3 is out of range"), Error);
    CHECK_THROWS_WITH_AS(index_select(Tensor::zeros({2}, DType::I64), 0, Tensor::from_vector_i64({1}, {1})),
                         doctest::Contains("index_select: expected x of dtype f32, got i64"), Error);
    const Tensor idx = Tensor::from_vector_i64({2}, {0, 4});
    CHECK_THROWS_WITH_AS(index_add(x, 1, idx, Tensor::zeros({2, 3, 3})),
                         doctest::Contains("index_add: expected src (2, 2, 3) (base (2, 5, 3) with size(1) = index length 2), got (2, 3, 3)"),
                         Error);
    CHECK_THROWS_WITH_AS(index_add(x, 2, idx, Tensor::zeros({2, 5, 2})),
                         doctest::Contains("index_add: index value 4 (at position 1) is out of range for dim 2 of size 3"),
                         Error);
}

TEST_CASE("index_select / index_add: save only the index (i64), and only when needed") {
    Tape& tape = current_tape();
    Tensor x = randn_leaf({4, 6}, 36);
    Tensor y = index_select(x, 1, Tensor::from_vector_i64({5}, {0, 1, 5, 5, 2}));
    CHECK(tape.live().items == 1);
    CHECK(tape.live().stored_bytes == 5 * 8);   // the index, not x (96 bytes)
    auto records = tape.records();
    REQUIRE(records.size() == 1);
    CHECK(records[0].kind == SaveKind::Indices);
    y.backward(Tensor::ones(y.shape()));
    CHECK(tape.live().stored_bytes == 0);

    // index_add: only src's gradient needs the index.
    Tensor base = randn_leaf({4, 6}, 37);
    Generator gen(2);
    Tensor src_frozen = Tensor::randn({4, 2}, gen);
    Tensor z = index_add(base, 1, Tensor::from_vector_i64({2}, {3, 3}), src_frozen);
    CHECK(tape.live().items == 0);
    z.backward(Tensor::ones(z.shape()));
    CHECK(base.grad().to_vector() == std::vector<float>(24, 1.f));
    Tensor src = randn_leaf({4, 2}, 38);
    Tensor z2 = index_add(Tensor::zeros({4, 6}), 1, Tensor::from_vector_i64({2}, {3, 3}), src);
    CHECK(tape.live().stored_bytes == 2 * 8);
    z2.backward(Tensor::ones(z2.shape()));
    CHECK(tape.live().stored_bytes == 0);
    CHECK(src.grad().to_vector() == std::vector<float>(8, 1.f));
}

TEST_CASE("index_select / index_add: match PyTorch") {
    SafeTensors fx = load_fixture("shape_index");
    auto& t = fx.tensors;
    const Tensor index = t.at("index");
    {
        Tensor x = leaf(t.at("x"));
        Tensor y = index_select(x, 1, index);
        check_close(y, t.at("select.out"), 0, 0, "index_select forward");   // a gather: bit-exact
        y.backward(t.at("select.grad_out"));
        // Duplicates add two floats: same order as torch's serial loop, but allow float rounding.
        check_close(x.grad(), t.at("select.grad_x"), 1e-6, 1e-7, "index_select grad");
    }
    {
        Tensor x = leaf(t.at("x"));
        Tensor y = index_select(x, 0, Tensor::from_vector_i64({3}, {2, 2, 0}));
        check_close(y, t.at("select0.out"), 0, 0, "index_select dim 0 forward");
        y.backward(t.at("select0.grad_out"));
        check_close(x.grad(), t.at("select0.grad_x"), 1e-6, 1e-7, "index_select dim 0 grad");
    }
    {
        Tensor base = leaf(t.at("base")), src = leaf(t.at("src"));
        Tensor y = index_add(base, 1, index, src);
        check_close(y, t.at("add.out"), 1e-6, 1e-7, "index_add forward");
        y.backward(t.at("add.grad_out"));
        check_close(base.grad(), t.at("add.grad_base"), 0, 0, "index_add grad base");
        check_close(src.grad(), t.at("add.grad_src"), 0, 0, "index_add grad src");
    }
}
