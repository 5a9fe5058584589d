// core/autograd.cpp -- node linking and the backward walk (see autograd.h).
#include "core/autograd.h"

#include <atomic>
#include <queue>
#include <unordered_map>

#include "core/anomaly.h"
#include "core/check.h"

namespace razor {
namespace {
thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_sequence{0};

// dst += src, both contiguous F32 of equal numel. Gradient buffers are private to the engine, so this is safe.
void accumulate_into(Tensor& dst, const Tensor& src) {
    float* d = dst.f32();
    const Tensor s = src.contiguous();
    const float* sp = s.f32();
    const int64_t n = dst.numel();
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) d[i] += sp[i];
}

// A private, contiguous copy that later accumulations may write into.
Tensor owned_copy(const Tensor& g) { return g.clone(); }
}  // namespace

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

bool any_requires_grad(const Tensor* inputs, size_t count) {
    if (!t_grad_enabled) return false;
    for (size_t i = 0; i < count; ++i)
        if (inputs[i].defined() && inputs[i].requires_grad()) return true;
    return false;
}

void link_node(const std::shared_ptr<Node>& node, const char* op, const Tensor* inputs, size_t count,
               const Tensor& output) {
    node->op_ = op;
    node->module_path_ = current_module_path();
    node->sequence_ = g_sequence.fetch_add(1, std::memory_order_relaxed);
    node->edges_.reserve(count);
    for (size_t i = 0; i < count; ++i) {
        const Tensor& t = inputs[i];
        Node::Edge edge;
        if (t.defined()) {
            edge.shape = t.shape();
            if (t.requires_grad()) {
                if (t.grad_fn())
                    edge.node = t.grad_fn();
                else
                    edge.leaf = t.impl();
            }
        }
        node->edges_.push_back(std::move(edge));
    }
    node->ctx.bind(node->op_, node->module_path_);
    // Anomaly mode (a re-run of a step that went non-finite): one thread-local test otherwise.
    if (anomaly_mode_enabled()) detail::anomaly_check_forward(node->op_, node->module_path_, inputs, count, output);
    output.set_grad_fn(node);
}

