// tests/support/gradcheck.cpp -- see gradcheck.h.
#include "support/gradcheck.h"

#include <cmath>
#include <sstream>

namespace razor::test {

namespace {
double weighted_sum(const Tensor& out, const Tensor& w) {
    Tensor o = out.contiguous();
    const float* po = o.f32();
    const float* pw = w.f32();
    double acc = 0;
    for (int64_t i = 0, n = o.numel(); i < n; ++i) acc += static_cast<double>(po[i]) * pw[i];
    return acc;
}
}  // namespace

bool gradcheck(const std::string& op, const OpFn& f, std::vector<Tensor> inputs, GradcheckOptions options) {
    for (Tensor& t : inputs) REQUIRE_MESSAGE((!t.defined() || t.is_contiguous()), op << ": gradcheck wants contiguous inputs");
    Tensor out = f(inputs);
    REQUIRE_MESSAGE(out.requires_grad(), op << ": output does not require grad");
    Generator gen(options.seed);
    Tensor w = Tensor::randn(out.shape(), gen);
    for (Tensor& t : inputs)
        if (t.defined() && t.requires_grad()) t.zero_grad();
    out.backward(w);

    bool ok = true;
    NoGradGuard no_grad;
    for (size_t k = 0; k < inputs.size(); ++k) {
        Tensor& x = inputs[k];
        if (!x.defined() || !x.requires_grad()) continue;
        Tensor analytic = x.grad();
        REQUIRE_MESSAGE(analytic.defined(), op << ": input " << k << " received no gradient");
        REQUIRE_MESSAGE(analytic.shape() == x.shape(), op << ": gradient shape " << shape_str(analytic.shape())
                                                           << " != input shape " << shape_str(x.shape()));
        const int64_t n = x.numel();
        std::vector<int64_t> probes;
        if (options.max_probes < 0 || options.max_probes >= n) {
            for (int64_t i = 0; i < n; ++i) probes.push_back(i);
        } else {
            for (int64_t i = 0; i < options.max_probes; ++i) probes.push_back(static_cast<int64_t>(gen.randint(n)));
        }
        float* px = x.f32();
        const Tensor ga = analytic.contiguous();
        for (int64_t i : probes) {
            const float saved = px[i];
            px[i] = static_cast<float>(saved + options.eps);
            const double plus = weighted_sum(f(inputs), w);
            px[i] = static_cast<float>(saved - options.eps);
            const double minus = weighted_sum(f(inputs), w);
            px[i] = saved;
            const double numeric = (plus - minus) / (2 * options.eps);
            const double got = ga.f32()[i];
            const bool pass = std::abs(numeric - got) <= options.atol + options.rtol * std::abs(numeric);
            if (!pass) {
                ok = false;
                CHECK_MESSAGE(pass, op << ": d/d input " << k << " element " << i << ": analytic " << got
                                       << " vs finite difference " << numeric);
            }
        }
    }
    CHECK_MESSAGE(ok, op << ": gradcheck failed");
    return ok;
}

Tensor randn_leaf(const Shape& shape, uint64_t seed, float scale) {
    Generator gen(seed);
    Tensor t = Tensor::randn(shape, gen);
    if (scale != 1.f) {
        float* p = t.f32();
        for (int64_t i = 0; i < t.numel(); ++i) p[i] *= scale;
    }
    t.requires_grad_();
    return t;
}

Tensor away_from(Tensor t, std::vector<float> points, float margin) {
    float* p = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i)
        for (float c : points)
            if (std::abs(p[i] - c) < margin) p[i] = p[i] >= c ? c + margin : c - margin;
    return t;
}

SafeTensors load_fixture(const std::string& name) {
    // appended piece by piece: GCC 12 reports a false -Warray-bounds on operator+ of a string literal here
    std::string path = RAZOR_FIXTURE_DIR;
    path.append("/").append(name).append(".safetensors");
    return load_safetensors(path);
}

void check_close(const Tensor& got, const Tensor& expected, double rtol, double atol, const std::string& what) {
    REQUIRE_MESSAGE(got.defined(), what << ": result is undefined");
    REQUIRE_MESSAGE(got.shape() == expected.shape(),
                    what << ": shape " << shape_str(got.shape()) << " vs expected " << shape_str(expected.shape()));
    Tensor g = got.contiguous(), e = expected.contiguous();
    double worst = 0;
    int64_t worst_i = -1;
    int64_t failures = 0;
    for (int64_t i = 0; i < g.numel(); ++i) {
        const double a = g.dtype() == DType::I64 ? g.i64()[i] : g.f32()[i];
        const double b = e.dtype() == DType::I64 ? e.i64()[i] : e.f32()[i];
        const double err = std::abs(a - b) - (atol + rtol * std::abs(b));
        if (err > 0 || std::isnan(a) != std::isnan(b)) {
            ++failures;
            if (err > worst || worst_i < 0) worst = err, worst_i = i;
        }
    }
    std::ostringstream os;
    if (failures)
        os << what << ": " << failures << " of " << g.numel() << " elements differ; worst at " << worst_i << ": got "
           << (g.dtype() == DType::I64 ? g.i64()[worst_i] : g.f32()[worst_i]) << ", expected "
           << (e.dtype() == DType::I64 ? e.i64()[worst_i] : e.f32()[worst_i]);
    CHECK_MESSAGE(failures == 0, os.str());
}

Tensor leaf(const Tensor& t) {
    Tensor c = t.clone();
    if (c.dtype() == DType::F32) c.requires_grad_();
    return c;
}

}  // namespace razor::test
