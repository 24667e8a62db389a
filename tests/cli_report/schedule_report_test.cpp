#include "plan/schedule_report.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "plan/memory.hpp"
#include "plan/partition.hpp"

namespace trident {
namespace {

// input_decks/tiny.toml with --set parallel.pp=2 --set parallel.tp=2 --set parallel.dp=2.
Deck tiny_pp2() {
  Deck deck;
  deck.path = "tiny.toml";
  deck.model = {.layers = 2, .d_model = 64, .heads = 4, .seq_len = 64, .vocab = 256};
  deck.parallel.tp = 2;
  deck.parallel.pp = 2;
  deck.parallel.dp = 2;
  deck.schedule.kind = ScheduleKind::one_f_one_b;
  deck.schedule.microbatches = 4;
  deck.schedule.micro_batch_size = 4;
  return deck;
}

std::string table_of(const Deck& deck) {
  std::ostringstream out;
  print_schedule_table(out, deck);
  return out.str();
}

std::string diagram_of(const Deck& deck) {
  std::ostringstream out;
  print_schedule_diagram(out, deck);
  return out.str();
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> result;
  for (std::string word; in >> word;) result.push_back(word);
  return result;
}

// The table row (as words, without the '*') whose kind column is `kind`; empty when none.
// Columns: kind, v, bubble, equal stages, theory, in flight r0, "/", in flight last, act. MiB.
// An auto row's kind is two words: "auto:" and the kind it chose.
std::vector<std::string> row_of(const std::string& table, const std::string& kind, bool* starred = nullptr) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells = words(line);
    const bool star = !cells.empty() && cells[0] == "*";
    if (star) cells.erase(cells.begin());
    if (cells.empty() || cells[0] != kind) continue;
    if (kind == "auto:") cells.erase(cells.begin());  // keep the chosen kind as the first cell
    if (starred != nullptr) *starred = star;
    return cells;
  }
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ScheduleTable, OneFOneBWithEqualStagesMatchesTheory) {
  const std::string table = table_of(tiny_pp2());
  bool starred = false;
  const auto row = row_of(table, "1f1b", &starred);
  ASSERT_EQ(row.size(), 9u) << table;
  EXPECT_TRUE(starred) << table;
  EXPECT_EQ(row[1], "1");                       // v
  EXPECT_EQ(row[3], "20.00%") << table;         // equal stages
  EXPECT_EQ(row[4], "20.00%") << table;         // theory (p-1)/(m+p-1) = 1/5
  EXPECT_EQ(row[5] + row[6] + row[7], "2/1");   // 1f1b holds p - s micro-batches
  // The last stage also runs the head (0.3 layers here): with FLOP costs the bubble is larger.
  EXPECT_GT(std::stod(row[2]), 20.0) << table;
  const auto gpipe = row_of(table, "gpipe");
  ASSERT_EQ(gpipe.size(), 9u) << table;
  EXPECT_EQ(gpipe[3], "20.00%");
  EXPECT_EQ(gpipe[5] + gpipe[6] + gpipe[7], "4/4");  // every forward before the first backward
}

TEST(ScheduleTable, OnlyTheDecksKindIsStarred) {
  const std::string table = table_of(tiny_pp2());
  int stars = 0;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    const auto cells = words(line);
    if (!cells.empty() && cells[0] == "*") ++stars;
  }
  EXPECT_EQ(stars, 1) << table;
  bool starred = true;
  row_of(table, "gpipe", &starred);
  EXPECT_FALSE(starred);
}

TEST(ScheduleTable, ActivationColumnIsThePlanStashTimesPeakInFlight) {
  const Deck deck = tiny_pp2();
  const auto stages = partition_layers(deck.model, deck.parallel);
  const RankMemory memory = rank_memory(deck, stages, 0);
  char expected[32];
  std::snprintf(expected, sizeof expected, "%.1f",
                2.0 * static_cast<double>(memory.activation_bytes_per_microbatch) / (1024.0 * 1024.0));
  const auto row = row_of(table_of(deck), "1f1b");
  ASSERT_EQ(row.size(), 9u);
  EXPECT_EQ(row[8], expected);
}

TEST(ScheduleTable, ListsWhatCannotRunAndWhy) {
  // Two layers on two ranks leave no room for two chunks per rank.
  const std::string table = table_of(tiny_pp2());
  EXPECT_TRUE(row_of(table, "interleaved-1f1b").empty()) << table;
  EXPECT_TRUE(contains(table, "not possible here: interleaved-1f1b (v = 2): needs pp x v = 4 <= model.layers = 2"))
      << table;
  EXPECT_FALSE(row_of(table, "zb-h1").empty()) << table;
}

