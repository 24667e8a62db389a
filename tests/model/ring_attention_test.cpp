// Ring attention over all ranks of MPI_COMM_WORLD (the cp group) against the tiled kernel over the
// whole sequence, which every rank also computes alone: each rank's two chunks of the output and of
// dq, dk and dv equal the whole sequence's rows, with and without packed documents (documents that
// cross chunk borders and ranks). Chunks of 520 positions span several query and key tiles.
//
// Every rank runs every collective before its checks, which are non-fatal.
#include "model/ring_attention.hpp"

#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "gradient_check.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int kSequences = 2, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kChunk = 520;
constexpr long kQld = kHeads * kHeadDim + 3, kKvld = kKvHeads * kHeadDim + 1, kOutld = kHeads * kHeadDim + 5;

// This rank's local rows of a whole-sequence tensor: of each sequence, chunk r, then chunk 2cp−1−r.
template <class T>
std::vector<T> local_rows(const std::vector<T>& whole, long ld, int total, int rank, int cp) {
  std::vector<T> local;
  for (int b = 0; b < kSequences; ++b)
    for (int chunk : {rank, 2 * cp - 1 - rank}) {
      const auto first = whole.begin() + (static_cast<long>(b) * total + static_cast<long>(chunk) * kChunk) * ld;
      local.insert(local.end(), first, first + kChunk * ld);
    }
  return local;
}

