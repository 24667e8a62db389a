#include "plan/rebalance.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trident {
namespace {

using Field = double ActionCosts::Stage::*;
constexpr Field kFields[] = {&ActionCosts::Stage::forward, &ActionCosts::Stage::backward,
                             &ActionCosts::Stage::input_grad, &ActionCosts::Stage::weight_grad};

}  // namespace

LayerCosts fit_layer_costs(const std::vector<StageLayers>& partition, const ActionCosts& measured) {
  if (partition.size() < 2 || partition.size() != measured.per_virtual_stage.size())
    throw std::invalid_argument("fit_layer_costs: needs one measured entry per virtual stage, two or more");
  const std::size_t body = partition.size() - 1;  // every virtual stage but the last
  double total_layers = 0.0;
  for (std::size_t vs = 0; vs < body; ++vs) total_layers += partition[vs].num_layers;
  const double mean_layers = total_layers / static_cast<double>(body);
  double layer_spread = 0.0;
  for (std::size_t vs = 0; vs < body; ++vs) layer_spread += std::pow(partition[vs].num_layers - mean_layers, 2);
  LayerCosts fit;
  for (const Field field : kFields) {
    double total_time = 0.0, covariance = 0.0;
    for (std::size_t vs = 0; vs < body; ++vs) total_time += measured.per_virtual_stage[vs].*field;
    const double mean_time = total_time / static_cast<double>(body);
    for (std::size_t vs = 0; vs < body; ++vs)
      covariance += (partition[vs].num_layers - mean_layers) * (measured.per_virtual_stage[vs].*field - mean_time);
    const double slope = layer_spread > 0.0 ? covariance / layer_spread : 0.0;
    fit.layer.*field = slope > 0.0 ? slope : total_time / total_layers;
    fit.fixed.*field = slope > 0.0 ? std::max(0.0, mean_time - slope * mean_layers) : 0.0;
    fit.head.*field = std::max(0.0, measured.per_virtual_stage.back().*field - fit.fixed.*field -
                                        partition.back().num_layers * fit.layer.*field);
  }
  return fit;
}

std::vector<StageLayers> measured_balanced_partition(const LayerCosts& fit, int layers, int pieces,
                                                     const std::vector<double>& slowness) {
  const double fixed = fit.fixed.forward + fit.fixed.backward;
  const double layer = fit.layer.forward + fit.layer.backward;
  const double head = fit.head.forward + fit.head.backward;
  if (std::all_of(slowness.begin(), slowness.end(), [](double s) { return s == 1.0; }))
    return stages_from_counts(balanced_layer_counts(layers, pieces, 0.0, layer > 0.0 ? head / layer : 0.0));
  // Layers are alike, so giving each next layer to the stage that would end soonest with it
  // minimises the slowest stage (identical jobs on machines of different speeds).
  const auto time_with = [&](int stage, int count) {
    return slowness[static_cast<std::size_t>(stage)] * (fixed + count * layer + (stage == pieces - 1 ? head : 0.0));
  };
  std::vector<int> counts(static_cast<std::size_t>(pieces), 1);
  for (int placed = pieces; placed < layers; ++placed) {
    int best = 0;
    for (int stage = 1; stage < pieces; ++stage)
      if (time_with(stage, counts[static_cast<std::size_t>(stage)] + 1) <
          time_with(best, counts[static_cast<std::size_t>(best)] + 1))
        best = stage;
    ++counts[static_cast<std::size_t>(best)];
  }
  return stages_from_counts(counts);
}

ActionCosts predicted_action_costs(const LayerCosts& fit, const std::vector<StageLayers>& partition,
                                   double p2p_latency, const std::vector<double>& slowness) {
  ActionCosts costs;
  costs.p2p_latency = p2p_latency;
  for (std::size_t vs = 0; vs < partition.size(); ++vs) {
    ActionCosts::Stage stage;
    const bool last = vs + 1 == partition.size();
    const double slower = slowness.empty() ? 1.0 : slowness[vs];
    for (const Field field : kFields)
      stage.*field =
          slower * (fit.fixed.*field + partition[vs].num_layers * fit.layer.*field + (last ? fit.head.*field : 0.0));
    costs.per_virtual_stage.push_back(stage);
  }
  return costs;
}

}  // namespace trident
