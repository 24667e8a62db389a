// Context parallelism's attention (issue 38; DESIGN.md "Context parallelism"): ring attention over
// the cp group. Of every sequence of T positions, cut into 2·cp chunks of L, rank r holds chunks r
// and 2·cp − 1 − r (every rank then has the same causal work) as its local rows [B, 2, L] of q, k,
// v and out, in that order. The ranks' k | v chunks travel round the ring, each hop posted before
// the attention of the chunks in hand; a local query chunk and a visiting key chunk at or before
// it run the tiled kernel with their positions (AttentionShape's offsets), and the partial outputs
// merge by their log-sum-exp. Backward sends the key chunks round again, and the sums of their k
// and v gradients one step behind them (each hop overlapping the next step's attention), which
// every rank adds to and which reach their owner after a whole turn. Grouped-query heads travel as their kv heads only. Packed documents: the shape's starts are
// positions in the whole sequence, one per local row (kernels/document_mask.hpp's ContextChunks
// gives the chunks' places).
#pragma once

#include <cstddef>

#include "comm/comm.hpp"
#include "kernels/attention.hpp"
#include "kernels/device.hpp"

namespace trident {

class RingAttention {
 public:
  // `sizes`: this rank's B sequences of T = 2·L local rows (its two chunks) and its heads; the
  // buffers the ring's chunks travel in are sized for them once.
  RingAttention(Comm& cp, const AttentionShape& sizes);

  // What forward keeps for backward: the log-sum-exp of every local row, [B, 2, heads, L].
  std::size_t saved_floats() const;

  // out (local rows) = causal attention of the local queries over the whole sequence. `local`: the
  // sizes' shape with the row strides of q, k, v and out (out's at most the sizes' out_ld, or
  // heads · head_dim where that is larger) and the documents' starts (positions in the whole
  // sequence) of the local rows, if any.
  void forward(GemmContext& gemm, float* out, float* log_sum_exp, const float* q, const float* k, const float* v,
               const AttentionShape& local);
  // dq, dk, dv (local rows; overwritten) = the gradient of Σ dout · out, from forward's inputs, its
  // output and what it saved.
  void backward(GemmContext& gemm, float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                const float* v, const float* out, const float* log_sum_exp, const AttentionShape& local);

 private:
  int chunk_index(int rank, int local_chunk) const { return ContextChunks{rank, cp_.size()}.chunk(local_chunk); }
  // Takes the call's strides and documents, checked against the sizes.
  void use(const AttentionShape& local);
  // The tiled kernel's shape for sequence b's local query chunk against key chunk `key_chunk`
  // (an index in the whole sequence).
  AttentionShape pair(int b, int query_chunk, int key_chunk, bool accumulate) const;
  long row(int b, int local_chunk) const { return (2L * b + local_chunk) * L_; }  // first local row
  // k | v of the local rows into the first of the travelling buffers.
  void pack_keys(const float* k, const float* v);
  // run(b, local query chunk, local key chunk, key chunk's index in the sequence) for every pair of
  // step `step` whose keys are at or before its queries.
  template <class Pair>
  void for_each_visible_pair(int step, const Pair& run) const;
  // Posts the hop of `send` to the next rank and of the previous rank's into `recv`.
  void post_hop(const FloatBuffer& send, const FloatBuffer& recv, int tag, CommRequestPtr (&requests)[2]);

  Comm& cp_;
  AttentionShape local_;  // the sizes, then the call's shape
  int L_;
  int kv_width_;  // kv_heads · head_dim: the columns of k, and of v
  long part_ld_;  // the widest out_ld a call may give (part_ holds one chunk of such rows)
  // [B, 2L, 2 · kv_width] each: k | v of the visiting chunks, their gradients' travelling sums, and
  // one backward step's gradients of the keys in hand.
  FloatBuffer kv_[2], dkv_[2], block_;
  FloatBuffer part_, part_lse_, scratch_;  // one pair's output and statistic, the tiled kernel's scratch
};

}  // namespace trident
