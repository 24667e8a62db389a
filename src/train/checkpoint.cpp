#include "train/checkpoint.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <numeric>
#include <ostream>

#include "io/checkpoint_writer.hpp"

namespace trident {

namespace {

constexpr std::int64_t kCheckpointFormatVersion = 1;

// Deletes all but the newest `keep` step_*.h5 files in `dir`.
void prune_checkpoints(const std::filesystem::path& dir, int keep) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("step_") && name.ends_with(".h5")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // zero-padded step numbers sort by name
  for (std::size_t i = 0; i + keep < files.size(); ++i) std::filesystem::remove(files[i]);
}

}  // namespace

std::string checkpoint_dir(const Deck& deck) {
  const std::filesystem::path dir(deck.checkpoint.dir);
  return (dir.is_absolute() ? dir : std::filesystem::path(deck.output.dir) / dir).string();
}

void save_model_checkpoint(const Deck& deck, const ProcessGrid& grid, const ParamStore& params,
                           const std::vector<ParamStore>& stage_layouts, int step, std::ostream& log) {
  const bool writer = grid.world_rank == 0;
  std::vector<NamedTensor> tensors;
  std::vector<float> whole;
  // Replicas along dp hold identical values: the dp = 0 replica sends its stages' tensors.
  if (grid.coords.dp == 0) {
    for (int stage = 0; stage < grid.config.pp; ++stage) {
      int index = 0;
      for (const ParamTensor& layout : stage_layouts[stage].tensors()) {
        // The last stage's tied wte is the first stage's, and stage 0 writes it.
        if (stage > 0 && layout.name == "wte.weight") continue;
        const int tag = index++;
        if (grid.coords.pp == stage) {
          gather_full_tensor(params.find(layout.name), params.values, *grid.tp, whole);  // collective over tp
          if (stage > 0 && grid.coords.tp == 0) {
            FloatBuffer message("checkpoint_tensor", whole.size());
            Kokkos::deep_copy(message, HostFloatBuffer(whole.data(), whole.size()));
            grid.pp->send_async(message.data(), whole.size(), 0, tag)->wait();
          }
        }
        if (writer) {
          if (stage > 0) {
            FloatBuffer message("checkpoint_tensor", static_cast<std::size_t>(std::accumulate(layout.global_shape.begin(), layout.global_shape.end(), std::int64_t{1}, std::multiplies<>())));
            grid.pp->recv_async(message.data(), message.extent(0), stage, tag)->wait();
            whole.resize(message.extent(0));
            Kokkos::deep_copy(HostFloatBuffer(whole.data(), whole.size()), message);
          }
          tensors.push_back({layout.name, layout.global_shape, whole});
        }
      }
    }
  }
  if (writer) {
    const std::string dir = checkpoint_dir(deck);
    const ParallelConfig& p = deck.parallel;
    const std::string path = write_checkpoint(
        dir, step, tensors,
        {{"step", std::int64_t{step}},
         {"seed", static_cast<std::int64_t>(deck.train.seed)},
         {"format_version", kCheckpointFormatVersion},
         {"grid", std::to_string(p.tp) + "x" + std::to_string(p.pp) + "x" + std::to_string(p.dp)},
         {"deck", deck.text}});
    prune_checkpoints(dir, deck.checkpoint.keep);
    log << "checkpoint " << path << "\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);  // the file is committed before any rank goes on
}

}  // namespace trident
