// tests/sparse/test_masker.cpp -- the masker: exact counts, the tie rule, zeros, per-sample independence, thread and
// SIMD independence, agreement with the reference rule, the energy bound (spec §12 items 1-6).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/core.h"
#include "sparse/back_razor.h"

using namespace razor;
using namespace razor::sparse;

namespace {

std::vector<float> randn_vec(int64_t n, uint64_t seed, float scale = 1.f) {
    Generator gen(seed);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = gen.normal() * scale;
    return v;
}

// An independent statement of razor's rule: sort indices by (|x| descending, index ascending), take the first c,
// drop exact zeros. (No keys, no histogram.)
std::vector<char> naive_keep(const std::vector<float>& x, int64_t c) {
    std::vector<int64_t> idx(x.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
    std::vector<char> keep(x.size(), 0);
    for (int64_t i = 0; i < c; ++i)
        if (x[idx[i]] != 0.f) keep[idx[i]] = 1;
    return keep;
}

// The reference rule: keep |x| >= the k-th smallest |x|.
std::vector<char> reference_keep(const std::vector<float>& x, double r) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<float> mag(x.size());
    for (size_t i = 0; i < x.size(); ++i) mag[i] = std::fabs(x[i]);
    std::vector<float> sorted = mag;
    std::sort(sorted.begin(), sorted.end());
    const float thr = sorted[static_cast<size_t>(prune_rank(n, r) - 1)];
    std::vector<char> keep(x.size());
    for (size_t i = 0; i < x.size(); ++i) keep[i] = mag[i] >= thr;
    return keep;
}

struct Packed {
    std::vector<uint64_t> bits;
    std::vector<float> values;
    SampleThreshold t;
};

// Every kernel family this CPU runs (core/isa.h), the portable one (Isa::Generic, the oracle) first.
std::vector<Isa> families() {
    std::vector<Isa> out;
    for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512})
        if (isa_supported(isa)) out.push_back(isa);
    return out;
}

Packed run_sample(const std::vector<float>& x, double r, TieMode mode, Isa isa) {
    const int64_t n = static_cast<int64_t>(x.size());
    MaskerScratch scratch;
    Packed p;
    p.t = select_threshold(x.data(), n, keep_count(n, r), mode, scratch, isa);
    p.bits.assign(static_cast<size_t>((n + 63) / 64), ~uint64_t{0});   // garbage: pack must overwrite every word
    p.values.assign(static_cast<size_t>(p.t.kept()) + 4, -12345.f);     // guard entries: must stay untouched
    const int64_t count = pack_sample_f32(x.data(), n, p.t, p.bits.data(), p.values.data(), isa);
    CHECK(count == p.t.kept());
    for (size_t i = static_cast<size_t>(count); i < p.values.size(); ++i) CHECK(p.values[i] == -12345.f);
    p.values.resize(static_cast<size_t>(count));
    return p;
}

bool bit(const std::vector<uint64_t>& bits, int64_t i) { return (bits[i >> 6] >> (i & 63)) & 1u; }

// Bitmap equals `keep`, padding bits are 0, and the values are x at the kept positions, in order, bit for bit.
void check_packed(const Packed& p, const std::vector<float>& x, const std::vector<char>& keep, const char* what) {
    const int64_t n = static_cast<int64_t>(x.size());
    int64_t j = 0, mismatched_bits = 0, mismatched_values = 0;
    for (int64_t i = 0; i < n; ++i) {
        mismatched_bits += bit(p.bits, i) != static_cast<bool>(keep[i]);
        if (bit(p.bits, i)) {
            if (j >= static_cast<int64_t>(p.values.size()) ||
                std::bit_cast<uint32_t>(p.values[j]) != std::bit_cast<uint32_t>(x[i]))
                ++mismatched_values;
            ++j;
        }
    }
    for (int64_t i = n; i < static_cast<int64_t>(p.bits.size()) * 64; ++i) mismatched_bits += bit(p.bits, i);
    INFO(what << " n=" << n);
    CHECK(mismatched_bits == 0);
    CHECK(mismatched_values == 0);
    CHECK(j == static_cast<int64_t>(p.values.size()));
}

}  // namespace

