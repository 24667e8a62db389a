// What one rank holds of the model and trains it with: its layers (stage_chunks of the schedule's
// placement), the gradient reduction, the gradient norm, the optimizer, the compute the executor drives and the
// evaluator. All of it depends on the split of the layers, so re-planning that moves layers builds
// it anew (train/trainer.cpp, through a checkpoint) rather than patching each piece.
#pragma once

#include <memory>
#include <vector>

#include "deck/config.hpp"
#include "dp/global_grad_norm.hpp"
#include "dp/gradient_sync.hpp"
#include "grid/process_grid.hpp"
#include "kernels/device.hpp"
#include "model/transformer.hpp"
#include "optim/optimizer.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/stage_compute.hpp"
#include "plan/partition.hpp"
#include "schedule/schedule.hpp"
#include "train/evaluator.hpp"
#include "train/step_tokens.hpp"

namespace trident {

struct StageWork {
  // deck, grid and tokens must outlive this; `options` as the training's executor has them.
  // `deck_partition`: the split the deck gives, which [emulate]'s times are for (an emulated chunk
  // with more or fewer layers in `partition` sleeps in proportion).
  StageWork(const Deck& deck, const Schedule& schedule, const ProcessGrid& grid,
            const std::vector<StageLayers>& partition, const std::vector<StageLayers>& deck_partition,
            const StepTokens& tokens, const PipelineExecutor::Options& options);

  Transformer model;
  GradientSync sync;
  GlobalGradNorm grad_norm;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<StageCompute> compute;
  std::unique_ptr<Evaluator> evaluator;  // null without [eval]
  const ParamTensor* wte;                // this rank's copy of the tied embedding, if any
};

}  // namespace trident
