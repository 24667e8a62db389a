#include "train/checkpoint.hpp"

#include <algorithm>
#include <filesystem>
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

void save_model_checkpoint(const Deck& deck, const ProcessGrid& grid, const ParamStore& params, int step,
                           std::ostream& log) {
  const bool writer = grid.world_rank == 0;
  std::vector<NamedTensor> tensors;
  std::vector<float> whole;
  for (const ParamTensor& tensor : params.tensors()) {
    gather_full_tensor(tensor, params.values, *grid.tp, whole);  // collective over the tp group
    if (writer) tensors.push_back({tensor.name, tensor.global_shape, whole});
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