TEST_CASE("masker: keep count (spec §12.1), computed in double as the reference") {
    CHECK(prune_rank(151296, 0.9) == 136166);
    CHECK(keep_count(151296, 0.9) == 15131);
    CHECK(static_cast<double>(keep_count(151296, 0.9)) / 151296 == doctest::Approx(0.100009).epsilon(1e-5));
    CHECK(keep_count(1000, 0.0) == 1000);    // r = 0: k clips to 1, everything kept
    CHECK(keep_count(1000, 1.0) == 1);       // r = 1: k = n_s, only the largest
    CHECK(keep_count(10, 0.95) == 2);        // k = floor(9.5) = 9
    CHECK(keep_count(10, 0.05) == 10);       // k = clip(0.5, 1, 10) = 1
    CHECK(keep_count(10, 0.9) == 2);         // k = 9 (the reference keeps thr = 9th smallest and above: 2)
    CHECK(keep_count(1, 0.9) == 1);
    CHECK(keep_count(0, 0.9) == 0);
}

TEST_CASE("masker: exact count and the same set as an independent sort, for many sizes and ratios") {
    uint64_t seed = 1;
    for (int64_t n : {1, 2, 7, 15, 16, 17, 63, 64, 65, 100, 1000, 4099, 16384}) {
        for (double r : {0.0, 0.3, 0.5, 0.9, 0.97, 0.999, 1.0}) {
            const std::vector<float> x = randn_vec(n, seed++);
            const int64_t c = keep_count(n, r);
            for (Isa isa : families()) {
                const Packed p = run_sample(x, r, TieMode::Razor, isa);
                CHECK(p.t.kept() == c);
                check_packed(p, x, naive_keep(x, c), isa_name(isa));
            }
        }
    }
}

TEST_CASE("masker: ties at the boundary keep exactly c, lowest indices first (spec §12.3)") {
    // 1000 elements: 50 large distinct values, the rest all +-1 (one magnitude): c = 100 needs 50 of the ties.
    std::vector<float> x(1000);
    Generator gen(5);
    for (int64_t i = 0; i < 1000; ++i) x[i] = (gen.uniform() < 0.5f ? -1.f : 1.f);
    for (int64_t i = 0; i < 50; ++i) x[i * 19 + 3] = 10.f + static_cast<float>(i);
    const double r = 0.9;
    const int64_t c = keep_count(1000, r);
    REQUIRE(c == 101);
    for (Isa isa : families()) {
        const Packed p = run_sample(x, r, TieMode::Razor, isa);
        CHECK(p.t.kept() == c);
        CHECK(p.t.greater == 50);
        CHECK(p.t.ties == 51);
        check_packed(p, x, naive_keep(x, c), isa_name(isa));
        // The 51 kept ties are the 51 lowest-index +-1 entries.
        int64_t seen = 0, last_kept = -1, first_skipped = -1;
        for (int64_t i = 0; i < 1000; ++i) {
            if (std::fabs(x[i]) != 1.f) continue;
            if (bit(p.bits, i)) ++seen, last_kept = i;
            else if (first_skipped < 0) first_skipped = i;
        }
        CHECK(seen == 51);
        CHECK(last_kept < first_skipped);
    }
    // The reference rule keeps every tie: all 1000.
    CHECK(run_sample(x, r, TieMode::Reference, active_isa()).t.kept() == 1000);
}

TEST_CASE("masker: all-zero and zero-heavy samples store only non-zeros (spec §12.4)") {
    const std::vector<float> zeros(300, 0.f);
    for (Isa isa : families()) {
        const Packed p = run_sample(zeros, 0.9, TieMode::Razor, isa);
        CHECK(p.t.kept() == 0);
        check_packed(p, zeros, std::vector<char>(300, 0), "all zero");
        // r = 1 and r = 0 too: nothing to store
        CHECK(run_sample(zeros, 1.0, TieMode::Razor, isa).t.kept() == 0);
        CHECK(run_sample(zeros, 0.0, TieMode::Razor, isa).t.kept() == 0);
    }
    // The reference keeps everything at threshold 0.
    CHECK(run_sample(zeros, 0.9, TieMode::Reference, active_isa()).t.kept() == 300);

    // 95% zeros (some -0.0) at r = 0.9: razor stores the 5% non-zeros (fewer than c = 101), reference stores all.
    std::vector<float> x = randn_vec(1000, 9);
    for (int64_t i = 0; i < 1000; ++i)
        if (i % 20 != 0) x[i] = (i % 3 == 0) ? -0.f : 0.f;
    for (Isa isa : families()) {
        const Packed p = run_sample(x, 0.9, TieMode::Razor, isa);
        CHECK(p.t.kept() == 50);
        std::vector<char> nonzero(1000);
        for (int64_t i = 0; i < 1000; ++i) nonzero[i] = x[i] != 0.f;
        check_packed(p, x, nonzero, "zero-heavy");
    }
    const Packed ref = run_sample(x, 0.9, TieMode::Reference, active_isa());
    CHECK(ref.t.kept() == 1000);
    check_packed(ref, x, std::vector<char>(1000, 1), "zero-heavy reference");
}

