#include "plan/layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace trident {
namespace {

// The six words of three axes (from before context parallelism), and every order of all four.
const std::vector<std::string> kThreeAxisOrders = {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp",
                                                   "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"};
const std::vector<std::string> kAllOrders = [] {
  std::vector<std::string> words = kThreeAxisOrders;
  std::vector<std::string> axes = {"cp", "dp", "pp", "tp"};  // sorted: next_permutation visits all 24
  do words.push_back(axes[0] + "-" + axes[1] + "-" + axes[2] + "-" + axes[3]);
  while (std::next_permutation(axes.begin(), axes.end()));
  return words;
}();

struct Shape {
  int tp, cp, pp, dp;
};
const std::vector<Shape> kShapes = {{1, 1, 1, 1}, {2, 1, 2, 2}, {3, 1, 1, 2}, {1, 1, 5, 3}, {2, 2, 3, 5},
                                    {8, 1, 4, 2}, {4, 3, 1, 7}, {1, 4, 1, 6}, {2, 2, 2, 2}};

// The axes an order word names, read from the word itself (not from the deck's table): a word of
// three puts cp right after tp.
AxisOrder axes_named(const std::string& order) {
  std::vector<Axis> axes;
  for (std::size_t at = 0; at < order.size(); at += 3) {
    const std::string name = order.substr(at, 2);
    axes.push_back(name == "tp" ? Axis::tp : name == "cp" ? Axis::cp : name == "pp" ? Axis::pp : Axis::dp);
    if (name == "tp" && order.size() == 8) axes.push_back(Axis::cp);
  }
  AxisOrder named{};
  std::copy(axes.begin(), axes.end(), named.begin());
  return named;
}

ParallelConfig grid(Shape shape, const std::string& order) {
  ParallelConfig parallel;
  parallel.tp = shape.tp;
  parallel.cp = shape.cp;
  parallel.pp = shape.pp;
  parallel.dp = shape.dp;
  parallel.order = axes_named(order);
  return parallel;
}

TEST(Layout, EveryOrderWordOfTheDeckNamesItsAxes) {
  ASSERT_EQ(kAxisOrders.size(), kAllOrders.size());
  for (const std::string& order : kAllOrders) {
    const std::optional<AxisOrder> parsed = parse_choice<AxisOrder>(order);
    ASSERT_TRUE(parsed.has_value()) << order;
    EXPECT_EQ(*parsed, axes_named(order)) << order;
  }
  // An order is printed as its three-axis word where it has one: the banners of runs without cp
  // read as before.
  for (const std::string& order : kThreeAxisOrders) EXPECT_EQ(word_of(axes_named(order)), order);
  EXPECT_EQ(word_of(axes_named("cp-tp-dp-pp")), "cp-tp-dp-pp");
  EXPECT_EQ(word_of(ParallelConfig{}.order), "tp-dp-pp");
}

TEST(Layout, RoundTripsEveryRankForEveryShapeAndOrder) {
  for (const Shape& shape : kShapes) {
    for (const std::string& order : kAllOrders) {
      const ParallelConfig parallel = grid(shape, order);
      std::set<std::tuple<int, int, int, int>> seen;
      for (int rank = 0; rank < parallel.world_size(); ++rank) {
        const GridCoords c = rank_to_coords(rank, parallel);
        ASSERT_GE(c.tp, 0);
        ASSERT_LT(c.tp, shape.tp);
        ASSERT_GE(c.cp, 0);
        ASSERT_LT(c.cp, shape.cp);
        ASSERT_GE(c.pp, 0);
        ASSERT_LT(c.pp, shape.pp);
        ASSERT_GE(c.dp, 0);
        ASSERT_LT(c.dp, shape.dp);
        ASSERT_EQ(coords_to_rank(c, parallel), rank) << order << " rank " << rank;
        seen.insert({c.tp, c.cp, c.pp, c.dp});
      }
      EXPECT_EQ(static_cast<int>(seen.size()), parallel.world_size()) << order;
    }
  }
}

TEST(Layout, FirstAxisOfTheOrderVariesFastest) {
  for (const std::string& order : kAllOrders) {
    const ParallelConfig parallel = grid({2, 3, 5, 7}, order);
    const AxisOrder axes = axes_named(order);
    const int first_size = axis_size(axes[0], parallel);
    const int second_size = axis_size(axes[1], parallel);
    const GridCoords one = rank_to_coords(1, parallel);
    EXPECT_EQ(coordinate(one, axes[0]), 1) << order;
    const GridCoords next_second = rank_to_coords(first_size, parallel);
    EXPECT_EQ(coordinate(next_second, axes[0]), 0) << order;
    EXPECT_EQ(coordinate(next_second, axes[1]), 1) << order;
    const GridCoords next_third = rank_to_coords(first_size * second_size, parallel);
    EXPECT_EQ(coordinate(next_third, axes[2]), 1) << order;
    const GridCoords next_fourth = rank_to_coords(first_size * second_size * axis_size(axes[2], parallel), parallel);
    EXPECT_EQ(coordinate(next_fourth, axes[3]), 1) << order;
  }
}

TEST(Layout, DefaultOrderMatchesHandComputedRanks) {
  // tp-dp-pp with tp 2, pp 3, dp 2: rank = tp + 2 * dp + 4 * pp.
  const ParallelConfig parallel = grid({2, 1, 3, 2}, "tp-dp-pp");
  EXPECT_EQ(rank_to_coords(5, parallel), (GridCoords{.tp = 1, .pp = 1, .dp = 0}));
  EXPECT_EQ(rank_to_coords(7, parallel), (GridCoords{.tp = 1, .pp = 1, .dp = 1}));
  EXPECT_EQ(rank_to_coords(10, parallel), (GridCoords{.tp = 0, .pp = 2, .dp = 1}));
  EXPECT_EQ(coords_to_rank({.tp = 1, .pp = 2, .dp = 1}, parallel), 11);
}

TEST(Layout, PipelineFirstOrderMatchesHandComputedRanks) {
  // pp-tp-dp with tp 2, pp 3, dp 2: rank = pp + 3 * tp + 6 * dp.
  const ParallelConfig parallel = grid({2, 1, 3, 2}, "pp-tp-dp");
  EXPECT_EQ(rank_to_coords(4, parallel), (GridCoords{.tp = 1, .pp = 1, .dp = 0}));
  EXPECT_EQ(coords_to_rank({.tp = 1, .pp = 2, .dp = 1}, parallel), 11);
  EXPECT_EQ(coords_to_rank({.tp = 0, .pp = 2, .dp = 1}, parallel), 8);
}

TEST(Layout, RejectsRanksAndCoordinatesOutsideTheGrid) {
  const ParallelConfig parallel = grid({2, 1, 3, 2}, "tp-dp-pp");
  EXPECT_THROW(rank_to_coords(-1, parallel), std::out_of_range);
  EXPECT_THROW(rank_to_coords(12, parallel), std::out_of_range);
  EXPECT_THROW(coords_to_rank({.tp = 2, .pp = 0, .dp = 0}, parallel), std::out_of_range);
  EXPECT_THROW(coords_to_rank({.tp = 0, .pp = -1, .dp = 0}, parallel), std::out_of_range);
}

TEST(Layout, GroupsPartitionTheRanksAndVaryOnlyTheirAxis) {
  for (const Shape& shape : kShapes) {
    for (const std::string& order : kAllOrders) {
      const ParallelConfig parallel = grid(shape, order);
      for (Axis axis : {Axis::tp, Axis::cp, Axis::pp, Axis::dp}) {
        const auto groups = axis_groups(axis, parallel);
        const int size = axis_size(axis, parallel);
        EXPECT_EQ(static_cast<int>(groups.size()), parallel.world_size() / size);
        std::vector<int> owner(parallel.world_size(), -1);
        for (std::size_t g = 0; g < groups.size(); ++g) {
          ASSERT_EQ(static_cast<int>(groups[g].size()), size);
          const GridCoords base = rank_to_coords(groups[g].front(), parallel);
          for (int index = 0; index < size; ++index) {
            const int rank = groups[g][index];
            ASSERT_EQ(owner[rank], -1) << "rank " << rank << " in two " << word_of(axis) << " groups";
            owner[rank] = static_cast<int>(g);
            GridCoords expected = base;
            if (axis == Axis::tp) expected.tp = index;
            if (axis == Axis::cp) expected.cp = index;
            if (axis == Axis::pp) expected.pp = index;
            if (axis == Axis::dp) expected.dp = index;
            EXPECT_EQ(rank_to_coords(rank, parallel), expected) << order << " " << word_of(axis);
            EXPECT_EQ(axis_group(rank, axis, parallel), groups[g]);
          }
        }
        for (int rank = 0; rank < parallel.world_size(); ++rank) EXPECT_NE(owner[rank], -1);
        for (std::size_t g = 1; g < groups.size(); ++g) {
          EXPECT_LT(groups[g - 1].front(), groups[g].front());
        }
      }
    }
  }
}

TEST(Layout, ContextParallelRanksFollowTheirTpGroupByDefault) {
  // tp-cp-dp-pp with tp 2, cp 2, pp 2, dp 2: rank = tp + 2 * cp + 4 * dp + 8 * pp.
  const ParallelConfig parallel = grid({2, 2, 2, 2}, "tp-dp-pp");
  EXPECT_EQ(rank_to_coords(6, parallel), (GridCoords{.tp = 0, .cp = 1, .pp = 0, .dp = 1}));
  EXPECT_EQ(axis_group(6, Axis::cp, parallel), (std::vector<int>{4, 6}));
  EXPECT_EQ(axis_group(6, Axis::dp, parallel), (std::vector<int>{2, 6}));
  EXPECT_EQ(axis_group(6, Axis::pp, parallel), (std::vector<int>{6, 14}));
  EXPECT_EQ(describe_grid(parallel), "tp 2 x cp 2 x pp 2 x dp 2");
  EXPECT_EQ(describe_grid(grid({2, 1, 2, 2}, "tp-dp-pp")), "tp 2 x pp 2 x dp 2");
}

TEST(Layout, DefaultOrderTpGroupsAreContiguous) {
  const ParallelConfig parallel = grid({4, 1, 2, 3}, "tp-dp-pp");
  EXPECT_EQ(axis_group(6, Axis::tp, parallel), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(axis_group(6, Axis::dp, parallel), (std::vector<int>{2, 6, 10}));
  EXPECT_EQ(axis_group(6, Axis::pp, parallel), (std::vector<int>{6, 18}));
}

}  // namespace
}  // namespace trident
