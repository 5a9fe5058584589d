// apps/suggest.cpp -- see suggest.h.
#include "apps/suggest.h"

#include <algorithm>

namespace razor::apps {

size_t edit_distance(const std::string& a, const std::string& b) {
    // d[i][j]: edits from a's first i characters to b's first j (a (|a|+1) x (|b|+1) table, row-major).
    const size_t n = a.size(), m = b.size();
    std::vector<size_t> d((n + 1) * (m + 1));
    auto at = [&](size_t i, size_t j) -> size_t& { return d[i * (m + 1) + j]; };
    for (size_t i = 0; i <= n; ++i) at(i, 0) = i;
    for (size_t j = 0; j <= m; ++j) at(0, j) = j;
    for (size_t i = 1; i <= n; ++i)
        for (size_t j = 1; j <= m; ++j) {
            const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) best = std::min(best, at(i - 2, j - 2) + 1);
            at(i, j) = best;
        }
    return at(n, m);
}

std::string nearest_name(const std::string& typed, const std::vector<std::string>& names) {
    if (typed.empty()) return {};
    std::string prefixed;
    int prefix_count = 0;
    for (const std::string& name : names)
        if (name.rfind(typed, 0) == 0) prefixed = name, ++prefix_count;
    const size_t limit = typed.size() <= 3 ? 1 : std::max<size_t>(2, typed.size() / 3);
    std::string best;
    size_t best_distance = limit + 1;
    for (const std::string& name : names) {
        const size_t d = edit_distance(typed, name);
        if (d < best_distance) best = name, best_distance = d;
    }
    if (!best.empty()) return best;
    return prefix_count == 1 ? prefixed : std::string();
}

}  // namespace razor::apps
