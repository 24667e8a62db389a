#include "deck/relations.hpp"

#include <cstdint>
#include <filesystem>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "deck/messages.hpp"
#include "family/family.hpp"

namespace trident {

namespace {

// Counts that the rest of trident holds in an int (ranks, sequences per step).
constexpr std::int64_t kMaxCount = std::numeric_limits<int>::max();

std::vector<int> divisors(int n) {
  std::vector<int> small, large;
  for (int d = 1; std::int64_t{d} * d <= n; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.insert(large.begin(), n / d);
  }
  small.insert(small.end(), large.begin(), large.end());
  return small;
}

// Grouped-query attention and a rotary embedding: whole query heads per kv head, and head
// dimensions in pairs.
void check_heads_shape(const ModelConfig& model, const KeyLocations& where) {
  if (model.heads % model.key_value_heads() != 0) {
    where.fail("model.kv_heads", "model.kv_heads = " + std::to_string(model.key_value_heads()) +
                                     " does not divide model.heads = " + std::to_string(model.heads) +
                                     " (each kv head serves heads / kv_heads query heads); valid kv_heads: " +
                                     join_ints(divisors(model.heads)));
  }
  if (family_of(model).rotary() && model.d_model % model.heads == 0 && model.head_dim() % 2 != 0) {
    where.fail("model.heads", "model.d_model / model.heads = " + std::to_string(model.head_dim()) +
                                  " is odd, but rotary embeddings rotate pairs of dimensions: choose heads so that "
                                  "d_model / heads is even");
  }
}

// `model.family = "llama"` for each family that may untie its head.
std::string families_that_untie() {
  std::string words;
  for (const FamilyDescription& family : families()) {
    if (!family.head_may_untie) continue;
    if (!words.empty()) words += " or ";
    words += "model.family = \"" + std::string(word_of(family.family)) + "\"";
  }
  return words;
}

void check_model_shape(const Deck& deck, const KeyLocations& where) {
  const ModelConfig& model = deck.model;
  const FamilyDescription& family = family_of(model);
  if (!family.head_may_untie && !model.tie_embeddings)
    where.fail("model.tie_embeddings", "model.tie_embeddings = false needs " + families_that_untie() + ": " +
                                           std::string(family.title) + "'s head is tied to its token embedding " +
                                           "(DESIGN.md, Model); set it to true or remove the key");
  if (model.d_model % model.heads != 0) {
    const int below = model.d_model / model.heads * model.heads;
    where.fail("model.heads", "model.heads = " + std::to_string(model.heads) + " does not divide model.d_model = " +
                                  std::to_string(model.d_model) + "; heads must divide d_model (" +
                                  join_ints(divisors(model.d_model)) + "), or make d_model a multiple of " +
                                  std::to_string(model.heads) + " (e.g. " +
                                  (below > 0 ? std::to_string(below) + " or " : "") +
                                  std::to_string(below + model.heads) + ")");
  }
  check_heads_shape(model, where);
}

// A mixture of experts ([model.moe]) routes each token to top_k of its experts in every
// layer_freq-th layer. Every TP rank holds all experts whole (they are replicated, not split), so
// their count and widths need not divide by tp; what the parallel code does not handle yet is
// rejected here rather than trained wrongly.
void check_mixture(const Deck& deck, const KeyLocations& where) {
  const MoeConfig& moe = deck.model.moe;
  if (moe.experts == 0) return;  // dense
  if (moe.top_k > moe.experts) {
    const bool blame_experts = where.is_override("model.moe.experts") && !where.is_override("model.moe.top_k");
    where.fail(blame_experts ? "model.moe.experts" : "model.moe.top_k",
               "model.moe.top_k = " + std::to_string(moe.top_k) + " is more than model.moe.experts = " +
                   std::to_string(moe.experts) + " (each token goes to top_k different experts); valid top_k: 1 to " +
                   std::to_string(moe.experts));
  }
  const int layers = deck.model.layers;
  if (moe.layer_freq > layers) {
    where.fail("model.moe.layer_freq",
               "model.moe.layer_freq = " + std::to_string(moe.layer_freq) + " is more than model.layers = " +
                   std::to_string(layers) +
                   " (layer i is a mixture when i % layer_freq == 0); valid layer_freq: 1 to " +
                   std::to_string(layers));
  }
  if (deck.parallel.sequence_parallel) {
    where.fail("parallel.sequence_parallel",
               "parallel.sequence_parallel = true is not supported with [model.moe] yet (the experts' gradients "
               "would be partial per TP rank); set it to false");
  }
  if (deck.parallel.cp > 1) {
    where.fail("parallel.cp", "parallel.cp = " + std::to_string(deck.parallel.cp) +
                                  ": [model.moe] with context parallelism is not supported yet; set parallel.cp = 1");
  }
}

// Expert parallelism splits the experts evenly over ep of the data-parallel ranks.
void check_expert_split(const Deck& deck, const KeyLocations& where) {
  const int ep = deck.parallel.ep, dp = deck.parallel.dp, experts = deck.model.moe.experts;
  if (ep == 1) return;
  if (experts == 0)
    where.fail("parallel.ep", "parallel.ep = " + std::to_string(ep) +
                                  " splits a mixture of experts, but the model has none: add [model.moe] or set "
                                  "parallel.ep = 1");
  if (dp % ep == 0 && experts % ep == 0) return;
  std::vector<int> valid;
  for (int d : divisors(std::gcd(dp, experts))) valid.push_back(d);
  where.fail("parallel.ep", "parallel.ep = " + std::to_string(ep) + " must divide parallel.dp = " +
                                std::to_string(dp) + " (the expert-parallel ranks are data-parallel ranks) and " +
                                "model.moe.experts = " + std::to_string(experts) + " (each holds experts / ep); " +
                                "valid ep: " + join_ints(valid));
}

// Tensor parallelism gives each rank whole heads, whole kv heads and an equal share of the MLP's
// hidden width; the first width tp does not divide is named with the tp that work.
void check_tensor_split(const Deck& deck, const KeyLocations& where) {
  const ModelConfig& model = deck.model;
  const int tp = deck.parallel.tp;
  // GPT-2's kv heads are its heads and its MLP 4·d_model wide: only its heads can fail.
  const std::vector<std::pair<std::string, int>> split = {{"model.heads", model.heads},
                                                          {"model.kv_heads", model.key_value_heads()},
                                                          {"model.ffn_hidden", model.mlp_hidden()}};
  int common = 0;
  for (const auto& [key, width] : split) common = std::gcd(common, width);
  for (const auto& [key, width] : split) {
    if (width % tp == 0) continue;
    where.fail("parallel.tp", "parallel.tp = " + std::to_string(tp) + " does not divide " + key + " = " +
                                  std::to_string(width) +
                                  " (tensor parallelism splits it evenly across the tp "
                                  "ranks); valid tp: " +
                                  join_ints(divisors(common)));
  }
}

// Context parallelism cuts each sequence into 2·cp chunks of whole positions and runs attention as
// a ring of the tiled kernel's chunk pairs.
void check_context_split(const Deck& deck, const KeyLocations& where) {
  const int cp = deck.parallel.cp, seq_len = deck.model.seq_len;
  if (cp == 1) return;
  if (seq_len % (2 * cp) != 0) {
    std::vector<int> valid;
    for (int d : divisors(seq_len))
      if (seq_len % (2 * d) == 0) valid.push_back(d);
    where.fail("parallel.cp", "parallel.cp = " + std::to_string(cp) + " needs model.seq_len = " +
                                  std::to_string(seq_len) + " to be a multiple of 2 * cp = " + std::to_string(2 * cp) +
                                  " (each CP rank holds two chunks of seq_len / (2 * cp) positions); valid cp: " +
                                  join_ints(valid));
  }
  if (deck.model.attention != AttentionKernel::tiled)
    where.fail("model.attention", "parallel.cp = " + std::to_string(cp) +
                                      " runs ring attention, which the tiled kernel computes; set model.attention = "
                                      "\"tiled\" or parallel.cp = 1");
}

// Sequence parallelism splits the rows each rank holds of a micro-batch (seq_len / cp positions
// per sequence) evenly over the TP group.
void check_sequence_split(const Deck& deck, const KeyLocations& where) {
  const int tp = deck.parallel.tp, cp = deck.parallel.cp, positions = deck.model.seq_len / cp;
  if (!deck.parallel.sequence_parallel) return;
  if (tp == 1)
    where.fail("parallel.sequence_parallel",
               "parallel.sequence_parallel = true needs parallel.tp > 1 (it shards the sequence over the tensor-"
               "parallel ranks); set tp to 2 or more, or sequence_parallel = false");
  if (positions % tp != 0) {
    std::vector<int> valid;
    for (int d : divisors(positions))
      if (d > 1) valid.push_back(d);
    const std::string held = cp > 1 ? "seq_len / cp = " + std::to_string(positions) + " positions per CP rank"
                                     : "model.seq_len = " + std::to_string(positions);
    where.fail("parallel.sequence_parallel",
               "parallel.sequence_parallel = true needs " + held + " to be a multiple of parallel.tp = " +
                   std::to_string(tp) + " (each TP rank holds a tp-th of them); tp dividing it: " + join_ints(valid) +
                   ", or set sequence_parallel = false");
  }
}

void check_parallel(const Deck& deck, const KeyLocations& where) {
  const ParallelConfig& parallel = deck.parallel;
  const int layers = deck.model.layers;
  check_tensor_split(deck, where);
  check_context_split(deck, where);
  check_sequence_split(deck, where);
  const int virtual_stages = deck.schedule.virtual_stages;
  const std::int64_t chunks = std::int64_t{parallel.pp} * virtual_stages;
  if (chunks > layers) {
    const std::string split = virtual_stages > 1
                                  ? " with schedule.virtual_stages = " + std::to_string(virtual_stages)
                                  : std::string();
    where.fail("parallel.pp", "parallel.pp = " + std::to_string(parallel.pp) + split + " needs " +
                                  std::to_string(chunks) + " pipeline chunks of at least one layer each, but " +
                                  "model.layers = " + std::to_string(layers) + "; use pp * virtual_stages <= " +
                                  std::to_string(layers));
  }
  const std::int64_t ranks = std::int64_t{parallel.tp} * parallel.cp * parallel.pp * parallel.dp;
  if (ranks > kMaxCount) {
    where.fail("parallel.dp", "parallel.dp = " + std::to_string(parallel.dp) + " makes tp * cp * pp * dp = " +
                                  std::to_string(ranks) + " ranks, more than " + std::to_string(kMaxCount) +
                                  "; use a smaller grid");
  }
}

// parallel.stage_layers lists layers per virtual stage in model order: pp entries, or
// pp * virtual_stages with chunked schedules (which rank holds which: plan/partition.hpp).
void check_stage_layers(const Deck& deck, const KeyLocations& where) {
  const ParallelConfig& parallel = deck.parallel;
  const std::vector<int>& stages = parallel.stage_layers;
  if (stages.empty()) return;  // uniform or "balanced": the plan module splits any layer count
  const int layers = deck.model.layers;
  const int virtual_stages = deck.schedule.virtual_stages;
  const std::string other_splits = "or write stage_layers = \"balanced\" or leave it out (uniform split)";
  if (deck.schedule.kind == ScheduleKind::automatic && virtual_stages > 1) {
    where.fail("parallel.stage_layers",
               "parallel.stage_layers lists layers per virtual stage, but with schedule.kind = \"auto\" and "
               "schedule.virtual_stages = " + std::to_string(virtual_stages) +
                   " the chunks per rank are auto's choice; set virtual_stages = 1 or name a schedule kind, " +
                   other_splits);
  }
  const std::int64_t expected = std::int64_t{parallel.pp} * virtual_stages;
  if (static_cast<std::int64_t>(stages.size()) != expected) {
    const std::string pp = "parallel.pp = " + std::to_string(parallel.pp);
    const std::string count = virtual_stages == 1
                                  ? pp + "; give one layer count per pipeline stage"
                                  : pp + " x schedule.virtual_stages = " + std::to_string(virtual_stages) + " makes " +
                                        std::to_string(expected) +
                                        " virtual stages; give one layer count per virtual stage in model order "
                                        "(`trident plan` shows which rank holds each)";
    where.fail("parallel.stage_layers", "parallel.stage_layers has " + std::to_string(stages.size()) +
                                            " entries but " + count + ", " + other_splits);
  }
  const std::int64_t total = std::accumulate(stages.begin(), stages.end(), std::int64_t{0});
  if (total != layers) {
    where.fail("parallel.stage_layers", "parallel.stage_layers = [" + join_ints(stages) + "] sums to " +
                                            std::to_string(total) + " layers but model.layers = " +
                                            std::to_string(layers) + "; the entries must add up to " +
                                            std::to_string(layers));
  }
}

// "\"interleaved-1f1b\", \"zb-v\", \"v-half\", \"dualpipev\" or \"auto\"": the kinds that may hold several
// chunks per rank.
// "\"interleaved-1f1b\", ... or \"auto\"": the kinds that take virtual_stages > 1.
std::string kinds_with_chunks_text() {
  std::string text;
  for (std::string_view word : kinds_with_chunks()) text.append("\"").append(word).append("\", ");
  return text.substr(0, text.size() - 2) + " or \"auto\"";
}

void check_schedule(const Deck& deck, const KeyLocations& where) {
  const ScheduleConfig& schedule = deck.schedule;
  const std::int64_t sequences = std::int64_t{schedule.micro_batch_size} * schedule.microbatches * deck.parallel.dp;
  if (sequences > kMaxCount) {
    where.fail("schedule.microbatches", "schedule.microbatches = " + std::to_string(schedule.microbatches) +
                                            " makes the global batch micro_batch_size * microbatches * dp = " +
                                            std::to_string(sequences) + " sequences, more than " +
                                            std::to_string(kMaxCount) + "; use fewer micro-batches");
  }
  // Each kind's chunk rule and micro-batch rules (schedule/registry.hpp); with "auto",
  // virtual_stages is the most chunks per rank that auto may choose.
  const ScheduleType* type = find_schedule_type(schedule.kind);  // none for auto and a file
  if (schedule.virtual_stages > 1 && type != nullptr && type->chunks == ChunkRule::one) {
    where.fail("schedule.virtual_stages",
               "schedule.virtual_stages = " + std::to_string(schedule.virtual_stages) + " needs schedule.kind = " +
                   kinds_with_chunks_text() + " (kind is \"" + word_of(schedule.kind) +
                   "\"); use virtual_stages = 1 or change the kind");
  }
  if (type != nullptr && type->chunks == ChunkRule::two_in_a_v && schedule.virtual_stages != 2) {
    const bool blame_chunks = where.is_override("schedule.virtual_stages") && !where.is_override("schedule.kind");
    where.fail(blame_chunks ? "schedule.virtual_stages" : "schedule.kind",
               "schedule.kind = \"" + word_of(schedule.kind) +
                   "\" places two model chunks per pipeline rank in a V "
                   "and needs schedule.virtual_stages = 2, got " +
                   std::to_string(schedule.virtual_stages) + "; set virtual_stages = 2");
  }
  if (type != nullptr && type->chunks == ChunkRule::two_or_more && schedule.virtual_stages < 2) {
    const bool blame_chunks = where.is_override("schedule.virtual_stages") && !where.is_override("schedule.kind");
    where.fail(blame_chunks ? "schedule.virtual_stages" : "schedule.kind",
               "schedule.kind = \"" + word_of(schedule.kind) +
                   "\" needs schedule.virtual_stages >= 2 (model chunks per pipeline "
                   "rank), got " +
                   std::to_string(schedule.virtual_stages) +
                   "; set virtual_stages = 2 or more, or use kind = \"1f1b\"");
  }
  // A generator's rule on the micro-batches (interleaving's, as in Megatron: micro-batches go round
  // the ranks in groups of pp), checked here too so that the message can name the line.
  const int pp = deck.parallel.pp;
  if (type != nullptr && type->microbatches_in_groups_of_stages && schedule.microbatches % pp != 0) {
    const int below = schedule.microbatches / pp * pp;
    where.fail("schedule.microbatches",
               "schedule.microbatches = " + std::to_string(schedule.microbatches) +
                   " must be a multiple of parallel.pp = " + std::to_string(pp) + " for schedule.kind = \"" +
                   word_of(schedule.kind) + "\"; use " +
                   (below > 0 ? std::to_string(below) + " or " : "") + std::to_string(below + pp) +
                   ", or another kind");
  }
}

// A replayed graph runs none of an action's host code: the actions may not talk to other ranks or
// decide anything on the host from the step's data (pipeline/graphed_stage.hpp).
void check_cuda_graph(const Deck& deck, const KeyLocations& where) {
  if (!deck.train.cuda_graph) return;
  const ParallelConfig& grid = deck.parallel;
  std::string reason;
  if (grid.tp > 1 || grid.pp > 1 || grid.dp > 1 || grid.cp > 1)
    reason = "a grid of one rank (this one is tp " + std::to_string(grid.tp) + " x pp " + std::to_string(grid.pp) +
             " x dp " + std::to_string(grid.dp) + " x cp " + std::to_string(grid.cp) +
             "): the messages inside and between the actions are not recorded yet";
  else if (deck.model.moe.experts > 0)
    reason = "a dense model: [model.moe] reads its routing counts on the host inside each action";
  else if (deck.data.document_mask)
    reason = "data.document_mask = false: packed documents choose attention's tiles on the host per batch";
  else if (deck.emulate.enabled)
    reason = "the model: emulate.enabled = true sleeps on the host instead";
  if (!reason.empty())
    where.fail("train.cuda_graph", "train.cuda_graph = true (record each action once, replay it) needs " + reason +
                                       "; set train.cuda_graph = false");
}

void check_train(const Deck& deck, const KeyLocations& where) {
  if (deck.train.min_lr > deck.train.lr) {
    const char* key = where.is_override("train.lr") ? "train.lr" : "train.min_lr";
    where.fail(key, "train.min_lr = " + format_number(deck.train.min_lr) + " is larger than train.lr = " +
                        format_number(deck.train.lr) + "; min_lr must be in [0, lr]");
  }
  check_cuda_graph(deck, where);
}

// Packed documents are cut at data.eod_token, a token of the vocabulary.
void check_documents(const Deck& deck, const KeyLocations& where) {
  const DataConfig& data = deck.data;
  if (data.document_mask && data.eod_token < 0)
    where.fail("data.document_mask", "data.document_mask = true needs data.eod_token, the token that ends each "
                                     "document (trident-data encode writes it into the deck it prepares); add "
                                     "eod_token = N to [data], or set document_mask = false");
  if (data.eod_token >= deck.model.vocab)
    where.fail("data.eod_token", "data.eod_token = " + std::to_string(data.eod_token) +
                                     " is not a token of the vocabulary (model.vocab = " +
                                     std::to_string(deck.model.vocab) + "); valid: 0 to " +
                                     std::to_string(deck.model.vocab - 1));
}

void check_data(const Deck& deck, const KeyLocations& where) {
  const DataConfig& data = deck.data;
  check_documents(deck, where);
  if (data.kind == DataKind::synthetic) {
    if (data.synthetic_tokens <= deck.model.seq_len) {
      where.fail("data.synthetic_tokens", "data.synthetic_tokens = " + std::to_string(data.synthetic_tokens) +
                                              " must be larger than model.seq_len = " +
                                              std::to_string(deck.model.seq_len) +
                                              " to make one training window; use at least " +
                                              std::to_string(deck.model.seq_len + 1));
    }
    return;
  }
  if (data.paths.empty()) {
    const std::string what = data.kind == DataKind::bin    ? "llm.c token shards (.bin)"
                             : data.kind == DataKind::text ? "text files"
                                                           : "Megatron dataset prefixes (PREFIX.bin + PREFIX.idx)";
    where.fail("data.kind", "data.kind = \"" + word_of(data.kind) + "\" needs data.path, the " + what +
                                " to train on; add path = \"...\" (a path, a glob pattern or an array) to [data]");
  }
  if (data.kind == DataKind::text && deck.model.vocab != 256) {
    where.fail("model.vocab", "model.vocab = " + std::to_string(deck.model.vocab) +
                                  " but data.kind = \"text\" reads bytes; set model.vocab = 256");
  }
}

void check_eval(const Deck& deck, const KeyLocations& where) {
  const EvalConfig& eval = deck.eval;
  if (!eval.enabled) return;
  if (deck.emulate.enabled) {
    where.fail("emulate.enabled",
               "emulate.enabled = true replaces the model with timed sleeps, which have no loss "
               "to validate: remove the [eval] section or set emulate.enabled = false");
  }
  const bool synthetic = deck.data.kind == DataKind::synthetic;
  if (synthetic && !eval.paths.empty()) {
    where.fail("eval.path",
               "eval.path is for data files; with data.kind = \"synthetic\" the held-out windows "
               "continue the generated stream: remove eval.path");
  }
  if (!synthetic && eval.paths.empty()) {
    where.fail("eval.batches", "[eval] needs eval.path, the held-out " + word_of(deck.data.kind) +
                                   " data (same format as data.path) to measure the validation loss on");
  }
}

void check_checkpoint(const Deck& deck, const KeyLocations& where) {
  std::error_code ignored;
  const std::string& resume = deck.checkpoint.resume_file;
  if (deck.checkpoint.resume == CheckpointConfig::Resume::file && !std::filesystem::exists(resume, ignored)) {
    where.fail("checkpoint.resume", "checkpoint.resume: no such checkpoint: " + resume +
                                        "; use \"auto\" (newest in checkpoint.dir), \"none\", or an existing file");
  }
  const std::string& init = deck.checkpoint.init;
  if (init.starts_with(kHfPrefix) && !std::filesystem::is_directory(init.substr(kHfPrefix.size()), ignored)) {
    where.fail("checkpoint.init", "checkpoint.init: no such folder: " + init.substr(kHfPrefix.size()) +
                                      "; \"hf:DIR\" names a Hugging Face model folder (config.json and its weights)");
  }
  if (!init.empty() && !init.starts_with(kHfPrefix) && !std::filesystem::is_regular_file(init, ignored)) {
    where.fail("checkpoint.init", "checkpoint.init: no such checkpoint: " + init +
                                      "; give a trident checkpoint (trident-post import writes one) or \"hf:DIR\"");
  }
}

}  // namespace

void check_relations(const Deck& deck, const KeyLocations& where) {
  check_model_shape(deck, where);
  check_mixture(deck, where);
  check_expert_split(deck, where);
  check_parallel(deck, where);
  check_schedule(deck, where);
  check_stage_layers(deck, where);
  check_train(deck, where);
  check_data(deck, where);
  check_eval(deck, where);
  check_checkpoint(deck, where);
}

}  // namespace trident
