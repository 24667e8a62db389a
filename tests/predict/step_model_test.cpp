// The step model against hand counts: with a flat GEMM efficiency and free memory traffic an action
// costs its FLOPs at the peak; TP collectives, pipeline messages, the DP reduction and
// recomputation add what their formulas say (step_model.hpp).
#include "predict/step_model.hpp"

#include <gtest/gtest.h>

namespace trident {
namespace {

constexpr double kPeak = 1e12;

// Flat efficiency 1, memory traffic free, links of 1 GB/s and 1 us.
Machine ideal_machine(int devices_per_node) {
  Machine machine;
  machine.name = "ideal";
  machine.devices_per_node = devices_per_node;
  machine.device_memory_bytes = 1e12;
  machine.peak_fp32 = kPeak;
  machine.memory_bandwidth = 1e30;
  machine.gemm_efficiency = {{1.0, 1.0}};
  machine.intra_node = {1e9, 1e-6};
  machine.inter_node = {1e8, 1e-5};
  return machine;
}

// GPT-2, 2 layers, C 64, 4 heads, T 32, V 256; micro-batches of 2 sequences (64 rows), m = 4.
Deck small_deck(int tp = 1, int pp = 1, int dp = 1) {
  Deck deck;
  deck.model.layers = 2;
  deck.model.d_model = 64;
  deck.model.heads = 4;
  deck.model.seq_len = 32;
  deck.model.vocab = 256;
  deck.model.attention = AttentionKernel::explicit_probabilities;
  deck.parallel.tp = tp;
  deck.parallel.pp = pp;
  deck.parallel.dp = dp;
  deck.schedule.kind = ScheduleKind::one_f_one_b;
  deck.schedule.microbatches = 4;
  deck.schedule.micro_batch_size = 2;
  deck.train.precision = MatmulPrecision::fp32;
  return deck;
}

// By hand, one micro-batch (64 rows), C = 64: a layer's weight products 2·64·12·C² FLOPs, its
// attention core 2 products × 8 (sequence, head) pairs × 2·T·T·hd; the head's logits 2·64·V·C.
constexpr double kWeights = 2.0 * 64 * 12 * 64 * 64;
constexpr double kCore = 2.0 * 8 * 2 * 32 * 32 * 16;
constexpr double kHead = 2.0 * 64 * 256 * 64;
constexpr double kForward = 2 * (kWeights + kCore) + kHead;
constexpr double kInputGrad = 2 * (kWeights + 2 * kCore) + kHead;
constexpr double kWeightGrad = 2 * kWeights + kHead;

TEST(StepModel, OneRankRunsEveryMicroBatchAtThePeak) {
  const StepPrediction p = predict_step(small_deck(), ideal_machine(1));
  EXPECT_NEAR(p.costs.per_virtual_stage[0].forward, kForward / kPeak, 1e-15);
  EXPECT_NEAR(p.costs.per_virtual_stage[0].input_grad, kInputGrad / kPeak, 1e-15);
  EXPECT_NEAR(p.costs.per_virtual_stage[0].weight_grad, kWeightGrad / kPeak, 1e-15);
  EXPECT_NEAR(p.step_time_s, 4 * (kForward + kInputGrad + kWeightGrad) / kPeak, 1e-12);
  EXPECT_DOUBLE_EQ(p.bubble, 0.0);
  EXPECT_NEAR(p.tokens_per_s * p.step_time_s, 4 * 2 * 32, 1e-9);
  EXPECT_NEAR(p.mfu, p.flops_per_device / kPeak, 1e-12);
  EXPECT_EQ(p.memory_per_rank_bytes.size(), 1u);
  EXPECT_TRUE(p.fits);
}

TEST(StepModel, TensorParallelActionsAddTheirRingAllReduces) {
  // Per micro-batch: 2 all-reduces per layer in F and 2 in I, the embedding's 1 and the head's 1:
  // 10 of 64·64·4 bytes, each 2·(1/2)·bytes / 1 GB/s + 2·1 us inside one node.
  const StepPrediction p = predict_step(small_deck(2), ideal_machine(2));
  const double all_reduce = 64.0 * 64 * 4 / 1e9 + 2e-6;
  EXPECT_NEAR(p.tp_comm_s, 4 * 10 * all_reduce, 1e-12);
  // Across nodes (one device per node) the same bytes take the inter-node link.
  const StepPrediction across = predict_step(small_deck(2), ideal_machine(1));
  EXPECT_NEAR(across.tp_comm_s, 4 * 10 * (64.0 * 64 * 4 / 1e8 + 2e-5), 1e-12);
}

TEST(StepModel, APipelineMessageCrossingNodesTakesTheInterNodeLink) {
  const StepPrediction inside = predict_step(small_deck(1, 2), ideal_machine(2));
  EXPECT_NEAR(inside.costs.p2p_latency, 1e-6 + 64.0 * 64 * 4 / 1e9, 1e-15);
  const StepPrediction across = predict_step(small_deck(1, 2), ideal_machine(1));
  EXPECT_NEAR(across.costs.p2p_latency, 1e-5 + 64.0 * 64 * 4 / 1e8, 1e-15);
  EXPECT_GT(across.bubble, 0.0);
  EXPECT_EQ(across.memory_per_rank_bytes.size(), 2u);
  // The tied embedding's two copies sum their gradients: 256·64 floats between two nodes.
  EXPECT_NEAR(across.embedding_sync_s, 256.0 * 64 * 4 / 1e8 + 2e-5, 1e-12);
}

TEST(StepModel, TheDataParallelReductionShowsWhatOutlastsTheLastBackward) {
  Machine machine = ideal_machine(1);
  machine.inter_node = {1e6, 0.0};  // slow enough to outlast the backward
  const StepPrediction p = predict_step(small_deck(1, 1, 2), machine);
  // GPT-2 by hand: wte 256·64, wpe 32·64, per layer 12·C² + 13·C, ln_f 2·C.
  const double parameters = 256.0 * 64 + 32 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64;
  const double all_reduce = 2.0 * (1.0 / 2) * parameters * 4 / 1e6;
  EXPECT_NEAR(p.dp_exposed_s, all_reduce - p.costs.per_virtual_stage[0].backward, 1e-9);
  EXPECT_NEAR(p.step_time_s, p.pipeline_s + p.dp_exposed_s + p.optimizer_s, 1e-12);
}

TEST(StepModel, FullRecomputationRunsTheForwardAgainBeforeTheInputGradient) {
  Deck deck = small_deck();
  const StepPrediction plain = predict_step(deck, ideal_machine(1));
  deck.schedule.recompute = Recompute::full;
  const StepPrediction recomputed = predict_step(deck, ideal_machine(1));
  EXPECT_NEAR(recomputed.costs.per_virtual_stage[0].input_grad - plain.costs.per_virtual_stage[0].input_grad,
              plain.costs.per_virtual_stage[0].forward, 1e-15);
}

TEST(StepModel, ARankThatDoesNotFitIsSaid) {
  Machine machine = ideal_machine(1);
  machine.device_memory_bytes = 1024;
  EXPECT_FALSE(predict_step(small_deck(), machine).fits);
}

TEST(StepModel, ContextParallelRanksShareTheSequenceAndShowTheRingWhereItOutlastsAttention) {
  Deck whole = small_deck();
  whole.model.attention = AttentionKernel::tiled;
  Deck halves = whole;
  halves.parallel.cp = 2;
  const StepPrediction one = predict_step(whole, ideal_machine(2)), two = predict_step(halves, ideal_machine(2));
  // Each rank: half the rows of every product, half the causal square of attention: a cp-th of
  // the core is 2 products x 8 (sequence, head) pairs x 2 x (T/2 x 1/2) x T x hd FLOPs.
  const double core_share = 2.0 * 8 * 2 * (16 * 0.5) * 32 * 16 / kPeak / 2;
  // A hop: the rank's 32 rows of k | v (4 kv heads of 16), fp32, over 1 GB/s and 1 us. F overlaps
  // one hop with a cp-th of the core. I's two steps (two cp-ths each) overlap the keys' hop and the
  // first hop of the gradient sums; the second, after the last step, shows whole.
  const double hop = 32.0 * 2 * 4 * 16 * 4 / 1e9 + 1e-6;
  const double forward_ring = hop - core_share, backward_ring = 2 * (hop - 2 * core_share) + hop;
  EXPECT_NEAR(two.costs.per_virtual_stage[0].forward, one.costs.per_virtual_stage[0].forward / 2 + 2 * forward_ring,
              1e-15);
  EXPECT_NEAR(two.costs.per_virtual_stage[0].input_grad,
              one.costs.per_virtual_stage[0].input_grad / 2 + 2 * backward_ring, 1e-15);
  EXPECT_NEAR(two.cp_comm_s, 4 * 2 * (forward_ring + backward_ring), 1e-12);  // m 4, 2 layers
  EXPECT_DOUBLE_EQ(one.cp_comm_s, 0.0);
  // The two ranks sum their gradients as two replicas do (dp x cp = 2); one rank has nothing to sum.
  EXPECT_GT(two.dp_exposed_s, 0.0);
  EXPECT_DOUBLE_EQ(one.dp_exposed_s, 0.0);
}

// [model.moe]: a mixture layer multiplies by the router and, per token, its top k experts; with
// experts split over ep 2 of 2 replicas each F and I adds the rows' all-to-all out and back.
TEST(StepModel, AMixtureCountsItsActiveExpertsAndItsAllToAlls) {
  Deck dense = small_deck(1, 1, 2);
  dense.model.family = ModelFamily::llama;
  dense.model.ffn_hidden = 96;
  Deck mixture = dense;
  mixture.model.moe = {.experts = 4, .top_k = 2, .expert_ffn_hidden = 96, .layer_freq = 1};
  Deck split = mixture;
  split.parallel.ep = 2;
  const Machine machine = ideal_machine(2);
  const StepPrediction d = predict_step(dense, machine), m = predict_step(mixture, machine);
  const StepPrediction e = predict_step(split, machine);
  // Per micro-batch (64 rows) and layer, forward: k = 2 SwiGLU MLPs of F 96 per row instead of one,
  // plus the router's 64 x 4 x C product.
  const double extra = 2 * (2.0 * 64 * 3 * 64 * 96 + 2.0 * 64 * 4 * 64);
  EXPECT_NEAR(m.costs.per_virtual_stage[0].forward - d.costs.per_virtual_stage[0].forward, extra / kPeak, 1e-12);
  // One all-to-all: half of the 64 x 2 assignments' fp32 rows leave, over the replicas' 1 GB/s link.
  const double all_to_all = 64 * 2 * 64 * 4 / 2 / 1e9 + 1e-6;
  EXPECT_NEAR(e.costs.per_virtual_stage[0].forward - m.costs.per_virtual_stage[0].forward, 2 * 2 * all_to_all, 1e-12);
  EXPECT_NEAR(e.ep_comm_s, 4 * 2 * 2 * 2 * all_to_all, 1e-12);  // m 4, 2 layers, F and I, out and back
  EXPECT_DOUBLE_EQ(m.ep_comm_s, 0.0);
}

}  // namespace
}  // namespace trident
