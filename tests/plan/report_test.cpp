#include "plan/report.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "plan/memory.hpp"
#include "plan/partition.hpp"

namespace trident {
namespace {

Deck gpt3_deck() {
  Deck deck;
  deck.path = "input_decks/gpt3-175b.toml";
  deck.model = {.layers = 96, .d_model = 12288, .heads = 96, .seq_len = 2048, .vocab = 50257};
  deck.parallel.tp = 8;
  deck.parallel.pp = 16;
  deck.parallel.dp = 8;
  deck.schedule.kind = ScheduleKind::one_f_one_b;
  deck.schedule.microbatches = 64;
  deck.schedule.micro_batch_size = 1;
  return deck;
}

Deck small_grid_deck() {
  Deck deck;
  deck.path = "small.toml";
  deck.model = {.layers = 6, .d_model = 64, .heads = 4, .seq_len = 32, .vocab = 256};
  deck.parallel.tp = 2;
  deck.parallel.pp = 3;
  deck.parallel.dp = 2;
  deck.schedule.microbatches = 4;
  deck.schedule.micro_batch_size = 2;
  return deck;
}

std::string plan_text(const Deck& deck, int ranks) {
  std::ostringstream out;
  print_plan(out, deck, ranks);
  return out.str();
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> result;
  for (std::string word; in >> word;) result.push_back(word);
  return result;
}

// Whether some line of `text` consists of exactly these whitespace-separated words.
bool has_row(const std::string& text, const std::vector<std::string>& row) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (words(line) == row) return true;
  }
  return false;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Report, PlansA1024RankGridCompactlyAndFast) {
  const auto start = std::chrono::steady_clock::now();
  const std::string text = plan_text(gpt3_deck(), 1024);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);

  EXPECT_TRUE(contains(text, "grid: 1024 ranks = tp 8 x pp 16 x dp 8")) << text;
  EXPECT_TRUE(contains(text, "174,604,259,328 (174.60 B)")) << text;
  EXPECT_TRUE(contains(text, "50257 (padded to 50264")) << text;
  EXPECT_TRUE(contains(text, "tokens per step  1,048,576")) << text;
  EXPECT_TRUE(contains(text, "6*N_nonembedding*tokens + 6*V*C*tokens + 6*L*T*C*tokens")) << text;
  EXPECT_TRUE(contains(text, "EFLOP")) << text;
  EXPECT_TRUE(contains(text, "18.99% = (p-1)/(m+p-1) = 15/79")) << text;
  EXPECT_TRUE(contains(text, "second copy of wte on stage 15")) << text;
  EXPECT_TRUE(contains(text, "tp groups (128 of 8 ranks): {0..7}, {8..15}, {16..23}, ..., {1016..1023}"))
      << text;
  EXPECT_TRUE(contains(text, "dp groups (128 of 8 ranks): {0..56 step 8}, {1..57 step 8},")) << text;
  EXPECT_TRUE(contains(text, "pp groups (64 of 16 ranks): {0..960 step 64}, {1..961 step 64},")) << text;
  // First and last ranks of the grid, with their stage's layers; nothing in between.
  EXPECT_TRUE(has_row(text, {"0", "0", "0", "0", "0-5"})) << text;
  EXPECT_TRUE(has_row(text, {"1023", "7", "15", "7", "90-95"})) << text;
  EXPECT_FALSE(has_row(text, {"512", "0", "8", "0", "48-53"})) << text;
  // Stage rows: 1f1b keeps p - s = 16 micro-batches in flight on stage 0, 1 on stage 15.
  EXPECT_TRUE(contains(text, "wte, wpe, h.0-h.5")) << text;
  EXPECT_TRUE(contains(text, "h.90-h.95, ln_f, head (wte copy)")) << text;
  std::istringstream lines(text);
  int line_count = 0;
  for (std::string line; std::getline(lines, line);) ++line_count;
  EXPECT_LT(line_count, 120) << text;
}

TEST(Report, MemoryRowsShowInFlightMicrobatchesPerStage) {
  const std::string text = plan_text(gpt3_deck(), 1024);
  std::istringstream in(text);
  std::vector<std::vector<std::string>> memory_rows;
  bool in_memory = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Memory per rank", 0) == 0) in_memory = true;
    else if (in_memory && (line.empty() || line.rfind("  workspace:", 0) == 0))
      break;  // the notes below
    else if (in_memory) memory_rows.push_back(words(line));
  }
  ASSERT_EQ(memory_rows.size(), 17u) << text;  // header + 16 stages
  // Columns: stage, weights (2 words), grads (2), AdamW (2), act/micro-batch (2), in flight, ...
  EXPECT_EQ(memory_rows[1][0], "0");
  EXPECT_EQ(memory_rows[1][9], "16");
  EXPECT_EQ(memory_rows[16][0], "15");
  EXPECT_EQ(memory_rows[16][9], "1");
}

