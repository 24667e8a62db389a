// A contiguous piece of the model that one pipeline rank runs: a range of transformer blocks,
// preceded by the embedding on the model's first virtual stage and followed by ln_f, the tied
// head and the loss on its last. A rank holds one chunk per virtual stage it serves (one for
// 1F1B, v for interleaved schedules); a single rank holds the whole model as one chunk.
#pragma once

#include "deck/config.hpp"

namespace trident {

struct ModelChunk {
  int first_layer = 0;
  int num_layers = 0;
  bool embedding = false;  // wte + wpe lookup before the first block
  bool head = false;       // ln_f, logits through the tied wte, cross-entropy

  int end_layer() const { return first_layer + num_layers; }
};

inline ModelChunk whole_model(const ModelConfig& cfg) { return {0, cfg.layers, true, true}; }

}  // namespace trident
