#include "train/checkpoint.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <vector>

#include "comm/timed_comm.hpp"
#include "common/error.hpp"
#include "io/checkpoint_header.hpp"
#include "io/parallel_checkpoint.hpp"
#include "io/staged_checkpoint.hpp"
#include "model/families.hpp"
#include "model/transformer.hpp"
#include "train/hf_init.hpp"

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
  add_model_parameters(layout, cfg, {whole_model(cfg)});
  return layout;
}

// Exactly one copy of every element is written and checksummed: the first replica's (dp = cp = 0; of
// an expert under expert parallelism the first replica holding it, dp < ep), of a tensor every TP
// rank holds whole tp rank 0's, and of the tied wte the first stage's.
bool writes(const ProcessGrid& grid, const ParamTensor& tensor) {
  const bool replica = tensor.expert >= 0 ? grid.dp_rank() < grid.ep_size() && grid.cp_rank() == 0
                                          : grid.first_replica();
  return replica && (tensor.tp_sharded() || grid.tp_rank() == 0) &&
         (!is_token_embedding(tensor.name) || grid.first_stage());
}

// Host views of this rank's values and AdamW moments (layout of params.values): the buffers
// themselves where host and device memory are one (the CPU build), else host copies.
struct HostState {
  HostFloatBuffer values, m, v;
  float* group(int g) { return g == 0 ? values.data() : g == 1 ? m.data() : v.data(); }
};

HostFloatBuffer host_view(const FloatBuffer& buffer) {
  return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buffer);
}

