#include "plan/memory.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "plan/model_size.hpp"
#include "plan/partition.hpp"
#include "plan/pipeline_theory.hpp"

namespace trident {
namespace {

// B 2, T 4, C 8, H 2, V 16, L 3: B*T = 8. The hand counts below are for the explicit attention
// kernel, whose T×T probabilities show in them; TiledAttention* tests count the tiled one.
ModelConfig tiny() {
  ModelConfig model;
  model.attention = AttentionKernel::explicit_probabilities;
  model.layers = 3;
  model.d_model = 8;
  model.heads = 2;
  model.seq_len = 4;
  model.vocab = 16;
  return model;
}
constexpr int kB = 2;

// Per layer, by hand: ln_1 64 + 16, qkv 192, probabilities 2*2*4*4 = 64, attention output 64,
// residual 64, ln_2 64 + 16, fc 256, gelu 256, block output 64.
constexpr std::int64_t kLayer = 80 + 192 + 64 + 64 + 64 + 80 + 256 + 256 + 64;
constexpr std::int64_t kProbabilities = 64;  // per layer, in kLayer
// Every stage keeps its input B*T*C (the embedding output, or the activation received); the first
// also its B*T token ids.
constexpr std::int64_t kInput = 64;
constexpr std::int64_t kTokens = 8;
// ln_f 64 + 16, probabilities 8*16, losses 8.
constexpr std::int64_t kHeadAndLoss = 80 + 128 + 8;

TEST(Memory, LayerCountMatchesClosedForm) {
  // B*T*(16C + 4) + B*H*T^2
  EXPECT_EQ(kLayer, 8 * (16 * 8 + 4) + 2 * 2 * 16);
  EXPECT_EQ(activation_floats_per_microbatch(tiny(), kB, 1, 1, false, false), kInput + kLayer);
}

TEST(Memory, ActivationsPerStageMatchHandCount) {
  const ModelConfig model = tiny();
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 0, 3, true, true), 3648);
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 0, 3, true, true),
            kInput + kTokens + 3 * kLayer + kHeadAndLoss);
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 0, 2, true, false), kInput + kTokens + 2 * kLayer);
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 2, 1, false, true), kInput + kLayer + kHeadAndLoss);
}

TEST(Memory, TensorParallelShareDividesHeadAndMlpTerms) {
  const ModelConfig model = tiny();
  // tp 2: ln_1 80, qkv 96, probabilities 2*1*16 = 32, attention output 32, residual 64, ln_2 80,
  // fc 128, gelu 128, block output 64.
  const std::int64_t layer = 80 + 96 + 32 + 32 + 64 + 80 + 128 + 128 + 64;
  // ln_f 80, probabilities over 16/2 = 8 vocab rows: 64, losses 8.
  const std::int64_t head_and_loss = 80 + 64 + 8;
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 0, 3, true, true, 2),
            kInput + kTokens + 3 * layer + head_and_loss);
}

TEST(Memory, SequenceParallelShardsTheResidualStream) {
  const ModelConfig model = tiny();
  // tp 2, the stream on B*T/2 = 4 rows: ln_1 32 + 8, qkv 96, probabilities 32, attention output 32,
  // residual 32, ln_2 32 + 8, fc 128, gelu 128, block output 32.
  const std::int64_t layer = 40 + 96 + 32 + 32 + 32 + 40 + 128 + 128 + 32;
  // ln_f 32 + 8, probabilities over 8 vocab rows for all 8 tokens: 64, losses 8.
  const std::int64_t head_and_loss = 40 + 64 + 8;
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 0, 3, true, true, 2, {.sequence_parallel = true}),
            kInput / 2 + kTokens + 3 * layer + head_and_loss);
}

// The tiled kernel keeps one log-sum-exp per (sequence, head, position), B*H*T = 16 per layer,
// instead of the 64 probabilities; its scratch is 2 H tile^2 + B H T with the tile T = 4: 80.
TEST(Memory, TiledAttentionKeepsOneValuePerRow) {
  ModelConfig model = tiny();
  model.attention = AttentionKernel::tiled;
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 0, 3, true, true),
            kInput + kTokens + 3 * (kLayer - kProbabilities + 16) + kHeadAndLoss);
  // Selective recomputation has nothing to drop then.
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 0, 3, true, true, 1, {.keep_probabilities = false}),
            activation_floats_per_microbatch(model, kB, 0, 3, true, true));
  EXPECT_EQ(workspace_floats(model, kB, 1, false), 64 + 64 + 64 + 192 + 80 + 256);
}

