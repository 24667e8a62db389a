// The block type that computes each family (its facts: family/family.hpp), and the one switch from
// a deck's family to it. The model (transformer.cpp) and the activation arena are one composition
// over a Family of these.
#pragma once

#include <string_view>
#include <vector>

#include "deck/config.hpp"
#include "family/family.hpp"
#include "model/block.hpp"
#include "model/gpt2_block.hpp"
#include "model/llama_block.hpp"
#include "model/model_chunk.hpp"
#include "model/param_store.hpp"

namespace trident {

struct Gpt2Family {
  using Block = Gpt2Block;
  static constexpr ModelFamily family = ModelFamily::gpt2;
};

struct LlamaFamily {
  using Block = LlamaBlock;
  static constexpr ModelFamily family = ModelFamily::llama;
};

static_assert(TransformerBlock<Gpt2Family::Block> && TransformerBlock<LlamaFamily::Block>);

// `run` called with the Family of `family` (a Gpt2Family{} or LlamaFamily{}).
template <class Run>
decltype(auto) with_family(ModelFamily family, Run&& run) {
  switch (family) {
    case ModelFamily::gpt2: return run(Gpt2Family{});
    case ModelFamily::llama: return run(LlamaFamily{});
  }
  throw std::logic_error("with_family: a ModelFamily without a block type");
}

// Which experts of each mixture ([model.moe]) a rank holds under parallel.ep: rank `rank` of `size`
// holds experts [rank · E / size, (rank + 1) · E / size), under their global names.
struct ExpertShard {
  int rank = 0;
  int size = 1;
  int first(int experts) const { return rank * (experts / size); }
  bool holds(int expert, int experts) const {
    return expert < 0 || (expert >= first(experts) && expert < first(experts) + experts / size);
  }
};

// Adds to `params` (not yet allocated) the tensors `chunks` need, in model order, as the family's
// description gives them (global shapes, TP split, initialisation): the embedding on the first
// chunk (and on the last when the head is tied to it), the position table, the blocks (of a
// mixture, the experts `experts` holds), the final norm and the untied head.
void add_model_parameters(ParamStore& params, const ModelConfig& cfg, const std::vector<ModelChunk>& chunks,
                          ExpertShard experts = {});

}  // namespace trident
