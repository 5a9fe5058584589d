// tests/core/test_tape.cpp -- the tape as an object (core/tape.h): two tapes on two threads account independently,
// scopes nest (accounting and save policies per tape), peak/reset, and a SavedContext removes its records from the
// tape it saved into when it is released after its TapeScope ended, on another thread, or after every other owner
// of the tape let go.
#include <future>
#include <latch>
#include <thread>

#include "support/gradcheck.h"

using namespace razor;
using namespace razor::test;

namespace {

// Dense, but counts how often it was asked: tells which tape's policy stack decided a save.
class CountingPolicy final : public SavePolicy {
public:
    std::string name() const override { return "counting"; }
    std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const override {
        ++calls;
        return DenseSavePolicy().pack(t, site);
    }
    mutable int calls = 0;
};

// Saves a copy of each tensor (as Back Razor's packed forms do): the tape holds no input's storage.
class CopyingPolicy final : public SavePolicy {
public:
    std::string name() const override { return "copying"; }
    std::unique_ptr<SavedTensor> pack(const Tensor& t, const SaveSite& site) const override {
        return std::make_unique<DenseSaved>(t.clone(), std::string(site.op), true);
    }
};

// relu(mul(a, b)) on n x n leaves: saves a, b (dense, 4 n^2 bytes each) and a 1-bit mask; 3 records.
Tensor small_graph(int64_t n, uint64_t seed) {
    Tensor a = randn_leaf({n, n}, seed), b = randn_leaf({n, n}, seed + 1);
    return relu(mul(a, b));
}
int64_t small_graph_bytes(int64_t n) { return 2 * n * n * 4 + (n * n + 63) / 64 * 8; }

}  // namespace

TEST_CASE("tape: two tapes on two threads account independently, and neither touches the caller's tape") {
    const TapeTotals main_before = current_tape().live();
    std::latch both_saved(2), both_checked(2);
    auto worker = [&](int64_t n, uint64_t seed, TapeTotals* seen_live, TapeTotals* seen_peak, int64_t* others) {
        TapeScope scope;
        Tensor y = small_graph(n, seed);
        both_saved.arrive_and_wait();   // both tapes hold their records at once
        *seen_live = scope.tape().live();
        *others = static_cast<int64_t>(scope.tape().records().size());
        both_checked.arrive_and_wait();
        y.backward(Tensor::ones(y.shape()));
        *seen_peak = scope.tape().peak();
        CHECK(scope.tape().live().items == 0);   // doctest assertions are thread-safe
    };
    TapeTotals live1, live2, peak1, peak2;
    int64_t records1 = 0, records2 = 0;
    std::thread t1(worker, 8, 10, &live1, &peak1, &records1);
    std::thread t2(worker, 16, 20, &live2, &peak2, &records2);
    t1.join();
    t2.join();
    CHECK(live1.items == 3);
    CHECK(live2.items == 3);
    CHECK(records1 == 3);
    CHECK(records2 == 3);
    CHECK(live1.stored_bytes == small_graph_bytes(8));
    CHECK(live2.stored_bytes == small_graph_bytes(16));
    CHECK(peak1.stored_bytes == small_graph_bytes(8));
    CHECK(peak2.stored_bytes == small_graph_bytes(16));
    const TapeTotals main_after = current_tape().live();
    CHECK(main_after.items == main_before.items);
    CHECK(main_after.stored_bytes == main_before.stored_bytes);
}

TEST_CASE("tape: a thread without a TapeScope saves into its own default tape") {
    const int64_t main_items = current_tape().live().items;
    int64_t seen = -1;
    std::thread t([&] {
        Tensor y = small_graph(4, 30);
        seen = current_tape().live().items;
        y.backward(Tensor::ones(y.shape()));
    });
    t.join();
    CHECK(seen == 3);
    CHECK(current_tape().live().items == main_items);
}