// The datasets of the file (every group, every tensor) and this rank's boxes of each: those it
// writes, or with `reading` those it needs.
// The model's alone with `model_only` (checkpoint.init).
std::vector<TensorSlice> slices(const Deck& deck, const ProcessGrid& grid, const ParamStore& params, HostState& host,
                                bool reading, std::vector<bool>* counted = nullptr, bool model_only = false) {
  const ParamStore layout = whole_model_layout(deck.model);
  std::vector<TensorSlice> out;
  for (int g = 0; g < (model_only ? 1 : 3); ++g) {
    for (const ParamTensor& whole : layout.tensors()) {
      TensorSlice slice;
      slice.path = std::string(kGroups[g]) + "/" + dataset_name(whole.name);
      slice.global_shape = whole.global_shape;
      const ParamTensor* local = params.try_find(whole.name);
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

// "(498.3 MB in 1.92 s, 259.5 MB/s)": what benchmarks and users read off the log.
std::string transfer_summary(const std::string& path, double seconds) {
  const double megabytes = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  char text[96];
  std::snprintf(text, sizeof text, "(%.1f MB in %.2f s, %.1f MB/s)", megabytes, seconds, megabytes / seconds);
  return text;
}

// A warning when the checkpoint's run read other data (older checkpoints record none).
void check_data_position(const CheckpointHeader& header, const DataPosition& data, std::ostream& log) {
  if (!header.data_windows) return;
  if (*header.data_windows == data.windows && header.data_shuffled == data.shuffled) return;
  const auto describe = [](std::int64_t n, bool shuffle) {
    return std::to_string(n) + (shuffle ? " shuffled" : "") + " windows";
  };
  log << "  warning: the checkpoint's run read " << describe(*header.data_windows, header.data_shuffled)
      << ", this run reads " << describe(data.windows, data.shuffled)
      << " (data.path, data.shuffle or model.seq_len changed): it goes on "
      << "from the same sequence count, not from the windows the interrupted run would have read next\n";
}

// The root attributes of a checkpoint file (DESIGN.md "Checkpoint").
Attributes checkpoint_attributes(const Deck& deck, int step, const DataPosition& data) {
  const ParallelConfig& p = deck.parallel;
  const std::int64_t consumed = std::int64_t{step} * deck.global_batch_sequences();
  return {{"step", std::int64_t{step}},
          {"data_position", consumed},  // sequences
          {"data_windows", data.windows},
          {"data_shuffle", std::int64_t{data.shuffled ? 1 : 0}},
          {"data_epoch", consumed / data.windows},  // of the next sequence
          {"seed", static_cast<std::int64_t>(deck.train.seed)},
          {"rng", std::string("counter-based (seed, tensor name, element index): no state to save")},
          {"format_version", kCheckpointFormatVersion},
          {"grid", std::to_string(p.tp) + "x" + (p.cp > 1 ? std::to_string(p.cp) + "x" : "") + std::to_string(p.pp) +
                       "x" + std::to_string(p.dp)},
          {"model_family", word_of(deck.model.family)},
          {"deck", deck.text}};
}

// checkpoint.init's weights into params (the moments stay zero): a trident checkpoint's /model,
// its checksums verified, or with kHfPrefix a Hugging Face folder's safetensors (train/hf_init).
void load_initial_weights(const Deck& deck, const ProcessGrid& grid, ParamStore& params, std::ostream& log) {
  const std::string& init = deck.checkpoint.init;
  if (init.empty()) return;
  const double start = MPI_Wtime();
  HostState host{Kokkos::create_mirror_view(params.values), {}, {}};
  std::vector<bool> counted;
  std::vector<TensorSlice> wanted = slices(deck, grid, params, host, true, &counted, true);
  std::string source;
  if (init.starts_with(kHfPrefix)) {
    source = read_hf_folder(init.substr(kHfPrefix.size()), deck.model, wanted);
  } else {
    try {
      const CheckpointHeader header =
          checkpoint_header(read_checkpoint_collective(MPI_COMM_WORLD, init, wanted, counted), init);
      source = "the model of step " + std::to_string(header.step) + ", written on grid " + header.grid;
    } catch (const CheckpointError& error) {
      throw InputError(std::string(error.what()) + "; fix checkpoint.init");
    }
  }
  Kokkos::deep_copy(params.values, host.values);
  params.refresh_bf16_copy();
  if (grid.world_rank == 0)
    log << "  init    " << init << " (" << source << ", read in " << std::fixed << std::setprecision(2)
        << MPI_Wtime() - start << std::defaultfloat << " s): AdamW starts at zero\n";
}

// Runs a collective step of writing a checkpoint. It fails before anything is committed, so what
// is on disk stays as it was, and the message says so.
template <typename Step>
auto checkpoint_write_step(Step&& step) -> decltype(step()) {
  try {
    return step();
  } catch (const CheckpointError& error) {
    throw CheckpointWriteError(std::string(error.what()) + "; `latest` and the previous checkpoints are untouched");
  }
}

}  // namespace

bool writes_checkpoint_data(const ProcessGrid& grid, const ParamStore& params) {
  for (const ParamTensor& tensor : params.tensors())
    if (writes(grid, tensor)) return true;
  return false;
}

std::int64_t checkpoint_bytes(const Deck& deck) {
  const ParamStore layout = whole_model_layout(deck.model);
  std::int64_t elements = 0;
  for (const ParamTensor& tensor : layout.tensors()) elements += static_cast<std::int64_t>(tensor.size);
  const std::int64_t groups = std::size(kGroups);
  return checkpoint_file_bound(groups * elements * static_cast<std::int64_t>(sizeof(float)),
                               groups * static_cast<std::int64_t>(layout.tensors().size()),
                               static_cast<std::int64_t>(deck.text.size()) + 1024);
}

std::string checkpoint_dir(const Deck& deck) {
  const std::filesystem::path dir(deck.checkpoint.dir);
  return (dir.is_absolute() ? dir : std::filesystem::path(deck.output.dir) / dir).string();
}

std::int64_t save_checkpoint(const Deck& deck, const ProcessGrid& grid, const ParamStore& params,
                             Optimizer& optimizer, int step, const DataPosition& data, std::ostream& log) {
  const double start = MPI_Wtime();
  const Optimizer::Moments moments = optimizer.full_moments();  // collective over dp under ZeRO-1
  HostState host{host_view(params.values), host_view(moments.m), host_view(moments.v)};
  const std::vector<TensorSlice> mine = slices(deck, grid, params, host, false);
  const std::string path = checkpoint_write_step([&] {
    return write_checkpoint_collective(MPI_COMM_WORLD, checkpoint_dir(deck), step, deck.checkpoint.keep, mine,
                                       checkpoint_attributes(deck, step, data));
  });
  if (grid.world_rank == 0) log << "checkpoint " << path << " " << transfer_summary(path, MPI_Wtime() - start) << "\n" << std::flush;
  std::int64_t elements = 0;
  for (const TensorSlice& slice : mine) elements += slice_elements(slice);
  return elements * static_cast<std::int64_t>(sizeof(float));
}

namespace {

// TRIDENT_TEST_SLOW_CHECKPOINT_WRITE=STEP:SECONDS (tests only, DESIGN.md "Checkpoint"): the
// background write of step STEP's checkpoint pauses that long after its first dataset, so that a
// test can kill a rank inside it. 0 for other steps and without the variable.
double test_write_pause_s(int step) {
  const char* text = std::getenv("TRIDENT_TEST_SLOW_CHECKPOINT_WRITE");
  if (text == nullptr || *text == '\0') return 0.0;
  char* end = nullptr;
  const long slowed_step = std::strtol(text, &end, 10);
  double seconds = -1.0;
  if (*end == ':') seconds = std::strtod(end + 1, &end);
  if (*end != '\0' || !(seconds >= 0.0))
    throw InputError(std::string("TRIDENT_TEST_SLOW_CHECKPOINT_WRITE=") + text + ": expected STEP:SECONDS, e.g. 4:30");
  return slowed_step == step ? seconds : 0.0;
}

HostFloatBuffer host_copy(const FloatBuffer& buffer, HostFloatBuffer copy) {
  if (copy.extent(0) != buffer.extent(0))
    copy = HostFloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, "checkpoint copy"), buffer.extent(0));
  Kokkos::deep_copy(copy, buffer);
  return copy;
}

// The background write gives way to training where both want a core (Linux's nice is per thread).
void lower_this_threads_priority() {
  constexpr int kNice = 10;
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kNice);  // best effort: a failure changes nothing
}

}  // namespace

