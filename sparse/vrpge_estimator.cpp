// sparse/vrpge_estimator.cpp -- the K = 2 VR-PGE term into s.grad. See vrpge_estimator.h.
#include "sparse/vrpge_estimator.h"

namespace razor::sparse {

namespace {
void check_masks(const ChannelScores& scores, const ChannelMasks& masks, const char* which) {
    const auto& layers = scores.layers();
    if (masks.m.size() != layers.size())
        throw Error(fmt("accumulate_vrpge_grad: ", which, " has masks for ", masks.m.size(), " layers, expected ",
                        layers.size(), "; hint: pass the ChannelMasks returned by this ChannelScores' sample()"));
    for (size_t i = 0; i < layers.size(); ++i)
        if (masks.m[i].numel() != layers[i].channels)
            throw Error(fmt("accumulate_vrpge_grad: ", which, " mask of layer '", layers[i].name, "' has ",
                            masks.m[i].numel(), " channels, expected ", layers[i].channels));
}
}  // namespace

void accumulate_vrpge_grad(const ChannelScores& scores, const ChannelMasks& pass1, const ChannelMasks& pass2,
                           double L1, double L2, ScoreNorm norm, Estimator estimator) {
    check_masks(scores, pass1, "pass1");
    check_masks(scores, pass2, "pass2");
    if (!std::isfinite(L1) || !std::isfinite(L2))
        throw Error(fmt("accumulate_vrpge_grad: expected finite losses, got L1 = ", L1, ", L2 = ", L2,
                        "; hint: a diverged pass would poison every s"));
    for (size_t i = 0; i < scores.layers().size(); ++i) {
        if (!scores.owns_mask(i)) continue;   // unmasked, or sharing its owner's Bernoulli variables
        const Tensor& s = scores.s(i);
        Tensor grad = s.grad();
        if (!grad.defined()) {
            grad = Tensor::zeros(s.shape());
            s.set_grad(grad);
        }
        const Tensor sc = s.contiguous(), m1c = pass1.m[i].contiguous(), m2c = pass2.m[i].contiguous();
        RAZOR_CHECK(grad.is_contiguous()) << "s.grad of " << scores.layers()[i].name << " is not contiguous";
        const float *sp = sc.data<float>(), *m1 = m1c.data<float>(), *m2 = m2c.data<float>();
        float* gp = grad.data<float>();
        if (estimator == Estimator::Pge) {
            for (int64_t c = 0; c < s.numel(); ++c)
                gp[c] += static_cast<float>(pge_delta<double>(sp[c], m1[c], m2[c], L1, L2, norm));
            continue;
        }
        for (int64_t c = 0; c < s.numel(); ++c) {
            if (m1[c] == m2[c]) continue;   // agreeing channels get exactly 0
            gp[c] += static_cast<float>(vrpge_delta<double>(sp[c], m1[c], m2[c], L1, L2, norm));
        }
    }
}

}  // namespace razor::sparse
