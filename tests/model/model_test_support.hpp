// Shared by the model tests: tiny configurations, token buffers and parameter access.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "deck/config.hpp"
#include "gradient_check.hpp"
#include "model/transformer.hpp"

namespace trident::testing {

inline ModelConfig tiny_config() {
  ModelConfig cfg;
  cfg.layers = 2;
  cfg.d_model = 16;
  cfg.heads = 2;
  cfg.seq_len = 8;
  cfg.vocab = 32;
  return cfg;
}

// The tensor-parallel group of the single-rank model.
inline Comm& no_tp() {
  static const std::unique_ptr<Comm> comm = make_local_comm();
  return *comm;
}

inline IntBuffer random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  std::vector<int> values(n);
  for (int& v : values) v = token(rng);
  return int_buffer(values);
}

// The elements of one parameter tensor inside a flat buffer (values or grads).
inline FloatBuffer tensor_view(const FloatBuffer& buffer, const ParamTensor& tensor) {
  return Kokkos::subview(buffer, std::make_pair(tensor.offset, tensor.offset + tensor.size));
}

}  // namespace trident::testing
