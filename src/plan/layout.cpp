#include "plan/layout.hpp"

#include <stdexcept>

namespace trident {
namespace {

// One accessor for const and mutable coordinates.
template <typename Coords>
auto& coordinate_ref(Coords& coords, Axis axis) {
  switch (axis) {
    case Axis::tp: return coords.tp;
    case Axis::cp: return coords.cp;
    case Axis::pp: return coords.pp;
    case Axis::dp: return coords.dp;
  }
  throw std::logic_error("unknown grid axis");
}

}  // namespace

int axis_size(Axis axis, const ParallelConfig& parallel) {
  switch (axis) {
    case Axis::tp: return parallel.tp;
    case Axis::cp: return parallel.cp;
    case Axis::pp: return parallel.pp;
    case Axis::dp: return parallel.dp;
  }
  throw std::logic_error("unknown grid axis");
}

int coordinate(const GridCoords& coords, Axis axis) {
  return coordinate_ref(coords, axis);
}

GridCoords rank_to_coords(int rank, const ParallelConfig& parallel) {
  if (rank < 0 || rank >= parallel.world_size()) {
    throw std::out_of_range("rank " + std::to_string(rank) + " is outside a grid of " +
                            std::to_string(parallel.world_size()) + " ranks");
  }
  GridCoords coords;
  int rest = rank;
  for (Axis axis : parallel.order) {
    const int size = axis_size(axis, parallel);
    coordinate_ref(coords, axis) = rest % size;
    rest /= size;
  }
  return coords;
}

int coords_to_rank(GridCoords coords, const ParallelConfig& parallel) {
  int rank = 0;
  int stride = 1;
  for (Axis axis : parallel.order) {
    const int size = axis_size(axis, parallel);
    const int x = coordinate(coords, axis);
    if (x < 0 || x >= size) {
      throw std::out_of_range(word_of(axis) + " coordinate " + std::to_string(x) + " is outside [0, " +
                              std::to_string(size) + ")");
    }
    rank += x * stride;
    stride *= size;
  }
  return rank;
}

std::vector<int> axis_group(int rank, Axis axis, const ParallelConfig& parallel) {
  GridCoords coords = rank_to_coords(rank, parallel);
  std::vector<int> group;
  for (int x = 0; x < axis_size(axis, parallel); ++x) {
    coordinate_ref(coords, axis) = x;
    group.push_back(coords_to_rank(coords, parallel));
  }
  return group;
}

std::string describe_grid(const ParallelConfig& parallel) {
  std::string text = "tp " + std::to_string(parallel.tp);
  if (parallel.cp > 1) text += " x cp " + std::to_string(parallel.cp);
  text += " x pp " + std::to_string(parallel.pp) + " x dp " + std::to_string(parallel.dp);
  return parallel.ep > 1 ? text + " (experts over ep " + std::to_string(parallel.ep) + ")" : text;
}

std::string grid_keys(const ParallelConfig& parallel) {
  const bool cp = parallel.cp > 1;
  return std::string("parallel.tp × ") + (cp ? "parallel.cp × " : "") + "parallel.pp × parallel.dp = " +
         std::to_string(parallel.tp) + " × " + (cp ? std::to_string(parallel.cp) + " × " : "") +
         std::to_string(parallel.pp) + " × " + std::to_string(parallel.dp);
}

std::vector<std::vector<int>> axis_groups(Axis axis, const ParallelConfig& parallel) {
  // Ranks grow with every coordinate, so the member at coordinate 0 is a group's smallest rank.
  std::vector<std::vector<int>> groups;
  for (int rank = 0; rank < parallel.world_size(); ++rank) {
    if (coordinate(rank_to_coords(rank, parallel), axis) == 0) {
      groups.push_back(axis_group(rank, axis, parallel));
    }
  }
  return groups;
}

}  // namespace trident
