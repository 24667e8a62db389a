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

// Published parameter counts of the Hugging Face GPT-2 checkpoints (gpt2, gpt2-medium, gpt2-large,
// gpt2-xl: model.num_parameters(), tied head counted once; re-counted here with torch.nn modules).
TEST(ModelSize, Gpt2FamilyMatchesHuggingFaceCounts) {
  EXPECT_EQ(total_params(kGpt2Small), 124'439'808);
  EXPECT_EQ(total_params(shape(24, 1024, 16, 1024, 50257)), 354'823'168);
  EXPECT_EQ(total_params(shape(36, 1280, 20, 1024, 50257)), 774'030'080);
  EXPECT_EQ(total_params(shape(48, 1600, 25, 1024, 50257)), 1'557'611'200);
  // Minus wte (50257 x 768) and wpe (1024 x 768).
  EXPECT_EQ(non_embedding_params(kGpt2Small), 124'439'808 - 50257 * 768 - 1024 * 768);
}

// GPT-3 (Brown et al. 2020, Table 2.1: n_params, n_layers, d_model, n_heads; T = 2048): the
// paper's entries are rounded (355.9M is listed as 350M, 2.65B as 2.7B), so each count must lie
// within 2% of its entry.
TEST(ModelSize, Gpt3FamilyMatchesThePaperTable) {
  struct Row { double published; int layers, d_model, heads; };
  for (const Row& row : {Row{125e6, 12, 768, 12}, Row{350e6, 24, 1024, 16}, Row{1.3e9, 24, 2048, 24},
                         Row{2.7e9, 32, 2560, 32}, Row{6.7e9, 32, 4096, 32}, Row{175e9, 96, 12288, 96}}) {
    const double count = static_cast<double>(total_params(shape(row.layers, row.d_model, row.heads, 2048, 50257)));
    EXPECT_LT(std::abs(count / row.published - 1.0), 0.02) << row.layers << " layers: " << count;
  }
}

ModelConfig llama(int layers, int d_model, int heads, int kv_heads, int ffn_hidden, bool tied = false) {
  ModelConfig model = shape(layers, d_model, heads, 8192, 128256);
  model.family = ModelFamily::llama;
  model.kv_heads = kv_heads;
  model.ffn_hidden = ffn_hidden;
  model.tie_embeddings = tied;
  return model;
}

// Meta's published sizes (the Hugging Face checkpoints' parameter totals): Llama 3.1 8B and 70B
// exactly, 405B as "405.85 B", and the tied Llama 3.2 1B.
TEST(ModelSize, LlamaFamilyMatchesMetasPublishedCounts) {
  EXPECT_EQ(total_params(llama(32, 4096, 32, 8, 14336)), 8'030'261'248);
  EXPECT_EQ(total_params(llama(80, 8192, 64, 8, 28672)), 70'553'706'496);
  EXPECT_NEAR(static_cast<double>(total_params(llama(126, 16384, 128, 8, 53248))), 405.85e9, 0.001 * 405.85e9);
  EXPECT_EQ(total_params(llama(16, 2048, 32, 8, 8192, true)), 1'235'814'400);
}

// A Llama block on one TP rank, counted by hand: norms replicated, every projection split.
TEST(ModelSize, LlamaBlockShardsAndStages) {
  const ModelConfig model = llama(4, 64, 8, 2, 96);
  const std::int64_t c = 64, hd = 8, f = 96;
  const std::int64_t projections = c * 8 * hd + 2 * c * 2 * hd + 8 * hd * c + 3 * c * f;
  EXPECT_EQ(block_params(model), 2 * c + projections);
  EXPECT_EQ(block_params(model, 2), 2 * c + projections / 2);
  EXPECT_THROW(block_params(model, 4), InputError);  // 2 kv heads do not split across 4 ranks
  EXPECT_EQ(non_embedding_params(model), 4 * block_params(model) + c);
  // Untied: the last stage holds lm_head, the first embed_tokens; no position table.
  EXPECT_EQ(position_params(model), 0);
  EXPECT_EQ(sum_over_stages(model, 2, 1), total_params(model));
  EXPECT_EQ(total_params(model), 2 * model.vocab * c + non_embedding_params(model));
}

// [model.moe] on a small Llama, counted by hand: layers 0 and 2 mixtures (layer_freq 2), layer 1
// dense. A mixture holds a router [E, C] and E SwiGLU experts of width Fe (3·C·Fe each), whole on
// every TP rank; a token's forward multiplies by the router and top_k of the experts only.
TEST(ModelSize, MixtureLayersCountTheirExperts) {
  ModelConfig model = llama(3, 64, 8, 2, 96);
  model.moe = {.experts = 4, .top_k = 2, .expert_ffn_hidden = 40, .layer_freq = 2};
  const std::int64_t c = 64, hd = 8, f = 96, fe = 40, experts = 4, k = 2, v = model.vocab;
  const std::int64_t norms = 2 * c, attention = c * 8 * hd + 2 * c * 2 * hd + 8 * hd * c;
  const std::int64_t dense_mlp = 3 * c * f, expert = 3 * c * fe;
  const std::int64_t mixture = experts * c + experts * expert;
  EXPECT_EQ(block_params(model, 1, 0), norms + attention + mixture);
  EXPECT_EQ(block_params(model, 1, 1), norms + attention + dense_mlp);
  EXPECT_EQ(block_params(model, 1, 2), block_params(model, 1, 0));
  // tp 2 splits attention and the dense MLP, not the mixture.
  EXPECT_EQ(block_params(model, 2, 0), norms + attention / 2 + mixture);
  EXPECT_EQ(block_params(model, 2, 1), norms + (attention + dense_mlp) / 2);

  const std::int64_t blocks = 3 * (norms + attention) + 2 * mixture + dense_mlp;
  EXPECT_EQ(non_embedding_params(model), blocks + c);
  EXPECT_EQ(total_params(model), 2 * v * c + blocks + c);
  EXPECT_EQ(sum_over_stages(model, 3, 1), total_params(model));  // each stage its own kind of layer
  EXPECT_EQ(stage_params(model, {1, 1}, false, false, 1).blocks, norms + attention + dense_mlp);

  // Active: the router and k experts of each mixture.
  const std::int64_t active_mixture = experts * c + k * expert;
  EXPECT_EQ(active_block_params(model, 0), norms + attention + active_mixture);
  EXPECT_EQ(active_block_params(model, 1), block_params(model, 1, 1));
  const std::int64_t active_blocks = 3 * (norms + attention) + 2 * active_mixture + dense_mlp;
  EXPECT_EQ(active_non_embedding_params(model), active_blocks + c);
  EXPECT_EQ(active_params(model), 2 * v * c + active_blocks + c);
  EXPECT_DOUBLE_EQ(mean_active_block_params(model), static_cast<double>(active_blocks) / 3);

  // FLOPs: 6 per active parameter and token, the head's 6·V·C and attention's 6·L·T·C per token.
  const std::int64_t tokens = 4 * model.seq_len;
  const double n = static_cast<double>(tokens);
  EXPECT_DOUBLE_EQ(model_flops_per_step(model, tokens),
                   6.0 * static_cast<double>(active_blocks + c) * n + 6.0 * static_cast<double>(v * c) * n +
                       6.0 * 3 * model.seq_len * static_cast<double>(c) * n);
  // A dense model's active parameters are all of them.
  const ModelConfig dense = llama(3, 64, 8, 2, 96);
  EXPECT_EQ(active_params(dense), total_params(dense));
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

// The FLOPs formula against a count of every matrix product of one training step, written from
// the model's GEMM shapes: forward 2·m·n·k per product, backward twice that; causal attention
// computes half of its T x T scores and products. The formula also counts the biases and
// LayerNorm weights, which no GEMM multiplies, at 6 FLOPs per parameter and token (Kaplan et al.'s
// 6N convention): per block the c_attn (3C), attn c_proj (C), c_fc (4C) and mlp c_proj (C) biases
// and ln_1, ln_2 (2C each), and ln_f (2C).
double gemm_flops_per_step(const ModelConfig& m, double sequences) {
  const double t = m.seq_len, c = m.d_model, v = m.vocab, rows = sequences * t;
  const double per_layer = 2 * rows * c * (3 * c) + 2 * rows * c * c + 2 * rows * c * (4 * c) +
                           2 * rows * (4 * c) * c + 2 * (2 * sequences * t * t * c / 2);
  const double head = 2 * rows * c * v;
  return 3 * (m.layers * per_layer + head);
}

TEST(ModelSize, FlopsMatchACountOfEveryMatrixProduct) {
  for (const ModelConfig& model : {kGpt2Small, shape(24, 1024, 16, 1024, 50257), shape(4, 512, 8, 256, 4096)}) {
    const double sequences = 8;
    const double formula = model_flops_per_step(model, static_cast<std::int64_t>(sequences) * model.seq_len);
    const double counted = gemm_flops_per_step(model, sequences);
    const double tokens = sequences * model.seq_len, c = model.d_model;
    const double vector_params = model.layers * (3 * c + c + 4 * c + c + 2 * c + 2 * c) + 2 * c;
    EXPECT_DOUBLE_EQ(formula, counted + 6 * vector_params * tokens) << model.layers << " layers";
  }
}

}  // namespace
}  // namespace trident