TEST(Report, SmallGridListsEveryRank) {
  const std::string text = plan_text(small_grid_deck(), 12);
  // tp-dp-pp with tp 2, dp 2, pp 3: rank = tp + 2 dp + 4 pp; stages hold layers 0-1, 2-3, 4-5.
  EXPECT_TRUE(has_row(text, {"rank", "tp", "pp", "dp", "stage", "layers"})) << text;
  EXPECT_TRUE(has_row(text, {"0", "0", "0", "0", "0-1"})) << text;
  EXPECT_TRUE(has_row(text, {"5", "1", "1", "0", "2-3"})) << text;
  EXPECT_TRUE(has_row(text, {"7", "1", "1", "1", "2-3"})) << text;
  EXPECT_TRUE(has_row(text, {"11", "1", "2", "1", "4-5"})) << text;
  EXPECT_TRUE(contains(text, "tp groups (6 of 2 ranks): {0..1}, {2..3}, {4..5}, ..., {10..11}")) << text;
  EXPECT_TRUE(contains(text, "pp groups (4 of 3 ranks): {0..8 step 4}, {1..9 step 4}, {2..10 step 4}, {3..11 step 4}"))
      << text;
  EXPECT_TRUE(contains(text, "tokens per step  512")) << text;  // 2 x 4 x 2 sequences of 32
}

TEST(Report, DerivesDpFromRanksAndSaysSo) {
  const std::string text = plan_text(gpt3_deck(), 512);
  EXPECT_TRUE(contains(text, "grid: 512 ranks = tp 8 x pp 16 x dp 4")) << text;
  EXPECT_TRUE(contains(text, "planning with dp = 512 / (tp 8 x pp 16) = 4")) << text;
  EXPECT_TRUE(contains(text, "tokens per step  524,288")) << text;
}

TEST(Report, RejectsRanksThatDoNotFitNamingTheKeys) {
  for (int ranks : {100, 0, -128, 1000}) {
    try {
      plan_text(gpt3_deck(), ranks);
      FAIL() << "--ranks " << ranks << " accepted";
    } catch (const InputError& error) {
      const std::string message = error.what();
      EXPECT_TRUE(contains(message, "--ranks " + std::to_string(ranks))) << message;
      EXPECT_TRUE(contains(message, "parallel.tp")) << message;
      EXPECT_TRUE(contains(message, "parallel.pp")) << message;
      EXPECT_TRUE(contains(message, "128, 256, 384")) << message;
      EXPECT_TRUE(contains(message, "input_decks/gpt3-175b.toml")) << message;
    }
  }
}

TEST(Report, RejectsADeckErrorBeforePrintingAnything) {
  Deck deck = small_grid_deck();
  deck.parallel.tp = 3;  // 4 heads do not split across 3 ranks
  std::ostringstream out;
  EXPECT_THROW(print_plan(out, deck, deck.parallel.world_size()), InputError);
  EXPECT_TRUE(out.str().empty()) << out.str();
}

TEST(Report, SingleRankTinyDeck) {
  const Deck deck;  // defaults: 2 layers, d_model 64, 4 heads, seq 64, vocab 256
  const std::string text = plan_text(deck, 1);
  EXPECT_TRUE(contains(text, "grid: 1 ranks = tp 1 x pp 1 x dp 1")) << text;
  EXPECT_TRUE(contains(text, "wte, wpe, h.0-h.1, ln_f")) << text;
  EXPECT_FALSE(contains(text, "copy")) << text;
  EXPECT_TRUE(contains(text, "0.00% = (p-1)/(m+p-1) = 0/1")) << text;
  EXPECT_TRUE(has_row(text, {"0", "0", "0", "0", "0-1"})) << text;
}

TEST(Report, ContextParallelGridShowsItsAxisAndShrinksActivations) {
  Deck deck;  // seq 64
  deck.parallel.cp = 2;
  const std::string text = plan_text(deck, 2);
  EXPECT_TRUE(contains(text, "grid: 2 ranks = tp 1 x cp 2 x pp 1 x dp 1")) << text;
  EXPECT_TRUE(has_row(text, {"1", "0", "1", "0", "0", "0-1"})) << text;  // rank, tp, cp, pp, dp, layers
  EXPECT_TRUE(contains(text, "cp groups (1 of 2 ranks): {0..1}")) << text;
  const RankMemory one = rank_memory(Deck{}, partition_layers(Deck{}.model, Deck{}.parallel, 1), 0);
  const RankMemory two = rank_memory(deck, partition_layers(deck.model, deck.parallel, 1), 0);
  EXPECT_EQ(two.weight_bytes, one.weight_bytes);  // the position table keeps every position
  EXPECT_LT(two.activation_bytes_per_microbatch, one.activation_bytes_per_microbatch * 0.55);
  EXPECT_GT(two.activation_bytes_per_microbatch, one.activation_bytes_per_microbatch * 0.45);
}