struct BackgroundSave::Impl {
  HostState host;
  StagedCheckpoint staged;
  StagedWrite written;
};

BackgroundSave::BackgroundSave(const Deck& deck, const ProcessGrid& grid, const ParamStore& params,
                               Optimizer& optimizer, int step, const DataPosition& data, SaveBuffers buffers)
    : impl_(std::make_unique<Impl>()), step_(step), started_(MPI_Wtime()) {
  const double pause_s = test_write_pause_s(step);
  const Optimizer::Moments moments = optimizer.full_moments();  // collective over dp under ZeRO-1
  if (writes_checkpoint_data(grid, params)) {
    impl_->host = HostState{host_copy(params.values, std::move(buffers.values)),
                            host_copy(moments.m, std::move(buffers.m)), host_copy(moments.v, std::move(buffers.v))};
    bytes_copied_ = static_cast<std::int64_t>(sizeof(float)) * static_cast<std::int64_t>(3 * params.values.extent(0));
  } else {  // a replica that writes nothing copies nothing: its slices have no boxes
    impl_->host = HostState{std::move(buffers.values), std::move(buffers.m), std::move(buffers.v)};
  }
  impl_->staged = checkpoint_write_step([&] {
    return create_staged_checkpoint(MPI_COMM_WORLD, checkpoint_dir(deck), step, deck.checkpoint.keep,
                                    slices(deck, grid, params, impl_->host, false),
                                    checkpoint_attributes(deck, step, data));
  });
  copied_s_ = steady_seconds();
  writer_ = std::thread([this, pause_s] {
    lower_this_threads_priority();
    write_start_s_ = steady_seconds();
    impl_->written = write_staged_data(impl_->staged, pause_s);
    write_end_s_ = steady_seconds();
    written_here_.store(true);
  });
  blocked_s_ = MPI_Wtime() - started_;
}

