#include "plan/cp_traffic.hpp"

namespace trident {

CpTraffic cp_traffic_per_step(const Deck& deck, const std::vector<StageLayers>& stages, int rank) {
  const int cp = deck.parallel.cp;
  if (cp == 1) return {};
  const ModelConfig& model = deck.model;
  const std::int64_t rows = std::int64_t{deck.schedule.micro_batch_size} * model.seq_len / cp;
  const std::int64_t message = rows * 2 * model.key_value_heads() / deck.parallel.tp * model.head_dim() * 4;
  const int forwards = deck.schedule.recompute == Recompute::full ? 2 : 1;
  const std::int64_t hops_per_layer = forwards * (cp - 1) + (cp - 1) + cp;
  std::int64_t layers = 0;
  for (std::size_t stage = static_cast<std::size_t>(rank); stage < stages.size(); stage += deck.parallel.pp)
    layers += stages[stage].num_layers;
  const std::int64_t hops = hops_per_layer * layers * deck.schedule.microbatches;
  return {hops, hops * message};
}

}  // namespace trident