Deck interleaved_deck() {
  Deck deck = small_grid_deck();
  deck.model.layers = 8;
  deck.parallel.tp = 1;
  deck.parallel.pp = 2;
  deck.parallel.dp = 1;
  deck.schedule.kind = ScheduleKind::interleaved_1f1b;
  deck.schedule.virtual_stages = 2;
  return deck;
}

TEST(Report, InterleavedPlanShowsVirtualStagesAndEachRanksChunks) {
  const std::string text = plan_text(interleaved_deck(), 2);
  EXPECT_TRUE(contains(text, "4 virtual stages in model order")) << text;
  // stage, rank.chunk, layers, holds, compute, params (2 words), per TP rank (2 words)
  EXPECT_TRUE(contains(text, "h.0-h.1")) << text;
  std::istringstream in(text);
  std::vector<std::vector<std::string>> stage_rows;
  for (std::string line; std::getline(in, line);) {
    const auto cells = words(line);
    if (cells.size() >= 3 && (cells[1] == "0.0" || cells[1] == "1.0" || cells[1] == "0.1" || cells[1] == "1.1")) {
      stage_rows.push_back(cells);
    }
  }
  ASSERT_EQ(stage_rows.size(), 4u) << text;
  EXPECT_EQ(stage_rows[2][0], "2");
  EXPECT_EQ(stage_rows[2][1], "0.1");  // virtual stage 2 = chunk 1 of rank 0
  EXPECT_EQ(stage_rows[2][2], "4-5");
  EXPECT_TRUE(contains(text, "rank 0: layers 0-1,4-5 (4)")) << text;
  EXPECT_TRUE(contains(text, "rank 1: layers 2-3,6-7 (4)")) << text;
  EXPECT_TRUE(has_row(text, {"1", "0", "1", "0", "2-3,6-7"})) << text;  // rank layout
  EXPECT_TRUE(contains(text, "11.11% = (p-1)/(v*m+p-1) = 1/9")) << text;
  EXPECT_TRUE(contains(text, "virtual stages   2 chunks per rank")) << text;
  // Memory rows are per rank; Megatron's interleaved rank 0 holds (2 + 2 + 1) / 2 micro-batches.
  EXPECT_TRUE(contains(text, "in flight: micro-batches of a whole rank")) << text;
  EXPECT_TRUE(contains(text, " 2.50 ")) << text;
}

TEST(Report, BalancedSplitSaysWhatItBalances) {
  Deck deck = gpt3_deck();
  deck.parallel.stage_layers_balanced = true;
  const std::string text = plan_text(deck, 1024);
  EXPECT_TRUE(contains(text, "Stages (balanced for compute: ln_f + head + loss weigh 0.34 layers")) << text;
  // 96 layers + 0.34 on 16 stages: every stage but one gets 6 layers; no stage gets 7.
  EXPECT_FALSE(contains(text, "h.90-h.96")) << text;
}

TEST(Report, ComputeColumnWeighsTheHead) {
  const std::string text = plan_text(gpt3_deck(), 1024);
  // Stage 15: six layers + the head (2 V C / (24 C^2 + 2 T C) = 0.34 layers).
  EXPECT_TRUE(contains(text, "h.90-h.95, ln_f, head (wte copy)     6.34")) << text;
}

TEST(Report, AutoPlansOneChunkAndItsMemoryBound) {
  Deck deck = small_grid_deck();
  deck.schedule.kind = ScheduleKind::automatic;
  deck.schedule.virtual_stages = 2;
  const std::string text = plan_text(deck, 12);
  EXPECT_TRUE(contains(text, "kind             auto (the lowest simulated bubble within 3 micro-batches")) << text;
  EXPECT_TRUE(contains(text, "below 1f1b's")) << text;
  EXPECT_FALSE(contains(text, "virtual stages in model order")) << text;
}

TEST(Report, NotesFromTheCallerAreShownUnderTheGrid) {
  std::ostringstream out;
  print_plan(out, small_grid_deck(), 12, {"schedule.kind = \"auto\" chose zb-h1"});
  EXPECT_TRUE(contains(out.str(), "x dp 2\n  note: schedule.kind = \"auto\" chose zb-h1\n")) << out.str();
}

TEST(Report, FullRecomputeIsShown) {
  Deck deck = small_grid_deck();
  deck.schedule.recompute = Recompute::full;
  const std::string text = plan_text(deck, 12);
  EXPECT_TRUE(contains(text, "recompute        full")) << text;
  EXPECT_TRUE(contains(text, "+ one chunk recomputed")) << text;
}

}  // namespace
}  // namespace trident
