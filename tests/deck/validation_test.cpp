// Every validation rule, one row each: the bad deck is the minimal deck plus a few assignments;
// the message must start with the file and line of the offending assignment, name the key and
// say what would be valid.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "deck_test_support.hpp"

namespace trident::testing {
namespace {

struct Assignment {
  std::string section;
  std::string line;  // "layers = 0"

  std::string key() const { return section + "." + line.substr(0, line.find(' ')); }
};

struct BadDeckCase {
  std::string name;
  std::vector<Assignment> context;  // valid on their own, needed for the rule to bite
  Assignment bad;                   // the assignment the message must point at
  std::string hint;                 // part of "what would be valid"
};

// The minimal deck with `assignments` added (replacing a [model] key of the same name), and the
// line on which the last assignment ends up.
std::pair<std::string, int> deck_with(const std::vector<Assignment>& assignments) {
  std::map<std::string, std::string> model{{"layers", "4"}, {"d_model", "64"}, {"heads", "4"},
                                           {"seq_len", "16"}, {"vocab", "256"}};
  std::vector<std::string> lines;
  for (const std::string section :
       {"model", "model.moe", "parallel", "schedule", "train", "data", "checkpoint", "output", "emulate"}) {
    // An empty [model.moe] is an error of its own (no experts): only the cases that set its keys get one.
    const auto in_section = [&](const Assignment& assignment) { return assignment.section == section; };
    if (section == "model.moe" && std::ranges::none_of(assignments, in_section)) continue;
    lines.push_back("[" + section + "]");
    for (const Assignment& assignment : assignments) {
      if (assignment.section != section) continue;
      model.erase(assignment.line.substr(0, assignment.line.find(' ')));
    }
    if (section == "model") {
      for (const auto& [key, value] : model) lines.push_back(key + " = " + value);
    }
  }
  // Insert each assignment right after its section header, in order.
  int last_line = 0;
  for (const Assignment& assignment : assignments) {
    const auto header = std::find(lines.begin(), lines.end(), "[" + assignment.section + "]");
    const auto at = lines.insert(header + 1, assignment.line);
    last_line = static_cast<int>(at - lines.begin()) + 1;
  }
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return {text, last_line};
}

void PrintTo(const BadDeckCase& bad_case, std::ostream* out) { *out << bad_case.name; }

class BadDeck : public ::testing::TestWithParam<BadDeckCase> {};

TEST_P(BadDeck, NamesFileLineKeyAndWhatIsValid) {
  const BadDeckCase& bad_case = GetParam();
  std::vector<Assignment> assignments = bad_case.context;
  assignments.push_back(bad_case.bad);
  const auto [text, line] = deck_with(assignments);
  const std::string message = error_of(text);
  const std::string location = "deck.toml:" + std::to_string(line) + ": ";
  EXPECT_EQ(message.rfind(location, 0), 0u) << "expected to start with " << location << "\n" << message << "\n" << text;
  EXPECT_NE(message.find(bad_case.bad.key()), std::string::npos) << message;
  EXPECT_NE(message.find(bad_case.hint), std::string::npos) << "expected hint: " << bad_case.hint << "\n" << message;
}

const BadDeckCase kBadDecks[] = {
    // types
    {"IntegerGivenAString", {}, {"model", "layers = \"two\""}, "must be an integer"},
    {"IntegerGivenAFloat", {}, {"model", "layers = 2.0"}, "got the float 2.0"},
    {"IntegerTooLarge", {}, {"model", "d_model = 3000000000"}, "at most 2147483647"},
    {"RealGivenAString", {}, {"train", "lr = \"fast\""}, "must be a number greater than 0"},
    {"RealNotFinite", {}, {"train", "lr = inf"}, "finite"},
    {"BooleanGivenAnInteger", {}, {"model", "tie_embeddings = 1"}, "true or false"},
    {"ChoiceGivenAnInteger", {}, {"schedule", "kind = 1"}, "\"gpipe\", \"1f1b\""},
    {"ListGivenAString", {{"parallel", "pp = 2"}}, {"parallel", "stage_layers = \"2,2\""}, "array of integers"},
    {"DirectoryGivenANumber", {}, {"output", "dir = 5"}, "must be a string"},
    // model ranges and shape
    {"LayersZero", {}, {"model", "layers = 0"}, "at least 1"},
    {"DModelZero", {}, {"model", "d_model = 0"}, "at least 1"},
    {"HeadsNegative", {}, {"model", "heads = -4"}, "at least 1"},
    {"SeqLenZero", {}, {"model", "seq_len = 0"}, "at least 1"},
    {"VocabOne", {}, {"model", "vocab = 1"}, "at least 2"},
    {"UntiedHead", {}, {"model", "tie_embeddings = false"}, "needs model.family = \"llama\""},
    {"HeadsDoNotDivideDModel", {}, {"model", "heads = 5"}, "1, 2, 4, 8, 16, 32, 64"},
    {"FamilyTypo", {}, {"model", "family = \"lama\""}, "did you mean \"llama\"?"},
    {"Gpt2DeckWithALlamaKey", {}, {"model", "kv_heads = 2"}, "set model.family = \"llama\""},
    {"DocumentMaskWithoutEodToken", {}, {"data", "document_mask = true"}, "needs data.eod_token"},
    {"EodTokenOutsideTheVocabulary", {}, {"data", "eod_token = 256"}, "valid: 0 to 255"},
    {"Gpt2DeckWithRopeTheta", {}, {"model", "rope_theta = 10000.0"}, "remove it"},
    {"KvHeadsDoNotDivideHeads",
     {{"model", "family = \"llama\""}},
     {"model", "kv_heads = 3"},
     "valid kv_heads: 1, 2, 4"},
    {"RopeNeedsAnEvenHeadDim", {{"model", "family = \"llama\""}}, {"model", "heads = 64"}, "d_model / heads is even"},
    {"TpDoesNotDivideKvHeads",
     {{"model", "family = \"llama\""}, {"model", "kv_heads = 2"}},
     {"parallel", "tp = 4"},
     "model.kv_heads = 2 (tensor parallelism splits it evenly across the tp ranks); valid tp: 1, 2"},
    {"TpDoesNotDivideFfnHidden",
     {{"model", "family = \"llama\""}, {"model", "ffn_hidden = 6"}},
     {"parallel", "tp = 4"},
     "model.ffn_hidden = 6 (tensor parallelism splits it evenly across the tp ranks); valid tp: 1, 2"},
    // [model.moe]
    {"ExpertsZero", {{"model", "family = \"llama\""}}, {"model.moe", "experts = 0"}, "at least 1"},
    {"TopKZero", {{"model", "family = \"llama\""}, {"model.moe", "experts = 4"}}, {"model.moe", "top_k = 0"},
     "at least 1"},
    {"ExpertFfnHiddenZero",
     {{"model", "family = \"llama\""}, {"model.moe", "experts = 4"}},
     {"model.moe", "expert_ffn_hidden = 0"},
     "at least 1"},
    {"LayerFreqZero", {{"model", "family = \"llama\""}, {"model.moe", "experts = 4"}}, {"model.moe", "layer_freq = 0"},
     "at least 1"},
    {"AuxLossCoefNegative",
     {{"model", "family = \"llama\""}, {"model.moe", "experts = 4"}},
     {"model.moe", "aux_loss_coef = -0.01"},
     "at least 0"},
    {"CapacityFactorGivenAString",
     {{"model", "family = \"llama\""}, {"model.moe", "experts = 4"}},
     {"model.moe", "capacity_factor = \"none\""},
     "must be a number"},
    {"MisspeltMoeKey", {{"model", "family = \"llama\""}}, {"model.moe", "expert = 4"},
     "did you mean `model.moe.experts`?"},
    {"MoeKeyInModel", {{"model", "family = \"llama\""}}, {"model", "experts = 4"},
     "did you mean `model.moe.experts`?"},
    {"TopKAboveExperts",
     {{"model", "family = \"llama\""}, {"model.moe", "experts = 2"}},
     {"model.moe", "top_k = 3"},
     "is more than model.moe.experts = 2 (each token goes to top_k different experts); valid top_k: 1 to 2"},
    {"LayerFreqAboveLayers",
     {{"model", "family = \"llama\""}, {"model.moe", "experts = 4"}},
     {"model.moe", "layer_freq = 5"},
     "more than model.layers = 4 (layer i is a mixture when i % layer_freq == 0); valid layer_freq: 1 to 4"},
    {"MoeWithSequenceParallel",
     {{"model", "family = \"llama\""}, {"model.moe", "experts = 4"}, {"parallel", "tp = 2"}},
     {"parallel", "sequence_parallel = true"},
     "not supported with [model.moe] yet (the experts' gradients would be partial per TP rank); set it to false"},
    {"MoeWithContextParallel",
     {{"model", "family = \"llama\""}, {"model.moe", "experts = 4"}},
     {"parallel", "cp = 2"},
     "[model.moe] with context parallelism is not supported yet; set parallel.cp = 1"},
    {"ExpertParallelWithoutMixture", {{"parallel", "dp = 2"}}, {"parallel", "ep = 2"},
     "splits a mixture of experts, but the model has none: add [model.moe] or set parallel.ep = 1"},
    {"ExpertParallelNotDividingDp",
     {{"model", "family = \"llama\""}, {"model.moe", "experts = 8"}, {"parallel", "dp = 6"}},
     {"parallel", "ep = 4"},
     "parallel.ep = 4 must divide parallel.dp = 6 (the expert-parallel ranks are data-parallel ranks) and "
     "model.moe.experts = 8 (each holds experts / ep); valid ep: 1, 2"},
    {"ExpertParallelNotDividingExperts",
     {{"model", "family = \"llama\""}, {"model.moe", "experts = 6"}, {"parallel", "dp = 4"}},
     {"parallel", "ep = 4"},
     "valid ep: 1, 2"},
    {"EpZero", {}, {"parallel", "ep = 0"}, "at least 1"},
    // parallel
    {"TpZero", {}, {"parallel", "tp = 0"}, "at least 1"},
    {"ZeroStageTwo", {}, {"parallel", "zero = 2"}, "at most 1"},
    {"BucketSizeZero", {}, {"parallel", "bucket_mb = 0"}, "greater than 0"},
    {"PpZero", {}, {"parallel", "pp = 0"}, "at least 1"},
    {"DpZero", {}, {"parallel", "dp = 0"}, "at least 1"},
    {"TpDoesNotDivideHeads", {}, {"parallel", "tp = 3"}, "valid tp: 1, 2, 4"},
    {"OrderMissingAnAxis", {}, {"parallel", "order = \"tp-pp\""}, "\"tp-dp-pp\""},
    {"OrderRepeatsAnAxis", {}, {"parallel", "order = \"tp-tp-pp\""}, "\"pp-dp-tp\""},
    {"MoreStagesThanLayers", {}, {"parallel", "pp = 8"}, "model.layers = 4"},
    {"TooManyRanks", {{"parallel", "tp = 2"}}, {"parallel", "dp = 2000000000"}, "use a smaller grid"},
    {"StageLayersWrongCount", {{"parallel", "pp = 2"}}, {"parallel", "stage_layers = [1, 1, 2]"}, "parallel.pp = 2"},
    {"StageLayersWrongSum", {{"parallel", "pp = 2"}}, {"parallel", "stage_layers = [1, 2]"}, "add up to 4"},
    {"StageLayersEmptyStage",
     {{"parallel", "pp = 2"}},
     {"parallel", "stage_layers = [4, 0]"},
     "stage_layers[1] must be at least 1"},
    {"StageLayersOtherWord", {}, {"parallel", "stage_layers = \"even\""}, "or the string \"balanced\""},
    {"StageLayersMisspeltBalanced", {}, {"parallel", "stage_layers = \"balance\""}, "did you mean \"balanced\"?"},
    {"StageLayersGivenANumber", {}, {"parallel", "stage_layers = 2"}, "\"balanced\", got the integer 2"},
    {"StageLayersCountPerVirtualStage",
     {{"parallel", "pp = 2"},
      {"schedule", "kind = \"interleaved-1f1b\""},
      {"schedule", "virtual_stages = 2"},
      {"schedule", "microbatches = 2"}},
     {"parallel", "stage_layers = [2, 2]"},
     "makes 4 virtual stages"},
    {"StageLayersWithAutoChunks",
     {{"parallel", "pp = 2"}, {"schedule", "kind = \"auto\""}, {"schedule", "virtual_stages = 2"}},
     {"parallel", "stage_layers = [1, 1, 1, 1]"},
     "auto's choice"},
    // schedule
    {"UnknownSchedule", {}, {"schedule", "kind = \"pipedream\""}, "\"interleaved-1f1b\", \"zb-h1\""},
    {"ScheduleTypo", {}, {"schedule", "kind = \"1F1B\""}, "did you mean \"1f1b\"?"},
    {"MicrobatchesZero", {}, {"schedule", "microbatches = 0"}, "at least 1"},
    {"MicroBatchSizeZero", {}, {"schedule", "micro_batch_size = 0"}, "at least 1"},
    {"VirtualStagesZero", {}, {"schedule", "virtual_stages = 0"}, "at least 1"},
    {"GlobalBatchTooLarge",
     {{"schedule", "micro_batch_size = 100000"}},
     {"schedule", "microbatches = 100000"},
     "use fewer micro-batches"},
    {"VirtualStagesWithoutInterleaving",
     {},
     {"schedule", "virtual_stages = 2"},
     "\"interleaved-1f1b\", \"zb-v\", \"v-half\", \"dualpipev\" or \"auto\""},
    {"InterleavedNeedsTwoChunks", {}, {"schedule", "kind = \"interleaved-1f1b\""}, "virtual_stages >= 2"},
    {"InterleavedNeedsAMultipleOfPp",
     {{"parallel", "pp = 2"}, {"schedule", "kind = \"interleaved-1f1b\""}, {"schedule", "virtual_stages = 2"}},
     {"schedule", "microbatches = 3"},
     "use 2 or 4"},
    {"ScheduleAutoTypo", {}, {"schedule", "kind = \"atuo\""}, "did you mean \"auto\"?"},
    {"RecomputeUnknown", {}, {"schedule", "recompute = \"partial\""}, "\"none\", \"full\", \"selective\""},
    {"RecomputeTypo", {}, {"schedule", "recompute = \"ful\""}, "did you mean \"full\"?"},
    {"TimeoutZero", {}, {"schedule", "timeout_s = 0"}, "greater than 0"},
    {"TimeoutGivenAString", {}, {"schedule", "timeout_s = \"5m\""}, "must be a number greater than 0"},
    {"AutoMemoryLimitNegative", {}, {"schedule", "auto_memory_limit = -1"}, "at least 0"},
    // emulate
    {"EmulateEnabledGivenAString", {}, {"emulate", "enabled = \"yes\""}, "true or false"},
    {"EmulateForwardNegative", {}, {"emulate", "forward_ms = -1"}, "at least 0"},
    {"EmulateBackwardNegative", {}, {"emulate", "backward_ms = -0.5"}, "at least 0"},
    {"EmulateInputGradNotFinite", {}, {"emulate", "input_grad_ms = nan"}, "finite"},
    {"EmulateWeightGradGivenABoolean", {}, {"emulate", "weight_grad_ms = true"}, "must be a number"},
    {"MisspeltEmulateKey", {}, {"emulate", "foward_ms = 10"}, "did you mean `emulate.forward_ms`?"},
    {"EmulateKeyInTheWrongSection", {}, {"schedule", "forward_ms = 10"}, "did you mean `emulate.forward_ms`?"},
    {"TooManyChunksForLayers",
     {{"schedule", "kind = \"interleaved-1f1b\""}, {"schedule", "virtual_stages = 4"}},
     {"parallel", "pp = 2"},
     "pp * virtual_stages <= 4"},
    // train
    {"StepsZero", {}, {"train", "steps = 0"}, "at least 1"},
    {"SeedNegative", {}, {"train", "seed = -1"}, "at least 0"},
    {"LrZero", {}, {"train", "lr = 0"}, "greater than 0"},
    {"LrNegative", {}, {"train", "lr = -1e-3"}, "greater than 0"},
    {"MinLrNegative", {}, {"train", "min_lr = -1e-5"}, "at least 0"},
    {"MinLrAboveLr", {{"train", "lr = 1e-3"}}, {"train", "min_lr = 1e-2"}, "in [0, lr]"},
    {"WarmupNegative", {}, {"train", "warmup_steps = -1"}, "at least 0"},
    {"UnknownDecay", {}, {"train", "decay = \"exponential\""}, "\"cosine\", \"linear\", \"constant\""},
    {"Beta1One", {}, {"train", "beta1 = 1.0"}, "in [0, 1)"},
    {"Beta2Negative", {}, {"train", "beta2 = -0.1"}, "in [0, 1)"},
    {"EpsZero", {}, {"train", "eps = 0"}, "greater than 0"},
    {"WeightDecayNegative", {}, {"train", "weight_decay = -0.1"}, "at least 0"},
    {"GradClipNegative", {}, {"train", "grad_clip = -1"}, "at least 0"},
    {"CudaGraphGivenANumber", {}, {"train", "cuda_graph = 1"}, "true or false"},
    {"CudaGraphOnAGrid", {{"parallel", "dp = 2"}}, {"train", "cuda_graph = true"}, "a grid of one rank"},
    {"CudaGraphWithTensorParallelism", {{"parallel", "tp = 2"}}, {"train", "cuda_graph = true"},
     "(this one is tp 2 x pp 1 x dp 1 x cp 1)"},
    {"CudaGraphWithAMixture", {{"model", "family = \"llama\""}, {"model.moe", "experts = 4"}},
     {"train", "cuda_graph = true"}, "a dense model"},
    {"CudaGraphWithPackedDocuments", {{"data", "document_mask = true"}, {"data", "eod_token = 1"}},
     {"train", "cuda_graph = true"}, "data.document_mask = false"},
    {"CudaGraphEmulated", {{"emulate", "enabled = true"}}, {"train", "cuda_graph = true"}, "emulate.enabled = true"},
    // data
    {"UnknownDataKind", {}, {"data", "kind = \"parquet\""}, "\"bin\", \"text\", \"synthetic\""},
    {"BinWithoutPath", {}, {"data", "kind = \"bin\""}, "needs data.path"},
    {"MissingDataFile", {{"data", "kind = \"bin\""}}, {"data", "path = \"no_such_shard.bin\""}, "no such file"},
    {"SyntheticTooShort", {}, {"data", "synthetic_tokens = 16"}, "at least 17"},
    // checkpoint and output
    {"EveryNegative", {}, {"checkpoint", "every = -1"}, "at least 0"},
    {"KeepZero", {}, {"checkpoint", "keep = 0"}, "at least 1"},
    {"ResumeMissing", {}, {"checkpoint", "resume = \"no_such_step.h5\""}, "\"auto\""},
    {"ResumeEmpty", {}, {"checkpoint", "resume = \"\""}, "\"none\""},
    {"CheckpointDirEmpty", {}, {"checkpoint", "dir = \"\""}, "must not be empty"},
    {"OutputDirEmpty", {}, {"output", "dir = \"\""}, "must not be empty"},
    {"LogEveryZero", {}, {"output", "log_every = 0"}, "at least 1"},
    // unknown keys
    {"KeyInTheWrongSection", {}, {"model", "lr = 1e-3"}, "did you mean `train.lr`?"},
    {"MisspeltKey", {}, {"model", "d_modle = 64"}, "did you mean `model.d_model`?"},
    {"UnknownKeyListsTheSection", {}, {"output", "colour = \"red\""}, "\"dir\", \"log_every\""},
};

INSTANTIATE_TEST_SUITE_P(Rules, BadDeck, ::testing::ValuesIn(kBadDecks),
                         [](const auto& info) { return info.param.name; });

TEST(DeckValidation, TextDataNeedsAByteVocabulary) {
  ScratchDir dir("text_vocab");
  dir.write("corpus.txt", "hello");
  try {
    parse_deck("[model]\nvocab = 50257\n[data]\nkind = \"text\"\npath = \"corpus.txt\"\n",
               (dir.path() / "deck.toml").string(), {});
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("deck.toml:2: model.vocab = 50257"), std::string::npos) << message;
    EXPECT_NE(message.find("model.vocab = 256"), std::string::npos) << message;
  }
}

TEST(DeckValidation, DataPathMustBeAFileNotADirectory) {
  ScratchDir dir("data_directory");
  std::filesystem::create_directories(dir.path() / "shards");
  EXPECT_THROW(parse_deck("[model]\n[data]\nkind = \"bin\"\npath = \"shards\"\n",
                          (dir.path() / "deck.toml").string(), {}),
               InputError);
}

TEST(DeckValidation, SyntaxErrorNamesItsLine) {
  const std::string message = error_of("[model]\nlayers = 2\nheads = \n");
  EXPECT_EQ(message.rfind("deck.toml:3: invalid TOML", 0), 0u) << message;
}

TEST(DeckValidation, DuplicateKeyIsASyntaxError) {
  const std::string message = error_of("[model]\nlayers = 2\nlayers = 3\n");
  EXPECT_EQ(message.rfind("deck.toml:3: invalid TOML", 0), 0u) << message;
  EXPECT_NE(message.find("layers"), std::string::npos) << message;
}

TEST(DeckValidation, ModelSectionIsRequired) {
  const std::string message = error_of("[train]\nsteps = 3\n");
  EXPECT_EQ(message.rfind("deck.toml: missing section [model]", 0), 0u) << message;
  EXPECT_NE(error_of("").find("missing section [model]"), std::string::npos);
}

TEST(DeckValidation, UnknownSectionGetsASuggestion) {
  const std::string message = error_of(std::string(kMinimalDeck) + "[trian]\nsteps = 3\n");
  EXPECT_EQ(message.rfind("deck.toml:7: unknown section [trian]; did you mean [train]?", 0), 0u) << message;
  EXPECT_NE(error_of(std::string(kMinimalDeck) + "[zzzzzzzz]\n").find("\"checkpoint\""), std::string::npos);
}

TEST(DeckValidation, TopLevelKeyBelongsInASection) {
  const std::string message = error_of(std::string("steps = 3\n") + kMinimalDeck);
  EXPECT_EQ(message.rfind("deck.toml:1: unknown key `steps`; did you mean `train.steps`?", 0), 0u) << message;
}

TEST(DeckValidation, SectionMustBeATable) {
  const std::string message = error_of("model = 3\n");
  EXPECT_EQ(message.rfind("deck.toml:1: `model` must be a section", 0), 0u) << message;
}

// [model.moe] is the one table inside [model]; any other is named with the sections there are.
TEST(DeckValidation, NestedTableMustBeASection) {
  const std::string message = error_of(std::string(kMinimalDeck) + "[model.extra]\nx = 1\n");
  EXPECT_EQ(message.rfind("deck.toml:7: unknown section [model.extra]; the sections are \"model\", \"model.moe\"", 0),
            0u)
      << message;
  const std::string typo = error_of(std::string(kMinimalDeck) + "family = \"llama\"\n[model.mo]\nexperts = 4\n");
  EXPECT_EQ(typo.rfind("deck.toml:8: unknown section [model.mo]; did you mean [model.moe]?", 0), 0u) << typo;
  const std::string deeper = error_of(std::string(kMinimalDeck) + "[model.moe.extra]\nx = 1\n");
  EXPECT_NE(deeper.find("unknown section [model.moe.extra]"), std::string::npos) << deeper;
}

TEST(DeckValidation, MoeMustBeATable) {
  const std::string message = error_of(std::string(kMinimalDeck) + "family = \"llama\"\nmoe = 4\n");
  EXPECT_EQ(message.rfind("deck.toml:8: `model.moe` must be a section ([model.moe] followed by its keys), got the "
                          "integer 4",
                          0),
            0u)
      << message;
}

// The family rule names the table at its header, and says the family that reads it.
TEST(DeckValidation, Gpt2DeckWithAMixtureOfExperts) {
  const std::string message = error_of(std::string(kMinimalDeck) + "[model.moe]\nexperts = 4\n");
  EXPECT_EQ(message.rfind("deck.toml:7: [model.moe] is a Llama section, but model.family = \"gpt2\" (the default); "
                          "remove it, or set model.family = \"llama\"",
                          0),
            0u)
      << message;
  // Made by --set, the table is located by the argument that made it.
  const std::string set = error_of(kMinimalDeck, {"model.moe.experts=4"});
  EXPECT_EQ(set.rfind("--set model.moe.experts=4: [model.moe] is a Llama section", 0), 0u) << set;
}

TEST(DeckValidation, MoeTableNeedsExperts) {
  const std::string llama = std::string(kMinimalDeck) + "family = \"llama\"\n";
  const std::string message = error_of(llama + "[model.moe]\ntop_k = 1\n");
  EXPECT_EQ(message.rfind("deck.toml:8: [model.moe] needs model.moe.experts", 0), 0u) << message;
  EXPECT_NE(message.find("add experts = N to [model.moe]"), std::string::npos) << message;
  const std::string set = error_of(llama, {"model.moe.top_k=1"});
  EXPECT_EQ(set.rfind("--set model.moe.top_k=1: [model.moe] needs model.moe.experts", 0), 0u) << set;
}

// top_k left at its default (2) with one expert: the message points at the [model.moe] header.
TEST(DeckValidation, DefaultTopKIsLocatedByItsSection) {
  const std::string message =
      error_of(std::string(kMinimalDeck) + "family = \"llama\"\n\n[model.moe]\nexperts = 1\n");
  EXPECT_EQ(message.rfind("deck.toml:9: model.moe.top_k = 2 is more than model.moe.experts = 1", 0), 0u) << message;
  // experts set by --set and top_k not: the override is what to change.
  const std::string set =
      error_of(std::string(kMinimalDeck) + "family = \"llama\"\n[model.moe]\nexperts = 4\ntop_k = 3\n",
               {"model.moe.experts=2"});
  EXPECT_EQ(set.rfind("--set model.moe.experts=2: model.moe.top_k = 3 is more than model.moe.experts = 2", 0), 0u)
      << set;
}

TEST(DeckValidation, RelationPointsAtTheKeyThatIsSet) {
  // layers is left at its default (2) while pp asks for 4 stages: the message points at pp's line.
  const std::string message = error_of("[model]\n\n[parallel]\npp = 4\n");
  EXPECT_EQ(message.rfind("deck.toml:4: parallel.pp = 4", 0), 0u) << message;
  // data.kind = "bin" with no path: the kind's line.
  EXPECT_EQ(error_of("[model]\n[data]\nkind = \"bin\"\n").rfind("deck.toml:3: data.kind", 0), 0u);
}

TEST(DeckValidation, DefaultedKeyIsLocatedByItsSection) {
  // min_lr keeps its default 1e-4, above the lr the file sets: blame min_lr at the [train] header.
  const std::string message = error_of("[model]\n[train]\nlr = 1e-5\n");
  EXPECT_EQ(message.rfind("deck.toml:2: train.min_lr = 0.0001 is larger than train.lr = 1e-05", 0), 0u) << message;
}

}  // namespace
}  // namespace trident::testing
