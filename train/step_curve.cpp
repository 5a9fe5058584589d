// train/step_curve.cpp -- see step_curve.h.
#include "train/step_curve.h"

#include <cmath>
#include <limits>

namespace razor::train {

void StepCurve::add(int64_t k, int64_t steps, double loss, double accuracy, double lr) {
    // m_t = beta m_{t-1} + (1 - beta) x_t;  smoothed = m_t / (1 - beta^t)
    s_.decay *= kCurveBeta;
    s_.loss_avg = kCurveBeta * s_.loss_avg + (1 - kCurveBeta) * loss;
    if (std::isfinite(accuracy)) s_.acc_avg = kCurveBeta * s_.acc_avg + (1 - kCurveBeta) * accuracy;
    const int64_t every = steps > 0 ? (steps + kCurvePoints - 1) / kCurvePoints : 1;
    if (k % every != 0 && k != steps) return;
    const double correction = 1 - s_.decay;
    s_.points.push_back({steps > 0 ? static_cast<double>(k) / steps : 1.0, s_.loss_avg / correction,
                       std::isfinite(accuracy) ? s_.acc_avg / correction : std::numeric_limits<double>::quiet_NaN(),
                       lr});
}

std::vector<CurvePoint> StepCurve::take() {
    std::vector<CurvePoint> out;
    out.swap(s_.points);
    s_.loss_avg = s_.acc_avg = 0, s_.decay = 1;
    return out;
}

nlohmann::json curve_json(const std::vector<CurvePoint>& points) {
    nlohmann::json at = nlohmann::json::array(), loss = at, acc = at, lr = at;
    for (const CurvePoint& p : points) {
        at.push_back(p.at), loss.push_back(p.loss), lr.push_back(p.lr);
        acc.push_back(std::isfinite(p.accuracy) ? nlohmann::json(p.accuracy) : nlohmann::json(nullptr));
    }
    return {{"at", at}, {"loss", loss}, {"acc", acc}, {"lr", lr}};
}

std::vector<CurvePoint> curve_from_json(const nlohmann::json& entry) {
    std::vector<CurvePoint> out;
    if (!entry.is_object() || !entry.contains("curve")) return out;
    const nlohmann::json& c = entry["curve"];
    const char* keys[] = {"at", "loss", "acc", "lr"};
    for (const char* key : keys)
        if (!c.is_object() || !c.contains(key) || !c[key].is_array() || c[key].size() != c["at"].size()) return out;
    const auto number = [](const nlohmann::json& v) {
        return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
    };
    for (size_t i = 0; i < c["at"].size(); ++i)
        out.push_back({number(c["at"][i]), number(c["loss"][i]), number(c["acc"][i]), number(c["lr"][i])});
    return out;
}

}  // namespace razor::train
