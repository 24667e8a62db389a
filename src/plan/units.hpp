// Numbers as people read them in the plan: 124,439,808 / 124.44 M / 1.50 GiB / 3.21 TFLOP.
#pragma once

#include <cstdint>
#include <string>

namespace trident {

std::string with_thousands(std::int64_t value);  // 124439808 -> "124,439,808"
std::string human_count(double count);           // K, M, B, T (powers of 1000)
std::string human_bytes(double bytes);           // B, KiB, MiB, GiB, TiB (powers of 1024)
std::string human_flops(double flops);           // FLOP, KFLOP, ... EFLOP (powers of 1000)
std::string percent(double fraction);            // 0.1899 -> "18.99%"

}  // namespace trident
