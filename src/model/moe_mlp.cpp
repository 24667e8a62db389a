#include "model/moe_mlp.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/linear.hpp"
#include "kernels/moe_routing.hpp"
#include "kernels/profile.hpp"
#include "kernels/swiglu.hpp"
#include "model/layer_context.hpp"

namespace trident {

namespace {

constexpr WeightLayout kLinear = WeightLayout::out_in;

FloatBuffer scratch(const char* name, std::size_t n) {
  return FloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), n);
}

// The rows from `first` on of a tensor `width` wide, as it is stored.
ProductInput rows_from(const ProductInput& tensor, int first, int width) {
  const long offset = static_cast<long>(first) * width;
  return tensor.bf16 ? ProductInput::of_bf16(tensor.bf16 + offset) : ProductInput(tensor.fp32 + offset);
}

// Local expert j's weights inside a layer's (or its gradients').
struct ExpertWeights {
  float* gate_up;  // w1 | w3 [2F, C]
  float* down;     // w2 [C, F]
};
ExpertWeights expert(const MoeWeights& w, int j, int F, int C) {
  float* first = w.experts + static_cast<long>(j) * 3 * F * C;
  return {first, first + 2L * F * C};
}

template <class T>
std::vector<T> to_host(const T* device, std::size_t n) {
  std::vector<T> host(n);
  Kokkos::deep_copy(Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host.data(), n),
                    Kokkos::View<const T*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(device, n));
  return host;
}

template <class T>
void to_device(T* device, const std::vector<T>& host) {
  Kokkos::deep_copy(Kokkos::View<T*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(device, host.size()),
                    Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host.data(),
                                                                                                      host.size()));
}

// One product pair's rows: local expert `expert`'s, rows [first, first + rows) of what it takes.
struct Segment {
  int expert, first, rows;
};

// How a micro-batch's rows travel, read on the host: the permutation's expert offsets, the
// segments this rank's experts take, and (expert parallelism) the floats going to and coming from
// each rank of the group.
struct Routing {
  std::vector<int> offsets;
  std::vector<Segment> segments;
  std::vector<std::size_t> sent, received;
  int taken = 0;  // rows this rank's experts take

  int kept() const { return offsets.back(); }
};

// received[r · El + j]: rows of local expert j from rank r, in the order they arrive.
Routing routing_of(const MoeShape& shape, std::vector<int> offsets, const std::vector<int>& received, int C) {
  Routing routing;
  routing.offsets = std::move(offsets);
  const int E = shape.experts, El = shape.local_experts();
  if (shape.ranks == 1) {
    for (int e = 0; e < E; ++e)
      routing.segments.push_back({e, routing.offsets[e], routing.offsets[e + 1] - routing.offsets[e]});
    routing.taken = routing.kept();
  } else {
    for (int r = 0; r < shape.ranks; ++r) {
      routing.sent.push_back(static_cast<std::size_t>(routing.offsets[(r + 1) * El] - routing.offsets[r * El]) * C);
      std::size_t from_r = 0;
      for (int j = 0; j < El; ++j) {
        const int rows = received[r * El + j];
        routing.segments.push_back({j, routing.taken, rows});
        routing.taken += rows;
        from_r += rows;
      }
      routing.received.push_back(from_r * C);
    }
  }
  std::erase_if(routing.segments, [](const Segment& s) { return s.rows == 0; });
  return routing;
}

// The rows of each of this rank's experts that every rank of the group sends it: each rank's
// counts per expert (E, grouped by the experts' ranks) exchanged El at a time.
std::vector<int> exchange_counts(MoeContext& moe, const std::vector<int>& offsets) {
  const int E = moe.shape.experts, El = moe.shape.local_experts(), ranks = moe.shape.ranks;
  std::vector<float> sent(E);
  for (int e = 0; e < E; ++e) sent[e] = static_cast<float>(offsets[e + 1] - offsets[e]);
  to_device(moe.sent_counts.data(), sent);
  const std::vector<std::size_t> each(ranks, El);
  moe.ep->all_to_all_v(moe.sent_counts.data(), each, moe.received_counts.data(), each);
  const std::vector<float> received = to_host(moe.received_counts.data(), E);
  return std::vector<int>(received.begin(), received.end());
}

// The routing of the micro-batch whose stash is `x`, as forward left it (offsets and counts).
Routing stashed_routing(const MoeContext& moe, const MoeStash& x, int C) {
  const int E = moe.shape.experts;
  return routing_of(moe.shape, to_host(x.offsets, E + 1), x.received ? to_host(x.received, E) : std::vector<int>{},
                    C);
}

