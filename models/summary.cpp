// models/summary.cpp -- see summary.h.
#include "models/summary.h"

#include <cstdio>
#include <map>
#include <set>

#include "nn/attention.h"
#include "nn/conv.h"
#include "nn/linear.h"

namespace razor::models {
namespace {

// Own forward MACs of one call (see the conventions in summary.h).
int64_t own_macs(const nn::Module& m, const Tensor& x, const Tensor& y) {
    if (auto* conv = dynamic_cast<const nn::Conv2d*>(&m)) {
        const int64_t k = conv->config.kernel_size;
        return y.numel() * (conv->in_channels / conv->config.groups) * k * k;
    }
    if (auto* lin = dynamic_cast<const nn::Linear*>(&m)) return y.numel() * lin->in_features;
    if (auto* attn = dynamic_cast<const nn::MultiheadAttention*>(&m)) {
        const int64_t B = x.size(0), N = x.size(1), D = attn->embed_dim;
        return B * N * 3 * D * D + 2 * B * N * N * D;   // in-projection + q k^T + p v
    }
    return 0;
}

// The kernels conv2d chose for this call of the layer (conv_algorithms_str of select_algorithm).
std::string conv_kernel(const nn::Conv2d& conv, const Tensor& x) {
    const nn::Conv2dConfig& c = conv.config;
    const Conv2dOptions o{{c.stride, c.stride}, {c.padding, c.padding}, {c.dilation, c.dilation}, c.groups};
    return conv_algorithms_str(select_algorithm(conv2d_geometry(x.shape(), conv.weight.shape(), o)));
}

void collect(const nn::Module& m, const std::string& path, int depth, std::vector<LayerSummary>& out,
             std::map<std::string, size_t>& index) {
    LayerSummary row;
    row.path = path;
    row.type = m.type_name();
    row.depth = depth;
    row.params = m.num_parameters();
    for (const auto& [name, child] : m.named_children()) row.params -= child->num_parameters();
    index[path] = out.size();
    out.push_back(row);
    for (const auto& [name, child] : m.named_children())
        collect(*child, path.empty() ? name : path + "." + name, depth + 1, out, index);
}

std::string with_commas(int64_t v) {
    std::string s = std::to_string(v < 0 ? -v : v), out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i && (s.size() - i) % 3 == 0) out += ',';
        out += s[i];
    }
    return v < 0 ? "-" + out : out;
}

// 1234567 -> "1.23 M"; below 1000 the integer itself.
std::string human(double v) {
    const char* units[] = {"", " K", " M", " G", " T"};
    int u = 0;
    while (v >= 1000 && u < 4) v /= 1000, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.2f%s", v, units[u]);
    return buf;
}

}  // namespace

ModelSummary summarize(nn::Module& model, const Shape& input_shape, uint64_t seed) {
    ModelSummary s;
    s.input = input_shape;
    std::map<std::string, size_t> index;
    collect(model, "", 0, s.layers, index);
    s.params = model.num_parameters();
    for (const auto& [name, t] : model.named_buffers()) s.buffer_elements += t.numel();

    // Restore the buffers (BN running statistics, num_batches_tracked) and the mode afterwards.
    std::vector<std::pair<Tensor, Tensor>> buffers;
    for (const auto& [name, t] : model.named_buffers()) buffers.emplace_back(t, t.clone());
    const bool was_training = model.is_training();

    std::set<uint64_t> before;
    for (const auto& r : current_tape().records()) before.insert(r.id);
    Generator gen(seed);
    const Tensor x = Tensor::randn(input_shape, gen);
    model.train();
    {
        nn::ForwardObserverGuard observer([&](const nn::Module& m, const std::string& path, const Tensor& in,
                                               const Tensor& out) {
            auto it = index.find(path);
            if (it == index.end()) return;   // a module outside the tree (called by hand); not ours to count
            LayerSummary& row = s.layers[it->second];
            row.called = true;
            row.output = out.shape();
            row.macs += own_macs(m, in, out);
            if (auto* conv = dynamic_cast<const nn::Conv2d*>(&m)) row.kernel = conv_kernel(*conv, in);
        });
        const Tensor y = model(x);   // the graph, and so the tape, lives until the end of this scope
        s.output = y.shape();
        std::map<std::pair<std::string, std::string>, size_t> tape_index;   // (path, op) -> s.tape
        for (const auto& r : current_tape().records()) {
            if (before.count(r.id)) continue;
            if (r.kind != SaveKind::Parameter) {
                auto [t, fresh] = tape_index.try_emplace({r.module_path, r.op}, s.tape.size());
                if (fresh) s.tape.push_back(TapeRow{r.module_path, r.op, "", r.shape});
                TapeRow& row = s.tape[t->second];
                row.saved += (row.saved.empty() ? "" : " ") + r.name + ":" + r.format;
                ++row.items;
                row.stored_bytes += r.stored_bytes;
                row.dense_bytes += r.dense_bytes;
            }
            auto it = index.find(r.module_path);
            LayerSummary& row = s.layers[it == index.end() ? 0 : it->second];
            row.saved_bytes += r.stored_bytes;
            row.saved_dense_bytes += r.dense_bytes;
            s.saved_bytes += r.stored_bytes;
            s.saved_dense_bytes += r.dense_bytes;
            ++s.saved_items;
        }
    }
    for (const auto& row : s.layers) s.macs += row.macs;

    model.train(was_training);
    NoGradGuard no_grad;
    for (auto& [live, saved] : buffers) live.copy_(saved);
    return s;
}