// The walk. Nodes are run in an order where every consumer of a node's output has already contributed its
// gradient: count, for each node reachable from the root, how many edges point at it; run a node when that
// count reaches zero. Among ready nodes the most recently recorded runs first (as PyTorch), which frees the
// late, large activations early.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
    RAZOR_CHECK(root.defined()) << "backward() on an undefined tensor";
    if (!root.requires_grad())
        throw Error("backward(): the tensor does not require grad and has no grad_fn; hint: did the forward run "
                    "under NoGradGuard, or does no parameter have requires_grad_()?");
    Tensor seed = gradient;
    if (!seed.defined()) {
        if (root.numel() != 1)
            throw Error(fmt("backward(): a gradient can be created implicitly only for a one-element output, got ",
                            shape_str(root.shape()), "; hint: reduce to a scalar loss or pass backward(gradient)"));
        seed = Tensor::ones(root.shape());
    } else if (seed.shape() != root.shape()) {
        throw Error(fmt("backward(): gradient shape ", shape_str(seed.shape()), " does not match the output ",
                        shape_str(root.shape())));
    }

    NoGradGuard no_grad;
    // A leaf's first gradient becomes its .grad. When nothing else holds g's storage (a fresh, whole, contiguous
    // buffer: the usual case for a parameter's gradient) .grad takes it over, as PyTorch's AccumulateGrad does;
    // otherwise (an op that returned one tensor for two inputs, a view, the caller's seed) it gets a private copy.
    auto accumulate_leaf = [](const std::shared_ptr<TensorImpl>& leaf, Tensor& g) {
        Tensor leaf_tensor(leaf);
        Tensor current = leaf_tensor.grad();
        if (current.defined())
            accumulate_into(current, g);
        else if (g.impl().use_count() == 1 && g.storage().use_count() == 1 && g.is_contiguous() &&
                 static_cast<size_t>(g.numel()) * dtype_size(g.dtype()) == g.storage()->bytes)
            leaf_tensor.set_grad(std::move(g));
        else
            leaf_tensor.set_grad(owned_copy(g));
    };

    // A leaf's post-accumulate-grad hooks run when its last gradient of this backward has been added (a copy of
    // the list: a hook may remove itself).
    auto run_hooks = [](const std::shared_ptr<TensorImpl>& leaf) {
        const std::vector<TensorImpl::GradHook> hooks = leaf->post_accumulate_grad_hooks;
        const Tensor leaf_tensor(leaf);
        for (const auto& hook : hooks) hook.fn(leaf_tensor);
    };

    if (!root.grad_fn()) {   // a leaf: d(root)/d(root) = seed
        accumulate_leaf(root.impl(), seed);
        if (!root.impl()->post_accumulate_grad_hooks.empty()) run_hooks(root.impl());
        return;
    }

    // 1. Dependency counts over the reachable graph, and for each leaf with hooks the number of edges into it.
    std::unordered_map<Node*, int> dependencies;
    std::unordered_map<TensorImpl*, int> hooked_leaf_edges;
    {
        std::vector<Node*> stack{root.grad_fn().get()};
        dependencies[root.grad_fn().get()] = 0;
        while (!stack.empty()) {
            Node* node = stack.back();
            stack.pop_back();
            for (const auto& edge : node->edges()) {
                if (edge.leaf && !edge.leaf->post_accumulate_grad_hooks.empty()) ++hooked_leaf_edges[edge.leaf.get()];
                if (!edge.node) continue;
                auto [it, inserted] = dependencies.try_emplace(edge.node.get(), 0);
                ++it->second;
                if (inserted) stack.push_back(edge.node.get());
            }
        }
    }

    // 2. Run nodes in dependency order, accumulating gradients per node.
    auto later_first = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
        return a->sequence() < b->sequence();
    };
    std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, decltype(later_first)> ready(
        later_first);
    std::unordered_map<Node*, Tensor> pending;   // node -> sum of gradients w.r.t. its output
    pending[root.grad_fn().get()] = seed;
    ready.push(root.grad_fn());

    while (!ready.empty()) {
        std::shared_ptr<Node> node = ready.top();
        ready.pop();
        Tensor grad_output = std::move(pending[node.get()]);
        pending.erase(node.get());
        if (node->ctx.released())
            throw Error(fmt(node->op(), ": backward through this part of the graph a second time, but its saved "
                            "tensors were freed after the first backward; hint: call backward(gradient, "
                            "/*retain_graph=*/true) the first time, or run the forward again"));

        std::vector<Tensor> grads = node->backward_consuming(std::move(grad_output));
        RAZOR_CHECK_EQ(grads.size(), node->num_inputs()) << "node " << node->op() << " returned a wrong count";
        if (!retain_graph) node->ctx.release();
        if (anomaly_mode_enabled()) detail::anomaly_check_backward(node->op(), node->module_path(), grads);

        for (size_t i = 0; i < grads.size(); ++i) {
            const Node::Edge& edge = node->edges()[i];
            if (!edge.wants_grad()) continue;
            Tensor& g = grads[i];
            RAZOR_CHECK(g.defined()) << node->op() << " returned no gradient for input " << i << " that needs one";
            if (g.shape() != edge.shape)
                throw Error(fmt(node->op(), " backward: gradient for input ", i, " has shape ", shape_str(g.shape()),
                                " but the input has shape ", shape_str(edge.shape),
                                "; hint: this is a bug in the op's backward")); 
            if (edge.leaf) {
                accumulate_leaf(edge.leaf, g);
                if (auto it = hooked_leaf_edges.find(edge.leaf.get()); it != hooked_leaf_edges.end() && --it->second == 0)
                    run_hooks(edge.leaf);
                continue;
            }
            Node* next = edge.node.get();
            auto it = pending.find(next);
            if (it == pending.end())
                pending.emplace(next, g);
            else {
                if (it->second.same_storage(g) || !it->second.is_contiguous() || it->second.storage().use_count() > 1)
                    it->second = owned_copy(it->second);
                accumulate_into(it->second, g);
            }
            if (--dependencies[next] == 0) ready.push(edge.node);
        }
    }
}

}  // namespace razor
