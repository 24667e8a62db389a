// A mixture of experts in place of a Llama block's MLP ([model.moe], Hugging Face's
// MixtralSparseMoeBlock): a router (a linear layer without bias, computed in fp32) scores the
// experts per token; each token goes to its top k, each expert a SwiGLU MLP
// (w2(silu(w1 x) · w3 x)); the outputs are summed with the router's renormalised weights.
//   forward: router product, softmax and top k, permutation (tokens grouped by expert), one
//            product pair per expert over its rows, weighted un-permutation added to the residual.
//   backward: the same in reverse, the experts' and the router's weight gradients at once (a
//            zero-bubble schedule's W has nothing left to do for them).
// The load-balancing loss (Switch Transformer's, as Mixtral's: E · Σ_e f_e · P_e with f_e the
// share of the micro-batch's tokens that chose expert e and P_e its mean router probability),
// weighted by aux_loss_coef and averaged over the mixture layers, joins the objective: its value
// accumulates on the device with the micro-batch's tokens as weight (the loss's form, a sum) and
// its gradient enters the router's softmax backward.
//
// Expert parallelism (parallel.ep > 1): a rank holds E / ep consecutive experts. The permutation,
// grouped by expert, is grouped by the experts' ranks too: its rows go to them by an all-to-all
// over the ep group (first how many rows of each expert, then the rows), come back the same way
// after the experts' products, and in backward their gradients travel likewise. A rank's experts
// take rows from every rank of the group, in source order ("segments": one product pair each).
//
// The mixture works on the residual stream's rows: with tensor parallelism (without sequence
// parallelism) every TP rank holds its experts whole and computes the same, so nothing is summed
// over TP.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/comm.hpp"
#include "deck/config.hpp"
#include "kernels/device.hpp"
#include "kernels/gemm.hpp"

namespace trident {

struct LayerContext;

// A layer's mixture as its stash sees it: 0 experts for a dense MLP.
struct MoeShape {
  int experts = 0;
  int top_k = 0;
  int hidden = 0;            // each expert's F
  int ranks = 1;             // parallel.ep
  std::size_t received = 0;  // the most rows this rank's experts take in a micro-batch

  int local_experts() const { return experts / ranks; }
};

// model.moe's figures of layer `layer` for micro-batches of `rows` rows on each of `ranks`
// expert-parallel ranks: 0 experts for a dense layer.
MoeShape moe_shape(const ModelConfig& cfg, int layer, std::size_t rows, int ranks);

// What every mixture layer of a model shares: the shape, the expert-parallel group, the router's
// fp32 products, backward's scratch, and the step's figures (on the device until the step's end).
struct MoeContext {
  // rows: a micro-batch's on this rank; ep: the expert-parallel group (null: this rank holds every
  // expert), which must outlive the model.
  MoeContext(const ModelConfig& cfg, std::size_t rows, Comm* ep = nullptr);
  MoeShape shape;
  int mixture_layers;
  double aux_coef;
  int capacity;  // assignments an expert takes per micro-batch and source rank (no limit: rows · k)
  Comm* ep;      // null without expert parallelism
  GemmContext router_gemm{MatmulPrecision::fp32};
  // Backward's, one micro-batch at a time: d(w1 | w3) and the experts' input gradients of the
  // received rows, the router's logits' and routing weights' gradients.
  FloatBuffer d_gate_up, d_assigned, d_logits, d_weights;
  // Expert parallelism: the permutation's rows on their way out (forward), their gradients on their
  // way back (backward); how many rows of each expert go out and come in.
  FloatBuffer permuted, sent_counts, received_counts;
  // Σ over counted forwards of aux_coef / mixture layers · E · Σ_e counts_e · P_e (the loss's
  // weighting: a sum over the micro-batch's tokens), and each layer's tokens per expert.
  Kokkos::View<double, MemSpace> aux_sum{"moe_aux_sum"};
  FloatBuffer tokens_per_expert;  // [layers, E]; zero for layers without a mixture or held elsewhere

  // Moves the figures into *aux (one device double) and tokens[layers · E] (device doubles), zeroing
  // them for the next step; queued.
  void take_figures(double* aux, double* tokens);
};

// A layer's router [E, C] and the experts this rank holds: local expert j's w1 | w3 [2F, C] at
// experts + j · 3FC, its w2 [C, F] right after them (the order of the family's description).
struct MoeWeights {
  float* router = nullptr;
  float* experts = nullptr;
};

// What forward keeps for backward (R: the stream's rows, N: MoeShape::received; plan/memory.cpp
// counts the same).
struct MoeStash {
  float* probs;     // [R, E]    the router's softmax
  int* chosen;      // [R · k]   each token's experts
  float* weights;   // [R · k]   their renormalised probabilities
  float* counts;    // [E]       tokens that chose each expert
  int* offsets;     // [E + 1]   each expert's rows of the permutation
  int* order;       // [R · k]   the assignment of each row of the permutation
  int* slot;        // [R · k]   each assignment's row (−1: dropped)
  int* received;    // [ep, E / ep] rows of each local expert from each rank (expert parallelism only)
  ProductInput x;   // [N, C]    the rows this rank's experts take (fp32 under expert parallelism)
  float* gate_up;   // [N, 2F]   each row's w1 | w3 outputs
  ProductInput h;   // [N, F]    silu(w1 x) · w3 x
  float* y;         // [N, C]    each row's expert output (backward overwrites it with its gradient)
  float* returned;  // [R · k, C] the permutation's expert outputs, back (expert parallelism; else y)

  template <class Take, class ProductTake>
  void carve(const MoeShape& shape, std::size_t rows, std::size_t C, Take&& take, ProductTake&& product_input);
};

// residual3[R, C] = residual2 + the mixture of `norm` (fp32 [R, C]).
void moe_forward(const LayerContext& ctx, const MoeWeights& w, const MoeStash& x, const float* norm,
                 const float* residual2, float* residual3);
// dnorm[R, C] = d/d norm of the mixture given dout[R, C]; the experts' and router's weight gradients
// added to dw's.
void moe_backward(const LayerContext& ctx, const MoeWeights& w, const MoeWeights& dw, const MoeStash& x,
                  const float* norm, const float* dout, float* dnorm);

template <class Take, class ProductTake>
void MoeStash::carve(const MoeShape& shape, std::size_t rows, std::size_t C, Take&& take,
                     ProductTake&& product_input) {
  const std::size_t E = shape.experts, assigned = rows * shape.top_k, F = shape.hidden, N = shape.received;
  const bool split = shape.ranks > 1;
  // Integers share the float arena (both four bytes).
  auto ints = [&](std::size_t n) { return reinterpret_cast<int*>(take(n)); };
  probs = take(rows * E);
  chosen = ints(assigned);
  weights = take(assigned);
  counts = take(E);
  offsets = ints(E + 1);
  order = ints(assigned);
  slot = ints(assigned);
  received = split ? ints(E) : nullptr;
  x = split ? ProductInput(take(N * C)) : product_input(N * C);
  gate_up = take(N * 2 * F);
  h = product_input(N * F);
  y = take(N * C);
  returned = split ? take(assigned * C) : nullptr;
}

}  // namespace trident