TEST(Memory, ProbabilitiesCoverThePaddedVocabShard) {
  ModelConfig model = tiny();
  model.vocab = 15;  // tp 2 pads to 16: 8 rows per rank; tp 1 keeps 15
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 0, 0, false, true, 1), kInput + 80 + 8 * 15 + 8);
  EXPECT_EQ(activation_floats_per_microbatch(model, kB, 0, 0, false, true, 2), kInput + 80 + 8 * 8 + 8);
}

TEST(Memory, RejectsLayersOutsideTheModel) {
  EXPECT_THROW(activation_floats_per_microbatch(tiny(), kB, 2, 2, false, true), std::invalid_argument);
  EXPECT_THROW(activation_floats_per_microbatch(tiny(), kB, -1, 1, true, false), std::invalid_argument);
}

TEST(PipelineTheory, InFlightMicrobatchesPerSchedule) {
  ScheduleConfig gpipe;
  gpipe.kind = ScheduleKind::gpipe;
  gpipe.microbatches = 8;
  ScheduleConfig one_f_one_b;
  one_f_one_b.kind = ScheduleKind::one_f_one_b;
  one_f_one_b.microbatches = 8;
  EXPECT_EQ(in_flight_microbatches(gpipe, 0, 1), 8);  // the generator runs every F first
  EXPECT_EQ(in_flight_microbatches(one_f_one_b, 0, 1), 1);
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(in_flight_microbatches(gpipe, stage, 4), 8);
    EXPECT_EQ(in_flight_microbatches(one_f_one_b, stage, 4), 4 - stage);
  }
  one_f_one_b.microbatches = 2;
  EXPECT_EQ(in_flight_microbatches(one_f_one_b, 0, 4), 2);
  EXPECT_EQ(in_flight_microbatches(one_f_one_b, 2, 4), 2);
  EXPECT_EQ(in_flight_microbatches(one_f_one_b, 3, 4), 1);
}