// The experts' products over the rows they take: gate_up, h and y of `x`.
void experts_forward(const LayerContext& ctx, const MoeWeights& w, const MoeStash& x, const Routing& routing) {
  const int C = ctx.C, F = ctx.moe->shape.hidden;
  for (const Segment& s : routing.segments)
    linear_forward(ctx.gemm, x.gate_up + 2L * F * s.first, rows_from(x.x, s.first, C),
                   expert(w, s.expert, F, C).gate_up, nullptr, s.rows, C, 2 * F, kLinear);
  swiglu_forward(x.h, x.gate_up, routing.taken, F);
  for (const Segment& s : routing.segments)
    linear_forward(ctx.gemm, x.y + static_cast<long>(C) * s.first, rows_from(x.h, s.first, F),
                   expert(w, s.expert, F, C).down, nullptr, s.rows, F, C, kLinear);
}

// dy (in place of x.y) back through the experts: their weight gradients, and the input gradient of
// each row they took into d_assigned.
void experts_backward(const LayerContext& ctx, const MoeWeights& w, const MoeWeights& dw, const MoeStash& x,
                      const Routing& routing, float* d_assigned) {
  const int C = ctx.C, F = ctx.moe->shape.hidden;
  const SwigluGrads grads(ctx.moe->d_gate_up.data(), static_cast<long>(ctx.moe->shape.received), F,
                          ctx.gemm.precision() == MatmulPrecision::bf16);
  const float* dy = x.y;
  for (const Segment& s : routing.segments) {
    const float* dy_s = dy + static_cast<long>(C) * s.first;
    linear_backward_input(ctx.gemm, grads.dh_row(s.first), dy_s, expert(w, s.expert, F, C).down, s.rows, F, C,
                          kLinear, static_cast<int>(grads.dh_ld));
    linear_backward_weight(ctx.gemm, expert(dw, s.expert, F, C).down, nullptr, rows_from(x.h, s.first, F), dy_s,
                           s.rows, F, C, kLinear);
  }
  swiglu_backward(grads.d_gate_up, grads.dh, grads.dh_ld, x.gate_up, routing.taken, F);
  for (const Segment& s : routing.segments) {
    const ProductInput dgu_s = grads.d_gate_up_row(s.first, F);
    linear_backward_input(ctx.gemm, d_assigned + static_cast<long>(C) * s.first, dgu_s,
                          expert(w, s.expert, F, C).gate_up, s.rows, C, 2 * F, kLinear);
    linear_backward_weight(ctx.gemm, expert(dw, s.expert, F, C).gate_up, nullptr, rows_from(x.x, s.first, C), dgu_s,
                           s.rows, C, 2 * F, kLinear);
  }
}

// The router, its top k and the permutation; the load-balancing loss's figures when counted.
void route(const LayerContext& ctx, const MoeWeights& w, const MoeStash& x, const float* norm) {
  MoeContext& moe = *ctx.moe;
  const int R = ctx.local_rows(), C = ctx.C, E = moe.shape.experts, k = moe.shape.top_k;
  linear_forward(moe.router_gemm, x.probs, norm, w.router, nullptr, R, C, E, kLinear);
  route_top_k(x.probs, x.chosen, x.weights, R, E, k);
  sort_by_expert(x.chosen, R, k, E, moe.capacity, x.offsets, x.order, x.slot, x.counts);
  if (!ctx.counted) return;
  const double scale = moe.aux_coef * E / (static_cast<double>(moe.mixture_layers) * R);
  add_load_balance(x.probs, x.counts, R, E, scale, moe.aux_sum.data(),
                   moe.tokens_per_expert.data() + static_cast<long>(ctx.layer) * E);
}

// The assignments an expert takes of one rank's micro-batch of `rows` rows: ⌈factor · rows · k / E⌉
// under a capacity factor, else all of them.
std::size_t expert_capacity(const MoeConfig& moe, std::size_t rows) {
  const std::size_t assigned = rows * moe.top_k;
  if (moe.capacity_factor <= 0) return assigned;
  return static_cast<std::size_t>(std::ceil(moe.capacity_factor * static_cast<double>(assigned) / moe.experts));
}

}  // namespace

MoeShape moe_shape(const ModelConfig& cfg, int layer, std::size_t rows, int ranks) {
  if (!cfg.moe_layer(layer)) return {};
  const MoeConfig& moe = cfg.moe;
  // Dropless, every rank may send all of its rows to this rank's experts; a capacity bounds what
  // each expert takes of each rank.
  std::size_t received = rows * moe.top_k * ranks;
  if (moe.capacity_factor > 0) received = std::min(received, expert_capacity(moe, rows) * moe.experts);
  return {moe.experts, moe.top_k, cfg.expert_hidden(), ranks, received};
}

