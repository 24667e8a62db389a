#include "plan/layout.hpp"

#include <stdexcept>
#include <string_view>

#include "common/error.hpp"

namespace trident {
namespace {

// One accessor for const and mutable coordinates.
template <typename Coords>
auto& coordinate_ref(Coords& coords, Axis axis) {
  switch (axis) {
    case Axis::tp: return coords.tp;
    case Axis::pp: return coords.pp;
    case Axis::dp: return coords.dp;
  }
  throw std::logic_error("unknown grid axis");
}

[[noreturn]] void throw_bad_order(const std::string& order) {
  throw InputError("parallel.order = \"" + order +
                   "\" is not a valid rank order: name each of tp, pp and dp exactly once, "
                   "fastest-varying first, joined by '-' (for example \"tp-dp-pp\", the default, "
                   "or \"tp-pp-dp\")");
}

}  // namespace

std::array<Axis, 3> parse_axis_order(const std::string& order) {
  std::array<Axis, 3> axes{};
  std::array<bool, 3> seen{};
  std::size_t count = 0;
  std::string_view rest = order;
  while (true) {
    const std::size_t dash = rest.find('-');
    const std::string_view name = rest.substr(0, dash);
    std::size_t index = 0;
    if (name == "tp") {
      index = 0;
    } else if (name == "pp") {
      index = 1;
    } else if (name == "dp") {
      index = 2;
    } else {
      throw_bad_order(order);
    }
    if (seen[index] || count == axes.size()) throw_bad_order(order);
    seen[index] = true;
    axes[count++] = static_cast<Axis>(index);
    if (dash == std::string_view::npos) break;
    rest.remove_prefix(dash + 1);
  }
  if (count != axes.size()) throw_bad_order(order);
  return axes;
}

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::tp: return "tp";
    case Axis::pp: return "pp";
    case Axis::dp: return "dp";
  }
  throw std::logic_error("unknown grid axis");
}

int axis_size(Axis axis, const ParallelConfig& parallel) {
  switch (axis) {
    case Axis::tp: return parallel.tp;
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
  for (Axis axis : parse_axis_order(parallel.order)) {
    const int size = axis_size(axis, parallel);
    coordinate_ref(coords, axis) = rest % size;
    rest /= size;
  }
  return coords;
}

int coords_to_rank(GridCoords coords, const ParallelConfig& parallel) {
  int rank = 0;
  int stride = 1;
  for (Axis axis : parse_axis_order(parallel.order)) {
    const int size = axis_size(axis, parallel);
    const int x = coordinate(coords, axis);
    if (x < 0 || x >= size) {
      throw std::out_of_range(std::string(axis_name(axis)) + " coordinate " + std::to_string(x) +
                              " is outside [0, " + std::to_string(size) + ")");
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
