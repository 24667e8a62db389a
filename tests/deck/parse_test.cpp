// Reading decks: every key lands in its field, defaults, recorded text, files.
#include <gtest/gtest.h>

#include "deck_test_support.hpp"

namespace trident::testing {
namespace {

TEST(DeckParse, MinimalDeckKeepsEveryDefaultOfConfigHpp) {
  const Deck deck = parse(kMinimalDeck);
  const Deck defaults;
  EXPECT_EQ(deck.model.layers, 4);
  EXPECT_EQ(deck.model.seq_len, 16);
  EXPECT_EQ(deck.model.tie_embeddings, defaults.model.tie_embeddings);
  EXPECT_EQ(deck.parallel.tp, defaults.parallel.tp);
  EXPECT_EQ(deck.parallel.pp, defaults.parallel.pp);
  EXPECT_EQ(deck.parallel.dp, defaults.parallel.dp);
  EXPECT_EQ(word_of(deck.parallel.order), "tp-dp-pp");
  EXPECT_TRUE(deck.parallel.stage_layers.empty());
  EXPECT_FALSE(deck.parallel.share_device);
  EXPECT_EQ(deck.schedule.kind, ScheduleKind::one_f_one_b);
  EXPECT_EQ(deck.schedule.microbatches, defaults.schedule.microbatches);
  EXPECT_EQ(deck.schedule.micro_batch_size, defaults.schedule.micro_batch_size);
  EXPECT_EQ(deck.schedule.virtual_stages, 1);
  EXPECT_EQ(deck.train.steps, defaults.train.steps);
  EXPECT_EQ(deck.train.seed, defaults.train.seed);
  EXPECT_EQ(deck.train.lr, defaults.train.lr);
  EXPECT_EQ(deck.train.min_lr, defaults.train.min_lr);
  EXPECT_EQ(deck.train.warmup_steps, defaults.train.warmup_steps);
  EXPECT_EQ(deck.train.decay, defaults.train.decay);
  EXPECT_EQ(deck.train.beta1, defaults.train.beta1);
  EXPECT_EQ(deck.train.beta2, defaults.train.beta2);
  EXPECT_EQ(deck.train.eps, defaults.train.eps);
  EXPECT_EQ(deck.train.weight_decay, defaults.train.weight_decay);
  EXPECT_EQ(deck.train.grad_clip, defaults.train.grad_clip);
  EXPECT_EQ(deck.data.kind, DataKind::synthetic);
  EXPECT_TRUE(deck.data.paths.empty());
  EXPECT_EQ(deck.data.synthetic_tokens, defaults.data.synthetic_tokens);
  EXPECT_EQ(deck.checkpoint.dir, defaults.checkpoint.dir);
  EXPECT_EQ(deck.checkpoint.every, defaults.checkpoint.every);
  EXPECT_EQ(deck.checkpoint.keep, defaults.checkpoint.keep);
  EXPECT_DOUBLE_EQ(deck.checkpoint.timeout_s, defaults.checkpoint.timeout_s);
  EXPECT_EQ(deck.checkpoint.resume, CheckpointConfig::Resume::newest);
  EXPECT_EQ(deck.output.dir, defaults.output.dir);
  EXPECT_EQ(deck.output.log_every, defaults.output.log_every);
}

// GPT-2's shape keys follow from its architecture: MHA, a 4C MLP, LayerNorm eps 1e-5, tied head.
TEST(DeckParse, Gpt2IsTheDefaultFamilyWithItsFixedShape) {
  const Deck deck = parse(kMinimalDeck);
  EXPECT_EQ(deck.model.family, ModelFamily::gpt2);
  EXPECT_EQ(deck.model.key_value_heads(), 4);
  EXPECT_EQ(deck.model.mlp_hidden(), 4 * 64);
  EXPECT_TRUE(deck.model.tie_embeddings);
}

// Llama's defaults: MHA unless kv_heads is given, Meta's SwiGLU width rule, an untied head. The
// rule's published instances: Llama 2 7B (C 4096) has 11008, Llama 1 65B (C 8192) 22016.
TEST(DeckParse, LlamaDefaultsFollowMetasRules) {
  const Deck small = parse(std::string(kMinimalDeck) + "family = \"llama\"\n");
  EXPECT_EQ(small.model.family, ModelFamily::llama);
  EXPECT_EQ(small.model.key_value_heads(), 4);
  EXPECT_EQ(small.model.mlp_hidden(), 256);  // ⌈8·64/3⌉ = 171, up to a multiple of 256
  EXPECT_EQ(small.model.rope_theta, 500000.0);
  EXPECT_EQ(small.model.norm_eps, 1e-5);
  EXPECT_FALSE(small.model.tie_embeddings);
  EXPECT_EQ(parse("[model]\nfamily = \"llama\"\nlayers = 1\nd_model = 4096\nheads = 32\nseq_len = 8\nvocab = 32000\n")
                .model.mlp_hidden(),
            11008);
  EXPECT_EQ(parse("[model]\nfamily = \"llama\"\nlayers = 1\nd_model = 8192\nheads = 64\nseq_len = 8\nvocab = 32000\n")
                .model.mlp_hidden(),
            22016);
  const Deck given = parse(std::string(kMinimalDeck) +
                           "family = \"llama\"\nkv_heads = 2\nffn_hidden = 96\nrope_theta = 10000.0\nnorm_eps = 1e-6\n"
                           "tie_embeddings = true\n");
  EXPECT_EQ(given.model.key_value_heads(), 2);
  EXPECT_EQ(given.model.mlp_hidden(), 96);
  EXPECT_EQ(given.model.rope_theta, 10000.0);
  EXPECT_EQ(given.model.norm_eps, 1e-6);
  EXPECT_TRUE(given.model.tie_embeddings);
}

// [model.moe], a table inside [model], fills ModelConfig::moe; a deck without it keeps every MLP dense.
TEST(DeckParse, MixtureOfExpertsFillsMoeConfig) {
  const std::string llama = std::string(kMinimalDeck) + "family = \"llama\"\n";
  EXPECT_EQ(parse(llama).model.moe.experts, 0);
  const Deck deck = parse(llama +
                          "\n[model.moe]\nexperts = 8\ntop_k = 3\nexpert_ffn_hidden = 96\nlayer_freq = 2\n"
                          "aux_loss_coef = 0.02\ncapacity_factor = 1.25\n");
  const MoeConfig& moe = deck.model.moe;
  EXPECT_EQ(moe.experts, 8);
  EXPECT_EQ(moe.top_k, 3);
  EXPECT_EQ(moe.expert_ffn_hidden, 96);
  EXPECT_EQ(moe.layer_freq, 2);
  EXPECT_DOUBLE_EQ(moe.aux_loss_coef, 0.02);
  EXPECT_DOUBLE_EQ(moe.capacity_factor, 1.25);
  EXPECT_EQ(deck.model.layers, 4);  // [model]'s own keys are still read
  // Only experts given: the defaults of model_config.hpp.
  const MoeConfig defaults;
  const MoeConfig given = parse(llama + "[model.moe]\nexperts = 4\n").model.moe;
  EXPECT_EQ(given.experts, 4);
  EXPECT_EQ(given.top_k, defaults.top_k);
  EXPECT_EQ(given.expert_ffn_hidden, defaults.expert_ffn_hidden);
  EXPECT_EQ(given.layer_freq, defaults.layer_freq);
  EXPECT_DOUBLE_EQ(given.aux_loss_coef, defaults.aux_loss_coef);
  EXPECT_DOUBLE_EQ(given.capacity_factor, defaults.capacity_factor);
  // TOML's other spellings of the same table: dotted keys in [model], an inline table.
  EXPECT_EQ(parse(llama + "moe.experts = 5\n").model.moe.experts, 5);
  EXPECT_EQ(parse(llama + "moe = { experts = 6, top_k = 1 }\n").model.moe.top_k, 1);
}

// The experts are replicated over the TP group: neither their count nor their width need divide tp.
TEST(DeckParse, ExpertsNeedNotDivideByTp) {
  const Deck deck = parse(std::string(kMinimalDeck) +
                          "family = \"llama\"\n[model.moe]\nexperts = 3\nexpert_ffn_hidden = 7\n[parallel]\ntp = 2\n");
  EXPECT_EQ(deck.parallel.tp, 2);
  EXPECT_EQ(deck.model.moe.experts, 3);
  EXPECT_EQ(deck.model.moe.expert_ffn_hidden, 7);
}

TEST(DeckParse, ReadsEveryKeyIntoItsField) {
  ScratchDir dir("every_key");
  dir.write("tokens.bin", "not checked here: the data module reads it");
  dir.write("step_00000007.h5", "");
  const std::string text = R"(
[model]
layers = 8
d_model = 96
heads = 6
seq_len = 32
vocab = 50257
tie_embeddings = true

[parallel]
tp = 3
pp = 2
dp = 5
order = "pp-tp-dp"
stage_layers = [3, 5]
share_device = true

[schedule]
kind = "gpipe"
microbatches = 7
micro_batch_size = 3

[train]
steps = 42
seed = 18446744
lr = 2.5e-4
min_lr = 1e-5
warmup_steps = 4
decay = "linear"
beta1 = 0.8
beta2 = 0.99
eps = 1e-6
weight_decay = 0.05
grad_clip = 0.5

[data]
kind = "bin"
path = "tokens.bin"
synthetic_tokens = 5000

[checkpoint]
dir = "ckpt"
every = 10
keep = 3
on_failure = "continue"
timeout_s = 90.5
resume = "step_00000007.h5"

[output]
dir = "runs/every"
log_every = 6
)";
  const Deck deck = parse_deck(text, (dir.path() / "deck.toml").string(), {});
  EXPECT_EQ(deck.model.layers, 8);
  EXPECT_EQ(deck.model.d_model, 96);
  EXPECT_EQ(deck.model.heads, 6);
  EXPECT_EQ(deck.model.seq_len, 32);
  EXPECT_EQ(deck.model.vocab, 50257);
  EXPECT_TRUE(deck.model.tie_embeddings);
  EXPECT_EQ(deck.parallel.tp, 3);
  EXPECT_EQ(deck.parallel.pp, 2);
  EXPECT_EQ(deck.parallel.dp, 5);
  EXPECT_EQ(word_of(deck.parallel.order), "pp-tp-dp");
  EXPECT_EQ(deck.parallel.stage_layers, (std::vector<int>{3, 5}));
  EXPECT_TRUE(deck.parallel.share_device);
  EXPECT_EQ(deck.schedule.kind, ScheduleKind::gpipe);
  EXPECT_EQ(deck.schedule.microbatches, 7);
  EXPECT_EQ(deck.schedule.micro_batch_size, 3);
  EXPECT_EQ(deck.train.steps, 42);
  EXPECT_EQ(deck.train.seed, 18446744u);
  EXPECT_DOUBLE_EQ(deck.train.lr, 2.5e-4);
  EXPECT_DOUBLE_EQ(deck.train.min_lr, 1e-5);
  EXPECT_EQ(deck.train.warmup_steps, 4);
  EXPECT_EQ(deck.train.decay, LrDecay::linear);
  EXPECT_DOUBLE_EQ(deck.train.beta1, 0.8);
  EXPECT_DOUBLE_EQ(deck.train.beta2, 0.99);
  EXPECT_DOUBLE_EQ(deck.train.eps, 1e-6);
  EXPECT_DOUBLE_EQ(deck.train.weight_decay, 0.05);
  EXPECT_DOUBLE_EQ(deck.train.grad_clip, 0.5);
  EXPECT_EQ(deck.data.kind, DataKind::bin);
  EXPECT_EQ(deck.data.paths, std::vector<std::string>{(dir.path() / "tokens.bin").string()});
  EXPECT_EQ(deck.data.synthetic_tokens, 5000);
  EXPECT_EQ(deck.checkpoint.dir, "ckpt");
  EXPECT_EQ(deck.checkpoint.every, 10);
  EXPECT_EQ(deck.checkpoint.keep, 3);
  EXPECT_EQ(deck.checkpoint.on_failure, CheckpointFailure::continue_training);
  EXPECT_DOUBLE_EQ(deck.checkpoint.timeout_s, 90.5);
  EXPECT_EQ(deck.checkpoint.resume, CheckpointConfig::Resume::file);
  EXPECT_EQ(deck.checkpoint.resume_file, (dir.path() / "step_00000007.h5").string());
  EXPECT_EQ(deck.output.dir, "runs/every");
  EXPECT_EQ(deck.output.log_every, 6);
}

TEST(DeckParse, EnumChoicesMapToTheirValues) {
  const std::string base = std::string(kMinimalDeck) + "[train]\n";
  EXPECT_EQ(parse(base + "decay = \"cosine\"\n").train.decay, LrDecay::cosine);
  EXPECT_EQ(parse(base + "decay = \"linear\"\n").train.decay, LrDecay::linear);
  EXPECT_EQ(parse(base + "decay = \"constant\"\n").train.decay, LrDecay::constant);
  const std::pair<std::string, ScheduleKind> kinds[] = {{"gpipe", ScheduleKind::gpipe},
                                                        {"1f1b", ScheduleKind::one_f_one_b},
                                                        {"interleaved-1f1b", ScheduleKind::interleaved_1f1b},
                                                        {"zb-h1", ScheduleKind::zb_h1},
                                                        {"zb-v", ScheduleKind::zb_v},
                                                        {"v-half", ScheduleKind::v_half},
                                                        {"dualpipev", ScheduleKind::dualpipe_v},
                                                        {"auto", ScheduleKind::automatic}};
  for (const auto& [word, kind] : kinds) {
    const bool chunked = kind == ScheduleKind::interleaved_1f1b || kind == ScheduleKind::zb_v ||
                         kind == ScheduleKind::v_half || kind == ScheduleKind::dualpipe_v;
    const std::string chunks = chunked ? "virtual_stages = 2\n" : "";
    EXPECT_EQ(parse(std::string(kMinimalDeck) + "[schedule]\nkind = \"" + word + "\"\n" + chunks).schedule.kind, kind);
    EXPECT_EQ(word_of(kind), word);
  }
  EXPECT_EQ(parse(std::string(kMinimalDeck) + "[schedule]\nrecompute = \"full\"\n").schedule.recompute,
            Recompute::full);
  using Replan = ScheduleConfig::Replan;
  EXPECT_EQ(parse(std::string(kMinimalDeck)).schedule.replan, Replan::off);
  EXPECT_EQ(parse(std::string(kMinimalDeck) + "[schedule]\nreplan = \"once\"\n").schedule.replan, Replan::once);
  const ScheduleConfig every = parse(std::string(kMinimalDeck) + "[schedule]\nreplan = \"every 25\"\n").schedule;
  EXPECT_EQ(every.replan, Replan::every);
  EXPECT_EQ(every.replan_every, 25);
  EXPECT_EQ(parse(std::string(kMinimalDeck) + "[schedule]\nrecompute = \"none\"\n").schedule.recompute,
            Recompute::none);
  EXPECT_EQ(parse(std::string(kMinimalDeck) + "[schedule]\nrecompute = \"selective\"\n").schedule.recompute,
            Recompute::selective);
  for (const char* order : {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"}) {
    EXPECT_EQ(word_of(parse(std::string(kMinimalDeck) + "[parallel]\norder = \"" + order + "\"\n").parallel.order),
              order);
  }
}

TEST(DeckParse, IntegersAreAcceptedForReals) {
  const Deck deck = parse(std::string(kMinimalDeck) + "[train]\nlr = 1\nmin_lr = 0\ngrad_clip = 2\n");
  EXPECT_EQ(deck.train.lr, 1.0);
  EXPECT_EQ(deck.train.min_lr, 0.0);
  EXPECT_EQ(deck.train.grad_clip, 2.0);
}

TEST(DeckParse, BoundaryValuesAreValid) {
  const Deck deck = parse(std::string(kMinimalDeck) +
                          "[train]\nseed = 0\nwarmup_steps = 0\nbeta1 = 0\nweight_decay = 0\ngrad_clip = 0\n"
                          "min_lr = 1e-3\nlr = 1e-3\n[checkpoint]\nevery = 0\nkeep = 1\n"
                          "[data]\nsynthetic_tokens = 17\n");
  EXPECT_EQ(deck.train.seed, 0u);
  EXPECT_EQ(deck.train.min_lr, deck.train.lr);
  EXPECT_EQ(deck.data.synthetic_tokens, 17);
}

TEST(DeckParse, InterleavedScheduleTakesVirtualStages) {
  const Deck deck = parse(std::string(kMinimalDeck) +
                          "[parallel]\npp = 2\n[schedule]\nkind = \"interleaved-1f1b\"\nvirtual_stages = 2\n"
                          "microbatches = 4\n");
  EXPECT_EQ(deck.schedule.virtual_stages, 2);
}

TEST(DeckParse, ScheduleAndEmulateKeysLandInTheirFields) {
  const Deck defaults;
  const Deck minimal = parse(kMinimalDeck);
  EXPECT_EQ(minimal.schedule.recompute, Recompute::none);
  EXPECT_EQ(minimal.schedule.timeout_s, defaults.schedule.timeout_s);
  EXPECT_EQ(minimal.schedule.auto_memory_limit, 0.0);
  EXPECT_FALSE(minimal.emulate.enabled);
  EXPECT_EQ(minimal.emulate.forward_ms, defaults.emulate.forward_ms);
  EXPECT_FALSE(minimal.parallel.stage_layers_balanced);

  const Deck deck = parse(std::string(kMinimalDeck) +
                          "[schedule]\nkind = \"auto\"\nvirtual_stages = 2\nrecompute = \"full\"\n"
                          "timeout_s = 12.5\nauto_memory_limit = 3\n"
                          "[emulate]\nenabled = true\nforward_ms = 1.5\nbackward_ms = 3\n"
                          "input_grad_ms = 0\nweight_grad_ms = 2.25\n");
  EXPECT_EQ(deck.schedule.kind, ScheduleKind::automatic);
  EXPECT_EQ(deck.schedule.virtual_stages, 2);
  EXPECT_EQ(deck.schedule.recompute, Recompute::full);
  EXPECT_DOUBLE_EQ(deck.schedule.timeout_s, 12.5);
  EXPECT_DOUBLE_EQ(deck.schedule.auto_memory_limit, 3.0);
  EXPECT_TRUE(deck.emulate.enabled);
  EXPECT_DOUBLE_EQ(deck.emulate.forward_ms, 1.5);
  EXPECT_DOUBLE_EQ(deck.emulate.backward_ms, 3.0);
  EXPECT_DOUBLE_EQ(deck.emulate.input_grad_ms, 0.0);
  EXPECT_DOUBLE_EQ(deck.emulate.weight_grad_ms, 2.25);
}

TEST(DeckParse, StageLayersBalanced) {
  const Deck deck = parse(std::string(kMinimalDeck) + "[parallel]\npp = 3\nstage_layers = \"balanced\"\n");
  EXPECT_TRUE(deck.parallel.stage_layers_balanced);
  EXPECT_TRUE(deck.parallel.stage_layers.empty());
  // Any layer count splits: 4 layers on 3 stages is fine with "balanced".
  EXPECT_EQ(deck.parallel.pp, 3);
}

// pp x virtual_stages entries; a list given by --set replaces the file's "balanced".
TEST(DeckParse, StageLayersListsEveryVirtualStageWhenInterleaved) {
  const Deck deck = parse(std::string(kMinimalDeck) +
                          "[parallel]\npp = 2\nstage_layers = \"balanced\"\n"
                          "[schedule]\nkind = \"interleaved-1f1b\"\nvirtual_stages = 2\nmicrobatches = 2\n",
                          {"parallel.stage_layers=[1, 1, 1, 1]"});
  EXPECT_EQ(deck.parallel.stage_layers, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_FALSE(deck.parallel.stage_layers_balanced);
}

TEST(DeckParse, AutoTakesVirtualStagesAsItsMostChunks) {
  const Deck deck = parse(std::string(kMinimalDeck) + "[parallel]\npp = 2\n[schedule]\nkind = \"auto\"\n"
                                                      "virtual_stages = 2\nmicrobatches = 3\n");
  EXPECT_EQ(deck.schedule.virtual_stages, 2);
}

TEST(DeckParse, TextDataWithByteVocabulary) {
  ScratchDir dir("text_data");
  dir.write("corpus.txt", "hello");
  const Deck deck = parse_deck(std::string(kMinimalDeck) + "[data]\nkind = \"text\"\npath = \"corpus.txt\"\n",
                               (dir.path() / "deck.toml").string(), {});
  EXPECT_EQ(deck.data.kind, DataKind::text);
  EXPECT_EQ(deck.data.paths, std::vector<std::string>{(dir.path() / "corpus.txt").string()});
}

TEST(DeckParse, AbsoluteDataPathIsKept) {
  ScratchDir dir("absolute_path");
  const auto file = dir.write("tokens.bin", "");
  const Deck deck = parse(std::string(kMinimalDeck) + "[data]\nkind = \"bin\"\npath = \"" + file.string() + "\"\n");
  EXPECT_EQ(deck.data.paths, std::vector<std::string>{file.string()});
}

TEST(DeckParse, RecordsPathAndText) {
  const Deck deck = parse(kMinimalDeck);
  EXPECT_EQ(deck.path, "deck.toml");
  EXPECT_EQ(deck.text, kMinimalDeck);
}

TEST(DeckParse, ResumeKeywordsAreKeptVerbatim) {
  EXPECT_EQ(parse(std::string(kMinimalDeck) + "[checkpoint]\nresume = \"none\"\n").checkpoint.resume, CheckpointConfig::Resume::none);
  EXPECT_EQ(parse(std::string(kMinimalDeck) + "[checkpoint]\nresume = \"auto\"\n").checkpoint.resume, CheckpointConfig::Resume::newest);
}

TEST(DeckLoad, ReadsAFile) {
  ScratchDir dir("load");
  const auto file = dir.write("mine.toml", kMinimalDeck);
  const Deck deck = load_deck(file.string(), {"train.steps=3"});
  EXPECT_EQ(deck.path, file.string());
  EXPECT_EQ(deck.model.layers, 4);
  EXPECT_EQ(deck.train.steps, 3);
}

TEST(DeckLoad, MissingFileIsNamed) {
  try {
    load_deck("no/such/deck.toml", {});
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("no/such/deck.toml"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("not found"), std::string::npos) << error.what();
  }
}

TEST(DeckLoad, DirectoryIsNotADeck) {
  ScratchDir dir("directory");
  EXPECT_THROW(load_deck(dir.path().string(), {}), InputError);
}

}  // namespace
}  // namespace trident::testing
