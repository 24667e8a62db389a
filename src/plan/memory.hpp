// Memory per rank in bytes: weights, gradients, AdamW m and v (ZeRO-1: a 1/dp shard, and the
// buffers it reduce-scatters into), activations, all fp32 whatever train.precision (a product
// rounds copies of its activation operands, kernels/matmul_precision.hpp); under bf16 also the
// weights' bf16 copy that the products read (model/param_store.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "deck/config.hpp"
#include "plan/partition.hpp"

namespace trident {

// 4-byte words (floats; int32 token ids count as one word each) that one micro-batch stashes
// between its forward and its backward on a stage holding layers [first_layer, first_layer +
// num_layers). The model's activation arena stores exactly this list (B = micro_batch_size,
// T = seq_len, C = d_model, H = heads, V = vocab):
//   every stage        its input B*T*C: the embedding output on the first stage (which also keeps
//                      the B*T token ids), the activation received from the previous stage on the
//                      others
//   per layer          ln_1 out B*T*C, ln_1 mean+rstd 2*B*T, qkv 3*B*T*C, what attention saves
//                      (model.attention "tiled": a log-sum-exp per row, B*H*T; "explicit": the
//                      probabilities B*H*T*T), attention output B*T*C, residual after attention
//                      B*T*C, ln_2 out B*T*C, ln_2 mean+rstd 2*B*T, fc pre-activation 4*B*T*C,
//                      gelu output 4*B*T*C, block output B*T*C (= B*T*(16C + 4) + B*H*T, tiled)
//   last stage         ln_f out B*T*C + mean/rstd 2*B*T, probabilities B*T*V, per-token losses B*T
// (Llama: RMSNorm keeps rstd only, q/k/v are (H + 2 kv_heads) head widths, SwiGLU keeps gate, up
// and their product.) With tp > 1 this is one TP rank's share: the head-split terms (qkv,
// attention probabilities with H / tp heads, attention output) and the MLP terms are divided by
// tp, and the probabilities cover the rank's vocabulary shard (V padded to a multiple of tp,
// divided by tp); the rest is replicated. With mode.keep_probabilities = false (schedule.recompute
// = "selective") the explicit kernel's B*(H/tp)*T^2 attention probabilities are not stashed; with
// mode.sequence_parallel the residual stream's tensors (the stage's input, the norms' outputs and
// statistics, the residuals, the block outputs) hold B*T/tp rows; with mode.bf16_product_inputs
// (train.precision = "bf16") what only products read is kept in bf16: half the words, rounded up
// to whole 16-byte groups (product_input_floats): the MLP's output activation (GELU's, SwiGLU's)
// and the norms' outputs.
// A mixture layer ([model.moe], ModelConfig::moe_layer; model/moe_mlp.hpp's MoeStash) keeps instead
// of ln_2's product input, the MLP's outputs and its activation, with R the residual stream's rows
// and A = R * top_k assignments, E experts of hidden width F (whole on every TP rank): ln_2 out R*C
// in fp32 (the router reads it) + rstd R, router softmax R*E, chosen experts and their weights
// 2*A, token counts E, permutation offsets E + 1, order and slot 2*A (integers one word each),
// permuted input A*C and expert activation A*F (product inputs: bf16-sized under bf16), w1 | w3
// outputs 2*A*F, expert outputs A*C.
// Throws std::invalid_argument if the layers fall outside the model.
struct StashMode {
  bool keep_probabilities = true;
  bool sequence_parallel = false;
  bool bf16_product_inputs = false;
  int expert_ranks = 1;  // parallel.ep: a mixture's rows travel to its experts' ranks and back
};
std::int64_t activation_floats_per_microbatch(const ModelConfig& model, int micro_batch_size, int first_layer,
                                              int num_layers, bool first_stage, bool last_stage, int tp = 1,
                                              StashMode mode = {});

// 4-byte words that one micro-batch stashes on one chunk with schedule.recompute = "full": only
// the chunk's input, B*T*C (the first virtual stage: the B*T token ids), and on the last the B*T
// targets; the rest is recomputed from them just before the chunk's backward.
std::int64_t recompute_floats_per_microbatch(const ModelConfig& model, int micro_batch_size, bool first_stage,
                                             bool last_stage);

// 4-byte words of the output gradients one micro-batch keeps on a chunk of `num_layers` layers from
// its I until its W (schedules that split B): per layer its blocks' OutputGrads (model/block.hpp),
// over all B*T rows: the block output's and the attention projection's B*T*C each, q | k | v's and
// the MLP input layer's (GPT-2 c_fc F/tp, Llama gate | up 2F/tp) outputs.
std::int64_t kept_grad_floats_per_microbatch(const ModelConfig& model, int micro_batch_size, int num_layers, int tp);

struct RankMemory {
  std::int64_t weight_bytes = 0;       // the fp32 master weights
  std::int64_t weight_copy_bytes = 0;  // train.precision = "bf16": their bf16 copy, which the products read
  std::int64_t grad_bytes = 0;
  std::int64_t optimizer_bytes = 0;  // AdamW m + v, of this rank's shard under ZeRO-1
  // ZeRO-1's reduced-gradient shard and padded staging copies (plan/buckets.hpp); 0 without it.
  std::int64_t zero1_bytes = 0;
  // checkpoint.async: the host copy of the weights and the whole AdamW m and v that a background
  // save writes from (train/checkpoint.hpp SaveBuffers); 0 without it.
  std::int64_t checkpoint_copy_bytes = 0;
  // Stash of one micro-batch on every chunk of the rank (recompute: the chunks' inputs only).
  std::int64_t activation_bytes_per_microbatch = 0;
  // Micro-batches of a whole rank in flight at the peak (pipeline_theory.hpp); fractional for
  // interleaved schedules, which hold chunks of micro-batches.
  double in_flight_microbatches = 0.0;
  // recompute = "full": the full stash of the largest chunk, rebuilt for its backward; "selective":
  // one layer's attention probabilities, rebuilt for its backward. 0 otherwise.
  std::int64_t recompute_bytes = 0;
  // The buffers backward writes activation gradients into (workspace_floats), and under context
  // parallelism the ring's (ring_floats).
  std::int64_t workspace_bytes = 0;

