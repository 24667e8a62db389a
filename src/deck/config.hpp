// Typed configuration: what the deck parser produces and every other module consumes.
// Nothing outside src/deck parses TOML; modules receive these structs, with each fixed choice an
// enum (deck/choices.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deck/choices.hpp"
#include "schedule/schedule.hpp"

namespace trident {

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  // Context parallelism: each sequence cut into 2·cp chunks, rank r of a cp group holding chunks r
  // and 2·cp − 1 − r, attention run as a ring over the group (model/ring_attention.hpp).
  int cp = 1;
  // Expert parallelism ([model.moe]): the experts split evenly over ep ranks carved from the
  // data-parallel ones (dp % ep == 0; consecutive dp coordinates form a group), tokens sent to their
  // experts' ranks and back by all-to-all (model/moe_mlp.hpp). Not a grid axis: the world is tp·cp·pp·dp.
  int ep = 1;
  AxisOrder order = {Axis::tp, Axis::cp, Axis::dp, Axis::pp};  // fastest-varying axis first
  // Layers per virtual stage (pp × schedule's chunks entries, model order). Empty = uniform;
  // stage_layers_balanced = true: balanced for the embedding on the first and the head + loss on
  // the last stage (deck: stage_layers = "balanced").
  std::vector<int> stage_layers;
  bool stage_layers_balanced = false;
  // Megatron's sequence parallelism: the residual stream (norms, residual adds) holds B·T/tp rows
  // per TP rank, with all-gather / reduce-scatter at the tensor-parallel region's borders.
  bool sequence_parallel = false;
  int zero = 0;                    // 1 = ZeRO-1: AdamW state sharded across the dp group
  double bucket_mb = 25.0;         // data-parallel gradient all-reduce bucket size (MiB)
  P2pMatching p2p = P2pMatching::automatic;  // resolved by make_process_grid
  // GPU build: the ranks of a node may outnumber its GPUs and share them (rank r takes GPU r mod G);
  // every collective and pipeline message then goes over MPI through host copies (NCCL refuses two
  // ranks on one GPU). A test mode: a one-GPU machine runs a grid. The CPU build runs as without it.
  bool share_device = false;

  int world_size() const { return tp * cp * pp * dp; }
};

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int microbatches = 1;       // m: micro-batches per step on each data-parallel replica
  int micro_batch_size = 1;   // sequences per micro-batch
  int virtual_stages = 1;     // v: model chunks per pipeline rank (interleaved-1f1b >= 2, zb-v and v-half 2)
  Recompute recompute = Recompute::none;
  // Watchdog: the longest one blocking wait may last before the job aborts (exit 4), naming what
  // it waited for: a pipeline message (the executor's own poll) and every wait marked with
  // common/watchdog's BlockedIn (the Comm collectives and request waits, the trainer's barriers,
  // event gather and reductions of each step). Not checkpoint I/O (checkpoint.timeout_s), nor the
  // set-up's and re-planning's unmarked MPI calls. DESIGN.md "Deck" and "Schedules are data".
  double timeout_s = 300.0;
  // auto: the most activation memory a rank may hold, in micro-batches of a whole stage
  // (0 = what 1F1B holds on stage 0, i.e. p).
  double auto_memory_limit = 0.0;
  // v-half: the activations a rank may hold, as a fraction of 1F1B's peak (p micro-batches of a
  // whole stage); zb-v holds all of it.
  double activation_budget = 0.5;
  // schedule.replan: "off", "once" (after step 2, the first without first-touch costs) or
  // "every N" (after every N-th step): re-plan from the measured costs (plan/replan.hpp).
  enum class Replan { off, once, every } replan = Replan::off;
  int replan_every = 0;  // N of "every N"
  // schedule.file: the action lists kind "file" runs (schedule/csv_schedule.hpp), and the schedule
  // read from it when the deck is loaded (deck/schedule_file.hpp).
  std::string file;
  std::shared_ptr<const Schedule> from_file;
};

// Where the deck's schedule places each rank's chunks: its kind's, or the file's.
inline ChunkPlacement chunk_placement(const ScheduleConfig& schedule) {
  return schedule.kind == ScheduleKind::file && schedule.from_file ? schedule.from_file->placement
                                                                   : chunk_placement(schedule.kind);
}

