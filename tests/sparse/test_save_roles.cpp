// tests/sparse/test_save_roles.cpp -- Back Razor decides by save role (core/saved.h), not by op or item name: every
// activation every zoo model saves is covered by an explicit decision of RazorSavePolicy, and an op the policy has
// never heard of gets its role's decision.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "models/registry.h"
#include "sparse/back_razor.h"

using namespace razor;
using namespace razor::sparse;

namespace {

// Passes every save through `inner` and remembers the site and the decision.
class RecordingPolicy final : public SavePolicy {
public:
    explicit RecordingPolicy(std::shared_ptr<const RazorSavePolicy> inner) : inner_(std::move(inner)) {}
    std::string name() const override { return inner_->name(); }
    std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const override {
        seen.push_back(Seen{std::string(site.op), std::string(site.module_path), std::string(site.name), site.role,
                            inner_->decide(site)});
        return inner_->pack(t, site);
    }

    struct Seen {
        std::string op, module_path, name;
        SaveRole role;
        RazorSavePolicy::Decision decision;
    };
    mutable std::vector<Seen> seen;

private:
    std::shared_ptr<const RazorSavePolicy> inner_;
};

// The smallest inputs each family accepts (a name added to the registry is walked with the defaults).
models::ModelOptions small_options(const std::string& name) {
    if (name == "mlp" || name == "lenet5") return {.in_channels = 1, .image_size = 28};
    if (name == "vit_tiny") return {.image_size = 8, .depth = 2};
    if (name == "vit_b_16" || name == "vit_s_16") return {.image_size = 16, .depth = 1};   // one patch, one block
    if (name == "resnet18" || name == "resnet34" || name == "resnet50") return {.image_size = 16};
    return {};   // the CIFAR resnets and vggs: 32x32 only
}

const SaveRole kActivationRoles[] = {SaveRole::WeightGradOperand, SaveRole::InputGradOperand,
                                     SaveRole::BatchNormInput,    SaveRole::LayerNormInput,
                                     SaveRole::GeluInput,         SaveRole::PointwiseOperand,
                                     SaveRole::LossOperand};

// y = 2 x, saving x under `role` (a stand-in for an op added later; no policy knows its name).
struct MadeUpBackward final : Node {
    std::vector<Tensor> backward(const Tensor& g) override {
        CHECK(ctx.unpack("z").shape() == g.shape());
        return {mul(g, 2.f)};
    }
};
Tensor made_up_op(const Tensor& x, SaveRole role) {
    Tensor y;
    {
        NoGradGuard no_grad;
        y = mul(x, 2.f);
    }
    if (auto node = record<MadeUpBackward>("made_up_op", {x}, y)) node->ctx.save("z", x, role);
    return y;
}

}  // namespace

TEST_CASE("save roles: every activation of every zoo model is covered by an explicit Back Razor decision" *
          doctest::test_suite("model-scale")) {
    RazorConfig config;
    config.batch_norm = BatchNormSave::Razored;   // every rule that can prune, pruning
    for (const std::string& name : models::model_names()) {
        INFO("model " << name);
        const models::ModelOptions options = small_options(name);
        Generator gen(3);
        auto model = models::make_model(name, 10, gen, options);
        const Tensor x = Tensor::randn({2, options.in_channels, options.image_size, options.image_size}, gen);
        const Tensor labels = Tensor::from_vector_i64({2}, {1, 7});
        auto recorder = std::make_shared<RecordingPolicy>(std::make_shared<RazorSavePolicy>(config));
        TapeScope scope;
        {
            SavePolicyGuard guard(recorder);
            Tensor loss = cross_entropy((*model)(x), labels);
            loss.backward();
        }
        CHECK(scope.tape().live().items == 0);

        std::map<SaveRole, int> activations;
        for (const auto& s : recorder->seen) {
            INFO(s.module_path << " " << s.op << " '" << s.name << "' as " << save_role_name(s.role));
            CHECK(s.decision.covered);
            if (save_kind(s.role) != SaveKind::Activation) continue;
            activations[s.role] += 1;
            // The roles that prune under this config did prune (F32 inputs, non-empty): nothing fell back to dense.
            if (s.role == SaveRole::WeightGradOperand || s.role == SaveRole::BatchNormInput ||
                s.role == SaveRole::LayerNormInput || s.role == SaveRole::InputGradOperand)
                CHECK(s.decision.form == RazorSavePolicy::Form::Razored);
            if (s.role == SaveRole::GeluInput) CHECK(s.decision.form == RazorSavePolicy::Form::DenseF16);
        }
        CHECK(activations[SaveRole::WeightGradOperand] > 0);   // every model has a conv or a linear
        CHECK(activations[SaveRole::LossOperand] == 1);        // the loss head
        if (name.starts_with("resnet") || name.starts_with("vgg")) CHECK(activations[SaveRole::BatchNormInput] > 0);
        if (name.starts_with("vit")) {
            CHECK(activations[SaveRole::LayerNormInput] > 0);
            CHECK(activations[SaveRole::InputGradOperand] > 0);
            CHECK(activations[SaveRole::GeluInput] > 0);
        }
    }
}