TEST_CASE("masker: razor and reference rules agree on random normal data (spec §12.5)") {
    for (int64_t n : {64, 777, 5000}) {
        for (double r : {0.5, 0.8, 0.9, 0.97}) {
            const std::vector<float> x = randn_vec(n, static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(r * 100));
            const Packed a = run_sample(x, r, TieMode::Razor, active_isa());
            const Packed b = run_sample(x, r, TieMode::Reference, active_isa());
            CHECK(a.bits == b.bits);
            CHECK(a.values == b.values);
            check_packed(b, x, reference_keep(x, r), "reference rule");
        }
    }
}

TEST_CASE("masker: energy bound |x - x_s|^2 <= (1 - c/n) |x|^2 per sample (spec §12.6)") {
    for (double r : {0.5, 0.9, 0.97}) {
        const std::vector<float> x = randn_vec(2000, 77);
        const Packed p = run_sample(x, r, TieMode::Razor, active_isa());
        double total = 0, dropped = 0;
        for (int64_t i = 0; i < 2000; ++i) {
            total += static_cast<double>(x[i]) * x[i];
            if (!bit(p.bits, i)) dropped += static_cast<double>(x[i]) * x[i];
        }
        CHECK(dropped <= (1.0 - static_cast<double>(keep_count(2000, r)) / 2000) * total);
    }
}

TEST_CASE("masker: NaN and inf rank above every finite magnitude (Release; Debug rejects them)") {
#ifdef NDEBUG
    std::vector<float> x = randn_vec(100, 3);
    x[10] = std::numeric_limits<float>::quiet_NaN();
    x[20] = -std::numeric_limits<float>::infinity();
    const Packed p = run_sample(x, 0.99, TieMode::Razor, active_isa());   // c = 2
    CHECK(p.t.kept() == 2);
    CHECK(bit(p.bits, 10));
    CHECK(bit(p.bits, 20));
#else
    MESSAGE("Debug build: the masker checks finiteness instead");
#endif
}

TEST_CASE("masker: results do not depend on the thread count or the SIMD path (spec §12.3)") {
    // 16 samples of 5000 values quantised to a few levels: heavy ties at every threshold, plus zeros.
    Generator gen(11);
    Tensor x = Tensor::empty({16, 50, 100});
    float* px = x.f32();
    for (int64_t i = 0; i < x.numel(); ++i) px[i] = std::round(gen.normal() * 3.f) / 4.f;
    auto payload = [&](int threads, Isa isa) {
        const int before = num_threads();
        set_num_threads(threads);
        auto packed = RazoredTensor::pack(x, {.ratio = 0.9, .values = ValueCodec::F32, .isa = isa});
        set_num_threads(before);
        const auto* bytes = reinterpret_cast<const uint8_t*>(packed->bitmap());
        return std::vector<uint8_t>(bytes, bytes + packed->stored_bytes());
    };
    const std::vector<uint8_t> one = payload(1, Isa::Generic);
    for (Isa isa : families()) {
        INFO(isa_name(isa));
        CHECK(payload(1, isa) == one);
        CHECK(payload(2, isa) == one);
        CHECK(payload(8, isa) == one);
    }
}

TEST_CASE("masker: scaling one sample changes no other sample (spec §12.2)") {
    Generator gen(21);
    Tensor x = Tensor::randn({3, 4, 50}, gen);
    auto a = RazoredTensor::pack(x, {.ratio = 0.9});
    Tensor y = x.clone();
    float* py = y.f32();
    for (int64_t i = 200; i < 400; ++i) py[i] *= 1e3f;   // sample 1
    auto b = RazoredTensor::pack(y, {.ratio = 0.9});
    const int64_t W = a->words_per_sample();
    for (int64_t s : {0, 2}) {
        CHECK(std::equal(a->bitmap() + s * W, a->bitmap() + (s + 1) * W, b->bitmap() + s * W));
        CHECK(std::equal(a->values_f32() + a->offsets()[s], a->values_f32() + a->offsets()[s + 1],
                         b->values_f32() + b->offsets()[s]));
    }
    // ...and sample 1 keeps the same positions (a uniform scale preserves the order), values scaled.
    CHECK(std::equal(a->bitmap() + W, a->bitmap() + 2 * W, b->bitmap() + W));
}

