// core/autograd.h -- reverse-mode autograd: nodes, the backward walk, grad mode.
//
// reference: torch.autograd (Function/Node, engine, no_grad). docs: docs/autograd.md.
//
// A differentiable op, in its forward, asks record<MyBackward>(op, inputs, output). That returns nullptr when no
// input requires a gradient (or grad mode is off): then nothing is saved and no node exists. Otherwise the node
// is linked to the inputs' grad_fn (or, for leaves, to the leaf itself), becomes the output's grad_fn, and the
// op saves what backward needs into node->ctx (saved.h).
//
// Semantics (as PyTorch; documented because micrograd's users trip on them):
//   * Gradients accumulate into leaf.grad with +=. Calling backward twice (two forwards, or retain_graph=true)
//     without zero_grad() doubles them.
//   * Only leaves that require grad get .grad. A tensor used by several ops receives the sum of their gradients.
//   * Each node's saved state is freed right after its backward (retain_graph=false). A second backward
//     through the same graph is then an error that says so.
//   * Backward runs with grad mode off: gradients have no history (no double backward).
//   * The walk hands each node its output's gradient (Node::backward_consuming); ReLU, BatchNorm, GELU and softmax
//     write their input's gradient over it when nothing else holds it (a gradient shared by two inputs, or a seed
//     the caller passed and still holds, is left alone). Fewer activation-sized gradients are alive at once.
//   * Writing in place into a tensor some node saved makes that node's backward throw, naming the op.
//   * A leaf's post-accumulate-grad hooks (Tensor::register_post_accumulate_grad_hook) run once per backward,
//     right after its last gradient of that backward was added, while the walk goes on to earlier nodes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/saved.h"
#include "core/tape.h"
#include "core/tensor.h"

namespace razor {

// One recorded op. Single output; one gradient slot per input.
class Node {
public:
    Node() = default;
    virtual ~Node() = default;
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    // grad_output has the output's shape. Returns one gradient per input, in input order; an undefined Tensor
    // for inputs that need none (see needs_grad(i)). Shapes must equal the inputs' shapes (the engine checks).
    virtual std::vector<Tensor> backward(const Tensor& grad_output) = 0;
    // What the walk calls: grad_output is handed over, and nothing else reads it afterwards. A node whose input
    // gradient is elementwise in grad_output (a ReLU's mask, BatchNorm's second pass) overrides this to write that
    // gradient over grad_output's buffer when grad_output.sole_owner(), so the two never take memory at once. The
    // default is backward().
    virtual std::vector<Tensor> backward_consuming(Tensor&& grad_output) { return backward(grad_output); }

    const std::string& op() const { return op_; }
    const std::string& module_path() const { return module_path_; }
    bool needs_grad(size_t input) const { return input < edges_.size() && edges_[input].wants_grad(); }
    size_t num_inputs() const { return edges_.size(); }
    uint64_t sequence() const { return sequence_; }

    SavedContext ctx;   // what backward needs; released right after backward

    // Where the gradient of input i goes: the node that produced it, or the leaf itself.
    struct Edge {
        std::shared_ptr<Node> node;
        std::shared_ptr<TensorImpl> leaf;
        Shape shape;     // the input's shape, to check the gradient backward returns
        bool wants_grad() const { return node != nullptr || leaf != nullptr; }
    };
    const std::vector<Edge>& edges() const { return edges_; }

private:
    friend void link_node(const std::shared_ptr<Node>& node, const char* op, const Tensor* inputs, size_t count,
                          const Tensor& output);

    std::string op_;
    std::string module_path_;
    std::vector<Edge> edges_;
    uint64_t sequence_ = 0;
};

// Grad mode (thread-local). NoGradGuard turns recording off in a scope, as torch.no_grad().
bool grad_enabled();
class NoGradGuard {
public:
    NoGradGuard();
    ~NoGradGuard();
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
    bool previous_;
};

// Connects `node` to the inputs' producers and makes it the output's grad_fn (use record<N> instead).
void link_node(const std::shared_ptr<Node>& node, const char* op, const Tensor* inputs, size_t count,
               const Tensor& output);

// True when recording an op on these inputs would be useful.
bool any_requires_grad(const Tensor* inputs, size_t count);
inline bool any_requires_grad(std::initializer_list<Tensor> inputs) {
    return any_requires_grad(inputs.begin(), inputs.size());
}

// Records a node of type N for `op` if any input requires grad and grad mode is on; else returns nullptr.
// Undefined tensors in `inputs` (an absent bias) are allowed and get no gradient.
template <class N>
std::shared_ptr<N> record(const char* op, std::initializer_list<Tensor> inputs, const Tensor& output) {
    if (!any_requires_grad(inputs)) return nullptr;
    auto node = std::make_shared<N>();
    link_node(node, op, inputs.begin(), inputs.size(), output);
    return node;
}

// The same for a run-time number of inputs (concat).
template <class N>
std::shared_ptr<N> record(const char* op, const std::vector<Tensor>& inputs, const Tensor& output) {
    if (!any_requires_grad(inputs.data(), inputs.size())) return nullptr;
    auto node = std::make_shared<N>();
    link_node(node, op, inputs.data(), inputs.size(), output);
    return node;
}

// The backward walk (Tensor::backward calls this).
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace razor