MoeContext::MoeContext(const ModelConfig& cfg, std::size_t rows, Comm* ep_group)
    : shape(moe_shape(cfg, 0, rows, ep_group ? ep_group->size() : 1)),
      mixture_layers(cfg.moe_layers()),
      aux_coef(cfg.moe.aux_loss_coef),
      capacity(static_cast<int>(expert_capacity(cfg.moe, rows))),
      ep(shape.ranks > 1 ? ep_group : nullptr),
      d_gate_up(scratch("moe_d_gate_up", shape.received * 2 * shape.hidden)),
      d_assigned(scratch("moe_d_assigned", shape.received * cfg.d_model)),
      d_logits(scratch("moe_d_logits", rows * shape.experts)),
      d_weights(scratch("moe_d_weights", rows * shape.top_k)),
      permuted(scratch("moe_permuted", ep ? rows * shape.top_k * cfg.d_model : 0)),
      sent_counts(scratch("moe_sent_counts", ep ? shape.experts : 0)),
      received_counts(scratch("moe_received_counts", ep ? shape.experts : 0)),
      tokens_per_expert("moe_tokens_per_expert", static_cast<std::size_t>(cfg.layers) * shape.experts) {}

void MoeContext::take_figures(double* aux, double* tokens) {
  double* aux_sum_now = aux_sum.data();
  float* counts = tokens_per_expert.data();
  const int n = static_cast<int>(tokens_per_expert.extent(0));
  declare_kernel_cost(KernelCost::of_floats(1.5 * n + 1.0, 3.0 * n + 3.0, 0.0));
  Kokkos::parallel_for("take_moe_figures", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(int i) {
    tokens[i] = counts[i];
    counts[i] = 0.0f;
    if (i == 0) {
      aux[0] = aux_sum_now[0];
      aux_sum_now[0] = 0.0;
    }
  });
}

void moe_forward(const LayerContext& ctx, const MoeWeights& w, const MoeStash& x, const float* norm,
                 const float* residual2, float* residual3) {
  MoeContext& moe = *ctx.moe;
  const int R = ctx.local_rows(), C = ctx.C, E = moe.shape.experts, k = moe.shape.top_k;
  route(ctx, w, x, norm);
  std::vector<int> offsets = to_host(x.offsets, E + 1);
  if (!moe.ep) {
    const Routing routing = routing_of(moe.shape, std::move(offsets), {}, C);
    gather_assigned_rows(x.x, norm, x.order, routing.kept(), k, C);
    experts_forward(ctx, w, x, routing);
    return combine_expert_outputs(residual3, residual2, x.y, x.slot, x.weights, R, k, C);
  }
  const std::vector<int> received = exchange_counts(moe, offsets);
  to_device(x.received, received);
  const Routing routing = routing_of(moe.shape, std::move(offsets), received, C);
  gather_assigned_rows(moe.permuted.data(), norm, x.order, routing.kept(), k, C);
  moe.ep->all_to_all_v(moe.permuted.data(), routing.sent, x.x.fp32, routing.received);
  experts_forward(ctx, w, x, routing);
  moe.ep->all_to_all_v(x.y, routing.received, x.returned, routing.sent);
  combine_expert_outputs(residual3, residual2, x.returned, x.slot, x.weights, R, k, C);
}

void moe_backward(const LayerContext& ctx, const MoeWeights& w, const MoeWeights& dw, const MoeStash& x,
                  const float* norm, const float* dout, float* dnorm) {
  MoeContext& moe = *ctx.moe;
  const int R = ctx.local_rows(), C = ctx.C, E = moe.shape.experts, k = moe.shape.top_k;
  const Routing routing = stashed_routing(moe, x, C);
  // Each expert output's gradient replaces it, here or (expert parallelism) where it came back.
  float* outputs = moe.ep ? x.returned : x.y;
  expert_output_grads(outputs, moe.d_weights.data(), dout, outputs, x.slot, x.weights, R, k, C);
  if (moe.ep) moe.ep->all_to_all_v(x.returned, routing.sent, x.y, routing.received);
  experts_backward(ctx, w, dw, x, routing, moe.d_assigned.data());
  float* d_permuted = moe.d_assigned.data();
  if (moe.ep) {
    moe.ep->all_to_all_v(moe.d_assigned.data(), routing.received, moe.permuted.data(), routing.sent);
    d_permuted = moe.permuted.data();
  }
  sum_assigned_rows(dnorm, d_permuted, x.slot, R, k, C);
  // The load-balancing loss's gradient per probability: loss_scale · aux_coef / layers · E · counts_e / R.
  const float aux_scale =
      static_cast<float>(ctx.loss_scale * moe.aux_coef * E / (static_cast<double>(moe.mixture_layers) * R));
  route_backward(moe.d_logits.data(), x.probs, x.chosen, x.weights, moe.d_weights.data(), x.counts, aux_scale, R, E,
                 k);
  gemm(moe.router_gemm, false, false, R, C, E, 1.0f, moe.d_logits.data(), E, w.router, C, 1.0f, dnorm, C);
  linear_backward_weight(moe.router_gemm, dw.router, nullptr, norm, moe.d_logits.data(), R, C, E, kLinear);
}

}  // namespace trident