TEST_CASE("tape: scopes nest; each tape has its own records and its own save-policy stack") {
    auto outer_policy = std::make_shared<CountingPolicy>();
    TapeScope outer;
    CHECK(&current_tape() == &outer.tape());
    SavePolicyGuard guard(outer_policy);
    CHECK(&active_save_policy() == outer_policy.get());
    Tensor y1 = small_graph(4, 40);   // mul's a and b go through the outer policy (the mask does not: save_mask)
    CHECK(outer_policy->calls == 2);
    {
        TapeScope inner;   // a fresh tape, starting with the policy in force
        CHECK(&current_tape() == &inner.tape());
        CHECK(&active_save_policy() == outer_policy.get());
        Tensor y2 = small_graph(8, 50);
        CHECK(outer_policy->calls == 4);
        CHECK(inner.tape().live().stored_bytes == small_graph_bytes(8));
        CHECK(outer.tape().live().stored_bytes == small_graph_bytes(4));
        {
            auto inner_policy = std::make_shared<CountingPolicy>();
            SavePolicyGuard on_inner(inner_policy);   // pushed on the inner tape only
            TapeScope again(outer.handle());          // the same tape may be made current again ...
            CHECK(&current_tape() == &outer.tape());
            CHECK(&active_save_policy() == outer_policy.get());   // ... with its own stack
            TapeScope bare(std::make_shared<Tape>());   // a tape made by hand starts dense
            CHECK(active_save_policy().name() == "dense");
            Tensor y3 = small_graph(2, 55);
            CHECK(outer_policy->calls == 4);
            CHECK(inner_policy->calls == 0);
            CHECK(bare.tape().live().items == 3);
            y3.backward(Tensor::ones(y3.shape()));
        }
        CHECK(&current_tape() == &inner.tape());
        CHECK(&active_save_policy() == outer_policy.get());
        y2.backward(Tensor::ones(y2.shape()));
        CHECK(inner.tape().live().items == 0);
    }
    CHECK(&current_tape() == &outer.tape());
    CHECK(&active_save_policy() == outer_policy.get());
    CHECK(outer.tape().live().items == 3);
    y1.backward(Tensor::ones(y1.shape()));
    CHECK(outer.tape().live().items == 0);
}

TEST_CASE("tape: the peak holds the highest live total until reset_peak") {
    TapeScope scope;
    Tape& tape = scope.tape();
    CHECK(tape.peak().stored_bytes == 0);
    {
        Tensor big = small_graph(32, 60);
        Tensor y = small_graph(4, 70);
        CHECK(tape.peak().stored_bytes == small_graph_bytes(32) + small_graph_bytes(4));
        CHECK(tape.peak().items == 6);
        big.backward(Tensor::ones(big.shape()));
        CHECK(tape.live().stored_bytes == small_graph_bytes(4));
        CHECK(tape.peak().stored_bytes == small_graph_bytes(32) + small_graph_bytes(4));
        tape.reset_peak();
        CHECK(tape.peak().stored_bytes == small_graph_bytes(4));
        y.backward(Tensor::ones(y.shape()));
    }
    CHECK(tape.live().items == 0);
    CHECK(tape.peak().stored_bytes == small_graph_bytes(4));
    tape.reset_peak();
    CHECK(tape.peak().stored_bytes == 0);
    CHECK(tape.peak().items == 0);
}

TEST_CASE("tape: a graph released after its TapeScope ended removes its records from that tape") {
    const int64_t outside = current_tape().live().items;
    auto tape = std::make_shared<Tape>();
    Tensor y;
    {
        TapeScope scope(tape);
        y = small_graph(8, 80);
    }
    CHECK(tape->live().items == 3);
    CHECK(current_tape().live().items == outside);   // not the caller's tape
    y.backward(Tensor::ones(y.shape()));
    CHECK(tape->live().items == 0);
    CHECK(tape->live().stored_bytes == 0);
    CHECK(current_tape().live().items == outside);
}

