#include "train/stage_work.hpp"

#include "dp/sharded_adamw.hpp"
#include "optim/adamw.hpp"
#include <algorithm>
#include <utility>

#include "common/error.hpp"
#include "kernels/device_graph.hpp"
#include "pipeline/emulated_stage.hpp"
#include "pipeline/graphed_stage.hpp"
#include "pipeline/model_stage.hpp"
#include "pipeline/slowed_stage.hpp"
#include "pipeline/stage_chunks.hpp"
#include "plan/buckets.hpp"

namespace trident {
namespace {

std::unique_ptr<Optimizer> make_optimizer(const Deck& deck, Transformer& model, GradientSync& sync) {
  if (deck.parallel.zero == 1) return std::make_unique<ShardedAdamW>(sync, deck.train);
  return std::make_unique<AdamW>(model.params(), deck.train);
}

// Per chunk of this rank: its layers over those it has in the deck's split.
std::vector<double> emulated_scales(const Schedule& schedule, const std::vector<StageLayers>& partition,
                                    const std::vector<StageLayers>& deck_partition, int pp_rank) {
  const std::vector<ModelChunk> now = stage_chunks(schedule, partition, pp_rank);
  const std::vector<ModelChunk> deck = stage_chunks(schedule, deck_partition, pp_rank);
  std::vector<double> scales;
  for (std::size_t c = 0; c < now.size(); ++c)
    scales.push_back(static_cast<double>(now[c].num_layers) / std::max(deck[c].num_layers, 1));
  return scales;
}

// What the model computes on: the real model, or the emulated actions of the deck's [emulate]
// section. With the model, backward reports each gradient range as final through
// `grads_ready` (data parallelism's hook), which starts reducing it while backward goes on.
std::unique_ptr<StageCompute> make_model_or_emulation(const Deck& deck, Transformer& model, const StepTokens& tokens,
                                                      const Transformer::GradsReadyFn& grads_ready,
                                                      std::vector<double> emulated_scales) {
  if (deck.emulate.enabled) return std::make_unique<EmulatedStage>(deck.emulate, std::move(emulated_scales));
  const float loss_scale = 1.0f / static_cast<float>(deck.tokens_per_step());
  return std::make_unique<ModelStage>(model, tokens.inputs, tokens.targets, tokens.positions, loss_scale,
                                      grads_ready);
}

// The same, its actions recorded and replayed as device graphs under train.cuda_graph, and slowed
// where the test-only TRIDENT_TEST_SLOW_RANK names this rank.
std::unique_ptr<StageCompute> make_stage_compute(const Deck& deck, Transformer& model, const StepTokens& tokens,
                                                 const Transformer::GradsReadyFn& grads_ready, int world_rank,
                                                 std::vector<double> emulated_scales) {
  std::unique_ptr<StageCompute> compute =
      make_model_or_emulation(deck, model, tokens, grads_ready, std::move(emulated_scales));
  if (deck.train.cuda_graph) {
    if (!DeviceGraph::available())
      throw InputError(deck.path + ": train.cuda_graph = true records CUDA graphs, which this CPU build of trident "
                                   "has none of; set train.cuda_graph = false, or run the GPU build");
    compute = std::make_unique<GraphedStage>(std::move(compute));
  }
  if (const std::optional<double> factor = test_slowdown_for(world_rank))
    return std::make_unique<SlowedStage>(std::move(compute), *factor);
  return compute;
}

}  // namespace

StageWork::StageWork(const Deck& deck, const Schedule& schedule, const ProcessGrid& grid,
                     const std::vector<StageLayers>& partition, const std::vector<StageLayers>& deck_partition,
                     const StepTokens& tokens, const PipelineExecutor::Options& options)
    : model(deck.model, deck.schedule.micro_batch_size, deck.train.seed, *grid.tp_group,
            stage_chunks(schedule, partition, grid.pp_rank()), deck.schedule.recompute, deck.train.precision,
            deck.parallel.sequence_parallel, grid.cp_group.get(), grid.ep_group.get()),
      sync(model.params(), *grid.dp_cp_group, bucket_elements(deck.parallel.bucket_mb) * sizeof(float),
           deck.parallel.zero == 1, grid.expert_dp_group.get()),
      grad_norm(sync, grid),
      optimizer(make_optimizer(deck, model, sync)),
      compute(make_stage_compute(deck, model, tokens, sync.hook(), grid.world_rank,
                                 emulated_scales(schedule, partition, deck_partition, grid.pp_rank()))),
      evaluator(deck.eval.enabled ? std::make_unique<Evaluator>(deck, schedule, grid, model, options) : nullptr),
      wte(model.tied_embedding()) {}

}  // namespace trident
