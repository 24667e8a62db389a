// What a layer's forward and backward read besides its weights, its stash and its input: the shape
// of one micro-batch on this tensor-parallel rank, the TP group its collectives run in, the GEMM
// context its products go through, and the scratch its backward writes activation gradients into.
// The model builds one and hands it to every layer (model/gpt2_block.hpp), so a layer has no
// hidden inputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/comm.hpp"
#include "deck/choices.hpp"
#include "kernels/column_sums.hpp"
#include "kernels/gemm.hpp"
#include "kernels/attention.hpp"
#include "kernels/rope.hpp"
#include "model/moe_mlp.hpp"
#include "model/ring_attention.hpp"
#include "model/tp_shape.hpp"

namespace trident {

// When a backward pass computes the weight gradients: during it, or later in a separate W pass
// (zero-bubble schedules split backward into input gradient I and weight gradient W).
enum class WeightGrads { now, deferred };

// Activation gradients inside one layer's backward. Micro-batches run backward one at a time, so
// one set serves them all. Under selective recomputation with the explicit attention kernel `att`
// holds the attention probabilities a layer's stash does not keep: written by its forward, rebuilt
// from q and k by its backward.
struct BackwardScratch {
  float* att;    // [B, H/tp, T, T] attention probabilities (selective recomputation only, else null)
  float* dln;    // [B, T, C]       gradient w.r.t. a norm's output
  float* datty;  // [B, T, C/tp]    gradient w.r.t. the attention output
  float* attention;  // the attention kernel's scratch, forward and backward (attention_scratch_floats)
  float* dfch;   // [B, T, k·F/tp]  gradient w.r.t. the MLP's k input products (GPT-2's c_fc; Llama's gate | up)
  float* dqkv;   // [B, T, 3C/tp]   gradient w.r.t. q, k and v (weights now)
  // Sequence parallelism only (else null): all B·T rows of the tensor-parallel region's border.
  float* gathered = nullptr;   // [B, T, C]  a norm's output gathered, or a row-parallel layer's partial sums
  float* dgathered = nullptr;  // [B, T, C]  the residual stream's gradient gathered
  float* dln_local = nullptr;  // [B, T/tp, C] dln summed over TP, this rank's rows
  ColumnSumScratch column_sums;  // a norm backward's per-team weight-gradient sums (kernels/column_sums.hpp)
};

// The shape of one micro-batch's stash on this rank: the TP share of the columns, the B·T rows of
// the tensor-parallel region, and the residual stream's rows (B·T / tp under sequence
// parallelism), and what the attention kernel saves for backward (attention_saved_floats; 0 under
// selective recomputation with the explicit kernel, whose probabilities are then rebuilt), and
// whether the activations only products read are kept in bf16 (train.precision = "bf16").
struct StashShape {
  TpShape local;
  std::size_t B, T, C;
  std::size_t stream_rows;
  std::size_t attention_saved;
  bool bf16_product_inputs = false;
  MoeShape mixture = {};  // the layer's mixture of experts ([model.moe]); none: a dense MLP
  std::size_t rows() const { return B * T; }

  // Carves a ProductInput of `elements` with a block's `take` (floats from the stash's arena).
  template <class Take>
  ProductInput product_input(Take&& take, std::size_t elements) const {
    float* floats = take(product_input_floats(elements, bf16_product_inputs));
    if (bf16_product_inputs) return ProductInput::of_bf16(reinterpret_cast<std::uint16_t*>(floats));
    return floats;
  }
};

struct LayerContext {
  int B, T, C;
  TpShape local;
  Comm& tp;
  GemmContext& gemm;
  BackwardScratch scratch;
  const RopeTable* rope = nullptr;  // the rotary embedding's angles, for rotary positions (else null)
  float norm_eps = 1e-5f;           // model.norm_eps, which RMSNorm reads (LayerNorm's is 1e-5 always)
  // parallel.sequence_parallel: the residual stream (block inputs and outputs, norms, residual
  // adds) holds local_rows() = B·T/tp rows on each TP rank, a contiguous block of the [B·T] rows.
  bool sequence_parallel = false;
  AttentionKernel attention = AttentionKernel::tiled;  // model.attention
  // parallel.cp > 1: the micro-batch's rows are this rank's two chunks of each sequence, and
  // attention is a ring over the cp group (else null).
  RingAttention* ring = nullptr;
  // The position ids and packed documents of the micro-batch in hand (the model sets them before
  // each pass).
  TokenPositions positions = {};
  // [model.moe]: what the mixture layers share (else null); the layer in hand (its index in the
  // whole model), whether its forward counts toward the step's figures (not when recomputed for
  // backward, nor an evaluation) and the scale of the loss gradient its backward carries
  // (Transformer::backward's).
  MoeContext* moe = nullptr;
  int layer = 0;
  bool counted = true;
  float loss_scale = 1.0f;

  int rows() const { return B * T; }  // rows of the tensor-parallel region: every position
  std::size_t hidden_floats() const { return static_cast<std::size_t>(B) * T * C; }  // one [B, T, C] tensor
  int local_rows() const { return sequence_parallel ? rows() / tp.size() : rows(); }
  std::size_t local_floats() const { return static_cast<std::size_t>(local_rows()) * C; }  // the stream's share

  // A term added before a TP all-reduce of partial sums (a row-parallel bias, the position
  // embedding) is added by TP rank 0 alone, so that the sum counts it once.
  const float* once(const float* term) const { return tp.rank() == 0 ? term : nullptr; }

  // The borders of the tensor-parallel region (Megatron's g and ḡ; without sequence parallelism
  // their identity and all-reduce). Entering it: this rank's stream rows `local`, all-gathered into
  // `full` under sequence parallelism (returned), else `local` itself, which holds every row.
  const float* gather_rows(const float* local, float* full) const;
  // The same for an activation only products read (a norm's output), gathered as it is kept
  // (bf16 bits into the first half of `full` under bf16).
  Operand gather_rows(const ProductInput& local, float* full) const;
  // Leaving it: partial sums over TP of every row, `partial`, summed into this rank's stream rows
  // `local`: reduce-scatter under sequence parallelism, else an all-reduce in place (`local` must
  // then be `partial`; summed_rows_buffer says where to write partial sums).
  CommRequestPtr sum_rows_async(float* partial, float* local) const;
  void sum_rows(float* partial, float* local) const { sum_rows_async(partial, local)->wait(); }
  // Where to write the partial sums that sum_rows will reduce into `local`: `scratch` under
  // sequence parallelism, else `local` itself.
  float* partial_rows(float* local, float* scratch) const { return sequence_parallel ? scratch : local; }
  // Where a block's backward gathers the stream's gradient for its row-parallel layers.
  float* output_grads(float* dresidual) const { return sequence_parallel ? scratch.dgathered : dresidual; }

  // Causal attention of the local rows (the shape's), by the kernel of model.attention, or the ring
  // over the cp group. `saved`: what the stash keeps for backward, or null (selective recomputation
  // with the explicit kernel: forward writes the probabilities into scratch.att, backward rebuilds
  // them there from q and k).
  void attention_forward(float* out, float* saved, const float* q, const float* k, const float* v,
                         const AttentionShape& shape) const;
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                          const float* v, const float* out, const float* saved, const AttentionShape& shape) const;
};

}  // namespace trident
