// A machine description (`trident plan DECK --machine FILE`, DESIGN.md "Machine files and step prediction"): what one
// device computes, what it holds, and how fast its links move bytes. input_decks/machines/ has
// files for common systems. A device is what one rank runs on: a GPU, or a CPU core.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "deck/choices.hpp"

namespace trident {

struct Link {
  double bandwidth = 0.0;  // bytes/s per device and direction
  double latency = 0.0;    // seconds per message
};

struct Machine {
  std::string path;  // the file, for messages
  std::string name;
  int devices_per_node = 1;
  double device_memory_bytes = 0.0;
  // Dense matrix-product peak of one device, FLOP/s, by the precision its inputs are rounded to.
  double peak_fp32 = 0.0, peak_tf32 = 0.0, peak_bf16 = 0.0;
  double memory_bandwidth = 0.0;  // bytes/s of one device, for element-wise work
  // The fraction of the peak one matrix product reaches, by its FLOPs: (flops, fraction) points
  // with increasing flops, interpolated linearly in log(flops) and flat beyond the ends.
  std::vector<std::pair<double, double>> gemm_efficiency;
  Link intra_node, inter_node;

  // FLOP/s of the dense peak at `precision` (automatic: bf16 where the machine has a bf16 peak and
  // the deck asked for it, else as the GPU build resolves it: tf32 on GPUs, fp32 on CPUs). Throws
  // InputError naming the file when that peak is not given.
  double peak_flops(MatmulPrecision precision) const;
  double gemm_fraction(double flops) const;
  // Seconds for one matrix product of `flops` at `peak`.
  double gemm_seconds(double flops, double peak) const;
  // Seconds for one kernel that moves `bytes` through memory and does `flops` (a roofline: the
  // slower of the two, the operations at the FP32 peak where one is given).
  double kernel_seconds(double bytes, double flops) const;
  // Seconds for one matrix product that also moves `bytes`: its time at `peak` and its efficiency,
  // unless the bytes take longer.
  double product_seconds(double flops, double bytes, double peak) const;
};

// Throws InputError naming the file, the line and the key, with what would be valid.
Machine parse_machine(const std::string& text, const std::string& source_name);
Machine load_machine(const std::string& path);

}  // namespace trident
