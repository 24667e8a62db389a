#include "train/checkpoint.hpp"

#include <filesystem>
#include <ostream>
#include <vector>

#include "common/error.hpp"
#include "io/parallel_checkpoint.hpp"
#include "model/gpt.hpp"

namespace trident {

namespace {

constexpr std::int64_t kCheckpointFormatVersion = 2;
const char* const kGroups[] = {"model", "optimizer/m", "optimizer/v"};

// "h.0.attn.c_attn.weight" → "h/0/attn/c_attn/weight" (DESIGN.md: HF key, '.' → '/').
std::string dataset_name(const std::string& hf_name) {
  std::string path = hf_name;
  for (char& c : path)
    if (c == '.') c = '/';
  return path;
}

// Every tensor of the whole model with its global shape, in model order: the datasets of a file.
ParamStore whole_model_layout(const ModelConfig& cfg) {
  ParamStore layout;
  add_gpt_parameters(layout, cfg, {whole_model(cfg)});
  return layout;
}

const ParamTensor* held(const ParamStore& params, const std::string& name) {
  for (const ParamTensor& tensor : params.tensors())
    if (tensor.name == name) return &tensor;
  return nullptr;
}

// Exactly one copy of every element is written and checksummed: the dp = 0 replica's, of a tensor
// every TP rank holds whole tp rank 0's, and of the tied wte the first stage's.
bool writes(const ProcessGrid& grid, const ParamTensor& tensor) {
  return grid.coords.dp == 0 && (tensor.tp_sharded() || grid.coords.tp == 0) &&
         (tensor.name != "wte.weight" || grid.first_stage());
}

// This rank's host copies of its values and AdamW moments (layout of params.values).
struct HostState {
  std::vector<float> values, m, v;
  float* group(int g) { return g == 0 ? values.data() : g == 1 ? m.data() : v.data(); }
};

// The datasets of the file (every group, every tensor) and this rank's boxes of each: those it
// writes, or with `reading` those it needs.
std::vector<TensorSlice> slices(const Deck& deck, const ProcessGrid& grid, const ParamStore& params, HostState& host,
                                bool reading, std::vector<bool>* counted = nullptr) {
  const ParamStore layout = whole_model_layout(deck.model);
  std::vector<TensorSlice> out;
  for (int g = 0; g < 3; ++g) {
    for (const ParamTensor& whole : layout.tensors()) {
      TensorSlice slice;
      slice.path = std::string(kGroups[g]) + "/" + dataset_name(whole.name);
      slice.global_shape = whole.global_shape;
      const ParamTensor* local = held(params, whole.name);
      const bool mine = local && writes(grid, *local);
      if (local && (reading || mine)) {
        slice.local_shape = local->local_shape;
        slice.data = host.group(g) + local->offset;
        for (const ShardBox& box : shard_boxes(*local, params.tp_rank(), params.tp_size()))
          slice.boxes.push_back({box.global_start, box.local_start, box.count});
      }
      if (counted) counted->push_back(mine);
      out.push_back(std::move(slice));
    }
  }
  return out;
}

std::vector<float> to_host(const FloatBuffer& buffer) {
  std::vector<float> out(buffer.extent(0));
  Kokkos::deep_copy(HostFloatBuffer(out.data(), out.size()), buffer);
  return out;
}

}  // namespace

std::string checkpoint_dir(const Deck& deck) {
  const std::filesystem::path dir(deck.checkpoint.dir);
  return (dir.is_absolute() ? dir : std::filesystem::path(deck.output.dir) / dir).string();
}

void save_checkpoint(const Deck& deck, const ProcessGrid& grid, const ParamStore& params, Optimizer& optimizer,
                     int step, std::ostream& log) {
  const std::size_t n = params.total_size();
  FloatBuffer m("checkpoint_m", n), v("checkpoint_v", n);
  optimizer.export_moments(m, v);  // collective over dp under ZeRO-1
  HostState host{to_host(params.values), to_host(m), to_host(v)};
  const ParallelConfig& p = deck.parallel;
  const std::string path = write_checkpoint_collective(
      MPI_COMM_WORLD, checkpoint_dir(deck), step, deck.checkpoint.keep, slices(deck, grid, params, host, false),
      {{"step", std::int64_t{step}},
       {"data_position", std::int64_t{step} * deck.global_batch_sequences()},  // sequences consumed
       {"seed", static_cast<std::int64_t>(deck.train.seed)},
       {"rng", std::string("counter-based (seed, tensor name, element index): no state to save")},
       {"format_version", kCheckpointFormatVersion},
       {"grid", std::to_string(p.tp) + "x" + std::to_string(p.pp) + "x" + std::to_string(p.dp)},
       {"deck", deck.text}});
  if (grid.world_rank == 0) log << "checkpoint " << path << "\n" << std::flush;
}

int resume_from_checkpoint(const Deck& deck, const ProcessGrid& grid, ParamStore& params, Optimizer& optimizer,
                           std::ostream& log) {
  const std::string& resume = deck.checkpoint.resume;
  if (resume == "none") return 0;
  const bool automatic = resume == "auto";
  const std::vector<std::string> candidates =
      automatic ? checkpoint_candidates(checkpoint_dir(deck)) : std::vector<std::string>{resume};
  const bool root = grid.world_rank == 0;
  HostState host{std::vector<float>(params.total_size()), std::vector<float>(params.total_size()),
                 std::vector<float>(params.total_size())};
  std::vector<bool> counted;
  const std::vector<TensorSlice> wanted = slices(deck, grid, params, host, true, &counted);
  std::string problems;
  for (const std::string& path : candidates) {
    try {
      const Attributes attributes = read_checkpoint_collective(MPI_COMM_WORLD, path, wanted, counted);
      const int step = static_cast<int>(attribute_value<std::int64_t>(attributes, "step"));
      Kokkos::deep_copy(params.values, HostFloatBuffer(host.values.data(), host.values.size()));
      FloatBuffer m("resume_m", params.total_size()), v("resume_v", params.total_size());
      Kokkos::deep_copy(m, HostFloatBuffer(host.m.data(), host.m.size()));
      Kokkos::deep_copy(v, HostFloatBuffer(host.v.data(), host.v.size()));
      optimizer.import_moments(m, v);
      if (root) log << "  resume  " << path << " (step " << step << ", written on grid "
                    << attribute_value<std::string>(attributes, "grid") << ")\n";
      return step;
    } catch (const CheckpointError& error) {
      if (!automatic) throw InputError(std::string(error.what()) + "; fix checkpoint.resume or use \"auto\"/\"none\"");
      if (root) log << "  warning: " << error.what() << "; trying the previous checkpoint\n";
      problems += std::string("\n  ") + error.what();
    }
  }
  if (!candidates.empty())
    throw InputError("no valid checkpoint in " + checkpoint_dir(deck) + ":" + problems +
                     "\nremove or repair them, or start fresh with --set checkpoint.resume=none");
  return 0;
}

}  // namespace trident
