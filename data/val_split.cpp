// data/val_split.cpp -- stratified, seeded train/validation split (see val_split.h).
#include "data/val_split.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/rng.h"
#include "data/batch.h"   // shuffled_indices

namespace razor::data {

TrainValSplit split_train_val(const ImageDataset& ds, double fraction, uint64_t seed) {
    if (!(fraction > 0.0 && fraction < 1.0))
        throw Error(fmt("split_train_val(", ds.name, "): the validation fraction must be in (0, 1), got ", fraction,
                        "; hint: --val-split 0.1 keeps 10% of each class for validation"));
    std::vector<std::vector<int64_t>> by_class(ds.num_classes);   // rows of each class, in dataset order
    for (int64_t i = 0; i < ds.size(); ++i) by_class[ds.labels.i64()[i]].push_back(i);
    Generator gen(seed);
    std::vector<int64_t> train_rows, val_rows;
    for (const std::vector<int64_t>& rows : by_class) {
        const auto n = static_cast<int64_t>(rows.size());
        int64_t k = static_cast<int64_t>(std::nearbyint(fraction * static_cast<double>(n)));
        if (n >= 2) k = std::clamp<int64_t>(k, 1, n - 1);
        else k = 0;
        const std::vector<int64_t> order = shuffled_indices(n, gen);
        for (int64_t j = 0; j < n; ++j) (j < k ? val_rows : train_rows).push_back(rows[order[j]]);
    }
    std::sort(train_rows.begin(), train_rows.end());
    std::sort(val_rows.begin(), val_rows.end());
    const std::string tag = fmt("[val-split ", fraction, ", seed ", seed, "]");
    return {select_rows(ds, train_rows, ds.name + tag + ".train"), select_rows(ds, val_rows, ds.name + tag + ".val")};
}

}  // namespace razor::data
