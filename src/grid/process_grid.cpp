#include "grid/process_grid.hpp"

#include <cstdio>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "common/error.hpp"
#include "kernels/device.hpp"
#ifdef KOKKOS_ENABLE_CUDA
#include "comm/host_staged_comm.hpp"
#include "comm/nccl_comm.hpp"
#include "comm/nccl_pipeline_comm.hpp"
#endif

namespace trident {

namespace {

// The Comm of one group (`split` holds its ranks). The CPU build talks MPI on every axis. The GPU
// build runs the collectives of tp, dp and the embedding group on NCCL, after the kernels queued so
// far; the pipeline's messages on NCCL too (one channel per peer and direction, comm/
// nccl_pipeline_comm.hpp), or on MPI through host copies (parallel.p2p "mpi" or "ordered"); with
// parallel.share_device everything goes on MPI through host copies.
enum class Traffic { collectives, point_to_point };

std::unique_ptr<Comm> group_comm(MPI_Comm split, Traffic traffic, const ParallelConfig& config,
                                 const std::string& name) {
#ifdef KOKKOS_ENABLE_CUDA
  if (config.share_device) return make_host_staged_comm(make_mpi_comm(split, name));
  if (traffic == Traffic::point_to_point && config.p2p == P2pMatching::nccl)
    return make_nccl_pipeline_comm(split, ExecSpace().cuda_stream());
  if (traffic == Traffic::point_to_point) return make_host_staged_comm(make_mpi_comm(split, name));
  return make_nccl_comm(split, ExecSpace().cuda_stream(), name);
#else
  (void)traffic;
  (void)config;
  return make_mpi_comm(split, name);
#endif
}

// The group of `world_rank` along `axis`: split by the group's first member, ordered by coordinate.
std::unique_ptr<Comm> axis_comm(MPI_Comm world, int world_rank, Axis axis, const ParallelConfig& config) {
  const std::vector<int> group = axis_group(world_rank, axis, config);
  if (group.size() == 1) return make_local_comm();
  MPI_Comm split = MPI_COMM_NULL;
  MPI_Comm_split(world, group.front(), coordinate(rank_to_coords(world_rank, config), axis), &split);
  // The pipeline's and the ring's messages go to one neighbour at a time.
  const bool messages = axis == Axis::pp || axis == Axis::cp;
  auto comm = group_comm(split, messages ? Traffic::point_to_point : Traffic::collectives, config,
                         std::string(word_of(axis)));
  MPI_Comm_free(&split);
  return comm;
}

// The dp × cp ranks with this rank's tp and pp coordinates, ordered by dp, then cp.
std::unique_ptr<Comm> dp_cp_comm(MPI_Comm world, const ProcessGrid& grid) {
  if (grid.config.dp * grid.config.cp == 1) return make_local_comm();
  MPI_Comm split = MPI_COMM_NULL;
  const int color = grid.tp_rank() + grid.tp_size() * grid.pp_rank();
  MPI_Comm_split(world, color, grid.cp_rank() + grid.cp_size() * grid.dp_rank(), &split);
  auto comm = group_comm(split, Traffic::collectives, grid.config, grid.config.cp > 1 ? "dp x cp" : "dp");
  MPI_Comm_free(&split);
  return comm;
}

// The expert-parallel group (`experts_alike` false: dp coordinates g·ep ... g·ep + ep − 1 with this
// rank's g) or the expert-data-parallel one (true: the dp coordinates ≡ this rank's mod ep), with
// this rank's tp, cp and pp coordinates.
std::unique_ptr<Comm> expert_comm(MPI_Comm world, const ProcessGrid& grid, bool experts_alike) {
  const ParallelConfig& config = grid.config;
  const int ep = config.ep, dp = grid.dp_rank();
  const int within = experts_alike ? dp % ep : dp / ep, across = experts_alike ? dp / ep : dp % ep;
  const int color = grid.tp_rank() + config.tp * (grid.cp_rank() + config.cp * (grid.pp_rank() + config.pp * within));
  MPI_Comm split = MPI_COMM_NULL;
  MPI_Comm_split(world, color, across, &split);
  auto comm = group_comm(split, experts_alike ? Traffic::collectives : Traffic::point_to_point, config,
                         experts_alike ? "expert dp" : "ep");
  MPI_Comm_free(&split);
  return comm;
}

std::unique_ptr<Comm> embedding_comm(MPI_Comm world, const ProcessGrid& grid) {
  const ParallelConfig& config = grid.config;
  if (grid.head_pp_rank == 0) return make_local_comm();
  // Every rank takes part in the split (it is collective); the other stages opt out.
  const bool member = grid.first_stage() || grid.holds_head();
  const int color =
      member ? grid.tp_rank() + config.tp * (grid.cp_rank() + config.cp * grid.dp_rank()) : MPI_UNDEFINED;
  MPI_Comm split = MPI_COMM_NULL;
  MPI_Comm_split(world, color, grid.pp_rank(), &split);
  if (!member) return make_local_comm();
  auto comm = group_comm(split, Traffic::collectives, config, "embedding");
  MPI_Comm_free(&split);
  return comm;
}

}  // namespace

P2pMatching resolve_p2p(P2pMatching p2p, bool share_device) {
#ifdef KOKKOS_ENABLE_CUDA
  if (share_device && p2p == P2pMatching::nccl)
    throw InputError(
        "parallel.p2p = \"nccl\" cannot run with parallel.share_device = true (NCCL refuses two ranks on one GPU): "
        "use \"ordered\" (NCCL's matching over MPI) or \"mpi\"");
  if (p2p == P2pMatching::automatic) return share_device ? P2pMatching::tagged : P2pMatching::nccl;
  return p2p;
#else
  (void)share_device;
  if (p2p == P2pMatching::nccl)
    throw InputError(
        "parallel.p2p = \"nccl\" needs the GPU build (the cuda preset); on a CPU, \"ordered\" runs the pipeline's "
        "messages in NCCL's order over MPI");
  return p2p == P2pMatching::automatic ? P2pMatching::tagged : p2p;
#endif
}

ProcessGrid make_process_grid(MPI_Comm world, const ParallelConfig& requested, ChunkPlacement placement) {
  ParallelConfig config = requested;
  config.p2p = resolve_p2p(requested.p2p, requested.share_device);
  ProcessGrid grid;
  grid.config = config;
  grid.head_pp_rank = head_rank(placement, config.pp);
  MPI_Comm_rank(world, &grid.world_rank);
  MPI_Comm_size(world, &grid.world_size);
  grid.coords = rank_to_coords(grid.world_rank, config);
  grid.hosts = hosts_of_ranks(world);
  // Same call order on every rank: MPI_Comm_split is collective over `world`.
  grid.tp_group = std::make_unique<TimedComm>(axis_comm(world, grid.world_rank, Axis::tp, config));
  grid.cp_group = std::make_unique<TimedComm>(axis_comm(world, grid.world_rank, Axis::cp, config));
  grid.pp_group = axis_comm(world, grid.world_rank, Axis::pp, config);
  grid.dp_cp_group = dp_cp_comm(world, grid);
  grid.embedding_group = embedding_comm(world, grid);
  const bool experts_split = config.ep > 1;
  grid.ep_group = std::make_unique<TimedComm>(experts_split ? expert_comm(world, grid, false) : make_local_comm());
  if (experts_split) grid.expert_dp_group = expert_comm(world, grid, true);
  return grid;
}

std::string describe_rank_layout(const ProcessGrid& grid) {
  const bool cp = grid.cp_size() > 1;  // a column only where it varies
  std::string text = "  rank  host                  tp";
  text += cp ? "  cp  pp  dp\n" : "  pp  dp\n";
  for (int rank = 0; rank < grid.world_size; ++rank) {
    const GridCoords c = rank_to_coords(rank, grid.config);
    char line[160];
    std::snprintf(line, sizeof line, "  %4d  %-20s %3d", rank, grid.hosts[rank].c_str(), c.tp);
    text += line;
    if (cp) std::snprintf(line, sizeof line, " %3d %3d %3d\n", c.cp, c.pp, c.dp);
    else std::snprintf(line, sizeof line, " %3d %3d\n", c.pp, c.dp);
    text += line;
  }
  return text;
}

std::string describe_pipeline_peer(const ProcessGrid& grid, int pipeline_rank) {
  const int world_rank = axis_group(grid.world_rank, Axis::pp, grid.config).at(pipeline_rank);
  return "pipeline rank " + std::to_string(pipeline_rank) + " (world rank " + std::to_string(world_rank) + " on " +
         grid.hosts[world_rank] + ")";
}

}  // namespace trident
