// train/fit_position.cpp -- see fit_position.h.
#include "train/fit_position.h"

#include <bit>
#include <cmath>

#include "core/check.h"
#include "optim/optimizer.h"
#include "train/train_state.h"

namespace razor::train {
namespace {

constexpr const char* kMetric = "fit.metric.";
constexpr const char* kHint = "hint: resume from a folder razor wrote, or from its last.old/";

double real_entry(const std::map<std::string, Tensor>& state, const std::string& key, const std::string& where) {
    const double v = optim::unpack_f64(state_entry(state, key, where), where + ": " + key);
    if (!std::isfinite(v) || v < 0)
        throw Error(fmt(where, ": entry '", key, "' must be a finite number >= 0, got ", v, "; ", kHint));
    return v;
}

// Doubles as i64 bit patterns (exact, NaN included), as optim::pack_f64 keeps one.
Tensor pack_doubles(const Shape& shape, const std::vector<double>& v) {
    std::vector<int64_t> bits;
    for (double x : v) bits.push_back(std::bit_cast<int64_t>(x));
    return Tensor::from_vector_i64(shape, bits);
}
std::vector<double> unpack_doubles(const Tensor& t) {
    std::vector<double> v;
    for (int64_t b : t.to_vector_i64()) v.push_back(std::bit_cast<double>(b));
    return v;
}

}  // namespace

void pack_epoch_progress(const EpochProgress& p, std::map<std::string, Tensor>& state) {
    state["fit.steps"] = i64_scalar(p.steps);
    state["fit.skipped"] = i64_scalar(p.skipped);
    state["fit.finite"] = i64_scalar(p.finite);
    state["fit.seen"] = i64_scalar(p.seen);
    state["fit.correct"] = i64_scalar(p.correct);
    state["fit.loss_sum"] = optim::pack_f64(p.loss_sum);
    state["fit.seconds"] = optim::pack_f64(p.seconds);
    state["fit.tape"] = Tensor::from_vector_i64({3}, {p.tape.stored_bytes, p.tape.dense_bytes, p.tape.items});
    for (const auto& [name, sum] : p.metric_sums) state[kMetric + name] = optim::pack_f64(sum);
    const StepCurveState& c = p.curve.state();
    state["fit.curve"] = pack_doubles({3}, {c.loss_avg, c.acc_avg, c.decay});
    std::vector<double> points;
    for (const CurvePoint& q : c.points) points.insert(points.end(), {q.at, q.loss, q.accuracy, q.lr});
    state["fit.curve_points"] = pack_doubles({static_cast<int64_t>(c.points.size()), 4}, points);
}

EpochProgress read_epoch_progress(const std::map<std::string, Tensor>& state, const std::string& where,
                                  int64_t steps_per_epoch) {
    EpochProgress p;
    if (!state.count("fit.steps")) return p;
    constexpr int64_t kMax = int64_t{1} << 53;
    p.steps = state_i64(state, "fit.steps", where, 0, std::max<int64_t>(steps_per_epoch - 1, 0));
    p.skipped = state_i64(state, "fit.skipped", where, 0, p.steps);
    p.finite = state_i64(state, "fit.finite", where, p.steps - p.skipped, p.steps - p.skipped);
    p.seen = state_i64(state, "fit.seen", where, 0, kMax);
    p.correct = state_i64(state, "fit.correct", where, 0, p.seen);
    p.loss_sum = real_entry(state, "fit.loss_sum", where);
    p.seconds = real_entry(state, "fit.seconds", where);
    const Tensor& tape = state_entry(state, "fit.tape", where);
    if (tape.dtype() != DType::I64 || tape.numel() != 3)
        throw Error(fmt(where, ": entry 'fit.tape' must be 3 x i64 (stored, dense bytes, items), got ",
                        dtype_name(tape.dtype()), " ", shape_str(tape.shape()), "; ", kHint));
    const auto t = tape.to_vector_i64();
    if (t[0] < 0 || t[1] < 0 || t[2] < 0)
        throw Error(fmt(where, ": entry 'fit.tape' must hold sizes >= 0, got (", t[0], ", ", t[1], ", ", t[2], "); ",
                        kHint));
    p.tape = {.stored_bytes = t[0], .dense_bytes = t[1], .items = t[2]};
    const std::string prefix = kMetric;
    for (const auto& [key, value] : state)
        if (key.rfind(prefix, 0) == 0) {
            const double v = optim::unpack_f64(value, where + ": " + key);
            if (!std::isfinite(v)) throw Error(fmt(where, ": entry '", key, "' must be finite, got ", v, "; ", kHint));
            p.metric_sums[key.substr(prefix.size())] = v;
        }
    // the curve: entries of checkpoints from before it existed are absent (the epoch's curve then restarts)
    if (state.count("fit.curve")) {
        const Tensor& avg = state_entry(state, "fit.curve", where);
        const Tensor& pts = state_entry(state, "fit.curve_points", where);
        if (avg.dtype() != DType::I64 || avg.numel() != 3 || pts.dtype() != DType::I64 || pts.dim() != 2 ||
            pts.size(1) != 4 || pts.size(0) > kCurvePoints + 1)
            throw Error(fmt(where, ": entries 'fit.curve' (3 x i64) and 'fit.curve_points' (N <= ", kCurvePoints + 1,
                            " x 4 x i64) hold the per-step curve, got ", dtype_name(avg.dtype()), " ",
                            shape_str(avg.shape()), " and ", dtype_name(pts.dtype()), " ", shape_str(pts.shape()),
                            "; ", kHint));
        StepCurveState c;
        const auto a = unpack_doubles(avg);
        c.loss_avg = a[0], c.acc_avg = a[1], c.decay = a[2];
        if (!std::isfinite(c.loss_avg) || !std::isfinite(c.acc_avg) || !(c.decay > 0 && c.decay <= 1))
            throw Error(fmt(where, ": entry 'fit.curve' must hold finite averages and a decay in (0, 1], got (",
                            c.loss_avg, ", ", c.acc_avg, ", ", c.decay, "); ", kHint));
        const auto q = unpack_doubles(pts);
        for (size_t i = 0; i + 3 < q.size(); i += 4) {
            if (!(q[i] > 0 && q[i] <= 1) || !std::isfinite(q[i + 1]) || !std::isfinite(q[i + 3]))
                throw Error(fmt(where, ": entry 'fit.curve_points' row ", i / 4, " must be (at in (0, 1], finite loss, "
                                "accuracy, finite lr), got (", q[i], ", ", q[i + 1], ", ", q[i + 2], ", ", q[i + 3],
                                "); ", kHint));
            c.points.push_back({q[i], q[i + 1], q[i + 2], q[i + 3]});
        }
        p.curve = StepCurve(std::move(c));
    }
    return p;
}

}  // namespace razor::train
