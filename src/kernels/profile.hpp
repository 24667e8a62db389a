// Names for Kokkos Tools (kokkos-tools' kernel timer and space-time stack, Nsight Systems through
// kokkos-tools' NVTX connector, bench/step_census): regions around a training step, each layer's
// forward, backward and weight gradient, the optimizer and every matrix product, and a mark wherever
// the host waits for the device. With no tool loaded each costs one test of a flag.
#pragma once

#include <cstdint>

namespace trident {

inline constexpr char kStepRegion[] = "trident::step";
inline constexpr char kLayerForwardRegion[] = "trident::layer_forward";
inline constexpr char kLayerBackwardRegion[] = "trident::layer_backward";
inline constexpr char kLayerWeightGradRegion[] = "trident::layer_weight_grad";
inline constexpr char kOptimizerRegion[] = "trident::optimizer";
inline constexpr char kProductRegion[] = "trident::gemm";
// Prefix of the profile event that marks a host wait; the reason follows it.
inline constexpr char kHostWaitEvent[] = "trident::host_wait ";

// What a kernel moves through device memory (bytes read and written, counting each tensor once,
// as a kernel that streams it would) and the floating-point operations it does, from its shape.
// The code that launches a kernel or a product declares it just before; a tool (bench/step_census)
// takes it as the kernel starts, so that a run's timings become bandwidths and FLOP rates.
struct KernelCost {
  double bytes = 0.0;
  double flops = 0.0;
  // fp32 (or int32) elements read and written, and operations.
  static KernelCost of_floats(double read, double written, double flops = 0.0) {
    return {4.0 * (read + written), flops};
  }
};

// Declares the cost of the next kernel or product launched (one; a later declaration replaces it).
void declare_kernel_cost(const KernelCost& cost);
// The cost declared for the kernel starting now, cleared (zeros where none was declared).
KernelCost take_kernel_cost();

// Scoped: the region lasts as long as the object.
class ProfileRegion {
 public:
  explicit ProfileRegion(const char* name);
  ~ProfileRegion();
  ProfileRegion(const ProfileRegion&) = delete;
  ProfileRegion& operator=(const ProfileRegion&) = delete;

 private:
  bool open_;
};

// A kernel launched outside Kokkos (trident's own CUDA kernels), shown to Kokkos Tools as a
// parallel_for of that label for as long as the object lives, so that the census and kernel timers
// count it with the rest.
class ForeignKernel {
 public:
  explicit ForeignKernel(const char* label);
  ~ForeignKernel();
  ForeignKernel(const ForeignKernel&) = delete;
  ForeignKernel& operator=(const ForeignKernel&) = delete;

 private:
  bool open_;
  std::uint64_t id_ = 0;
};

// The host waits until the device has run the work queued so far (a fence; a no-op on the CPU
// build). Every such wait in trident goes through here with its reason, so that the waits inside a
// step can be counted: on a GPU each one stalls the launch queue.
void wait_for_device(const char* why);

// The host waited for the device in another way (a reduction's result read on the host, a CUDA
// event): marked as wait_for_device marks a fence.
void note_host_wait(const char* why);

}  // namespace trident