TEST_CASE("tape: a graph recorded on one thread and released on another removes its records from its tape") {
    const TapeTotals outside = current_tape().live();
    auto tape = std::make_shared<Tape>();
    std::promise<Tensor> handed;
    std::thread recorder([&] {
        TapeScope scope(tape);   // this thread now owns the tape
        handed.set_value(small_graph(8, 90));
    });
    Tensor y = handed.get_future().get();
    recorder.join();
    CHECK(tape->live().items == 3);
    y.backward(Tensor::ones(y.shape()));   // releases on this thread, which does not own the tape: queued
    y = Tensor();
    CHECK(tape->live().items == 0);        // applied by the tape's next operation
    CHECK(tape->live().stored_bytes == 0);
    CHECK(tape->records().empty());
    CHECK(current_tape().live().items == outside.items);
    CHECK(current_tape().live().stored_bytes == outside.stored_bytes);

    // The same, with the owner still active: it keeps recording and releasing on its own tape while another thread
    // releases a graph it recorded earlier; its totals end where the hand count says.
    std::promise<Tensor> first;
    std::latch released(1);
    int64_t owner_live_after = -1;
    std::thread owner([&] {
        TapeScope scope(tape);
        first.set_value(small_graph(8, 100));
        for (int i = 0; i < 20; ++i) {
            Tensor z = small_graph(4, 110 + i);
            z.backward(Tensor::ones(z.shape()));
        }
        released.wait();
        owner_live_after = scope.tape().live().items;
    });
    Tensor g = first.get_future().get();
    g.backward(Tensor::ones(g.shape()));
    g = Tensor();
    released.count_down();
    owner.join();
    CHECK(owner_live_after == 0);
}

TEST_CASE("tape: a tape no one else holds lives until the last context saved into it is released") {
    std::weak_ptr<Tape> weak;
    Tensor y;
    {
        TapeScope scope;   // a fresh tape, held only by the scope ...
        weak = scope.handle();
        y = small_graph(4, 130);
    }
    CHECK_FALSE(weak.expired());   // ... and by the contexts of the graph saved into it
    CHECK(weak.lock()->live().items == 3);
    y.backward(Tensor::ones(y.shape()));
    CHECK(weak.expired());         // every context released: the tape went with them
}

TEST_CASE("tape: SavePolicyGuard pops from the tape it pushed onto; push and pop are checked") {
    auto policy = std::make_shared<CountingPolicy>();
    auto tape = std::make_shared<Tape>();
    {
        TapeScope scope(tape);
        {
            SavePolicyGuard guard(policy);
            CHECK(&tape->save_policy() == policy.get());
            SavePolicyGuard keep(nullptr);   // keeps the outer policy
            CHECK(&tape->save_policy() == policy.get());
        }
        CHECK(tape->save_policy().name() == "dense");
    }
    auto based = std::make_shared<Tape>(policy);   // a base policy sits under the stack and cannot be popped
    CHECK(&based->save_policy() == policy.get());
    CHECK(based->save_policy_handle() == policy);
    CHECK_THROWS_WITH_AS(based->pop_save_policy(), doctest::Contains("no policy pushed"), Error);
    CHECK_THROWS_WITH_AS(tape->pop_save_policy(), doctest::Contains("no policy pushed"), Error);
    CHECK_THROWS_WITH_AS(tape->push_save_policy(nullptr), doctest::Contains("null policy"), Error);
    CHECK_THROWS_WITH_AS(TapeScope(std::shared_ptr<Tape>()), doctest::Contains("TapeScope: null tape"), Error);
}

TEST_CASE("tape: the dense-equivalent counts a storage once per version: written over between two saves, it is two "
          "tensors a dense tape would keep") {
    TapeScope scope;
    SavePolicyGuard guard(std::make_shared<CopyingPolicy>());
    Tensor w = randn_leaf({8, 8}, 51);
    const int64_t bytes = 8 * 8 * 4;
    {   // one storage, one version, saved twice (mul's a and b): once
        const Tensor x = mul(w, 1.f);
        const Tensor y = mul(x, x);
        CHECK(scope.tape().live().dense_bytes == bytes);
        CHECK(scope.tape().live().stored_bytes == 2 * bytes);
    }
    {   // gelu saves x, then writes y over it; the second gelu saves y from the same storage at the next version
        Tensor x = mul(w, 1.f);
        const void* storage = x.storage().get();
        const Tensor y = gelu(std::move(x));
        REQUIRE(y.storage().get() == storage);
        const Tensor z = gelu(y);
        CHECK(scope.tape().live().dense_bytes == 2 * bytes);
        CHECK(scope.tape().live().stored_bytes == 2 * bytes);
    }
    CHECK(scope.tape().live().items == 0);
}
