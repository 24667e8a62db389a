#include "model/ring_attention.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "kernels/copy.hpp"
#include "kernels/profile.hpp"
#include "kernels/residual.hpp"

namespace trident {

namespace {

enum Tag { kKeysTag = 0, kGradsTag = 1 };

// Waits for a hop's receive and send (either may be absent) and forgets them.
void wait_all(CommRequestPtr (&requests)[2]) {
  for (CommRequestPtr& request : requests)
    if (request) std::exchange(request, nullptr)->wait();
}

}  // namespace

RingAttention::RingAttention(Comm& cp, const AttentionShape& sizes)
    : cp_(cp), local_(sizes), L_(sizes.T / 2), kv_width_(sizes.kv_heads * sizes.head_dim) {
  if (sizes.T % 2 != 0 || sizes.kernel != AttentionKernel::tiled)
    throw std::invalid_argument("RingAttention: two chunks of equal length per rank, on the tiled kernel");
  local_.out_ld = std::max(sizes.out_ld, static_cast<long>(sizes.heads) * sizes.head_dim);  // part_'s rows
  const std::size_t kv_floats = static_cast<std::size_t>(sizes.B) * sizes.T * 2 * kv_width_;
  for (int i = 0; i < 2; ++i) {
    kv_[i] = FloatBuffer("ring_kv", kv_floats);
    dkv_[i] = FloatBuffer("ring_dkv", kv_floats);
  }
  block_ = FloatBuffer("ring_block", kv_floats);
  part_ld_ = local_.out_ld;
  part_ = FloatBuffer("ring_part", static_cast<std::size_t>(L_) * part_ld_);
  part_lse_ = FloatBuffer("ring_part_lse", static_cast<std::size_t>(sizes.heads) * L_);
  scratch_ = FloatBuffer("ring_scratch", attention_scratch_floats(pair(0, 0, 0, false)));
}

std::size_t RingAttention::saved_floats() const { return static_cast<std::size_t>(local_.B) * local_.heads * local_.T; }

void RingAttention::use(const AttentionShape& local) {
  if (local.B != local_.B || local.T != local_.T || local.heads != local_.heads || local.kv_heads != local_.kv_heads ||
      local.head_dim != local_.head_dim || local.kernel != local_.kernel || local.out_ld > part_ld_)
    throw std::invalid_argument("RingAttention: a call's shape differs from the sizes it was built for");
  local_ = local;
}

AttentionShape RingAttention::pair(int b, int query_chunk, int key_chunk, bool accumulate) const {
  AttentionShape shape = local_;
  shape.B = 1;
  shape.T = L_;
  shape.kv_ld = 2L * kv_width_;
  shape.query_offset = chunk_index(cp_.rank(), query_chunk) * L_;
  shape.key_offset = key_chunk * L_;
  shape.accumulate_grads = accumulate;
  if (local_.documents) {
    const long first = row(b, query_chunk);
    shape.documents = {local_.documents.starts + first, local_.documents.host_starts + first};
  }
  return shape;
}

void RingAttention::post_hop(const FloatBuffer& send, const FloatBuffer& recv, int tag, CommRequestPtr (&requests)[2]) {
  // Over MPI the send reads the buffer when posted: the kernels that wrote it must have run.
  if (!cp_.ordered_on_device()) wait_for_device("ring attention hop");
  const int next = (cp_.rank() + 1) % cp_.size(), previous = (cp_.rank() + cp_.size() - 1) % cp_.size();
  requests[0] = cp_.recv_async(recv.data(), recv.extent(0), previous, tag);
  requests[1] = cp_.send_async(send.data(), send.extent(0), next, tag);
}

void RingAttention::pack_keys(const float* k, const float* v) {
  const long rows = static_cast<long>(local_.B) * local_.T, kv_ld = 2L * kv_width_;
  copy_columns(kv_[0].data(), kv_ld, k, local_.kv_ld, rows, kv_width_);
  copy_columns(kv_[0].data() + kv_width_, kv_ld, v, local_.kv_ld, rows, kv_width_);
}

template <class Pair>
void RingAttention::for_each_visible_pair(int step, const Pair& run) const {
  const int owner = (cp_.rank() - step + cp_.size()) % cp_.size();  // of the keys in hand
  for (int b = 0; b < local_.B; ++b)
    for (int query = 0; query < 2; ++query)
      for (int key = 0; key < 2; ++key) {
        const int key_chunk = chunk_index(owner, key);
        if (key_chunk <= chunk_index(cp_.rank(), query)) run(b, query, key, key_chunk);  // else in its future
      }
}

void RingAttention::forward(GemmContext& gemm, float* out, float* log_sum_exp, const float* q, const float* k,
                            const float* v, const AttentionShape& local) {
  use(local);
  pack_keys(k, v);
  for (int step = 0; step < cp_.size(); ++step) {
    const FloatBuffer &here = kv_[step % 2], &next = kv_[(step + 1) % 2];
    CommRequestPtr hop[2];
    if (step + 1 < cp_.size()) post_hop(here, next, kKeysTag, hop);
    for_each_visible_pair(step, [&](int b, int query, int key, int key_chunk) {
      const AttentionShape shape = pair(b, query, key_chunk, false);
      float* out_chunk = out + row(b, query) * local_.out_ld;
      float* lse_chunk = log_sum_exp + row(b, query) * local_.heads;
      const float* kv = here.data() + row(b, key) * 2L * kv_width_;
      // Step 0's first key chunk (the rank's own chunk r) is at or before both query chunks (a row
      // of a document that starts after it gets out 0 and a log-sum-exp that merges as nothing).
      const bool first = step == 0 && key == 0;
      attention_forward(gemm, first ? out_chunk : part_.data(), first ? lse_chunk : part_lse_.data(),
                        scratch_.data(), q + row(b, query) * local_.q_ld, kv, kv + kv_width_, shape);
      if (!first) attention_merge(out_chunk, lse_chunk, part_.data(), part_lse_.data(), shape);
    });
    wait_all(hop);
  }
}

// Backward: the keys travel as in forward. Their gradients travel one step behind: each step's
// pairs write the gradients of the keys in hand into block_ while the partial sums of the same keys
// (from the ranks they visited before) arrive; then the block is added and the sums go on. So every
// hop of gradients but the last overlaps a step's attention, and after cp hops each rank holds the
// sums of its own keys.
void RingAttention::backward(GemmContext& gemm, float* dq, float* dk, float* dv, const float* dout, const float* q,
                             const float* k, const float* v, const float* out, const float* log_sum_exp,
                             const AttentionShape& local) {
  use(local);
  const long rows = static_cast<long>(local_.B) * local_.T, kv_ld = 2L * kv_width_;
  const std::size_t kv_floats = dkv_[0].extent(0);
  pack_keys(k, v);
  zero_columns(dq, local_.q_ld, rows, local_.heads * local_.head_dim);
  CommRequestPtr grads_hop[2];
  for (int step = 0; step < cp_.size(); ++step) {
    const FloatBuffer &here = kv_[step % 2], &next = kv_[(step + 1) % 2];
    const FloatBuffer& sums = dkv_[step % 2];  // the keys in hand's gradients so far (step 0: none)
    CommRequestPtr keys_hop[2];
    if (step + 1 < cp_.size()) post_hop(here, next, kKeysTag, keys_hop);
    const FloatBuffer& block = step == 0 ? sums : block_;
    zero_floats(block.data(), kv_floats);
    for_each_visible_pair(step, [&](int b, int query, int key, int key_chunk) {
      const float* kv = here.data() + row(b, key) * kv_ld;
      float* dkv = block.data() + row(b, key) * kv_ld;
      attention_backward(gemm, dq + row(b, query) * local_.q_ld, dkv, dkv + kv_width_, scratch_.data(),
                         dout + row(b, query) * local_.out_ld, q + row(b, query) * local_.q_ld, kv, kv + kv_width_,
                         out + row(b, query) * local_.out_ld, log_sum_exp + row(b, query) * local_.heads,
                         pair(b, query, key_chunk, true));
    });
    wait_all(grads_hop);  // the sums arrived in `sums`; the buffer they left is free again
    if (step > 0) residual_forward(sums.data(), sums.data(), block.data(), static_cast<long>(kv_floats));
    if (cp_.size() > 1) post_hop(sums, dkv_[(step + 1) % 2], kGradsTag, grads_hop);
    wait_all(keys_hop);
  }
  wait_all(grads_hop);
  const FloatBuffer& own = dkv_[cp_.size() > 1 ? cp_.size() % 2 : 0];
  copy_columns(dk, local_.kv_ld, own.data(), kv_ld, rows, kv_width_);
  copy_columns(dv, local_.kv_ld, own.data() + kv_width_, kv_ld, rows, kv_width_);
}

}  // namespace trident