// The MPI group with every message's tag dropped: messages then pair up by posting order alone, one
// FIFO per pair of ranks, as NCCL matches them (the ring must post its hops in the same order on
// every rank).
class PostingOrderComm final : public Comm {
 public:
  explicit PostingOrderComm(std::unique_ptr<Comm> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void all_reduce_sum(float* data, std::size_t count) override { inner_->all_reduce_sum(data, count); }
  double all_reduce_sum(double value) override { return inner_->all_reduce_sum(value); }
  CommRequestPtr all_reduce_sum_async(float* data, std::size_t count) override {
    return inner_->all_reduce_sum_async(data, count);
  }
  void queue_all_reduce_sum(double* data, std::size_t count) override { inner_->queue_all_reduce_sum(data, count); }
  void all_gather(const float* send, float* recv, std::size_t count) override { inner_->all_gather(send, recv, count); }
  void all_gather(const std::uint16_t* send, std::uint16_t* recv, std::size_t count) override {
    inner_->all_gather(send, recv, count);
  }
  void reduce_scatter_sum(const float* send, float* recv, std::size_t count) override {
    inner_->reduce_scatter_sum(send, recv, count);
  }
  CommRequestPtr reduce_scatter_sum_async(const float* send, float* recv, std::size_t count) override {
    return inner_->reduce_scatter_sum_async(send, recv, count);
  }
  void broadcast(float* data, std::size_t count, int root) override { inner_->broadcast(data, count, root); }
  CommRequestPtr send_async(const float* data, std::size_t count, int peer, int) override {
    return inner_->send_async(data, count, peer, 0);
  }
  CommRequestPtr recv_async(float* data, std::size_t count, int peer, int) override {
    return inner_->recv_async(data, count, peer, 0);
  }

 private:
  std::unique_ptr<Comm> inner_;
};

enum class Matching { by_tag, by_posting_order };

void expect_ring_matches_whole_sequence(bool with_documents, Matching matching = Matching::by_tag) {
  std::unique_ptr<Comm> cp = make_mpi_comm(MPI_COMM_WORLD, "cp");
  if (matching == Matching::by_posting_order) cp = std::make_unique<PostingOrderComm>(std::move(cp));
  const int ranks = cp->size(), total = 2 * ranks * kChunk;
  // Document starts: cuts inside chunks and on a chunk border, in both sequences.
  std::vector<int> starts;
  for (int b = 0; b < kSequences; ++b)
    for (int t = 0, start = 0; t < total; ++t) {
      for (int cut : {b == 0 ? 300 : 7, b == 0 ? kChunk : total / 2 + 11, total - 3}) start = t >= cut ? cut : start;
      starts.push_back(start);
    }
  AttentionShape whole{kSequences, total, kHeads, kKvHeads, kHeadDim, kQld, kKvld, kOutld};
  const IntBuffer device_starts = int_buffer(starts);
  if (with_documents) whole.documents = {device_starts.data(), starts.data()};
  const std::size_t rows = static_cast<std::size_t>(kSequences) * total;
  const FloatBuffer q = random_buffer(rows * kQld, 61), k = random_buffer(rows * kKvld, 62),
                    v = random_buffer(rows * kKvld, 63), dout = random_buffer(rows * kOutld, 64);
  const FloatBuffer out{"out", rows * kOutld}, lse{"lse", attention_saved_floats(whole)},
      scratch{"scratch", attention_scratch_floats(whole)}, dq{"dq", rows * kQld}, dk{"dk", rows * kKvld},
      dv{"dv", rows * kKvld};
  GemmContext gemm;
  attention_forward(gemm, out.data(), lse.data(), scratch.data(), q.data(), k.data(), v.data(), whole);
  attention_backward(gemm, dq.data(), dk.data(), dv.data(), scratch.data(), dout.data(), q.data(), k.data(), v.data(),
                     out.data(), lse.data(), whole);

  const int rank = cp->rank();
  auto local = [&](const FloatBuffer& buffer, long ld) {
    const FloatBuffer result("local", static_cast<std::size_t>(kSequences) * 2 * kChunk * ld);
    copy_to(result, local_rows(to_host(buffer), ld, total, rank, ranks));
    return result;
  };
  const std::vector<int> my_starts = local_rows(starts, 1, total, rank, ranks);
  const IntBuffer my_device_starts = int_buffer(my_starts);
  AttentionShape mine{kSequences, 2 * kChunk, kHeads, kKvHeads, kHeadDim, kQld, kKvld, kOutld};
  if (with_documents) mine.documents = {my_device_starts.data(), my_starts.data()};
  RingAttention ring(*cp, mine);
  const FloatBuffer my_q = local(q, kQld), my_k = local(k, kKvld), my_v = local(v, kKvld);
  const FloatBuffer my_dout = local(dout, kOutld);
  const std::size_t my_rows = static_cast<std::size_t>(kSequences) * 2 * kChunk;
  const FloatBuffer my_out = random_buffer(my_rows * kOutld, 71), my_lse{"lse", ring.saved_floats()},
                    my_dq = random_buffer(my_rows * kQld, 72), my_dk = random_buffer(my_rows * kKvld, 73),
                    my_dv = random_buffer(my_rows * kKvld, 74);  // garbage: the ring overwrites them
  ring.forward(gemm, my_out.data(), my_lse.data(), my_q.data(), my_k.data(), my_v.data(), mine);
  ring.backward(gemm, my_dq.data(), my_dk.data(), my_dv.data(), my_dout.data(), my_q.data(), my_k.data(), my_v.data(),
                my_out.data(), my_lse.data(), mine);

  const long q_width = kHeads * kHeadDim, kv_width = kKvHeads * kHeadDim;
  expect_equal_columns("out", to_host(my_out), local_rows(to_host(out), kOutld, total, rank, ranks), kOutld, q_width);
  expect_equal_columns("dq", to_host(my_dq), local_rows(to_host(dq), kQld, total, rank, ranks), kQld, q_width);
  expect_equal_columns("dk", to_host(my_dk), local_rows(to_host(dk), kKvld, total, rank, ranks), kKvld, kv_width);
  expect_equal_columns("dv", to_host(my_dv), local_rows(to_host(dv), kKvld, total, rank, ranks), kKvld, kv_width);
}

TEST(RingAttention, EqualsTheWholeSequence) { expect_ring_matches_whole_sequence(false); }

TEST(RingAttention, EqualsTheWholeSequenceWithPackedDocuments) { expect_ring_matches_whole_sequence(true); }

// NCCL's matching (parallel.p2p's ordered kinds): the keys' and the gradient sums' hops of
// backward share each pair's one FIFO.
TEST(RingAttention, EqualsTheWholeSequenceMatchedByPostingOrder) {
  expect_ring_matches_whole_sequence(false, Matching::by_posting_order);
}

}  // namespace
}  // namespace trident
