// Where each rank sits in the TP × CP × PP × DP grid (DESIGN.md "Parallel semantics"). Pure
// arithmetic, no MPI: the grid module builds one communicator per axis from axis_group().
//
// parallel.order (an AxisOrder, deck/choices.hpp) names the axes fastest-varying first. The default "tp-cp-dp-pp"
// keeps the ranks of a tp group adjacent (one node, fastest links), then cp (the ring's hops every layer), then dp,
// with pp slowest (pipeline hops cross nodes).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "deck/config.hpp"

namespace trident {

struct GridCoords {
  int tp = 0;
  int cp = 0;
  int pp = 0;
  int dp = 0;

  bool operator==(const GridCoords&) const = default;
};

int axis_size(Axis axis, const ParallelConfig& parallel);
int coordinate(const GridCoords& coords, Axis axis);

// Both throw std::out_of_range for a rank or coordinate outside the grid.
GridCoords rank_to_coords(int rank, const ParallelConfig& parallel);
int coords_to_rank(GridCoords coords, const ParallelConfig& parallel);

// The ranks that differ from `rank` only along `axis`, ordered by their coordinate on that axis
// (so a rank's index in its group is its coordinate: usable as the key of MPI_Comm_split).
std::vector<int> axis_group(int rank, Axis axis, const ParallelConfig& parallel);

// "tp 2 x pp 4 x dp 8", with "x cp N" after tp where the grid has context parallelism and
// "(experts over ep N)" after it under expert parallelism: how the banner, the plan and messages
// name a grid.
std::string describe_grid(const ParallelConfig& parallel);
// "parallel.tp × parallel.pp × parallel.dp = 2 × 1 × 4" (with parallel.cp where cp > 1): the deck's
// keys for messages about the grid's size.
std::string grid_keys(const ParallelConfig& parallel);

// Every group along `axis`, ordered by their smallest rank; together they partition the ranks.
std::vector<std::vector<int>> axis_groups(Axis axis, const ParallelConfig& parallel);

}  // namespace trident
