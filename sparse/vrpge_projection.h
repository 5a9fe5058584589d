// sparse/vrpge_projection.h -- the Euclidean projection of the keep probabilities onto
//   S = { s : 0 ≤ s ≤ 1, Σ s ≤ K }          K = ρ·n, the sum taken over ALL masked channels of the network.
//
// reference: the official VRPGE code (the bisection after every optimiser step; ProbMask's is identical).
// docs: docs/vr-pge.md §4.
//
// From the KKT conditions, P_S(z) = clip(z − v*, 0, 1) with ONE scalar shift v* for every layer:
//   v* = 0                         if Σ clip(z, 0, 1) ≤ K      (slack budget: the projection is a plain clip)
//   v* = the root v > 0 of g(v) = Σ clip(z − v, 0, 1) − K      otherwise (g is continuous, non-increasing)
//
// Two ways to find v*:
//   Bisection (default, the reference's rule, §5.2): f(0) < 0 → v = 0; else bisect on [0, max z], stopping when
//     |f(v)| < 1e-3 (in channels) or after 21 evaluations. Its Σ s is within 1e-3 of K unless the cap is hit.
//   Exact (§5.3): sort the 2n breakpoints {z_i, z_i − 1}, walk g down from v = max z with a running slope (the
//     number of channels strictly inside (0, 1)), and interpolate linearly in the bracketing piece. O(n log n).
// Sums and v are computed in double from the f32 scores; the result is written back in f32 (so the stored Σ s
// carries f32 rounding, ~1e-7 per channel, on top of the method's tolerance).
#pragma once

#include <vector>

#include "core/core.h"

namespace razor::sparse {

enum class ProjectionMethod { Bisection, Exact };

struct ProjectionResult {
    double shift = 0;     // v, subtracted from every score before the clip
    int iterations = 0;   // bisection evaluations after f(0) (the reference's `itr`); 0 when slack or Exact
    double sum = 0;       // Σ clip(z − v, 0, 1) in double: the expected kept-channel count after projection
};

// The shift v for scores z (the defined tensors of ChannelScores::parameters()) and budget K; changes nothing.
ProjectionResult projection_shift(const std::vector<Tensor>& z, double budget,
                                  ProjectionMethod method = ProjectionMethod::Bisection);

// z ← clip(z − v, 0, 1) in place on every tensor (under no-grad; bumps versions). Returns what projection_shift
// found. Clips even when the budget is slack (v = 0), as the reference. Adam's moments are not touched.
ProjectionResult project_scores_(const std::vector<Tensor>& z, double budget,
                                 ProjectionMethod method = ProjectionMethod::Bisection);

}  // namespace razor::sparse
