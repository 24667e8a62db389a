// The kernels of a mixture of experts' routing (model/moe_mlp.hpp), in Hugging Face's
// MixtralSparseMoeBlock conventions: the router's softmax over all experts, the top k per token
// (ties to the lower expert), their weights renormalised over the k; the token-to-expert
// permutation and its inverse; the load-balancing loss (Switch / Mixtral form) and the backward
// of each. A token's j-th choice is its assignment a = t·k + j; the permutation lists the
// assignments kept, grouped by expert in token order (`order`), and `slot[a]` is where assignment
// a lies in it (−1: dropped by the expert's capacity).
#pragma once

#include "kernels/gemm.hpp"

namespace trident {

// probs[R, E]: the router's logits in, its softmax out (fp32); chosen[R·k], weights[R·k]: each
// token's k experts in descending probability and their probabilities renormalised to sum to 1.
void route_top_k(float* probs, int* chosen, float* weights, int rows, int experts, int k);

// Groups the assignments by expert (a counting sort, one thread: a micro-batch's R·k small
// integers). offsets[E + 1]: expert e's rows of the permutation are [offsets[e], offsets[e + 1]);
// an expert keeps at most `capacity` assignments, its first in token order. counts[E]: the tokens
// that chose each expert, dropped ones included (what the load-balancing loss reads).
void sort_by_expert(const int* chosen, int rows, int k, int experts, int capacity, int* offsets, int* order, int* slot,
                    float* counts);

// aux_sum[0] += scale · Σ_e counts[e] · Σ_t probs[t, e], and, where tokens_per_expert is not null,
// tokens_per_expert[e] += counts[e] (the step's load, per layer). One thread, as sort_by_expert.
void add_load_balance(const float* probs, const float* counts, int rows, int experts, double scale, double* aux_sum,
                      float* tokens_per_expert);

// out[p] = x[order[p] / k] for the `kept` rows of the permutation (as `out` is stored).
void gather_assigned_rows(ProductInput out, const float* x, const int* order, int kept, int k, int C);

// out[t] = residual[t] + Σ_j weights[a] · y[slot[a]] over token t's kept assignments a = t·k + j.
void combine_expert_outputs(float* out, const float* residual, const float* y, const int* slot, const float* weights,
                            int rows, int k, int C);

// combine's backward: dweights[a] = dout[t] · y[slot[a]] (0 when dropped) and then
// dy[slot[a]] = weights[a] · dout[t]; dy may be y itself (each row is read before it is written).
void expert_output_grads(float* dy, float* dweights, const float* dout, const float* y, const int* slot,
                         const float* weights, int rows, int k, int C);

// dx[t] = Σ_j dx_assigned[slot[a]] over token t's kept assignments (overwrites dx).
void sum_assigned_rows(float* dx, const float* dx_assigned, const int* slot, int rows, int k, int C);

// The router's logit gradient dlogits[R, E] from the routing weights' gradient dweights[R·k], through
// the renormalisation and the softmax, with the load-balancing loss's term aux_scale · counts[e]
// added to every token's d probs[t, e].
void route_backward(float* dlogits, const float* probs, const int* chosen, const float* weights,
                    const float* dweights, const float* counts, float aux_scale, int rows, int experts, int k);

}  // namespace trident