std::string format_summary(const ModelSummary& s) {
    const int64_t batch = s.input.empty() ? 1 : s.input[0];
    std::string out;
    char line[512];
    std::snprintf(line, sizeof line, "%-34s %-20s %-18s %12s %11s %11s %11s  %s\n", "module", "type", "output",
                  "params", "FLOPs", "saved", "dense-eq", "kernel");
    out += line;
    out += std::string(140, '-') + "\n";
    for (const auto& row : s.layers) {
        const std::string name = std::string(2 * row.depth, ' ') + (row.path.empty() ? "(model)" : row.path);
        const std::string shape = row.called ? shape_str(row.output) : "(not called)";
        std::snprintf(line, sizeof line, "%-34s %-20s %-18s %12s %11s %11s %11s  %s\n", name.c_str(), row.type.c_str(),
                      shape.c_str(), row.params ? with_commas(row.params).c_str() : "-",
                      row.macs ? human(2.0 * row.macs).c_str() : "-",
                      row.saved_bytes ? format_bytes(row.saved_bytes).c_str() : "-",
                      row.saved_dense_bytes ? format_bytes(row.saved_dense_bytes).c_str() : "-",
                      row.kernel.empty() ? "-" : row.kernel.c_str());
        out += line;
    }
    out += std::string(140, '-') + "\n";
    out += fmt("rows count what each module does itself (a container: its inline ops); FLOPs = 2 x MACs and tape "
               "bytes are for the batch of ", batch, "\n");
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.1fx", s.saved_bytes ? double(s.saved_dense_bytes) / s.saved_bytes : 0.0);
    out += fmt("input         ", shape_str(s.input), " -> output ", shape_str(s.output), "\n");
    out += fmt("parameters    ", with_commas(s.params), " (", format_bytes(s.params * 4), " fp32)   buffers ",
               with_commas(s.buffer_elements), "\n");
    out += fmt("forward MACs  ", with_commas(s.macs / batch), " per image (", human(static_cast<double>(s.macs) / batch),
               ")\n");
    out += fmt("forward FLOPs ", with_commas(2 * s.macs / batch), " per image (", human(2.0 * s.macs / batch),
               "); a training step ~3x: ", human(6.0 * s.macs / batch), "\n");
    out += fmt("saved tape    ", format_bytes(s.saved_bytes), " for batch ", batch, " (", format_bytes(s.saved_bytes / batch),
               " per image; dense fp32 tape ", format_bytes(s.saved_dense_bytes), ", ", ratio, ") in ",
               s.saved_items, " items\n");
    return out;
}

std::string format_tape(const ModelSummary& s) {
    std::string out;
    char line[640];
    auto ratio = [](int64_t dense, int64_t stored) {
        char buf[32];
        if (stored == 0) std::snprintf(buf, sizeof buf, dense ? "shared" : "-");
        else std::snprintf(buf, sizeof buf, "%.1fx", double(dense) / stored);
        return std::string(buf);
    };
    std::snprintf(line, sizeof line, "%-26s %-12s %-18s %11s %11s %7s  %s\n", "module", "op", "shape", "stored",
                  "dense-eq", "ratio", "saved (item:format)");
    out += line;
    out += std::string(123, '-') + "\n";
    for (const TapeRow& r : s.tape) {
        std::snprintf(line, sizeof line, "%-26s %-12s %-18s %11s %11s %7s  %s\n",
                      r.path.empty() ? "(model)" : r.path.c_str(), r.op.c_str(), shape_str(r.shape).c_str(),
                      format_bytes(r.stored_bytes).c_str(), format_bytes(r.dense_bytes).c_str(),
                      ratio(r.dense_bytes, r.stored_bytes).c_str(), r.saved.c_str());
        out += line;
    }
    out += std::string(123, '-') + "\n";
    // Per op family: where the bytes are.
    std::map<std::string, std::pair<int64_t, int64_t>> by_op;
    for (const TapeRow& r : s.tape) by_op[r.op].first += r.stored_bytes, by_op[r.op].second += r.dense_bytes;
    out += "by op        ";
    for (const auto& [op, b] : by_op)
        out += fmt(op, " ", format_bytes(b.first), " / ", format_bytes(b.second), " (", ratio(b.second, b.first),
                   ")   ");
    out += "\n";
    out += fmt("tape total   stored ", format_bytes(s.saved_bytes), " vs dense-equivalent ",
               format_bytes(s.saved_dense_bytes), ": ", ratio(s.saved_dense_bytes, s.saved_bytes), " smaller (",
               s.saved_items, " items; batch ", s.input.empty() ? 1 : s.input[0], ")\n");
    return out;
}

}  // namespace razor::models