  // Schedules that split B into I and W: the most bytes of output gradients the rank keeps from I
  // until W at once, walking its action list (kept_grad_floats_per_microbatch per chunk). 0 otherwise.
  std::int64_t kept_grad_bytes = 0;
  // Schedules that split B: the most bytes of stash and kept output gradients the rank holds at
  // once, walking its action list (a chunk's stash from its F until its W, its output gradients from
  // I until W; under full recomputation its inputs from F until I, then the rebuilt stash until W,
  // which recompute_bytes then leaves out). Exact where the in-flight count and kept_grad_bytes, each
  // at its own peak, add up to a bound. 0 otherwise.
  std::int64_t walked_peak_bytes = 0;
  std::int64_t activation_bytes() const {
    if (walked_peak_bytes > 0) return walked_peak_bytes + recompute_bytes;
    return static_cast<std::int64_t>(in_flight_microbatches * static_cast<double>(activation_bytes_per_microbatch)) +
           recompute_bytes + kept_grad_bytes;
  }
  // Not counted: the runtime (libraries, MPI's and the BLAS's buffers, the token data), about
  // 90-210 MiB per rank on this project's CPU machines (README.md, "Memory").
  std::int64_t total_bytes() const {
    return weight_bytes + weight_copy_bytes + grad_bytes + optimizer_bytes + zero1_bytes + checkpoint_copy_bytes +
           activation_bytes() + workspace_bytes;
  }
};

// 4-byte words of one rank's backward workspace, whatever chunks it holds (model/transformer.cpp's
// Workspace): the residual and norm gradients B*T*C each, the attention output's B*T*C/tp, q, k
// and v's 3*B*T*C/tp, the probabilities' B*(H/tp)*T^2, the MLP's B*T*F/tp (Llama: twice); with
// sequence parallelism the gathered rows (2*B*T*C), the summed norm gradient (B*T*C/tp) and the
// norm gradients set aside (8*C). (Selective recomputation's probabilities are recompute_bytes.)
// Under [model.moe] also the mixture's (model/moe_mlp.hpp's MoeContext, k = top_k, E experts of
// width F): backward's gradients of the w1 | w3 outputs B*T*k*2F, of the experts' inputs B*T*k*C,
// of the router logits B*T*E and of the routing weights B*T*k, and the step's tokens per expert L*E.
std::int64_t workspace_floats(const ModelConfig& model, int micro_batch_size, int tp, bool sequence_parallel,
                              int expert_ranks = 1);
// Context parallelism's ring attention buffers, for `model` with the rank's seq_len / cp positions.
std::int64_t ring_floats(const ModelConfig& model, int micro_batch_size, int tp);

// Peak memory of any rank of pipeline rank `rank` (all TP and DP ranks of a stage are alike).
// `stages` is a partition_layers result with pp * v entries (v = chunks per rank, the deck's
// schedule.virtual_stages); the rank holds stages[rank], stages[rank + pp], ...
RankMemory rank_memory(const Deck& deck, const std::vector<StageLayers>& stages, int rank);

// Whether the deck's schedule (auto's choice, or the file's) splits B into I and W.
bool planned_schedule_splits_backward(const Deck& deck);

}  // namespace trident
