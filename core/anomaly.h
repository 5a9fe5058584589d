// core/anomaly.h -- finding the first op that produced a NaN or an Inf: anomaly mode.
//
// reference: torch.autograd.detect_anomaly / set_detect_anomaly. docs: docs/reliability.md "Numerical faults".
//
// Normal steps pay nothing for this: a training loop checks the loss (one float) and the gradients (one pass, as
// clip_grad_norm_ does) and only when one of them is not finite runs the same step again under AnomalyMode. While
// an AnomalyMode is alive on a thread, the autograd engine checks
//   * forward:  every input of a recorded op that has no grad_fn (a parameter, a buffer-derived or data tensor: a NaN
//               weight read from a checkpoint is named here, by its parameter name when the guard was given it),
//               then the op's output;
//   * backward: every gradient a node returns, in the engine's execution order;
// and throws NonFiniteError at the first tensor holding a NaN or an Inf, naming the op, its module path ("layer1.0.
// conv1"), forward or backward, the shape and the counts. detect_anomaly() runs such a step and returns that report.
//
// Ops whose output is non-finite by design would be reported too; razor has none (softmax and max pooling start
// their running maxima at -inf internally, but no -inf reaches an output for finite inputs).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace razor {

struct NonFiniteCount {
    int64_t nan = 0, inf = 0;
    bool any() const { return nan + inf > 0; }
};
// Counts NaN and +-Inf entries of an F32 tensor (any layout); other dtypes have none.
NonFiniteCount count_nonfinite(const Tensor& t);
// True when every gradient of these tensors (the undefined ones are skipped) is finite. One pass, no allocation.
bool grads_finite(const std::vector<Tensor>& params);

// Where the first non-finite value appeared.
struct NonFiniteReport {
    std::string op;            // "log"; the consuming op for an input
    std::string module_path;   // "layer1.0.conv1"; "" at the top level
    std::string where;         // "forward output", "backward gradient for input 0", "input 1 (parameter fc.weight)"
    Shape shape;
    NonFiniteCount count;
    // "log (module 'fc2') forward output (8, 10): 3 NaN, 0 Inf of 80 values"
    std::string describe() const;
};

class NonFiniteError : public Error {
public:
    explicit NonFiniteError(NonFiniteReport report);
    const NonFiniteReport& report() const { return report_; }

private:
    NonFiniteReport report_;
};

// Turns anomaly checks on for this thread while alive. `named_leaves` (model.named_parameters()) lets a non-finite
// parameter be reported by its name.
class AnomalyMode {
public:
    explicit AnomalyMode(std::vector<std::pair<std::string, Tensor>> named_leaves = {});
    ~AnomalyMode();
    AnomalyMode(const AnomalyMode&) = delete;
    AnomalyMode& operator=(const AnomalyMode&) = delete;

private:
    const void* previous_;
};
bool anomaly_mode_enabled();
// Whether an op may write its result over t, a tensor its caller gave up (an x passed as Tensor&&, or the gradient
// the backward walk hands a node): t is defined, f32 and its storage's sole owner, and anomaly mode is off (its
// checks read every op's inputs after the op has run). docs/ops.md "Writing over an input the caller gives up".
bool may_write_over(const Tensor& t);

// Runs `step` (typically zero_grad, forward, loss, backward) under AnomalyMode. Returns the first non-finite value
// found, or nullopt when the step ran clean (then the fault did not reproduce, or lies outside autograd: an
// optimizer, a clipping norm). Other exceptions from `step` propagate.
std::optional<NonFiniteReport> detect_anomaly(const std::function<void()>& step,
                                              std::vector<std::pair<std::string, Tensor>> named_leaves = {});

namespace detail {
// Called by the engine (autograd.cpp) when anomaly_mode_enabled(); throw NonFiniteError.
void anomaly_check_forward(const std::string& op, const std::string& module_path, const Tensor* inputs, size_t count,
                           const Tensor& output);
void anomaly_check_backward(const std::string& op, const std::string& module_path, const std::vector<Tensor>& grads);
}  // namespace detail

}  // namespace razor
