// The schedule kinds' registry (schedule/registry.hpp): one line per kind, which the deck's words,
// the generators' rules, the in-flight theory and the candidate lists read. Each line is held to
// what its generator does: the rules to the combinations it accepts, the theory to the simulated
// peaks of the lists it writes.
#include "schedule/registry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "common/error.hpp"
#include "schedule/schedule.hpp"

namespace trident {
namespace {

TEST(ScheduleRegistry, EveryKindButAutoAndFileHasOneLineAndItsWordParsesBack) {
  std::set<ScheduleKind> kinds;
  for (const ScheduleType& type : schedule_types()) {
    EXPECT_TRUE(kinds.insert(type.kind).second) << type.word << " twice";
    EXPECT_EQ(&schedule_type(type.kind), &type);
    EXPECT_EQ(parse_choice<ScheduleKind>(type.word), type.kind);
    EXPECT_EQ(word_of(type.kind), type.word);
  }
  EXPECT_EQ(kinds.size(), choices(ScheduleKind{}).size() - 2) << "every word but auto's and file's names a line";
  EXPECT_EQ(word_of(ScheduleKind::automatic), "auto");
  EXPECT_EQ(word_of(ScheduleKind::file), "file");
  EXPECT_THROW(schedule_type(ScheduleKind::automatic), std::logic_error);
  EXPECT_THROW(schedule_type(ScheduleKind::file), std::logic_error);
  EXPECT_EQ(find_schedule_type(ScheduleKind::file), nullptr);
  EXPECT_EQ(chunk_placement(ScheduleKind::automatic), ChunkPlacement::interleaved);
}

TEST(ScheduleRegistry, RunsOnIsExactlyWhereTheGeneratorAccepts) {
  for (const ScheduleType& type : schedule_types())
    for (int p = 1; p <= 5; ++p)
      for (int m = 1; m <= 12; ++m)
        for (int v = 1; v <= 4; ++v) {
          bool made = true;
          try {
            make_schedule(type.kind, p, m, v);
          } catch (const InputError&) {
            made = false;
          }
          EXPECT_EQ(runs_on(type, p, m, v), made) << type.word << " p=" << p << " m=" << m << " v=" << v;
        }
}

// The in-flight theory of each line (what the planner's memory counts) against the peaks the
// simulator counts in the generated lists: a bound on every rank, reached on the busiest.
TEST(ScheduleRegistry, PeakInFlightBoundsEveryRankAndIsReached) {
  for (const ScheduleType& type : schedule_types())
    for (int p = 1; p <= 4; ++p)
      for (int m = 1; m <= 10; ++m)
        for (int v = 1; v <= 3; ++v) {
          if (!runs_on(type, p, m, v)) continue;
          const ScheduleRequest request{p, m, v, 0.5};
          const Schedule schedule = make_schedule(type.kind, request);
          const SimulatedStep step = simulate(schedule, ActionCosts::uniform(p * v, v));
          double theory_max = 0.0, simulated_max = 0.0;
          for (int rank = 0; rank < p; ++rank) {
            const double simulated = static_cast<double>(step.peak_in_flight[rank]) / v;
            const double theory = type.peak_in_flight(request, rank);
            EXPECT_LE(simulated, theory + 1e-12)
                << type.word << " p=" << p << " m=" << m << " v=" << v << " r=" << rank;
            theory_max = std::max(theory_max, theory);
            simulated_max = std::max(simulated_max, simulated);
          }
          EXPECT_DOUBLE_EQ(theory_max, simulated_max) << type.word << " p=" << p << " m=" << m << " v=" << v;
        }
}

}  // namespace
}  // namespace trident
