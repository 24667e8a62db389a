#include "model/init.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace trident {

namespace {

// splitmix64's output function: a bijective 64-bit mix with full avalanche.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char ch : text) hash = (hash ^ ch) * 0x100000001B3ull;
  return hash;
}

std::uint64_t tensor_stream(std::uint64_t seed, std::string_view name) { return mix64(seed ^ mix64(fnv1a(name))); }

float normal_in_stream(std::uint64_t stream, std::uint64_t index) {
  constexpr std::uint64_t golden_gamma = 0x9E3779B97F4A7C15ull;
  // Position `index` of the splitmix64 sequence that starts at `stream`.
  const std::uint64_t bits = mix64(stream + (index + 1) * golden_gamma);
  // Box–Muller on the two 32-bit halves; u1 lies in (0, 1) so the logarithm is finite.
  const double u1 = (static_cast<double>(bits >> 32) + 0.5) / 4294967296.0;
  const double u2 = static_cast<double>(bits & 0xFFFFFFFFull) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

}  // namespace

float counter_normal(std::uint64_t seed, std::string_view name, std::uint64_t index) {
  return normal_in_stream(tensor_stream(seed, name), index);
}

float init_std(const ModelConfig& cfg, TensorInit init) {
  return init == TensorInit::residual_normal ? 0.02f / std::sqrt(2.0f * cfg.layers) : 0.02f;
}

void init_parameters(ParamStore& params, const ModelConfig& cfg, std::uint64_t seed) {
  auto values = Kokkos::create_mirror_view(params.values);
  for (const ParamTensor& tensor : params.tensors()) {
    float* out = values.data() + tensor.offset;
    if (tensor.init == TensorInit::zeros) {
      std::fill(out, out + tensor.size, 0.0f);
    } else if (tensor.init == TensorInit::ones) {
      std::fill(out, out + tensor.size, 1.0f);
    } else {
      const float std = init_std(cfg, tensor.init);
      const std::uint64_t stream = tensor_stream(seed, tensor.name);
      for (std::size_t i = 0; i < tensor.size; ++i) {
        const std::int64_t global = global_index(tensor, static_cast<std::int64_t>(i), params.tp_rank(), params.tp_size());
        out[i] = global < 0 ? 0.0f : std * normal_in_stream(stream, static_cast<std::uint64_t>(global));
      }
    }
  }
  Kokkos::deep_copy(params.values, values);
}

}  // namespace trident
