// tests/support/conv_reference.cpp -- see conv_reference.h.
#include "support/conv_reference.h"

namespace razor::test {

ConvReference conv_reference(const ConvGeometry& g, const Tensor& x_in, const Tensor& w_in, const Tensor& b_in,
                             const Tensor& gy_in) {
    const std::vector<float> x = x_in.to_vector(), w = w_in.to_vector(), gy = gy_in.to_vector();
    const std::vector<float> b = b_in.defined() ? b_in.to_vector() : std::vector<float>();
    std::vector<double> y(gy.size(), 0.0), gx(x.size(), 0.0), gw(w.size(), 0.0);
    for (int64_t n = 0; n < g.N; ++n)
        for (int64_t oc = 0; oc < g.OC; ++oc)
            for (int64_t oh = 0; oh < g.OH; ++oh)
                for (int64_t ow = 0; ow < g.OW; ++ow) {
                    const size_t yi = static_cast<size_t>(((n * g.OC + oc) * g.OH + oh) * g.OW + ow);
                    double acc = b.empty() ? 0.0 : b[static_cast<size_t>(oc)];
                    for (int64_t cg = 0; cg < g.Cg; ++cg)
                        for (int64_t kh = 0; kh < g.KH; ++kh)
                            for (int64_t kw = 0; kw < g.KW; ++kw) {
                                const int64_t ih = oh * g.sh - g.ph + kh * g.dh, iw = ow * g.sw - g.pw + kw * g.dw;
                                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;   // zero padding
                                const int64_t c = oc / g.OCg * g.Cg + cg;
                                const size_t xi = static_cast<size_t>(((n * g.C + c) * g.H + ih) * g.W + iw);
                                const size_t wi = static_cast<size_t>(((oc * g.Cg + cg) * g.KH + kh) * g.KW + kw);
                                acc += double(w[wi]) * x[xi];
                                gx[xi] += double(w[wi]) * gy[yi];
                                gw[wi] += double(x[xi]) * gy[yi];
                            }
                    y[yi] = acc;
                }
    auto to_tensor = [](const std::vector<double>& v, const Shape& shape) {
        return Tensor::from_vector(shape, std::vector<float>(v.begin(), v.end()));
    };
    return {to_tensor(y, gy_in.shape()), to_tensor(gx, x_in.shape()), to_tensor(gw, w_in.shape())};
}

}  // namespace razor::test