std::int64_t BackgroundSave::bytes_written() const { return impl_->written.bytes; }

SaveBuffers BackgroundSave::release_buffers() {
  if (writer_.joinable()) writer_.join();
  return {std::move(impl_->host.values), std::move(impl_->host.m), std::move(impl_->host.v)};
}

BackgroundSave::~BackgroundSave() {
  if (writer_.joinable()) writer_.join();
}

void BackgroundSave::commit(std::ostream& log) {
  const double waiting_from = MPI_Wtime();
  writer_.join();
  const std::string path =
      checkpoint_write_step([&] { return commit_staged_checkpoint(MPI_COMM_WORLD, impl_->staged, impl_->written); });
  blocked_s_ += MPI_Wtime() - waiting_from;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    log << "checkpoint " << path << " " << transfer_summary(path, MPI_Wtime() - started_)
        << " in the background; training blocked " << std::fixed << std::setprecision(2) << blocked_s_
        << std::defaultfloat << " s\n"
        << std::flush;
}

int resume_from_checkpoint(const Deck& deck, const ProcessGrid& grid, ParamStore& params, Optimizer& optimizer,
                           const DataPosition& data, std::ostream& log) {
  if (deck.checkpoint.resume == CheckpointConfig::Resume::none) {
    load_initial_weights(deck, grid, params, log);
    return 0;
  }
  const bool automatic = deck.checkpoint.resume == CheckpointConfig::Resume::newest;
  const std::vector<std::string> candidates = automatic ? checkpoint_candidates(checkpoint_dir(deck))
                                                        : std::vector<std::string>{deck.checkpoint.resume_file};
  const bool root = grid.world_rank == 0;
  // Read straight into the parameters and the moments (on the CPU build, no copies): a file that
  // fails verification is followed by another load or by the run refusing to start.
  const Optimizer::Moments moments = optimizer.full_moments();
  HostState host{Kokkos::create_mirror_view(params.values), Kokkos::create_mirror_view(moments.m),
                 Kokkos::create_mirror_view(moments.v)};
  std::vector<bool> counted;
  const std::vector<TensorSlice> wanted = slices(deck, grid, params, host, true, &counted);
  std::string problems;
  for (const std::string& path : candidates) {
    try {
      const double start = MPI_Wtime();
      const CheckpointHeader header =
          checkpoint_header(read_checkpoint_collective(MPI_COMM_WORLD, path, wanted, counted), path);
      Kokkos::deep_copy(params.values, host.values);
      params.refresh_bf16_copy();
      Kokkos::deep_copy(moments.m, host.m);
      Kokkos::deep_copy(moments.v, host.v);
      optimizer.import_moments(moments);
      if (root) {
        log << "  resume  " << path << " (step " << header.step << ", written on grid " << header.grid << ") "
            << transfer_summary(path, MPI_Wtime() - start) << "\n";
        check_data_position(header, data, log);
      }
      return header.step;
    } catch (const CheckpointError& error) {
      if (!automatic) throw InputError(std::string(error.what()) + "; fix checkpoint.resume or use \"auto\"/\"none\"");
      if (root) log << "  warning: " << error.what() << "; trying the previous checkpoint\n";
      problems += std::string("\n  ") + error.what();
    }
  }
  if (!candidates.empty())
    throw InputError("no valid checkpoint in " + checkpoint_dir(deck) + ":" + problems +
                     "\nremove or repair them, or start fresh with --set checkpoint.resume=none");
  load_initial_weights(deck, grid, params, log);
  return 0;
}

}  // namespace trident
