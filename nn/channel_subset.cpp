// nn/channel_subset.cpp -- see channel_subset.h.
#include "nn/channel_subset.h"

#include <algorithm>
#include <iterator>

namespace razor::nn {

namespace {

thread_local ChannelSubsetScope* t_scope = nullptr;

// The positions of `sub` (sorted) inside `set` (sorted, a superset).
std::vector<int64_t> positions_in(const std::vector<int64_t>& sub, const std::vector<int64_t>& set) {
    std::vector<int64_t> pos;
    pos.reserve(sub.size());
    size_t j = 0;
    for (int64_t c : sub) {
        while (j < set.size() && set[j] < c) ++j;
        pos.push_back(static_cast<int64_t>(j++));
    }
    return pos;
}

}  // namespace

std::vector<int64_t> iota_channels(int64_t n) {
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
    return v;
}

Tensor index_tensor(const std::vector<int64_t>& idx) {
    return Tensor::from_vector_i64({static_cast<int64_t>(idx.size())}, idx);
}

ChannelTensor ChannelTensor::all(const Tensor& x, int64_t dim) { return {x, iota_channels(x.size(dim))}; }

Tensor to_dense(const ChannelTensor& x, int64_t width, int64_t dim) {
    if (static_cast<int64_t>(x.channels.size()) == width) return x.x;
    Shape s = x.x.shape();
    s[static_cast<size_t>(dim)] = width;
    if (x.channels.empty()) return Tensor::zeros(s);
    return index_add(Tensor::zeros(s), dim, index_tensor(x.channels), x.x);
}

ChannelTensor add_relu(const ChannelTensor& a, const ChannelTensor& b) {
    if (a.channels.empty() || b.channels.empty()) {
        const ChannelTensor& s = b.channels.empty() ? a : b;
        return {s.x.numel() ? relu(s.x) : s.x, s.channels};
    }
    if (a.channels == b.channels) return {razor::add_relu(a.x, b.x), a.channels};   // the dense case
    std::vector<int64_t> u;
    std::set_union(a.channels.begin(), a.channels.end(), b.channels.begin(), b.channels.end(), std::back_inserter(u));
    // One pass onto the union A ∪ O: no copy of the stream, no zero fill where neither holds every channel.
    return {add_relu_channels(a.x, positions_in(a.channels, u), b.x, positions_in(b.channels, u),
                              static_cast<int64_t>(u.size())),
            u};
}

void ChannelSubsets::keep(const std::string& path, std::vector<int64_t> channels) {
    for (size_t i = 0; i < channels.size(); ++i)
        if (channels[i] < 0 || (i > 0 && channels[i] <= channels[i - 1]))
            throw Error(fmt("ChannelSubsets::keep(", path, "): kept channels must be distinct, ascending and >= 0; "
                            "entry ", i, " is ", channels[i], "; hint: sort the list and drop duplicates"));
    kept_.insert_or_assign(path, std::move(channels));
}

const std::vector<int64_t>* ChannelSubsets::find(std::string_view path) const {
    auto it = kept_.find(path);
    return it == kept_.end() ? nullptr : &it->second;
}

const std::vector<int64_t>& ChannelSubsets::at(const std::string& path) const {
    if (const auto* k = find(path)) return *k;
    throw Error(fmt("ChannelSubsets: no kept-channel entry for module '", path, "' (", kept_.size(), " entries); "
                    "hint: build the plan from the model's scored_layers()"));
}

ChannelSubsetScope::ChannelSubsetScope(const ChannelSubsets& subsets) : subsets_(subsets), previous_(t_scope) {
    t_scope = this;
}
ChannelSubsetScope::~ChannelSubsetScope() { t_scope = previous_; }
ChannelSubsetScope* ChannelSubsetScope::current() { return t_scope; }

const std::vector<int64_t>* current_kept_channels(int64_t width, const std::string& module) {
    if (!t_scope) return nullptr;
    const std::string path = current_module_path();
    const std::vector<int64_t>* kept = t_scope->subsets().find(path);
    if (kept && !kept->empty() && kept->back() >= width)
        throw Error(fmt(module, ": the channel subset of '", path, "' keeps channel ", kept->back(), ", expected below ",
                        width, " (its out channels); hint: build the plan from this model's scored_layers()"));
    return kept;
}

void check_channels(const ChannelTensor& x, int64_t width, int64_t dim, const std::string& module) {
    const int64_t n = static_cast<int64_t>(x.channels.size());
    if (x.x.dim() <= dim || x.x.size(dim) != n || n > width || (n > 0 && x.channels.back() >= width))
        throw Error(fmt(module, ": expected a channel subset of ", width, " channels along dim ", dim, " with one "
                        "index per channel; got shape ", shape_str(x.x.shape()), " with ", n, " indices",
                        n ? fmt(" (largest ", x.channels.back(), ")") : std::string(),
                        "; hint: pass the producer's output (its channel list) unchanged"));
}

}  // namespace razor::nn
