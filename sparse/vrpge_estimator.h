// sparse/vrpge_estimator.h -- the VR-PGE structure gradient: K = 2 sampled masks, leave-one-out baseline.
//
// reference: the official VRPGE code (trainers/default.py: s.grad += Σ_k (L_k − L̄) g⁽ᵏ⁾; utils/conv_type.py: g).
// docs: docs/vr-pge.md §3.
//
// With two masks m⁽¹⁾, m⁽²⁾ drawn independently from Bernoulli(s), evaluated on the SAME minibatch with full mean
// losses L₁, L₂ (not the halved losses the weight backward uses), per channel c:
//
//   s.grad_c += ½ (L₁ − L₂) (g⁽¹⁾_c − g⁽²⁾_c)                           (= Σ_k (L_k − L̄) g⁽ᵏ⁾_c with L̄ = (L₁+L₂)/2)
//   ScoreNorm::Sqrt  (default, the official code):  g = (m − s) / √((s + ε)(1 − s + ε))       ε = 1e-20
//                    E[δ̃] = √(s(1−s)) ⊙ ∇_sΦ: a preconditioned gradient, variance ≤ B²/2 for every s.
//   ScoreNorm::Exact (the textbook leave-one-out REINFORCE):  g = (m − s) / ((s + ε)(1 − s + ε))
//                    E[δ] = ∇_sΦ exactly (unbiased), variance ~ 1/s near the boundaries.
//
// Only channels where the two masks disagree receive a non-zero term. At s ∈ {0, 1} exactly, m ≡ s so the numerator
// is 0 and the term is 0 (ε keeps the denominator positive: no NaN). ε inside the exact form is razor's addition
// (the reference's exact variant divides by s(1−s) and gives 0/0 at the boundary); it changes nothing for s
// further than ~1e-10 from {0, 1}. Each coordinate is computed in double and added to the f32 grad.
//
// Estimator::Pge, the ablation of spec §4.4 (NOT the reference): vanilla policy gradients, the same two passes and
// the same score g but no baseline, averaged over the K = 2 samples:
//
//   s.grad_c += ½ (L₁ g⁽¹⁾_c + L₂ g⁽²⁾_c)
//
// Its mean equals VR-PGE's (E[g] = 0, so subtracting L̄ changes no expectation), but every channel receives a term
// on every step, and the term scales with L itself instead of L₁ − L₂: a constant added to the loss leaves VR-PGE
// unchanged and inflates vanilla PGE's variance. With the exact score and a loss ≥ c > 0 one sample's variance is at
// least c²/(s(1 − s)) − (∂Φ/∂s)², unbounded as s → 0 or 1 (spec §4.5). The development repository's vanilla variant
// computes (m − s)(1 − s)/s by a precedence bug; this is (m − s)/(s(1 − s)). It exists to show what the baseline
// buys (docs/vr-pge.md §2).
#pragma once

#include <cmath>

#include "sparse/vrpge_scores.h"

namespace razor::sparse {

enum class ScoreNorm { Sqrt, Exact };
enum class Estimator { VrPge, Pge };   // leave-one-out baseline (the reference) | none (vanilla PGE, an ablation)

inline constexpr double kVrpgeEps = 1e-20;

// The per-channel score g(m, s) of one pass. T = double in razor (float would round 1e-20 · 1e-20 to 0 for the
// product but each factor stays representable, as the spec notes; double is simply the safer choice).
template <class T>
T vrpge_score(T s, T m, ScoreNorm norm) {
    const T denom = (s + T(kVrpgeEps)) * (T(1) - s + T(kVrpgeEps));
    return norm == ScoreNorm::Sqrt ? (m - s) / std::sqrt(denom) : (m - s) / denom;
}

// One coordinate of the K = 2 estimator: ½ (L₁ − L₂)(g⁽¹⁾ − g⁽²⁾).
template <class T>
T vrpge_delta(T s, T m1, T m2, T L1, T L2, ScoreNorm norm) {
    return T(0.5) * (L1 - L2) * (vrpge_score(s, m1, norm) - vrpge_score(s, m2, norm));
}

// One coordinate of the vanilla estimator (Estimator::Pge): ½ (L₁ g⁽¹⁾ + L₂ g⁽²⁾).
template <class T>
T pge_delta(T s, T m1, T m2, T L1, T L2, ScoreNorm norm) {
    return T(0.5) * (L1 * vrpge_score(s, m1, norm) + L2 * vrpge_score(s, m2, norm));
}

// Adds the structure gradient into every masked layer's s.grad (creating a zero grad first if it has none), from the
// two passes' masks (ChannelScores::sample) and full losses. s must not have changed since the masks were drawn.
void accumulate_vrpge_grad(const ChannelScores& scores, const ChannelMasks& pass1, const ChannelMasks& pass2,
                           double L1, double L2, ScoreNorm norm = ScoreNorm::Sqrt,
                           Estimator estimator = Estimator::VrPge);

}  // namespace razor::sparse