TEST_CASE("save roles: an op no policy knows by name gets its role's decision") {
    RazorConfig config;
    config.ratio = 0.8;
    config.attention = AttentionSave::DenseI8;
    config.gelu = GeluSave::Derivative4;
    config.batch_norm = BatchNormSave::ChannelI8;
    const auto policy = std::make_shared<RazorSavePolicy>(config);
    for (SaveRole role : kActivationRoles) {
        INFO("role " << save_role_name(role));
        // The decision for the made-up site equals the one for the same role anywhere else.
        const auto made_up = policy->decide(SaveSite{"made_up_op", "blk", "z", role});
        const auto known = policy->decide(SaveSite{"some_other_op", "blk", "other_name", role});
        CHECK(made_up.covered);
        CHECK(made_up.form == known.form);
        CHECK(made_up.options.ratio == known.options.ratio);
        CHECK(made_up.options.values == known.options.values);
    }

    // On the tape: the made-up op's item is stored as its role says; the gradient is unaffected (y = 2 x).
    const std::map<SaveRole, std::string> expected = {
        {SaveRole::WeightGradOperand, "bitmap+f32 r=0.80"}, {SaveRole::InputGradOperand, "dense+i8"},
        {SaveRole::BatchNormInput, "channel+i8"},                {SaveRole::LayerNormInput, "bitmap+f32 r=0.80"},
        {SaveRole::GeluInput, "gelu-d4"},                   {SaveRole::PointwiseOperand, "dense"},
        {SaveRole::LossOperand, "dense"}};
    Generator gen(5);
    for (const auto& [role, format] : expected) {
        INFO("role " << save_role_name(role));
        Tensor x = Tensor::randn({4, 64}, gen).requires_grad_();
        TapeScope scope;
        SavePolicyGuard guard(policy);
        Tensor y = made_up_op(x, role);
        const auto records = scope.tape().records();
        REQUIRE(records.size() == 1);
        CHECK(records[0].op == "made_up_op");
        CHECK(records[0].role == role);
        CHECK(records[0].kind == SaveKind::Activation);
        CHECK(records[0].format == format);
        sum(y).backward();
        CHECK(x.grad().to_vector() == std::vector<float>(256, 2.f));
        CHECK(scope.tape().live().items == 0);
    }
}

TEST_CASE("save roles: every role has a name and the kind the table in core/saved.h gives it") {
    for (SaveRole role : kActivationRoles) CHECK(save_kind(role) == SaveKind::Activation);
    CHECK(save_kind(SaveRole::Mask) == SaveKind::Mask);
    CHECK(save_kind(SaveRole::Indices) == SaveKind::Indices);
    CHECK(save_kind(SaveRole::Statistics) == SaveKind::Statistics);
    CHECK(save_kind(SaveRole::Parameter) == SaveKind::Parameter);
    std::set<std::string> names;
    for (SaveRole role : kActivationRoles) names.insert(save_role_name(role));
    for (SaveRole role : {SaveRole::Mask, SaveRole::Indices, SaveRole::Statistics, SaveRole::Parameter})
        names.insert(save_role_name(role));
    CHECK(names.size() == 11);
    CHECK(names.count("?") == 0);
}
