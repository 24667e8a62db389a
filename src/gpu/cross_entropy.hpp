// Softmax cross-entropy with its gradient on the GPU in two passes over the logits where the Kokkos
// kernel (kernels/cross_entropy.hpp) takes three: a warp per row, 16 bytes a lane, the row's maximum
// and its sum of exponentials found together (the online softmax: the sum rescaled whenever the
// maximum grows), then the gradient written. The same results as the Kokkos kernel up to float
// rounding; the loss sum deterministic (rows in warp and block order, blocks in block order).
#pragma once

#include <cuda_runtime.h>

namespace trident {

// Whether the kernel takes the call: V a multiple of 4 and the logits 16-byte aligned.
bool cross_entropy_supports(const float* logits, int V);

// As softmax_cross_entropy (kernels/cross_entropy.hpp): losses[r] = −log softmax(logits[r])[targets[r]]
// (NaN for a target outside [0, V)), logits[r] ← softmax(logits[r]) − onehot(targets[r]), *loss_sum
// (a device double) = Σ losses. Queued on `stream`; one launch at a time per process (the blocks'
// sums meet in a device array of the kernel's own).
void cross_entropy(float* logits, float* losses, const int* targets, int rows, int V, double* loss_sum,
                   cudaStream_t stream);

}  // namespace trident
