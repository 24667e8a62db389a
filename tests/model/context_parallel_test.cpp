// The model under context parallelism (parallel.cp = all ranks of MPI_COMM_WORLD) against the whole
// sequence on one rank, which every rank also computes: each rank runs its two chunks of every
// sequence, with their positions in the whole sequence (and their documents' starts there), and
// the sum over the cp group of the ranks' losses and parameter gradients equals the whole
// sequence's. GPT-2 (learned positions) and Llama (RoPE, grouped-query heads), with and without
// packed documents that cross chunk borders.
//
// Every rank runs every collective before its checks, which are non-fatal.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "kernels/document_mask.hpp"
#include "llama_block_case.hpp"
#include "model_test_support.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int kSequences = 2;

std::vector<int> host_ints(const IntBuffer& buffer) {
  const auto mirror = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buffer);
  return std::vector<int>(mirror.data(), mirror.data() + mirror.size());
}

// Within 1e-5 of the tensor's L2 norm (NaN never is).
void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  double error_sq = 0.0, norm_sq = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    error_sq += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm_sq += double(want[i]) * want[i];
  }
  EXPECT_GT(norm_sq, 0.0) << what << ": a gradient of zeros proves nothing";
  EXPECT_LE(std::sqrt(error_sq), 1e-5 * std::sqrt(norm_sq)) << what;
}

struct Pass {
  double loss_sum;
  std::vector<float> grads;
};

// Forward (loss summed over the tokens given) and backward at one scale, for every token count.
Pass train_pass(Transformer& model, const std::vector<int>& inputs, const std::vector<int>& targets,
                const std::vector<int>& positions, const std::vector<int>& starts, bool documents) {
  const IntBuffer tokens = int_buffer(inputs), target_ids = int_buffer(targets);
  const IntBuffer device_positions = int_buffer(positions), device_starts = int_buffer(starts);
  std::vector<int> host_starts = starts;
  TokenPositions at{device_positions.data()};
  if (documents) at.documents = {device_starts.data(), host_starts.data()};
  const double loss_sum = model.forward(0, tokens, target_ids, at);
  model.backward(0, 0.01f);
  return {loss_sum, to_host(model.params().grads)};
}

void expect_context_parallel_matches_whole(ModelConfig cfg, bool documents) {
  const std::unique_ptr<Comm> cp = make_mpi_comm(MPI_COMM_WORLD, "cp");
  const int ranks = cp->size(), T = 4 * ranks * 3, L = T / (2 * ranks);  // chunks of 6 (several per document)
  cfg.seq_len = T;
  const int eod = cfg.vocab - 1;
  std::vector<int> inputs = host_ints(random_tokens(kSequences * T, cfg.vocab - 1, 5));
  const std::vector<int> targets = host_ints(random_tokens(kSequences * T, cfg.vocab, 6));
  std::vector<int> starts(inputs.size()), positions(inputs.size());
  for (int b = 0; b < kSequences; ++b) {
    if (documents)
      for (int at : {4, L - 1, T / 2 + 1}) inputs[b * T + at + b] = eod;  // crossing chunk borders
    document_starts(&inputs[b * T], T, documents ? eod : -1, &starts[b * T]);
    for (int t = 0; t < T; ++t) positions[b * T + t] = t - starts[b * T + t];
  }
  Transformer whole(cfg, kSequences, 9, no_tp());
  const Pass want = train_pass(whole, inputs, targets, positions, starts, documents);

  const ContextChunks chunks{cp->rank(), ranks};
  auto local = [&](const std::vector<int>& all) {
    std::vector<int> mine;
    for (int b = 0; b < kSequences; ++b)
      for (int row = 0; row < 2 * L; ++row) mine.push_back(all[b * T + chunks.position(row, L)]);
    return mine;
  };
  Transformer model(cfg, kSequences, 9, no_tp(), {}, Recompute::none, MatmulPrecision::automatic, false, cp.get());
  Pass got = train_pass(model, local(inputs), local(targets), local(positions), local(starts), documents);
  cp->all_reduce_sum(got.grads.data(), got.grads.size());  // host buffers: the CPU build's comm reads them
  double loss_sum = got.loss_sum;
  MPI_Allreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

  EXPECT_NEAR(loss_sum, want.loss_sum, 1e-5 * std::abs(want.loss_sum));
  for (const ParamTensor& tensor : model.params().tensors()) {
    auto part = [&](const std::vector<float>& all) {
      return std::vector<float>(all.begin() + tensor.offset, all.begin() + tensor.offset + tensor.size);
    };
    expect_close(tensor.name, part(got.grads), part(want.grads));
  }
}

TEST(ContextParallel, Gpt2EqualsTheWholeSequence) { expect_context_parallel_matches_whole(tiny_config(), false); }
TEST(ContextParallel, Gpt2WithPackedDocuments) { expect_context_parallel_matches_whole(tiny_config(), true); }
TEST(ContextParallel, LlamaEqualsTheWholeSequence) {
  expect_context_parallel_matches_whole(llama_block_config(), false);
}
TEST(ContextParallel, LlamaWithPackedDocuments) { expect_context_parallel_matches_whole(llama_block_config(), true); }

}  // namespace
}  // namespace trident
