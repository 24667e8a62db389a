// Regression snapshots: the exact action order of a few schedules per generator, as the generators
// wrote it (TRIDENT_UPDATE_GOLDEN=1) and a person read it. They prove nothing about correctness
// (paper_schedules_test.cpp holds the hand-written references); any change to a generator shows
// up here as a diff to read.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "schedule/schedule.hpp"

namespace trident {
namespace {

struct GoldenCase {
  std::string kind;
  int p, m, v;
};

std::string golden_path(const GoldenCase& c) {
  return std::string(TRIDENT_SCHEDULE_GOLDEN_DIR) + "/" + c.kind + "_p" + std::to_string(c.p) + "_m" +
         std::to_string(c.m) + "_v" + std::to_string(c.v) + ".txt";
}

class GoldenListing : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenListing, MatchesFile) {
  const GoldenCase& c = GetParam();
  const std::string listing = list_actions(make_schedule(parse_choice<ScheduleKind>(c.kind).value(), c.p, c.m, c.v));
  const std::string path = golden_path(c);
  const char* update = std::getenv("TRIDENT_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path) << listing;
    GTEST_SKIP() << "rewrote " << path << "; read it before keeping it";
  }
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << "missing golden file " << path << " (run with TRIDENT_UPDATE_GOLDEN=1)";
  std::stringstream expected;
  expected << file.rdbuf();
  EXPECT_EQ(listing, expected.str()) << "generator output changed for " << path;
}

INSTANTIATE_TEST_SUITE_P(Generators, GoldenListing,
                         ::testing::Values(GoldenCase{"gpipe", 4, 4, 1}, GoldenCase{"gpipe", 2, 3, 1},
                                           GoldenCase{"1f1b", 4, 8, 1}, GoldenCase{"1f1b", 3, 2, 1},
                                           GoldenCase{"1f1b", 1, 3, 1}, GoldenCase{"interleaved-1f1b", 2, 4, 2},
                                           GoldenCase{"interleaved-1f1b", 4, 8, 2}, GoldenCase{"zb-h1", 4, 8, 1},
                                           GoldenCase{"zb-h1", 3, 2, 1}, GoldenCase{"zb-v", 2, 3, 2},
                                           GoldenCase{"zb-v", 4, 8, 2}, GoldenCase{"v-half", 4, 8, 2},
                                           GoldenCase{"dualpipev", 2, 4, 2}, GoldenCase{"dualpipev", 4, 9, 2}),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           std::string name = info.param.kind + "_p" + std::to_string(info.param.p) + "_m" +
                                              std::to_string(info.param.m) + "_v" + std::to_string(info.param.v);
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace trident
