// `--set section.key=value`: typed values, bare strings, precedence, and the same validation.
#include <gtest/gtest.h>

#include "deck_test_support.hpp"

namespace trident::testing {
namespace {

TEST(DeckOverride, ValuesAreParsedAsToml) {
  const Deck deck = parse(kMinimalDeck, {"train.lr=3e-4", "schedule.microbatches=8", "model.tie_embeddings=true",
                                         "parallel.pp=2", "parallel.stage_layers=[1, 3]", "output.dir=\"runs/x\""});
  EXPECT_DOUBLE_EQ(deck.train.lr, 3e-4);
  EXPECT_EQ(deck.schedule.microbatches, 8);
  EXPECT_TRUE(deck.model.tie_embeddings);
  EXPECT_EQ(deck.parallel.stage_layers, (std::vector<int>{1, 3}));
  EXPECT_EQ(deck.output.dir, "runs/x");
}

TEST(DeckOverride, StageLayersBalancedAsABareWordReplacesTheFilesList) {
  const Deck deck = parse(std::string(kMinimalDeck) + "[parallel]\npp = 2\nstage_layers = [1, 3]\n",
                          {"parallel.stage_layers=balanced"});
  EXPECT_TRUE(deck.parallel.stage_layers_balanced);
  EXPECT_TRUE(deck.parallel.stage_layers.empty());
}

TEST(DeckOverride, TextThatIsNotTomlIsABareString) {
  const Deck deck = parse(kMinimalDeck, {"schedule.kind=gpipe", "train.decay=linear", "output.dir=runs/a b",
                                         "parallel.order=dp-tp-pp", "checkpoint.resume=none"});
  EXPECT_EQ(deck.schedule.kind, ScheduleKind::gpipe);
  EXPECT_EQ(deck.train.decay, LrDecay::linear);
  EXPECT_EQ(deck.output.dir, "runs/a b");
  EXPECT_EQ(word_of(deck.parallel.order), "dp-tp-pp");
  EXPECT_EQ(deck.checkpoint.resume, CheckpointConfig::Resume::none);
}

TEST(DeckOverride, SpacesAroundKeyAndValueAreIgnored) {
  EXPECT_EQ(parse(kMinimalDeck, {" train.steps = 12 "}).train.steps, 12);
}

TEST(DeckOverride, BeatsTheFileAndTheLastOneWins) {
  const std::string text = std::string(kMinimalDeck) + "[train]\nsteps = 5\n";
  EXPECT_EQ(parse(text).train.steps, 5);
  EXPECT_EQ(parse(text, {"train.steps=9"}).train.steps, 9);
  EXPECT_EQ(parse(text, {"train.steps=9", "train.steps=11"}).train.steps, 11);
  EXPECT_EQ(parse(text, {"model.layers=6"}).model.layers, 6);
}

TEST(DeckOverride, CanSetAKeyOfASectionTheFileLacks) {
  EXPECT_EQ(parse(kMinimalDeck, {"checkpoint.keep=4"}).checkpoint.keep, 4);
}

TEST(DeckOverride, IsRecordedInTheDeckText) {
  const Deck deck = parse("[model]\nlayers = 2", {"train.steps=3", "schedule.kind=gpipe"});
  EXPECT_EQ(deck.text, "[model]\nlayers = 2\n# --set train.steps=3\n# --set schedule.kind=gpipe\n");
}

TEST(DeckOverride, ErrorsNameTheArgumentInsteadOfALine) {
  const std::string message = error_of(kMinimalDeck, {"model.layers=0"});
  EXPECT_EQ(message.rfind("--set model.layers=0: ", 0), 0u) << message;
  EXPECT_NE(message.find("model.layers must be at least 1, got 0"), std::string::npos) << message;
}

TEST(DeckOverride, WrongTypeIsRejected) {
  const std::string message = error_of(kMinimalDeck, {"model.layers=two"});
  EXPECT_NE(message.find("--set model.layers=two"), std::string::npos) << message;
  EXPECT_NE(message.find("must be an integer"), std::string::npos) << message;
  EXPECT_NE(message.find("\"two\""), std::string::npos) << message;
  EXPECT_NE(error_of(kMinimalDeck, {"train.lr="}).find("train.lr must be a number"), std::string::npos);
}

TEST(DeckOverride, RelationsBlameTheOverride) {
  const std::string message = error_of(kMinimalDeck, {"model.heads=5"});
  EXPECT_EQ(message.rfind("--set model.heads=5: ", 0), 0u) << message;
  EXPECT_NE(error_of(kMinimalDeck, {"train.lr=1e-5"}).find("--set train.lr=1e-5: "), std::string::npos);
}

TEST(DeckOverride, UnknownKeyGetsASuggestion) {
  const std::string message = error_of(kMinimalDeck, {"model.lr=1e-3"});
  EXPECT_EQ(message.rfind("--set model.lr=1e-3: ", 0), 0u) << message;
  EXPECT_NE(message.find("did you mean `train.lr`?"), std::string::npos) << message;
  EXPECT_NE(error_of(kMinimalDeck, {"modle.layers=2"}).find("did you mean `model.layers`?"), std::string::npos);
}

TEST(DeckOverride, MalformedArgumentsAreRejected) {
  EXPECT_NE(error_of(kMinimalDeck, {"train.lr"}).find("--set train.lr: missing '=value'"), std::string::npos);
  EXPECT_NE(error_of(kMinimalDeck, {"lr=3"}).find("section.key"), std::string::npos);
  EXPECT_NE(error_of(kMinimalDeck, {".lr=3"}).find("section.key"), std::string::npos);
  EXPECT_NE(error_of(kMinimalDeck, {"train.=3"}).find("section.key"), std::string::npos);
  EXPECT_NE(error_of(kMinimalDeck, {"train..lr=3"}).find("section.key"), std::string::npos);
  EXPECT_NE(error_of(kMinimalDeck, {".model.moe.experts=3"}).find("section.key"), std::string::npos);
  EXPECT_NE(error_of(kMinimalDeck, {"model.moe.=3"}).find("section.key"), std::string::npos);
}

// The section is everything before the last dot: train.lr.x is key x of a section [train.lr],
// which does not exist.
TEST(DeckOverride, KeyOfAnUnknownNestedSectionIsUnknown) {
  const std::string message = error_of(kMinimalDeck, {"train.lr.x=3"});
  EXPECT_EQ(message.rfind("--set train.lr.x=3: unknown key `train.lr.x`", 0), 0u) << message;
  const std::string far = error_of(kMinimalDeck, {"train.zzzzzz.qqqqqqqq=3"});
  EXPECT_NE(far.find("there is no section [train.zzzzzz]: the sections are \"model\""), std::string::npos) << far;
}

TEST(DeckOverride, SetsKeysOfNestedSections) {
  const std::string llama = std::string(kMinimalDeck) + "family = \"llama\"\n";
  const Deck deck = parse(llama + "[model.moe]\nexperts = 4\n", {"model.moe.top_k=1", "train.lr=1"});
  EXPECT_EQ(deck.model.moe.experts, 4);
  EXPECT_EQ(deck.model.moe.top_k, 1);
  EXPECT_DOUBLE_EQ(deck.train.lr, 1.0);
  // A deck without [model.moe]: --set makes the table.
  const Deck made = parse(llama, {"model.moe.experts=6", "model.moe.capacity_factor=1.5"});
  EXPECT_EQ(made.model.moe.experts, 6);
  EXPECT_DOUBLE_EQ(made.model.moe.capacity_factor, 1.5);
  // Its values are checked like the file's, and named by the argument.
  const std::string message = error_of(llama + "[model.moe]\nexperts = 4\n", {"model.moe.top_k=0"});
  EXPECT_EQ(message.rfind("--set model.moe.top_k=0: model.moe.top_k must be at least 1, got 0", 0), 0u) << message;
  const std::string typo = error_of(llama, {"model.moe.expert=4"});
  EXPECT_NE(typo.find("did you mean `model.moe.experts`?"), std::string::npos) << typo;
}

TEST(DeckOverride, RelativePathIsRelativeToTheWorkingDirectory) {
  ScratchDir dir("override_path");
  dir.write("tokens.bin", "");
  const auto previous = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  const Deck deck = parse_deck(kMinimalDeck, "/elsewhere/deck.toml", {"data.kind=bin", "data.path=tokens.bin"});
  std::filesystem::current_path(previous);
  EXPECT_EQ(deck.data.paths, std::vector<std::string>{
                                 (std::filesystem::absolute(dir.path()) / "tokens.bin").lexically_normal().string()});
}

TEST(DeckOverride, RelativePathInTheFileIsRelativeToTheDeck) {
  ScratchDir dir("deck_relative_path");
  std::filesystem::create_directories(dir.path() / "data");
  dir.write("data/tokens.bin", "");
  const Deck deck = parse_deck(std::string(kMinimalDeck) + "[data]\nkind = \"bin\"\npath = \"data/tokens.bin\"\n",
                               (dir.path() / "deck.toml").string(), {});
  EXPECT_EQ(deck.data.paths, std::vector<std::string>{(dir.path() / "data" / "tokens.bin").string()});
  // The same relative path from --set is looked up in the working directory, where it is absent.
  const std::string message = error_of(kMinimalDeck, {"data.kind=bin", "data.path=data/tokens.bin"});
  EXPECT_NE(message.find("--set data.path=data/tokens.bin: "), std::string::npos) << message;
}

}  // namespace
}  // namespace trident::testing
