#include "model/activation_arena.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "model_test_support.hpp"

namespace trident {
namespace {

using namespace testing;

// The stash list in bytes, written out independently of the arena's carving. Under tensor
// parallelism qkv, att, atty, fch and fch_gelu hold this rank's heads / columns and the logits its
// share of the padded vocabulary. att: a log-sum-exp per row (tiled attention) or the probabilities.
std::size_t expected_stash_bytes(const ModelConfig& cfg, std::size_t B, std::size_t tp = 1) {
  const std::size_t T = cfg.seq_len, C = cfg.d_model, H = cfg.heads, V = cfg.vocab, L = cfg.layers;
  const std::size_t BT = B * T;
  const std::size_t att = B * H / tp * T * (cfg.attention == AttentionKernel::tiled ? 1 : T);
  const std::size_t per_layer = BT * C + 2 * BT + 3 * BT * C / tp + att + BT * C / tp + BT * C + BT * C + 2 * BT +
                                4 * BT * C / tp + 4 * BT * C / tp + BT * C;
  const std::size_t floats = BT * C + L * per_layer + BT * C + 2 * BT + BT * ((V + tp - 1) / tp) + BT;
  return 4 * floats + 4 * BT;  // + int32 tokens
}

TEST(ActivationArena, StashSizeMatchesPlannerFormula) {
  EXPECT_EQ(stash_bytes(tiny_config(), 3), expected_stash_bytes(tiny_config(), 3));
  ModelConfig gpt2;
  gpt2.layers = 12, gpt2.d_model = 768, gpt2.heads = 12, gpt2.seq_len = 256, gpt2.vocab = 50257;
  EXPECT_EQ(stash_bytes(gpt2, 4), expected_stash_bytes(gpt2, 4));
  for (int tp : {2, 3, 4})
    EXPECT_EQ(stash_bytes(gpt2, 4, tp), expected_stash_bytes(gpt2, 4, tp)) << "tp " << tp;
  gpt2.attention = AttentionKernel::explicit_probabilities;
  EXPECT_EQ(stash_bytes(gpt2, 4), expected_stash_bytes(gpt2, 4));
  EXPECT_EQ(stash_bytes(gpt2, 4, 2), expected_stash_bytes(gpt2, 4, 2));
}

TEST(ActivationArena, ReusesFreedSlotsAndTracksPeak) {
  ActivationArena<Gpt2Block> arena(tiny_config(), 2, 1);
  const std::size_t stash = stash_bytes(tiny_config(), 2);
  Activations<Gpt2Block>& first = arena.acquire(10);
  Activations<Gpt2Block>& second = arena.acquire(11);
  EXPECT_NE(first.encoded, second.encoded);
  EXPECT_EQ(arena.current_bytes(), 2 * stash);
  EXPECT_EQ(&arena.stash(10), &first);
  arena.release(10);
  EXPECT_EQ(arena.current_bytes(), stash);
  EXPECT_EQ(arena.acquire(12).encoded, first.encoded);  // the freed slot, not a new one
  EXPECT_EQ(arena.peak_bytes(), 2 * stash);
  EXPECT_THROW(arena.acquire(11), std::logic_error);  // already in flight
  EXPECT_THROW(arena.stash(10), std::logic_error);    // released
  EXPECT_THROW(arena.release(10), std::logic_error);
}

TEST(ActivationArena, TwoMicroBatchesInFlightPeakAtTwoStashes) {
  const ModelConfig cfg = tiny_config();
  const int B = 2, BT = B * cfg.seq_len;
  Transformer model(cfg, B, 1, no_tp());
  const std::size_t stash = expected_stash_bytes(cfg, B);
  const IntBuffer in0 = random_tokens(BT, cfg.vocab, 1), in1 = random_tokens(BT, cfg.vocab, 2);
  EXPECT_EQ(model.activation_bytes(), 0u);
  model.forward(0, in0, in1);
  model.forward(1, in1, in0);
  EXPECT_EQ(model.activation_bytes(), 2 * stash);
  EXPECT_EQ(model.peak_activation_bytes(), 2 * stash);
  model.backward(0, 1.0f);
  model.backward(1, 1.0f);
  EXPECT_EQ(model.activation_bytes(), 0u);
  EXPECT_EQ(model.peak_activation_bytes(), 2 * stash);
  EXPECT_THROW(model.backward(1, 1.0f), std::logic_error);
}

// Counts Kokkos allocations through the tools interface.
int g_allocations = 0;
void count_allocation(Kokkos_Profiling_SpaceHandle, const char*, const void*, std::uint64_t) { ++g_allocations; }

TEST(ActivationArena, SteadyStateForwardBackwardAllocatesNothing) {
  const ModelConfig cfg = tiny_config();
  const int B = 2, BT = B * cfg.seq_len;
  Transformer model(cfg, B, 1, no_tp());
  const IntBuffer inputs = random_tokens(BT, cfg.vocab, 1), targets = random_tokens(BT, cfg.vocab, 2);
  auto step = [&] {
    model.zero_grads();
    model.forward(0, inputs, targets);
    model.forward(1, targets, inputs);
    model.backward(0, 0.5f);
    model.backward(1, 0.5f);
  };
  step();  // warm-up: the arena grows to two slots
  Kokkos::Tools::Experimental::set_allocate_data_callback(count_allocation);
  g_allocations = 0;
  const FloatBuffer probe("probe", 1);  // proves the callback is live
  EXPECT_EQ(g_allocations, 1);
  step();
  step();
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
  EXPECT_EQ(g_allocations, 1);
}

}  // namespace
}  // namespace trident
