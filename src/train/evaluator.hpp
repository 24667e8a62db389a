// The validation loss of [eval] (DESIGN.md "Validation"): eval.batches global batches of held-out
// windows, each of the training's shape (micro_batch_size × microbatches × dp sequences, always
// the first windows of the held-out stream, in order), run forward only through the pipeline on
// the training grid with the forward-only schedule of the training's own, and averaged over their
// tokens. Which windows are evaluated depends on the global batch only, so every grid measures the
// same loss.
#pragma once

#include <string>
#include <vector>

#include "data/batch_windows.hpp"
#include "deck/config.hpp"
#include "grid/process_grid.hpp"
#include "kernels/device.hpp"
#include "model/transformer.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/model_stage.hpp"
#include "schedule/schedule.hpp"
#include "train/step_tokens.hpp"

namespace trident {

class Evaluator {
 public:
  // `options` as the training's executor has them (message size, watchdog, clock).
  Evaluator(const Deck& deck, const Schedule& training, const ProcessGrid& grid, Transformer& model,
            const PipelineExecutor::Options& options);

  // eval.every steps, and after the last step.
  bool due(int step) const;
  // The mean loss per token over the held-out batches; collective over the whole grid.
  double evaluate();
  // "4 batches of 16 windows from eval.path: val.bin (llm.c, uint16), 40960 tokens, every 50 steps".
  std::string describe() const;

 private:
  const Deck& deck_;  // must outlive the evaluator
  const ProcessGrid& grid_;
  BatchWindows windows_;
  PipelineExecutor executor_;
  StepTokens tokens_;
  ModelStage stage_;
};

}  // namespace trident
