// apps/predict.cpp -- `razor predict --checkpoint RUN IMG [IMG...]`: the top-k classes of each photo, by name, with
// their probabilities.
//
// reference: torchvision's inference recipe (weights.transforms() -- Resize, CenterCrop, Normalize -- then
// model.eval(), softmax, topk). docs: docs/cli.md "razor predict".
//
// Everything comes from the checkpoint's metadata (apps/checkpoint_model.h): the model, its classes and their names,
// and the eval preprocessing the run used (data::eval_transform: shorter side to image_size / crop_pct, centre crop,
// normalise with its mean/std). Images may have any size, JPEG or PNG. Images are run in batches of --batch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/checkpoint_model.h"
#include "apps/commands.h"
#include "apps/threads.h"
#include "apps/flag_table.h"
#include "core/core.h"
#include "data/image_folder.h"

namespace razor::apps {
namespace {

struct PredictOptions {
    CheckpointFlags c;   // --checkpoint, --batch, --threads, --json
    int64_t top = 5;
};

constexpr const char* kSummary = "classify photos with a trained or fine-tuned checkpoint: top-k class names and "
                                 "probabilities (razor predict --checkpoint RUN IMG [IMG...])";

const FlagTable<PredictOptions>& predict_flags() {
    using O = PredictOptions;
    static const FlagTable<O> table =
        FlagTable<O>().family(checkpoint_flag_family(), &O::c).integer("top", "5", "classes to show per image", &O::top);
    return table;
}

// Splits argv into flags (with their values) and the image paths: an argument that is neither a flag nor the value
// of a flag that takes one is an image.
void split_argv(const std::vector<std::string>& argv, std::vector<std::string>& flags, std::vector<std::string>& images) {
    const auto& specs = predict_flags().specs();
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a.rfind("-", 0) != 0 || a == "-") {
            images.push_back(a);
            continue;
        }
        flags.push_back(a);
        const std::string name = a.substr(a.find_first_not_of('-'));
        const bool takes_value = std::any_of(specs.begin(), specs.end(), [&](const FlagSpec& s) {
            return !s.boolean && name == s.name;
        });
        if (takes_value && i + 1 < argv.size()) flags.push_back(argv[++i]);
    }
}

int predict(const PredictOptions& o, const std::vector<std::string>& images) {
    const std::string cmd = "razor predict";
    if (o.c.checkpoint.empty() || images.empty())
        throw Error(fmt(cmd, ": expected --checkpoint RUN and at least one image, got ",
                        o.c.checkpoint.empty() ? "no --checkpoint" : "no image", "; hint: razor predict --checkpoint "
                        "runs/finetune photo.jpg\n\n", predict_flags().args("predict", kSummary).usage()));
    check_checkpoint_flags(cmd, o.c);
    if (o.top < 1) throw Error(fmt(cmd, ": --top must be >= 1, got ", o.top));
    apply_threads("razor predict", o.c.threads);
    const train::Checkpoint ck = train::open_checkpoint(o.c.checkpoint, /*model_only=*/true);
    const CheckpointInputs in = read_checkpoint_inputs(cmd, ck);
    const int64_t K = !in.class_names.empty() ? static_cast<int64_t>(in.class_names.size()) : in.num_classes;
    if (in.model.empty() || K < 1 || in.image_size < 1 || in.mean.empty())
        throw Error(fmt(cmd, ": ", ck.folder, " does not record its model, classes, image size and normalisation "
                        "(metadata model '", in.model, "', ", K, " classes, image_size ", in.image_size, ", ",
                        in.mean.size(), " mean values); hint: predict with a checkpoint written by razor train or "
                        "razor finetune"));
    auto model = model_from_checkpoint(cmd, ck, in.model, K, in);
    model->eval();
    NoGradGuard no_grad;
    const data::TransformPtr tf = data::eval_transform({in.image_size, in.crop_pct, in.interpolation, in.mean, in.std});
    data::ImageDecode decode;
    decode.channels = in.in_channels;

    const int64_t top = std::min(o.top, K), S = in.image_size, C = in.in_channels;
    nlohmann::json results = nlohmann::json::array();
    Generator gen(0);   // the eval transform draws nothing
    for (size_t begin = 0; begin < images.size(); begin += static_cast<size_t>(o.c.batch)) {
        const size_t end = std::min(images.size(), begin + static_cast<size_t>(o.c.batch));
        const auto B = static_cast<int64_t>(end - begin);
        Tensor x = Tensor::empty({B, C, S, S});   // (B, C, S, S)
        for (int64_t b = 0; b < B; ++b) {
            const Tensor img = (*tf)(data::decode_image_file(images[begin + b], decode), gen).contiguous();
            std::copy(img.f32(), img.f32() + img.numel(), x.f32() + b * img.numel());
        }
        const Tensor logits = (*model)(x).contiguous();   // (B, K)
        for (int64_t b = 0; b < B; ++b) {
            // softmax in double: p_k = exp(l_k - max) / sum_j exp(l_j - max)
            const float* l = logits.f32() + b * K;
            const double mx = *std::max_element(l, l + K);
            std::vector<double> p(K);
            double sum = 0;
            for (int64_t k = 0; k < K; ++k) sum += p[k] = std::exp(static_cast<double>(l[k]) - mx);
            std::vector<int64_t> order(K);
            for (int64_t k = 0; k < K; ++k) order[k] = k, p[k] /= sum;
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return p[a] > p[c]; });
            nlohmann::json ranked = nlohmann::json::array();
            for (int64_t r = 0; r < top; ++r) {
                const int64_t k = order[r];
                const std::string name = k < static_cast<int64_t>(in.class_names.size()) ? in.class_names[k] : fmt("class ", k);
                ranked.push_back({{"class", name}, {"index", k}, {"probability", p[k]}});
            }
            results.push_back({{"image", images[begin + b]}, {"top", ranked}});
        }
    }
    if (o.c.json) {
        std::printf("%s\n", nlohmann::json({{"model", in.model}, {"checkpoint", ck.folder}, {"predictions", results}}).dump().c_str());
        return 0;
    }
    std::printf("predict %s from %s: %lld classes at %lld px\n", in.model.c_str(), ck.folder.c_str(),
                static_cast<long long>(K), static_cast<long long>(S));
    for (const nlohmann::json& r : results) {
        std::printf("\n%s\n", r["image"].get<std::string>().c_str());
        for (const nlohmann::json& t : r["top"])
            std::printf("  %6.2f%%  %s\n", 100 * t["probability"].get<double>(), t["class"].get<std::string>().c_str());
    }
    return 0;
}

}  // namespace

int run_predict(const std::vector<std::string>& argv) {
    std::vector<std::string> flags, images;
    split_argv(argv, flags, images);
    return run_with_flags(predict_flags(), "predict", kSummary, flags,
                          [&](const PredictOptions& o) { return predict(o, images); });
}

}  // namespace razor::apps
