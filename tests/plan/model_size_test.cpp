#include "plan/model_size.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "plan/partition.hpp"

namespace trident {
namespace {

ModelConfig shape(int layers, int d_model, int heads, int seq_len, int vocab) {
  ModelConfig model;
  model.layers = layers;
  model.d_model = d_model;
  model.heads = heads;
  model.seq_len = seq_len;
  model.vocab = vocab;
  return model;
}

const ModelConfig kGpt2Small = shape(12, 768, 12, 1024, 50257);
const ModelConfig kGpt3 = shape(96, 12288, 96, 2048, 50257);

std::vector<StageLayers> stages_of(const ModelConfig& model, int pp) {
  ParallelConfig parallel;
  parallel.pp = pp;
  return partition_layers(model, parallel);
}

// Sum over the stages of one rank's parameters (one TP shard when tp > 1).
std::int64_t sum_over_stages(const ModelConfig& model, int pp, int tp) {
  const auto stages = stages_of(model, pp);
  std::int64_t sum = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    sum += stage_params(model, stages[s], s == 0, s + 1 == stages.size(), tp).total();
  }
  return sum;
}

TEST(ModelSize, Gpt2SmallMatchesHuggingFaceCount) {
  EXPECT_EQ(total_params(kGpt2Small), 124'439'808);
  // Minus wte (50257 x 768) and wpe (1024 x 768).
  EXPECT_EQ(non_embedding_params(kGpt2Small), 85'056'000);
}

TEST(ModelSize, Gpt3Is175B) {
  // 96 x (12 C^2 + 13 C) + V C + T C + 2 C with C = 12288, V = 50257, T = 2048.
  EXPECT_EQ(total_params(kGpt3), 174'604'259'328);
  EXPECT_LT(std::abs(static_cast<double>(total_params(kGpt3)) / 175e9 - 1.0), 0.01);
}

TEST(ModelSize, PaddedVocabIsTheNextMultipleOfTp) {
  EXPECT_EQ(padded_vocab(50257, 1), 50257);
  EXPECT_EQ(padded_vocab(50257, 8), 50264);
  EXPECT_EQ(padded_vocab(50304, 8), 50304);
  EXPECT_EQ(padded_vocab(256, 3), 258);
}

TEST(ModelSize, BlockShardMatchesHandCount) {
  // tp 4, C 768: c_attn (768*2304 + 2304)/4, attn c_proj 768*768/4 + 768,
  // c_fc (768*3072 + 3072)/4, mlp c_proj 3072*768/4 + 768, ln_1 + ln_2 4*768.
  EXPECT_EQ(block_params(kGpt2Small, 4), 442'944 + 148'224 + 590'592 + 590'592 + 3'072);
  EXPECT_EQ(block_params(kGpt2Small), 7'087'872);
}

TEST(ModelSize, StagesSumToTotalPlusTheTiedHeadCopy) {
  const std::int64_t wte = static_cast<std::int64_t>(kGpt2Small.vocab) * kGpt2Small.d_model;
  EXPECT_EQ(sum_over_stages(kGpt2Small, 1, 1), total_params(kGpt2Small));
  for (int pp : {2, 3, 4, 12}) {
    EXPECT_EQ(sum_over_stages(kGpt2Small, pp, 1), total_params(kGpt2Small) + wte) << "pp " << pp;
  }
  const auto stages = stages_of(kGpt2Small, 4);
  EXPECT_EQ(stage_params(kGpt2Small, stages[3], false, true).head, wte);
  EXPECT_EQ(stage_params(kGpt2Small, stages[1], false, false).total(), 3 * block_params(kGpt2Small));
}

TEST(ModelSize, UntiedHeadIsCountedOnceOnTheLastStage) {
  ModelConfig untied = kGpt2Small;
  untied.tie_embeddings = false;
  const std::int64_t wte = static_cast<std::int64_t>(untied.vocab) * untied.d_model;
  EXPECT_EQ(total_params(untied), total_params(kGpt2Small) + wte);
  EXPECT_EQ(sum_over_stages(untied, 1, 1), total_params(untied));
  EXPECT_EQ(sum_over_stages(untied, 4, 1), total_params(untied));
}

TEST(ModelSize, TpShardsSumToTheWholeWithReplicationAndPadding) {
  const ModelConfig& model = kGpt2Small;
  const std::int64_t c = model.d_model;
  // Replicated on every TP rank: wpe, per block ln_1, ln_2 and both c_proj biases (6C), ln_f.
  const std::int64_t replicated = model.seq_len * c + model.layers * 6 * c + 2 * c;
  for (int pp : {1, 3}) {
    const std::int64_t wte_copies = pp == 1 ? 1 : 2;
    const std::int64_t whole = total_params(model) + (wte_copies - 1) * model.vocab * c;
    for (int tp : {1, 2, 3, 4, 6, 12}) {
      const std::int64_t padding = (padded_vocab(model.vocab, tp) - model.vocab) * c;
      EXPECT_EQ(tp * sum_over_stages(model, pp, tp),
                whole + (tp - 1) * replicated + wte_copies * padding)
          << "tp " << tp << " pp " << pp;
    }
  }
}

TEST(ModelSize, RejectsTpThatDoesNotSplitTheHeads) {
  try {
    stage_params(kGpt2Small, {0, 12}, true, true, 5);
    FAIL() << "tp 5 accepted for 12 heads";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("model.heads"), std::string::npos) << message;
    EXPECT_NE(message.find("parallel.tp"), std::string::npos) << message;
  }
}

TEST(ModelSize, FlopsFormulaMatchesHandComputation) {
  // L 2, C 64, T 64, V 256: N_nonembedding = 2 * (12 * 64^2 + 13 * 64) + 2 * 64 = 100,096.
  const ModelConfig tiny = shape(2, 64, 4, 64, 256);
  ASSERT_EQ(non_embedding_params(tiny), 100'096);
  // 512 tokens (B 8 x T 64): 6*100096*512 + 6*256*64*512 + 6*2*64*64*512.
  EXPECT_DOUBLE_EQ(model_flops_per_step(tiny, 512), 307'494'912.0 + 50'331'648.0 + 25'165'824.0);
}

TEST(ModelSize, FlopsEqualTheBatchForm) {
  // 6NBT + 6VCBT + 6LBT^2C with B = 16 sequences of the GPT-2 shape.
  const double n = non_embedding_params(kGpt2Small);
  const double b = 16, t = 1024, c = 768, v = 50257, l = 12;
  const double expected = 6 * n * b * t + 6 * v * c * b * t + 6 * l * b * t * t * c;
  EXPECT_NEAR(model_flops_per_step(kGpt2Small, 16 * 1024), expected, expected * 1e-12);
}

}  // namespace
}  // namespace trident
