// data/dataset.cpp -- ImageDataset accessors and class subsetting (see dataset.h).
#include "data/dataset.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "data/image_folder.h"

namespace razor::data {

Shape ImageDataset::image_shape() const {
    if (in_memory()) return {images.size(1), images.size(2), images.size(3)};
    return file_image_shape;
}

Tensor ImageDataset::image(int64_t i) const {
    if (i < 0 || i >= size())
        throw Error(fmt(name, ": image index ", i, " is out of range for ", size(), " images"));
    if (in_memory()) {
        const Shape& st = images.strides();
        return images.as_strided({images.size(1), images.size(2), images.size(3)}, {st[1], st[2], st[3]},
                                 images.offset() + i * st[0]);
    }
    RAZOR_CHECK(static_cast<int64_t>(files.size()) == size()) << name << ": " << files.size() << " files for "
                                                              << size() << " labels";
    const bool one_size = file_image_shape.size() == 3 && file_image_shape[1] > 0;
    return decode_image_file(files[i], decode, one_size ? file_image_shape : Shape{});
}

ImageDataset select_rows(const ImageDataset& ds, const std::vector<int64_t>& rows, const std::string& name) {
    ImageDataset out;
    out.num_classes = ds.num_classes;
    out.classes = ds.classes;
    out.name = name;
    const int64_t n = static_cast<int64_t>(rows.size());
    out.labels = Tensor::empty({n}, DType::I64);
    for (int64_t r = 0; r < n; ++r) {
        if (rows[r] < 0 || rows[r] >= ds.size())
            throw Error(fmt("select_rows(", ds.name, "): row ", rows[r], " is out of range for ", ds.size(), " images"));
        out.labels.i64()[r] = ds.labels.i64()[rows[r]];
    }
    if (ds.in_memory()) {
        const Shape s = ds.image_shape();   // (C, H, W)
        const int64_t bytes = shape_numel(s);
        out.images = Tensor::empty({n, s[0], s[1], s[2]}, DType::U8);
        const Tensor src = ds.images.contiguous();
        for (int64_t r = 0; r < n; ++r)
            std::memcpy(out.images.data<uint8_t>() + r * bytes, src.data<uint8_t>() + rows[r] * bytes, bytes);
    } else {
        out.file_image_shape = ds.file_image_shape;
    }
    out.decode = ds.decode;
    if (!ds.files.empty())
        for (int64_t r : rows) out.files.push_back(ds.files[r]);
    return out;
}

ImageDataset subset_classes(const ImageDataset& ds, const std::vector<int64_t>& keep) {
    if (keep.empty()) throw Error(fmt("subset_classes(", ds.name, "): expected at least one class, got none"));
    std::vector<int64_t> new_label(ds.num_classes, -1);   // old label -> new label, -1 = dropped
    for (size_t k = 0; k < keep.size(); ++k) {
        const int64_t c = keep[k];
        if (c < 0 || c >= ds.num_classes)
            throw Error(fmt("subset_classes(", ds.name, "): class ", c, " is out of range; expected 0..",
                            ds.num_classes - 1));
        if (new_label[c] >= 0)
            throw Error(fmt("subset_classes(", ds.name, "): class ", c, " is listed twice; hint: each class once"));
        new_label[c] = static_cast<int64_t>(k);
    }
    const int64_t* labels = ds.labels.i64();
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < ds.size(); ++i) {
        RAZOR_CHECK(labels[i] >= 0 && labels[i] < ds.num_classes) << ds.name << ": label " << labels[i] << " at " << i;
        if (new_label[labels[i]] >= 0) rows.push_back(i);
    }

    std::string list;
    for (size_t k = 0; k < keep.size(); ++k) {
        if (k) list += ',';
        list += std::to_string(keep[k]);
    }
    ImageDataset out = select_rows(ds, rows, ds.name + "[classes " + list + "]");
    out.num_classes = static_cast<int64_t>(keep.size());
    out.classes.clear();
    for (int64_t c : keep) out.classes.push_back(c < static_cast<int64_t>(ds.classes.size()) ? ds.classes[c] : std::to_string(c));
    for (int64_t r = 0; r < out.size(); ++r) out.labels.i64()[r] = new_label[labels[rows[r]]];
    return out;
}

ImageDataset subset_classes(const ImageDataset& ds, const std::vector<std::string>& keep) {
    std::vector<int64_t> ids;
    for (const std::string& name : keep) {
        auto it = std::find(ds.classes.begin(), ds.classes.end(), name);
        if (it == ds.classes.end()) {
            std::string known;
            for (const std::string& c : ds.classes) known += (known.empty() ? "" : ", ") + c;
            throw Error(fmt("subset_classes(", ds.name, "): no class named '", name, "'; the classes are: ",
                            known.empty() ? "(unnamed)" : known));
        }
        ids.push_back(it - ds.classes.begin());
    }
    return subset_classes(ds, ids);
}

std::vector<int64_t> class_counts(const ImageDataset& ds) {
    std::vector<int64_t> counts(ds.num_classes, 0);
    for (int64_t i = 0; i < ds.size(); ++i) {
        const int64_t label = ds.labels.i64()[i];
        RAZOR_CHECK(label >= 0 && label < ds.num_classes) << ds.name << ": label " << label << " at " << i;
        ++counts[label];
    }
    return counts;
}

}  // namespace razor::data