TEST(ScheduleTable, InterleavedRowUsesTheDecksChunksAndMegatronsTheory) {
  Deck deck = tiny_pp2();
  deck.model.layers = 8;
  deck.schedule.kind = ScheduleKind::interleaved_1f1b;
  deck.schedule.virtual_stages = 2;
  const std::string table = table_of(deck);
  bool starred = false;
  const auto row = row_of(table, "interleaved-1f1b", &starred);
  ASSERT_EQ(row.size(), 9u) << table;
  EXPECT_TRUE(starred);
  EXPECT_EQ(row[1], "2");
  EXPECT_EQ(row[3], "11.11%") << table;  // (p-1)/(v m + p-1) = 1/9
  EXPECT_EQ(row[4], "11.11%") << table;
  // Auto, not the deck's kind here, may use the interleaved line's chunks.
  bool auto_starred = true;
  EXPECT_FALSE(row_of(table, "auto:", &auto_starred).empty()) << table;
  EXPECT_FALSE(auto_starred);
}

TEST(ScheduleTable, AutoNamesItsChoiceAndIsStarred) {
  Deck deck = tiny_pp2();
  deck.schedule.kind = ScheduleKind::automatic;
  const std::string table = table_of(deck);
  bool starred = false;
  const auto row = row_of(table, "auto:", &starred);
  ASSERT_FALSE(row.empty()) << table;
  EXPECT_TRUE(starred) << table;
  EXPECT_EQ(row[0], word_of(deck_schedule(deck).kind));
}

TEST(ScheduleTable, EmulatedTimesAreUniformSoTheBubbleIsTheEqualStagesOne) {
  Deck deck = tiny_pp2();
  deck.emulate.enabled = true;
  deck.emulate.forward_ms = 5;
  deck.emulate.backward_ms = 10;
  deck.emulate.input_grad_ms = 5;
  deck.emulate.weight_grad_ms = 5;
  const std::string table = table_of(deck);
  for (const char* kind : {"gpipe", "1f1b", "zb-h1"}) {
    const auto row = row_of(table, kind);
    ASSERT_EQ(row.size(), 9u) << table;
    EXPECT_EQ(row[2], row[3]) << kind << "\n" << table;
  }
  EXPECT_TRUE(contains(table, "[emulate] sleeps: F 5 ms, B 10 ms, I 5 ms, W 5 ms")) << table;
}

TEST(ScheduleDiagram, DrawsTheDecksScheduleOneLinePerRank) {
  const std::string diagram = diagram_of(tiny_pp2());
  EXPECT_TRUE(contains(diagram, "Schedule diagram: 1f1b")) << diagram;
  EXPECT_TRUE(contains(diagram, "rank 0 |F0")) << diagram;
  EXPECT_TRUE(contains(diagram, "rank 1 |")) << diagram;
  EXPECT_TRUE(contains(diagram, "1f1b p=2 m=4")) << diagram;
  Deck deck = tiny_pp2();
  deck.schedule.kind = ScheduleKind::automatic;
  EXPECT_TRUE(contains(diagram_of(deck), "auto chose " + word_of(deck_schedule(deck).kind))) << diagram_of(deck);
}

TEST(DeckSchedule, MakesTheDecksKindAndNamesTheDeckWhenItCannot) {
  Deck deck = tiny_pp2();
  const Schedule schedule = deck_schedule(deck);
  EXPECT_EQ(schedule.kind, ScheduleKind::one_f_one_b);
  EXPECT_EQ(schedule.stages, 2);
  EXPECT_EQ(schedule.microbatches, 4);
  deck.model.layers = 4;
  deck.schedule.kind = ScheduleKind::interleaved_1f1b;
  deck.schedule.virtual_stages = 2;
  deck.schedule.microbatches = 3;  // not a multiple of pp (the deck validation would catch it first)
  try {
    deck_schedule(deck);
    FAIL() << "expected an InputError";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_TRUE(contains(message, "tiny.toml: schedule.kind = \"interleaved-1f1b\"")) << message;
    EXPECT_TRUE(contains(message, "schedule.microbatches = 3")) << message;
  }
}

TEST(DeckActionCosts, FollowTheStageFlopsInUnitsOfTheCheapestForward) {
  Deck deck = tiny_pp2();
  deck.model = {.layers = 12, .d_model = 768, .heads = 12, .seq_len = 1024, .vocab = 50257};
  deck.parallel.pp = 4;
  const ActionCosts costs = deck_action_costs(deck, 1);
  ASSERT_EQ(costs.per_virtual_stage.size(), 4u);
  // Three layers each; the last stage adds the head (~4.9 layers), the first the embedding.
  EXPECT_DOUBLE_EQ(costs.per_virtual_stage[1].forward, 1.0);
  EXPECT_NEAR(costs.per_virtual_stage[3].forward, (3 + 4.92) / 3, 0.01);
  for (const auto& stage : costs.per_virtual_stage) {
    EXPECT_DOUBLE_EQ(stage.backward, 2 * stage.forward);
    EXPECT_DOUBLE_EQ(stage.input_grad, stage.forward);
    EXPECT_DOUBLE_EQ(stage.weight_grad, stage.forward);
  }
  EXPECT_EQ(deck_action_costs(deck, 2).per_virtual_stage.size(), 8u);
}

}  // namespace
}  // namespace trident
