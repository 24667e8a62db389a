// Text output: the golden-file listing format and the timed diagram's layout.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"
#include "test_util.hpp"

namespace trident {
namespace {

using testing::input_error_message;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

int count_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  int count = 0;
  for (const std::string& line : lines) count += line.rfind(prefix, 0) == 0 ? 1 : 0;
  return count;
}

std::string render(const Schedule& schedule, int width) {
  return render_schedule(schedule,
                         simulate(schedule, ActionCosts::uniform(schedule.virtual_stages(), schedule.chunks)), width);
}

TEST(ListActions, OneLinePerRankWithTrailingNewline) {
  EXPECT_EQ(list_actions(make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1)),
            "rank 0: F0 F1 B0 B1\nrank 1: F0 B0 F1 B1\n");
  EXPECT_EQ(list_actions(make_schedule(ScheduleKind::interleaved_1f1b, 1, 1, 2)), "rank 0: F0.0 F0.1 B0.1 B0.0\n");
}

TEST(RenderSchedule, OneLinePerRankAndALegend) {
  const std::string text = render(make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1), 120);
  const std::vector<std::string> lines = lines_of(text);
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(count_prefix(lines, "rank " + std::to_string(rank) + " |"), 1);
  EXPECT_EQ(count_prefix(lines, "time"), 1);
  EXPECT_EQ(count_prefix(lines, "legend:"), 1);
  EXPECT_NE(text.find("F forward"), std::string::npos);
  EXPECT_NE(text.find("B backward"), std::string::npos);
  EXPECT_EQ(text.find("W weight grad"), std::string::npos) << "only kinds that occur are explained";
  // 33 time units of 2 characters: rank 3 (last stage) idles 3 units, then F0 B0 B0 ...
  EXPECT_NE(text.find("rank 3 |......F0B0B0F1B1B1F2B2B2"), std::string::npos) << text;
  // rank 0: the warm-up, then 6 units waiting for B0 to travel back, then 1F1B.
  EXPECT_NE(text.find("rank 0 |F0F1F2F3............B0B0F4"), std::string::npos) << text;
}

TEST(RenderSchedule, WrapsAtTheWidthInBlocks) {
  const Schedule schedule = make_schedule(ScheduleKind::zb_h1, 4, 8, 1);
  for (int width : {40, 60, 80, 120}) {
    const std::string text = render(schedule, width);
    const std::vector<std::string> lines = lines_of(text);
    for (const std::string& line : lines) EXPECT_LE(static_cast<int>(line.size()), width) << line;
    // 27 cells of 2 characters after an 8-character prefix.
    const int per_block = (width - 8) / 2;
    const int blocks = (27 + per_block - 1) / per_block;
    for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(count_prefix(lines, "rank " + std::to_string(rank) + " |"), blocks);
    EXPECT_GE(count_prefix(lines, "legend:"), 1);
  }
  EXPECT_NE(input_error_message([&] { render(schedule, 9); }).find("columns"), std::string::npos);
}

TEST(RenderSchedule, ZeroBubbleShowsItsSplitBackward) {
  const std::string text = render(make_schedule(ScheduleKind::zb_h1, 4, 8, 1), 120);
  EXPECT_NE(text.find("I input grad"), std::string::npos);
  EXPECT_NE(text.find("W weight grad"), std::string::npos);
  // The last stage (rank 3) runs F I pairs right away, its weight gradients postponed by 3.
  EXPECT_NE(text.find("rank 3 |......F0I0F1I1F2I2F3I3W0F4I4W1"), std::string::npos) << text;
}

TEST(RenderSchedule, LowerCaseForOddChunks) {
  const std::string text = render(make_schedule(ScheduleKind::interleaved_1f1b, 4, 8, 2), 200);
  EXPECT_NE(text.find("lower case chunk 1"), std::string::npos);
  EXPECT_NE(text.find("rank 0 |F0F1F2F3f0f1f2f3F4F5"), std::string::npos) << text;
}

TEST(RenderSchedule, WideScheduleUsesWiderCellsAndStaysInWidth) {
  const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 16, 40, 1);
  const std::string text = render(schedule, 120);
  const std::vector<std::string> lines = lines_of(text);
  for (const std::string& line : lines) EXPECT_LE(line.size(), 120u) << line;
  EXPECT_GE(count_prefix(lines, "rank 15 |"), 2);
  EXPECT_GE(count_prefix(lines, "rank  0 |"), 2);
  EXPECT_NE(text.find("rank  0 |F00F01F02"), std::string::npos) << text;
}

}  // namespace
}  // namespace trident
