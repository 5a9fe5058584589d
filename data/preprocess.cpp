// data/preprocess.cpp -- train and eval transforms of a Preprocess (see preprocess.h).
#include "data/preprocess.h"

#include "core/check.h"
#include "data/center_crop.h"
#include "data/random_resized_crop.h"

namespace razor::data {

Augment parse_augment(const std::string& name, const std::string& what) {
    if (name == "crop+flip") return Augment::CropFlip;
    if (name == "rrc+flip") return Augment::ResizedCropFlip;
    if (name == "none") return Augment::None;
    throw Error(fmt(what, ": expected crop+flip | rrc+flip | none, got '", name, "'"));
}

std::string augment_name(Augment a) {
    return a == Augment::CropFlip ? "crop+flip" : a == Augment::ResizedCropFlip ? "rrc+flip" : "none";
}

TransformPtr train_transform(const Preprocess& p, Augment augment) {
    if (augment == Augment::None) return eval_transform(p);
    std::vector<TransformPtr> tf;
    if (augment == Augment::ResizedCropFlip) {
        tf.push_back(random_resized_crop(p.image_size, p.interpolation));
    } else {
        tf.push_back(resize_center_crop(p.image_size, 1.0, p.interpolation));   // identity at the training size
        tf.push_back(random_crop(p.image_size, 4));
    }
    tf.push_back(random_horizontal_flip());
    tf.push_back(to_float_transform());
    tf.push_back(normalize_transform(p.mean, p.std));
    return compose(tf);
}

TransformPtr eval_transform(const Preprocess& p) {
    return compose({resize_center_crop(p.image_size, p.crop_pct, p.interpolation), to_float_transform(),
                    normalize_transform(p.mean, p.std)});
}

}  // namespace razor::data