TEST(PipelineTheory, BubbleFormula) {
  EXPECT_DOUBLE_EQ(theoretical_bubble(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(theoretical_bubble(16, 64), 15.0 / 79.0);
  EXPECT_DOUBLE_EQ(theoretical_bubble(1, 8), 0.0);
}

// Pipeline rank 0's memory under the deck's own layer split.
RankMemory first_rank_memory(const Deck& deck) { return rank_memory(deck, partition_layers(deck.model, deck.parallel), 0); }

TEST(Memory, SingleRankHoldsWeightsGradsAdamAndOneMicrobatch) {
  Deck deck;
  deck.model = tiny();
  deck.schedule.micro_batch_size = kB;
  deck.schedule.microbatches = 4;
  const auto stages = partition_layers(deck.model, deck.parallel);
  const RankMemory memory = rank_memory(deck, stages, 0);
  const std::int64_t weights = 4 * total_params(deck.model);
  EXPECT_EQ(memory.weight_bytes, weights);
  EXPECT_EQ(memory.grad_bytes, weights);
  EXPECT_EQ(memory.optimizer_bytes, 2 * weights);
  EXPECT_EQ(memory.in_flight_microbatches, 1);
  EXPECT_EQ(memory.activation_bytes(), 4 * 3648);
  // Workspace, by hand: dresidual 64, dln 64, datty 64, dqkv 192, datt 2*2*16 = 64, dfch 256.
  EXPECT_EQ(memory.workspace_bytes, 4 * (64 + 64 + 64 + 192 + 64 + 256));
  EXPECT_EQ(memory.total_bytes(), 4 * weights + 4 * 3648 + memory.workspace_bytes);
}

// Under bf16 the products read a bf16 copy of the weights (ParamStore::keep_bf16_copy): 2 more bytes
// per parameter; no copy in fp32 or TF32.
TEST(Memory, Bf16AddsTheWeightsCopyAndKeepsWhatOnlyProductsReadInHalves) {
  Deck deck;
  deck.model = tiny();
  const RankMemory fp32 = first_rank_memory(deck);
  EXPECT_EQ(fp32.weight_copy_bytes, 0);
  deck.train.precision = MatmulPrecision::bf16;
  const RankMemory bf16 = first_rank_memory(deck);
  EXPECT_EQ(bf16.weight_copy_bytes, 2 * total_params(deck.model));
  // Each layer's GELU output (B·T × 4C) and its two norms' outputs (B·T × C each), and the final
  // norm's, in 2 bytes instead of 4 (B·T·C = 32·B: whole 16-byte groups).
  const std::int64_t rows = static_cast<std::int64_t>(deck.schedule.micro_batch_size) * deck.model.seq_len;
  const std::int64_t halved = rows * deck.model.d_model * (deck.model.layers * (4 + 2) + 1);
  EXPECT_EQ(bf16.activation_bytes_per_microbatch, fp32.activation_bytes_per_microbatch - 2 * halved);

  EXPECT_EQ(bf16.total_bytes(), fp32.total_bytes() + 2 * total_params(deck.model) -
                                    (fp32.activation_bytes() - bf16.activation_bytes()));
  EXPECT_LT(bf16.activation_bytes(), fp32.activation_bytes());
}

// checkpoint.async copies the weights and AdamW's m and v to host memory for the background write:
// 12 more bytes per parameter, nothing else changes.
TEST(Memory, AsyncCheckpointsAddTheHostCopyOfWeightsAndMoments) {
  Deck deck;
  deck.model = tiny();
  const RankMemory synchronous = first_rank_memory(deck);
  EXPECT_EQ(synchronous.checkpoint_copy_bytes, 0);
  deck.checkpoint.async = true;
  const RankMemory background = first_rank_memory(deck);
  EXPECT_EQ(background.checkpoint_copy_bytes, 12 * total_params(deck.model));
  EXPECT_EQ(background.total_bytes(), synchronous.total_bytes() + 12 * total_params(deck.model));
}

TEST(Memory, ZeroOneShardsAdamAndAddsTheReducedGradientPieces) {
  Deck deck;
  deck.model = tiny();
  deck.parallel.dp = 3;
  deck.parallel.zero = 1;
  deck.parallel.bucket_mb = 400.0 / (1 << 20);  // 100 floats, rounded up to 102 (a multiple of dp)
  const std::int64_t params = total_params(deck.model);
  // Buckets of 102 from the end, each a 34-float piece per rank; the rest r at offset 0 in ceil(r / 3).
  const std::int64_t full = params / 102, rest = params % 102;
  const std::int64_t shard = 34 * full + (rest + 2) / 3;
  const bool padded = rest % 3 != 0;
  const RankMemory memory = first_rank_memory(deck);
  EXPECT_EQ(memory.weight_bytes, 4 * params);
  EXPECT_EQ(memory.grad_bytes, 4 * params);
  EXPECT_EQ(memory.optimizer_bytes, 8 * shard);
  EXPECT_EQ(memory.zero1_bytes, 4 * (shard + (padded ? 2 * 3 * ((rest + 2) / 3) : 0)));
  deck.parallel.zero = 0;
  EXPECT_EQ(first_rank_memory(deck).zero1_bytes, 0);
}

TEST(Memory, OneFOneBStagesHoldPMinusSMicrobatches) {
  Deck deck;
  deck.model = tiny();
  deck.parallel.pp = 3;
  deck.schedule.kind = ScheduleKind::one_f_one_b;
  deck.schedule.micro_batch_size = kB;
  deck.schedule.microbatches = 8;
  const auto stages = partition_layers(deck.model, deck.parallel);
  const RankMemory first = rank_memory(deck, stages, 0);
  const RankMemory last = rank_memory(deck, stages, 2);
  EXPECT_EQ(first.in_flight_microbatches, 3);
  EXPECT_EQ(first.activation_bytes(), 3 * 4 * (kInput + kTokens + kLayer));
  EXPECT_EQ(last.in_flight_microbatches, 1);
  EXPECT_EQ(last.activation_bytes(), 4 * (kInput + kLayer + kHeadAndLoss));
  // The last stage stores the tied head's copy of wte: 16 x 8.
  EXPECT_EQ(last.weight_bytes, 4 * (block_params(deck.model) + 2 * 8 + 16 * 8));
}

TEST(PipelineTheory, InFlightOfTheOtherKinds) {
  ScheduleConfig schedule;
  schedule.microbatches = 8;
  // zb-h1 postpones rank r's W by r micro-batches: every rank holds 1F1B's first rank's min(p, m)
  // between F and W (the simulator counts the same: tests/schedule/registry_test.cpp).
  schedule.kind = ScheduleKind::zb_h1;
  for (int stage = 0; stage < 4; ++stage) EXPECT_EQ(in_flight_microbatches(schedule, stage, 4), 4);
  schedule.kind = ScheduleKind::one_f_one_b;
  for (int stage = 0; stage < 4; ++stage) EXPECT_EQ(in_flight_microbatches(schedule, stage, 4), 4 - stage);
  // Megatron's interleaved warm-up + 1, in chunks, over v: rank 0 of p 4, v 2: (6 + 4 + 1) / 2.
  schedule.kind = ScheduleKind::interleaved_1f1b;
  schedule.virtual_stages = 2;
  EXPECT_DOUBLE_EQ(in_flight_microbatches(schedule, 0, 4), 5.5);
  EXPECT_DOUBLE_EQ(in_flight_microbatches(schedule, 3, 4), 2.5);
  schedule.microbatches = 2;  // capped by the m v chunks there are
  EXPECT_DOUBLE_EQ(in_flight_microbatches(schedule, 0, 4), 2.0);
  // auto: the bound it respects (0 = p), at most m.
  schedule.kind = ScheduleKind::automatic;
  schedule.microbatches = 8;
  EXPECT_DOUBLE_EQ(in_flight_microbatches(schedule, 0, 4), 4.0);
  schedule.auto_memory_limit = 2.5;
  EXPECT_DOUBLE_EQ(in_flight_microbatches(schedule, 3, 4), 2.5);
}

TEST(PipelineTheory, InterleavedBubbleFormula) {
  EXPECT_DOUBLE_EQ(theoretical_bubble(4, 8, 2), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(theoretical_bubble(4, 8, 1), theoretical_bubble(4, 8));
}

TEST(Memory, InterleavedRankHoldsAllItsChunks) {
  Deck deck;
  deck.model = tiny();
  deck.model.layers = 4;
  deck.parallel.pp = 2;
  deck.schedule.kind = ScheduleKind::interleaved_1f1b;
  deck.schedule.virtual_stages = 2;
  deck.schedule.micro_batch_size = kB;
  deck.schedule.microbatches = 4;
  const auto stages = partition_layers(deck.model, deck.parallel, 2);  // one layer per virtual stage
  const RankMemory first = rank_memory(deck, stages, 0);  // virtual stages 0 and 2
  const RankMemory last = rank_memory(deck, stages, 1);   // virtual stages 1 and 3
  EXPECT_EQ(first.activation_bytes_per_microbatch, 4 * (kInput + kTokens + kLayer + kInput + kLayer));
  EXPECT_EQ(last.activation_bytes_per_microbatch, 4 * (kInput + kLayer + kInput + kLayer + kHeadAndLoss));
  EXPECT_EQ(first.weight_bytes, 4 * (16 * 8 + 4 * 8 + 2 * block_params(deck.model)));
  EXPECT_DOUBLE_EQ(first.in_flight_microbatches, 2.5);  // (2 + 2 + 1) chunks / 2
  EXPECT_EQ(first.activation_bytes(), static_cast<std::int64_t>(2.5 * 4 * (2 * kInput + kTokens + 2 * kLayer)));
}

TEST(Memory, FullRecomputeKeepsChunkInputsAndRebuildsOneChunk) {
  Deck deck;
  deck.model = tiny();
  deck.parallel.pp = 3;
  deck.schedule.micro_batch_size = kB;
  deck.schedule.microbatches = 8;
  deck.schedule.recompute = Recompute::full;
  const auto stages = partition_layers(deck.model, deck.parallel);
  const RankMemory first = rank_memory(deck, stages, 0);
  const RankMemory middle = rank_memory(deck, stages, 1);
  const RankMemory last = rank_memory(deck, stages, 2);
  EXPECT_EQ(first.activation_bytes_per_microbatch, 4 * 8);  // the B*T token ids
  EXPECT_EQ(middle.activation_bytes_per_microbatch, 4 * 64);  // B*T*C
  EXPECT_EQ(last.activation_bytes_per_microbatch, 4 * (64 + 8));  // B*T*C and the B*T targets
  EXPECT_EQ(first.recompute_bytes, 4 * (kInput + kTokens + kLayer));
  EXPECT_EQ(first.activation_bytes(), 3 * 4 * 8 + 4 * (kInput + kTokens + kLayer));
}

TEST(Memory, SelectiveRecomputeDropsTheProbabilitiesAndRebuildsOneLayers) {
  Deck deck;
  deck.model = tiny();
  deck.parallel.pp = 3;
  deck.schedule.micro_batch_size = kB;
  deck.schedule.microbatches = 8;
  const auto stages = partition_layers(deck.model, deck.parallel);
  const RankMemory kept = rank_memory(deck, stages, 0);
  deck.schedule.recompute = Recompute::selective;
  const RankMemory selective = rank_memory(deck, stages, 0);
  EXPECT_EQ(selective.activation_bytes_per_microbatch, kept.activation_bytes_per_microbatch - 4 * kProbabilities);
  EXPECT_EQ(selective.recompute_bytes, 4 * kProbabilities);
  EXPECT_EQ(selective.activation_bytes(), 3 * 4 * (kInput + kTokens + kLayer - kProbabilities) + 4 * kProbabilities);
}

}  // namespace
}  // namespace trident
