#include "plan/ep_traffic.hpp"

namespace trident {

EpTraffic ep_traffic_per_step(const Deck& deck, const std::vector<StageLayers>& stages, int rank) {
  const int ep = deck.parallel.ep;
  if (ep == 1) return {};
  const ModelConfig& model = deck.model;
  const std::int64_t assigned = std::int64_t{deck.schedule.micro_batch_size} * model.seq_len * model.moe.top_k;
  const std::int64_t leaving = assigned * (ep - 1) / ep * model.d_model * 4;  // bytes of one way's rows
  const std::int64_t counts = std::int64_t{model.moe.experts} / ep * (ep - 1) * 4;
  const int forwards = deck.schedule.recompute == Recompute::full ? 2 : 1;
  std::int64_t mixtures = 0;
  for (std::size_t stage = static_cast<std::size_t>(rank); stage < stages.size(); stage += deck.parallel.pp)
    for (int layer = stages[stage].first_layer; layer < stages[stage].end_layer(); ++layer)
      mixtures += model.moe_layer(layer) ? 1 : 0;
  const std::int64_t per_layer_exchanges = forwards * 3 + 2;
  const std::int64_t per_layer_bytes = forwards * (counts + 2 * leaving) + 2 * leaving;
  const std::int64_t times = mixtures * deck.schedule.microbatches;
  return {times * per_layer_exchanges, times * per_layer_bytes};
}

}  // namespace trident