TEST_CASE("masker: the previous-threshold hint never changes the result (hits, misses, zeros, ties)") {
    // Successive samples through one scratch, as the codec does: scales that drift (hint hits), jump (misses),
    // zero-heavy and tied samples; every result must equal a fresh selection and the independent sort.
    const int64_t n = 3000;
    int64_t hits = 0, misses = 0;
    for (double r : {0.9, 0.5}) {
        MaskerScratch shared;
        int64_t sample = 0;
        for (float scale : {1.f, 1.05f, 1.1f, 0.97f, 50.f, 0.02f, 0.021f, 1.f, 0.f, 1.f, 1e-40f, 3.f, 3.f}) {
            std::vector<float> x = randn_vec(n, 100 + static_cast<uint64_t>(sample++), scale);
            if (sample % 4 == 0)
                for (int64_t i = 0; i < n; ++i) x[i] = std::round(x[i] * 2.f) / 2.f;   // heavy ties, some zeros
            const int64_t c = keep_count(n, r);
            MaskerScratch fresh;
            const SampleThreshold a = select_threshold(x.data(), n, c, TieMode::Razor, shared);
            const SampleThreshold b = select_threshold(x.data(), n, c, TieMode::Razor, fresh);
            INFO("scale " << scale << " r " << r);
            CHECK(a.key == b.key);
            CHECK(a.greater == b.greater);
            CHECK(a.ties == b.ties);
            Packed p;
            p.t = a;
            p.bits.assign(static_cast<size_t>((n + 63) / 64), 0);
            p.values.resize(static_cast<size_t>(a.kept()));
            pack_sample_f32(x.data(), n, a, p.bits.data(), p.values.data());
            check_packed(p, x, naive_keep(x, c), "hinted");
        }
        hits += shared.hint_hits, misses += shared.hint_misses;
    }
    CHECK(hits > 0);     // both paths were taken
    CHECK(misses > 0);
    // Subnormal-only and subnormal + zero samples go through the exponent-0 bucket.
    std::vector<float> tiny(500, 0.f);
    for (int64_t i = 0; i < 500; i += 3) tiny[i] = std::ldexp(static_cast<float>(i + 1), -140);
    for (double r : {0.5, 0.9, 0.0}) {
        const Packed p = run_sample(tiny, r, TieMode::Razor, active_isa());
        check_packed(p, tiny, naive_keep(tiny, keep_count(500, r)), "subnormals");
    }
}

TEST_CASE("masker: a multi-sample tensor with drifting scales equals the per-sample sort") {
    Generator gen(41);
    const int64_t B = 40, n_s = 700;
    Tensor x = Tensor::randn({B, n_s}, gen);
    float* px = x.f32();
    for (int64_t b = 0; b < B; ++b) {
        const float scale = b % 7 == 0 ? 30.f : 1.f + 0.02f * static_cast<float>(b);
        for (int64_t i = 0; i < n_s; ++i) px[b * n_s + i] *= scale;
        if (b % 5 == 0)
            for (int64_t i = 0; i < n_s; i += 2) px[b * n_s + i] = 0.f;
    }
    for (Isa isa : families()) {
        auto p = RazoredTensor::pack(x, {.ratio = 0.9, .isa = isa});
        for (int64_t b = 0; b < B; ++b) {
            std::vector<float> s(px + b * n_s, px + (b + 1) * n_s);
            const std::vector<char> keep = naive_keep(s, keep_count(n_s, 0.9));
            int64_t bad = 0;
            for (int64_t i = 0; i < n_s; ++i)
                bad += static_cast<bool>((p->bitmap()[b * p->words_per_sample() + (i >> 6)] >> (i & 63)) & 1u) !=
                       static_cast<bool>(keep[i]);
            INFO("sample " << b << " " << isa_name(isa));
            CHECK(bad == 0);
        }
    }
}
