// apps/freeze.cpp -- see freeze.h.
#include "apps/freeze.h"

#include <algorithm>
#include <set>

#include "apps/suggest.h"
#include "core/check.h"

namespace razor::apps {
namespace {

// The module paths a parameter name runs through: "layer1.0.conv1.weight" -> layer1, layer1.0, layer1.0.conv1.
std::vector<std::string> module_paths(const std::string& name) {
    std::vector<std::string> out;
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
        out.push_back(name.substr(0, dot));
    return out;
}

std::string last_component(const std::string& name) {
    const size_t dot = name.rfind('.');
    return dot == std::string::npos ? name : name.substr(dot + 1);
}

std::string joined(const std::vector<std::string>& items, size_t at_most = 12) {
    std::string s;
    for (size_t i = 0; i < items.size() && i < at_most; ++i) s += (i ? ", " : "") + items[i];
    if (items.size() > at_most) s += fmt(", ... (", items.size(), " in all)");
    return s;
}

// The error for a pattern that selects nothing: the nearest name, and the modules one level below the longest
// part of the pattern that is a module path (the top-level modules when no part is).
[[noreturn]] void no_match(const std::string& command, const std::string& flag, const std::string& pattern,
                           const std::vector<std::pair<std::string, Tensor>>& params) {
    std::set<std::string> modules;
    std::vector<std::string> candidates;   // modules, parameter names, last components: what a pattern may name
    std::set<std::string> seen;
    for (const auto& [name, p] : params) {
        for (const std::string& m : module_paths(name)) {
            modules.insert(m);
            if (seen.insert(m).second) candidates.push_back(m);
        }
        if (seen.insert(name).second) candidates.push_back(name);
        if (seen.insert(last_component(name)).second) candidates.push_back(last_component(name));
    }
    std::string parent;   // the longest dot-prefix of the pattern that is a module
    for (const std::string& m : module_paths(pattern + "."))
        if (modules.count(m)) parent = m;
    std::vector<std::string> below;
    const size_t depth = parent.empty() ? 0 : module_paths(parent + ".").size();
    for (const auto& [name, p] : params) {
        if (!parent.empty() && name.rfind(parent + ".", 0) != 0) continue;
        const std::vector<std::string> paths = module_paths(name);
        const std::string item = paths.size() > depth ? paths[depth] : name;   // a module, or a parameter there
        if (std::find(below.begin(), below.end(), item) == below.end()) below.push_back(item);
    }
    const std::string near = nearest_name(pattern, candidates);
    throw Error(fmt(command, ": --", flag, " pattern '", pattern, "' selects no parameter of the model",
                    near.empty() ? "" : fmt("; did you mean '", near, "'?"), " ",
                    parent.empty() ? std::string("its top-level modules") : fmt("the modules in ", parent), ": ",
                    joined(below), "; hint: a pattern names a module (layer1), a parameter (fc.bias), their last "
                    "component (bias) or a glob (layer2.*); razor info --model MODEL lists the layers"));
}

}  // namespace

std::vector<std::string> parse_patterns(const std::string& command, const std::string& flag, const std::string& text) {
    std::vector<std::string> out;
    if (text.empty()) return out;
    size_t start = 0;
    while (true) {
        const size_t comma = text.find(',', start);
        std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const size_t b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
        item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
        if (item.empty())
            throw Error(fmt(command, ": --", flag, " '", text, "' has an empty pattern; expected comma-separated "
                            "module paths, parameter names or globs such as layer1,layer2.*,fc; hint: remove the "
                            "extra comma"));
        out.push_back(item);
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

bool glob_match(const std::string& pattern, const std::string& text) {
    // Iterative wildcard matching with one backtrack point: the last `*` seen and where it started matching.
    size_t p = 0, t = 0, star = std::string::npos, from = 0;
    while (t < text.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
            ++p, ++t;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++, from = t;
        } else if (star != std::string::npos) {
            p = star + 1, t = ++from;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

bool selects(const std::string& pattern, const std::string& name) {
    if (glob_match(pattern, name) || glob_match(pattern, last_component(name))) return true;
    for (const std::string& m : module_paths(name))
        if (glob_match(pattern, m)) return true;
    return false;
}

FreezeResult apply_freeze(const std::string& command, nn::Module& model, const std::string& freeze,
                          const std::string& train_only) {
    const auto params = model.named_parameters();
    const auto apply = [&](const std::string& flag, const std::string& text, bool keep_selected) {
        for (const std::string& pattern : parse_patterns(command, flag, text)) {
            bool any = false;
            for (const auto& [name, p] : params) any = any || selects(pattern, name);
            if (!any) no_match(command, flag, pattern, params);
        }
        const std::vector<std::string> patterns = parse_patterns(command, flag, text);
        for (const auto& [name, p] : params) {
            bool selected = false;
            for (const std::string& pattern : patterns) selected = selected || selects(pattern, name);
            if (selected != keep_selected) Tensor(p).requires_grad_(false);
        }
    };
    if (!train_only.empty()) apply("train-only", train_only, true);
    if (!freeze.empty()) apply("freeze", freeze, false);
    FreezeResult r;
    for (const auto& [name, p] : params) {
        ++r.total_tensors, r.total_numel += p.numel();
        if (!p.requires_grad()) ++r.frozen_tensors, r.frozen_numel += p.numel();
    }
    if (r.frozen_tensors == r.total_tensors)
        throw Error(fmt(command, ": --freeze '", freeze, "' and --train-only '", train_only, "' leave no parameter "
                        "to train (all ", r.total_tensors, " are frozen); hint: freeze fewer modules, or train at "
                        "least the head (--train-only fc)"));
    return r;
}

std::string freeze_line(const FreezeResult& r) {
    return fmt("frozen ", r.frozen_tensors, " of ", r.total_tensors, " parameter tensors (", r.frozen_numel, " of ",
               r.total_numel, " values): no gradient, no optimiser state, no saved input for their weight gradients");
}

}  // namespace razor::apps
