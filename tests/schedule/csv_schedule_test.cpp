// Schedules as CSV action lists (schedule/csv_schedule.hpp): every generated kind written and read
// back is the same schedule, and a faulty file is refused naming its row and action.
#include "schedule/csv_schedule.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "test_util.hpp"

namespace trident {
namespace {

using testing::input_error_message;

TEST(CsvSchedule, EveryKindReadsBackAsWritten) {
  for (const ScheduleType& type : schedule_types())
    for (int p = 1; p <= 4; ++p)
      for (int m = 1; m <= 9; ++m)
        for (int v = 1; v <= 3; ++v) {
          if (!runs_on(type, p, m, v)) continue;
          const Schedule written = make_schedule(type.kind, p, m, v);
          const Schedule read = read_schedule_csv(schedule_csv(written));
          const std::string what = std::string(type.word) + " p=" + std::to_string(p) + " m=" + std::to_string(m);
          EXPECT_EQ(read.kind, ScheduleKind::file) << what;
          EXPECT_EQ(read.stages, p) << what;
          EXPECT_EQ(read.chunks, v) << what;
          // One rank holds every stage in either placement: the same table, and the file says no more.
          if (p > 1) {
            EXPECT_EQ(read.placement, written.placement) << what;
          }
          EXPECT_EQ(read.virtual_stage, written.virtual_stage) << what;
          EXPECT_EQ(read.actions, written.actions) << what;
        }
}

TEST(CsvSchedule, WritesPyTorchsActionsOneRowPerRank) {
  // 1f1b, p 2, m 2: rank 0 F0 F1 B0 B1 on stage 0; rank 1 F0 B0 F1 B1 on stage 1.
  EXPECT_EQ(schedule_csv(make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1)), "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  // A V: rank 0 holds stages 0 and 3 of p 2.
  const std::string v = schedule_csv(make_schedule(ScheduleKind::zb_v, 2, 2, 2));
  EXPECT_EQ(v.substr(0, v.find(',')), "0F0");
  EXPECT_NE(v.substr(0, v.find('\n')).find("3I0"), std::string::npos) << v;
}

TEST(CsvSchedule, ReadsSpacesBlankCellsAndWindowsLineEnds) {
  const Schedule s = read_schedule_csv(" 0F0 , 0B0,,\r\n1F0,1B0\r\n\n");
  EXPECT_EQ(s.stages, 2);
  EXPECT_EQ(s.microbatches, 1);
  EXPECT_EQ(s.actions[1], (std::vector<Action>{{ActionKind::forward, 0, 0}, {ActionKind::backward, 0, 0}}));
}

TEST(CsvSchedule, AFaultyFileIsRefusedNamingRowAndAction) {
  const auto refused = [](const std::string& text) { return input_error_message([&] { read_schedule_csv(text); }); };
  EXPECT_NE(refused("0F0,0B0\n1F0,1Q0\n").find("row 2, action \"1Q0\""), std::string::npos);
  EXPECT_NE(refused("0F0,0B0\n1F,1B0\n").find("row 2, action \"1F\""), std::string::npos);
  EXPECT_NE(refused("F0\n").find("row 1, action \"F0\""), std::string::npos);
  EXPECT_NE(refused("0F0,1B0\n1F0,0B0\n").find("row 1, action \"1B0\": stage 1 is not on rank 0"), std::string::npos);
  EXPECT_NE(refused("").find("no rows"), std::string::npos);
  EXPECT_NE(refused("0F0,0B0\n1B0,1F0\n").find("deadlock"), std::string::npos);
  EXPECT_NE(refused("0F0\n1F0,1B0\n").find("never runs the backward of F0"), std::string::npos);
}

}  // namespace
}  // namespace trident
