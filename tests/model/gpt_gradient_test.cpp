#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "model_test_support.hpp"

namespace trident {
namespace {

using namespace testing;

// Weights far from GPT-2's small initial values, so that every path (attention, MLP, LayerNorm
// scales) carries a gradient the check can see.
void randomise_parameters(Transformer& model) {
  std::vector<float> values(model.params().total_size());
  std::uint64_t seed = 100;
  for (const ParamTensor& tensor : model.params().tensors()) {
    const bool layernorm_weight = tensor.name.find("ln_") != std::string::npos && tensor.name.ends_with(".weight");
    const auto v = random_values(tensor.size, ++seed, layernorm_weight ? 0.2f : 0.3f, layernorm_weight ? 1.0f : 0.0f);
    std::copy(v.begin(), v.end(), values.begin() + tensor.offset);
  }
  copy_to(model.params().values, values);
}

TEST(GptGradient, InitialLossIsLogVocab) {
  const ModelConfig cfg = tiny_config();
  const int B = 2, BT = B * cfg.seq_len;
  Transformer model(cfg, B, 7, no_tp());
  const double loss = model.forward(0, random_tokens(BT, cfg.vocab, 1), random_tokens(BT, cfg.vocab, 2));
  EXPECT_NEAR(loss / BT, std::log(double(cfg.vocab)), 0.1);
}

// Buffers of the wrong size are refused before any kernel runs. The ids' values are not read on the
// host (the data layer checks them as it reads windows): a target outside the vocabulary makes the
// loss NaN, which the trainer reports, and reads nothing past the logits.
TEST(GptGradient, ForwardRejectsWrongSizedBuffersAndUnknownTargetsGiveNaN) {
  const ModelConfig cfg = tiny_config();
  const int B = 2, BT = B * cfg.seq_len;
  Transformer model(cfg, B, 7, no_tp());
  const IntBuffer good = random_tokens(BT, cfg.vocab, 1);
  EXPECT_THROW(model.forward(0, random_tokens(BT - 1, cfg.vocab, 1), good), std::invalid_argument);
  EXPECT_THROW(model.forward(0, good, random_tokens(BT + 1, cfg.vocab, 1)), std::invalid_argument);
  EXPECT_EQ(model.activation_bytes(), 0u);  // a rejected micro-batch holds no stash
  std::vector<int> ids(BT, 1);
  ids[5] = cfg.vocab;
  EXPECT_TRUE(std::isnan(model.forward(0, good, int_buffer(ids))));
  EXPECT_TRUE(std::isfinite(model.forward(1, good, good)));
}

TEST(GptGradient, EveryParameterMatchesFiniteDifferences) {
  const ModelConfig cfg = tiny_config();
  const int B = 2, BT = B * cfg.seq_len;
  Transformer model(cfg, B, 7, no_tp());
  randomise_parameters(model);
  const IntBuffer inputs = random_tokens(BT, cfg.vocab, 1), targets = random_tokens(BT, cfg.vocab, 2);
  model.zero_grads();
  model.forward(0, inputs, targets);
  model.backward(0, 1.0f);
  const std::vector<float> grads = to_host(model.params().grads);

  // backward() with loss_scale 0 frees the stash and adds nothing to the gradients.
  auto loss = [&] {
    const double sum = model.forward(0, inputs, targets);
    model.backward(0, 0.0f);
    return sum;
  };
  for (const ParamTensor& tensor : model.params().tensors()) {
    const std::vector<float> analytic(grads.begin() + tensor.offset, grads.begin() + tensor.offset + tensor.size);
    expect_gradient(tensor.name, tensor_view(model.params().values, tensor), analytic, loss, 1e-2f);
  }
}

}  // namespace
}  // namespace trident