// [emulate]: every pipeline action sleeps for a fixed time instead of computing, while the
// messages between stages are real, to study schedules at many ranks on a small machine.
struct EmulateConfig {
  bool enabled = false;
  double forward_ms = 10.0;
  double backward_ms = 20.0;     // B (input + weight gradient)
  double input_grad_ms = 10.0;   // I of zero-bubble schedules
  double weight_grad_ms = 10.0;  // W of zero-bubble schedules
};

struct TrainConfig {
  int steps = 10;
  std::uint64_t seed = 1234;
  double lr = 1e-3;
  double min_lr = 1e-4;
  int warmup_steps = 0;
  LrDecay decay = LrDecay::cosine;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied to 2-D weights only
  double grad_clip = 1.0;     // global-norm clip; 0 = off
  MatmulPrecision precision = MatmulPrecision::automatic;
  bool cuda_graph = false;  // each action recorded once as a CUDA graph and replayed (pipeline/graphed_stage.hpp)
};

struct DataConfig {
  DataKind kind = DataKind::synthetic;
  // data.path: bin/text files or Megatron prefixes, as the deck lists them (a string or an array;
  // relative paths: relative to the deck); `paths` holds them resolved and, for files, glob
  // patterns expanded, each pattern's matches sorted (deck/token_paths.hpp).
  std::vector<std::string> paths;
  std::int64_t synthetic_tokens = 1 << 20;  // synthetic: length of the generated token stream
  bool shuffle = false;                     // a permutation of the windows per epoch (data/window_order.hpp)
  // Packed documents: attention stops at each document's end and positions restart at its start
  // (kernels/document_mask.hpp); eod_token closes each document (-1: not given; the mask needs it).
  bool document_mask = false;
  std::int32_t eod_token = -1;
};

// The end-of-document token the step's batches are cut at, or -1 when documents are not masked.
inline std::int32_t eod_token(const DataConfig& data) { return data.document_mask ? data.eod_token : -1; }

// [eval]: a validation loss over held-out windows, forward only, on the training grid.
struct EvalConfig {
  bool enabled = false;            // the deck has an [eval] section
  std::vector<std::string> paths;  // eval.path, same rules as data.path; none for synthetic data
  int every = 0;                   // evaluate every k steps (0: only after the last step)
  int batches = 4;                 // global batches (of the training's shape) per evaluation
};

struct CheckpointConfig {
  std::string dir = "checkpoints";  // relative to output.dir
  int every = 0;                     // 0 = only at the end
  int keep = 2;
  CheckpointFailure on_failure = CheckpointFailure::abort;
  // Training goes on while a background thread writes the checkpoint's host copy (train/checkpoint_saver.hpp).
  bool async = false;
  // The longest a checkpoint's collective file I/O may take before the watchdog ends the job (a
  // writer stopped or cut off); separate from schedule.timeout_s since a large checkpoint is slow.
  double timeout_s = 600.0;
  // checkpoint.resume: "auto" (the newest in dir), "none", or a file's path (kept in resume_file,
  // relative paths resolved against the deck's directory).
  enum class Resume { newest, none, file } resume = Resume::newest;
  std::string resume_file;
  // checkpoint.init: the weights a run starts from when it resumes nothing: "" (initialised from
  // train.seed), a trident checkpoint's path (its /model only) or kHfPrefix + a Hugging Face
  // model folder. Paths resolved against the deck's directory.
  std::string init;
};
inline constexpr std::string_view kHfPrefix = "hf:";

struct OutputConfig {
  std::string dir = "runs/tiny";  // run directory; relative paths: relative to the working directory
  int log_every = 1;               // progress line every k steps (and always the first and last)
};

struct Deck {
  ModelConfig model;
  ParallelConfig parallel;
  ScheduleConfig schedule;
  TrainConfig train;
  DataConfig data;
  EvalConfig eval;
  CheckpointConfig checkpoint;
  OutputConfig output;
  EmulateConfig emulate;

  std::string path;  // the file it was read from
  std::string text;  // the file's text with overrides noted, recorded in run outputs

  // Global batch in sequences: micro_batch_size × microbatches × dp.
  int global_batch_sequences() const {
    return schedule.micro_batch_size * schedule.microbatches * parallel.dp;
  }
  std::int64_t tokens_per_step() const {
    return static_cast<std::int64_t>(global_batch_sequences()) * model.seq_len;
  }
};

}  // namespace trident
