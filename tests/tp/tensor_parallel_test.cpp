// The tensor-parallel model over all ranks of MPI_COMM_WORLD against the unsharded model that each
// rank also builds alone: same initial weights, same losses, same gradients (gathered), padding
// that stays zero, and replicated tensors that stay identical on every rank.
//
// Checks that fail on some ranks only must not skip a collective on those ranks (the others would
// hang), so every test runs all its collectives first and uses non-fatal EXPECTs.
#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "model/transformer.hpp"
#include "model_test_support.hpp"

namespace trident {
namespace {

using namespace testing;

constexpr int B = 2;

// heads = 4 splits over 2 and 4 ranks. vocab 37 does not divide by either (padded to 38 or 40);
// vocab 6 leaves the last of 4 ranks without a single real vocab id (6 → 8 rows of 2 per rank).
ModelConfig tp_config(int vocab) {
  ModelConfig cfg;
  cfg.layers = 2;
  cfg.d_model = 32;
  cfg.heads = 4;
  cfg.seq_len = 8;
  cfg.vocab = vocab;
  return cfg;
}

std::vector<float> gathered(const ParamTensor& tensor, const FloatBuffer& buffer, Comm& comm) {
  std::vector<float> out;
  gather_full_tensor(tensor, buffer, comm, out);
  return out;
}

// Whether data[0, count) holds the same bits on every rank of comm.
bool identical_on_every_rank(const float* data, std::size_t count, Comm& comm) {
  const FloatBuffer all("all", count * comm.size());
  comm.all_gather(data, all.data(), count);
  const std::vector<float> host = to_host(all);
  for (int r = 1; r < comm.size(); ++r)
    if (!std::equal(host.begin(), host.begin() + count, host.begin() + r * count)) return false;
  return true;
}

// Whether this rank's padding elements of `tensor` (those without a global index) are all 0.
bool padding_is_zero(const ParamTensor& tensor, const FloatBuffer& buffer, Comm& tp) {
  const std::vector<float> local = to_host(tensor_view(buffer, tensor));
  for (std::size_t i = 0; i < tensor.size; ++i)
    if (global_index(tensor, static_cast<std::int64_t>(i), tp.rank(), tp.size()) < 0 && local[i] != 0.0f) return false;
  return true;
}

bool same_on_every_rank(double value) {
  double low = value, high = value;
  MPI_Allreduce(&value, &low, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&value, &high, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return low == high;
}

double largest_magnitude(const std::vector<float>& values) {
  double largest = 0.0;
  for (float v : values) largest = std::max(largest, double(std::abs(v)));
  return largest;
}

// Number of elements where `actual` differs from `expected` by more than tolerance · max|expected|.
int mismatches(const std::vector<float>& actual, const std::vector<float>& expected, double tolerance) {
  const double largest = largest_magnitude(expected);
  int count = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) count += std::abs(double(actual[i]) - expected[i]) > tolerance * largest;
  return count;
}

// Weights far from GPT-2's small initial values (as in the model's gradient test), written into
// the reference model whole and into the sharded one slice by slice through global_index.
void randomise_both(Transformer& sharded, Transformer& reference, int tp_rank, int tp_size) {
  std::vector<float> local(sharded.params().total_size()), whole(reference.params().total_size());
  std::uint64_t seed = 100;
  for (const ParamTensor& tensor : reference.params().tensors()) {
    const bool layernorm_weight = tensor.name.find("ln_") != std::string::npos && tensor.name.ends_with(".weight");
    const auto values = random_values(tensor.size, ++seed, layernorm_weight ? 0.2f : 0.3f, layernorm_weight ? 1.0f : 0.0f);
    std::copy(values.begin(), values.end(), whole.begin() + tensor.offset);
    const ParamTensor& slice = sharded.params().find(tensor.name);
    for (std::size_t i = 0; i < slice.size; ++i) {
      const std::int64_t global = global_index(slice, static_cast<std::int64_t>(i), tp_rank, tp_size);
      local[slice.offset + i] = global < 0 ? 0.0f : values[global];
    }
  }
  copy_to(reference.params().values, whole);
  copy_to(sharded.params().values, local);
}

class TensorParallel : public ::testing::TestWithParam<int> {
 protected:
  std::unique_ptr<Comm> tp = make_mpi_comm(MPI_COMM_WORLD);
  ModelConfig cfg = tp_config(GetParam());
  Transformer sharded{cfg, B, 11, *tp};
  Transformer reference{cfg, B, 11, no_tp()};
  // The same micro-batches on every rank.
  std::vector<std::pair<IntBuffer, IntBuffer>> batches = {
      {random_tokens(B * cfg.seq_len, cfg.vocab, 1), random_tokens(B * cfg.seq_len, cfg.vocab, 2)},
      {random_tokens(B * cfg.seq_len, cfg.vocab, 3), random_tokens(B * cfg.seq_len, cfg.vocab, 4)}};
  const float loss_scale = 1.0f / (2 * B * cfg.seq_len);
};

TEST_P(TensorParallel, InitialWeightsAreTheUnshardedModelsAndPaddingIsZero) {
  for (const ParamTensor& tensor : sharded.params().tensors()) {
    const std::vector<float> whole = gathered(tensor, sharded.params().values, *tp);
    EXPECT_TRUE(whole == to_host(tensor_view(reference.params().values, reference.params().find(tensor.name))))
        << tensor.name;
    EXPECT_TRUE(padding_is_zero(tensor, sharded.params().values, *tp)) << tensor.name;
  }
}

TEST_P(TensorParallel, LossesAndGradientsAreTheUnshardedModels) {
  randomise_both(sharded, reference, tp->rank(), tp->size());
  // Two micro-batches in flight at once, as pipeline schedules run them.
  auto step = [&](Transformer& model) {
    model.zero_grads();
    const std::vector<double> losses = {model.forward(0, batches[0].first, batches[0].second),
                                        model.forward(1, batches[1].first, batches[1].second)};
    model.backward(1, loss_scale);
    model.backward(0, loss_scale);
    return losses;
  };
  const std::vector<double> losses = step(sharded), expected_losses = step(reference);
  for (int mb = 0; mb < 2; ++mb) {
    EXPECT_NEAR(losses[mb], expected_losses[mb], 1e-5 * expected_losses[mb]) << "micro-batch " << mb;
    EXPECT_TRUE(same_on_every_rank(losses[mb])) << "micro-batch " << mb << ": the loss differs between TP ranks";
  }

  for (const ParamTensor& tensor : sharded.params().tensors()) {
    const std::vector<float> grad = gathered(tensor, sharded.params().grads, *tp);
    const std::vector<float> expected = to_host(tensor_view(reference.params().grads, reference.params().find(tensor.name)));
    EXPECT_GT(largest_magnitude(expected), 0.0) << tensor.name << ": no gradient to compare";
    EXPECT_EQ(mismatches(grad, expected, 1e-4), 0) << tensor.name;
    if (!tensor.tp_sharded()) {
      EXPECT_TRUE(identical_on_every_rank(tensor.in(sharded.params().grads), tensor.size, *tp)) << tensor.name;
    }
    EXPECT_TRUE(padding_is_zero(tensor, sharded.params().grads, *tp)) << tensor.name << " gradient";
  }
}

// Data parallelism starts reducing a range as soon as it is reported: it must be final then,
// every TP all-reduce that feeds it done, and the ranges must cover all gradients once.
TEST_P(TensorParallel, ReportedGradientRangesAreFinalAndCoverEveryGradientOnce) {
  const ParamStore& params = sharded.params();
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  std::vector<std::vector<float>> at_report;
  sharded.zero_grads();
  sharded.forward(0, batches[0].first, batches[0].second);
  sharded.backward(0, loss_scale, [&](std::size_t offset, std::size_t count) {
    ranges.emplace_back(offset, count);
    const std::vector<float> all = to_host(params.grads);
    at_report.emplace_back(all.begin() + offset, all.begin() + offset + count);
  });
  const std::vector<float> final_grads = to_host(params.grads);
  // ln_f, each block, wpe, then the tied wte (whose copies a pipeline sums before reporting it)
  ASSERT_EQ(ranges.size(), static_cast<std::size_t>(cfg.layers) + 3);
  EXPECT_EQ(ranges.front().first, params.find("ln_f.weight").offset);
  EXPECT_EQ(ranges.back().first, params.find("wte.weight").offset);
  std::vector<int> covered(params.total_size(), 0);
  for (std::size_t k = 0; k < ranges.size(); ++k) {
    const auto [offset, count] = ranges[k];
    for (std::size_t i = offset; i < offset + count; ++i) ++covered[i];
    EXPECT_TRUE(std::equal(at_report[k].begin(), at_report[k].end(), final_grads.begin() + offset))
        << "range " << k << " changed after it was reported";
  }
  EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }));
}

INSTANTIATE_TEST_SUITE_P(Vocab, TensorParallel, ::testing::Values(37, 6),
                         [](const auto& info) { return "vocab" + std::to_string(info.param); });

TEST(TensorParallelShape, HeadsThatDoNotSplitAcrossTheGroupAreRejected) {
  const std::unique_ptr<Comm> tp = make_mpi_comm(MPI_COMM_WORLD);
  ModelConfig cfg = tp_config(37);
  cfg.heads = tp->size() + 1;
  cfg.d_model = 8 * cfg.heads;
  EXPECT_THROW(Transformer(cfg, B, 1, *tp), std::invalid_argument);
}

}  // namespace
}  // namespace trident
