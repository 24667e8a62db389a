// Test support shared by the kernel and model tests: random device buffers, host copies, and a
// central-difference gradient check.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/device.hpp"
#include "kernels/matmul_precision.hpp"

namespace trident::testing {

inline std::vector<float> to_host(const FloatBuffer& buffer) {
  auto mirror = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buffer);
  return std::vector<float>(mirror.data(), mirror.data() + mirror.size());
}

inline void copy_to(const FloatBuffer& buffer, const std::vector<float>& values) {
  auto mirror = Kokkos::create_mirror_view(buffer);
  std::copy(values.begin(), values.end(), mirror.data());
  Kokkos::deep_copy(buffer, mirror);
}

// A kernel's output stored in bf16 (a ProductInput) is its fp32 output rounded, element by element.
inline void expect_bf16_of(const Bf16Buffer& bits, const FloatBuffer& values) {
  const auto stored = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bits);
  const std::vector<float> expected = to_host(values);
  ASSERT_EQ(stored.extent(0), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(stored(i), bf16_bits(expected[i])) << i;
}

inline std::vector<float> random_values(std::size_t n, std::uint64_t seed, float stddev = 1.0f, float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(mean, stddev);
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng);
  return values;
}

inline FloatBuffer random_buffer(std::size_t n, std::uint64_t seed, float stddev = 1.0f, float mean = 0.0f) {
  FloatBuffer buffer("random", n);
  copy_to(buffer, random_values(n, seed, stddev, mean));
  return buffer;
}

inline IntBuffer int_buffer(const std::vector<int>& values) {
  IntBuffer buffer("ints", values.size());
  auto mirror = Kokkos::create_mirror_view(buffer);
  std::copy(values.begin(), values.end(), mirror.data());
  Kokkos::deep_copy(buffer, mirror);
  return buffer;
}

inline float element(const FloatBuffer& buffer, std::size_t i) {
  float value;
  Kokkos::deep_copy(value, Kokkos::subview(buffer, i));
  return value;
}

inline void set_element(const FloatBuffer& buffer, std::size_t i, float value) {
  Kokkos::deep_copy(Kokkos::subview(buffer, i), value);
}

// Σ a·b accumulated in double: the scalar objective of the layer checks (a random projection of
// a layer's output), whose gradient w.r.t. the output is the projection itself.
inline double dot(const FloatBuffer& a, const FloatBuffer& b) {
  const std::vector<float> x = to_host(a), y = to_host(b);
  double sum = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) sum += static_cast<double>(x[i]) * y[i];
  return sum;
}

inline std::vector<float> difference(const std::vector<float>& after, const std::vector<float>& before) {
  std::vector<float> d(after.size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = after[i] - before[i];
  return d;
}

// Element i passes when |analytic − numeric| ≤ atol_fraction · max|numeric| + rtol · |numeric|.
struct Tolerance {
  double rtol = 1e-2;
  double atol_fraction = 1e-3;
};

// Compares `analytic` with central differences (objective(p + eps) − objective(p − eps)) / 2eps
// for every element of `param`, restoring each element afterwards.
inline void expect_gradient(const std::string& what, const FloatBuffer& param, const std::vector<float>& analytic,
                            const std::function<double()>& objective, float eps, Tolerance tol = {}) {
  ASSERT_EQ(analytic.size(), param.size()) << what;
  std::vector<double> numeric(param.size());
  for (std::size_t i = 0; i < param.size(); ++i) {
    const float original = element(param, i);
    set_element(param, i, original + eps);
    const double plus = objective();
    set_element(param, i, original - eps);
    const double minus = objective();
    set_element(param, i, original);
    numeric[i] = (plus - minus) / (2.0 * eps);
  }
  double largest = 0.0, error_sq = 0.0, norm_sq = 0.0;
  for (double n : numeric) largest = std::max(largest, std::abs(n));
  ASSERT_GT(largest, 1e-4) << what << ": the gradient is (numerically) zero, so the check proves nothing";
  int failures = 0;
  for (std::size_t i = 0; i < param.size(); ++i) {
    const double error = std::abs(analytic[i] - numeric[i]);
    error_sq += error * error;
    norm_sq += numeric[i] * numeric[i];
    if (error > tol.atol_fraction * largest + tol.rtol * std::abs(numeric[i]) && ++failures <= 5)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " vs numeric " << numeric[i];
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << param.size() << " elements differ";
  EXPECT_LT(std::sqrt(error_sq / norm_sq), tol.rtol) << what << ": relative error of the whole gradient";
}

// `got` equals `want` within 1e-5 of the values' scale (NaN never does), in the `width` columns of
// each row of `ld` floats (the padding after them is not compared); the first five misses named.
inline void expect_equal_columns(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                                 long ld, long width) {
  double scale = 0.0;
  for (float x : want) scale = std::max(scale, std::abs(double(x)));
  int reported = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (static_cast<long>(i % ld) >= width) continue;
    if (!(std::abs(double(got[i]) - want[i]) <= 1e-5 * std::max(1.0, scale)) && ++reported <= 5)
      ADD_FAILURE() << what << "[" << i << "] (row " << i / ld << "): " << got[i] << ", expected " << want[i];
  }
}

}  // namespace trident::testing
