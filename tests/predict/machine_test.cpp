// Machine files: the shipped ones parse, every mistake names its file, line and key, and the GEMM
// efficiency curve interpolates in log(FLOPs).
#include "predict/machine.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"

namespace trident {
namespace {

const std::string kComplete = R"([machine]
name = "test box"
devices_per_node = 4
device_memory_gib = 16

[compute]
peak_tflops_bf16 = 100
memory_bandwidth_gbs = 1000
gemm_efficiency = [[1, 0.5], [100, 0.7]]

[network]
intra_node_gbs = 100
intra_node_latency_us = 2
inter_node_gbs = 10
inter_node_latency_us = 5
)";

std::string error_of(const std::string& text) {
  try {
    parse_machine(text, "box.toml");
  } catch (const InputError& error) {
    return error.what();
  }
  return "(no error)";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  return text.replace(text.find(from), from.size(), to);
}

TEST(MachineFile, TheShippedFilesParse) {
  for (const char* name : {"dgx-a100-80g", "dgx-h100", "dgx-h200", "cpu-2core"}) {
    const Machine machine = load_machine(std::string(TRIDENT_SOURCE_DIR) + "/input_decks/machines/" + name + ".toml");
    EXPECT_GT(machine.peak_flops(MatmulPrecision::fp32), 0.0) << name;
    EXPECT_FALSE(machine.gemm_efficiency.empty()) << name;
  }
  const Machine a100 = load_machine(std::string(TRIDENT_SOURCE_DIR) + "/input_decks/machines/dgx-a100-80g.toml");
  EXPECT_EQ(a100.devices_per_node, 8);
  EXPECT_DOUBLE_EQ(a100.peak_flops(MatmulPrecision::bf16), 312e12);
  EXPECT_DOUBLE_EQ(a100.inter_node.bandwidth, 23e9);
}

TEST(MachineFile, AKernelTakesTheSlowerOfItsBytesAndItsOperations) {
  const Machine no_fp32_peak = parse_machine(kComplete, "box.toml");  // 1000 GB/s
  EXPECT_DOUBLE_EQ(no_fp32_peak.kernel_seconds(2e9, 1e15), 2e-3);     // operations unpriced without a peak
  const Machine machine =
      parse_machine(replaced(kComplete, "peak_tflops_bf16 = 100", "peak_tflops_bf16 = 100\npeak_tflops_fp32 = 10"),
                    "box.toml");
  EXPECT_DOUBLE_EQ(machine.kernel_seconds(1e9, 1e10), 1e-3);  // bytes: 1 ms; operations: 1 ms
  EXPECT_DOUBLE_EQ(machine.kernel_seconds(1e9, 1e11), 1e-2);  // operations: 10 ms
  // 100 GFLOP at 70% of 100 TFLOP/s; its megabyte is a microsecond.
  EXPECT_DOUBLE_EQ(machine.product_seconds(1e11, 1e6, 100e12), 1e11 / (100e12 * 0.7));
  EXPECT_DOUBLE_EQ(machine.product_seconds(1e11, 1e10, 100e12), 1e-2);  // 10 GB: the bytes are slower
  EXPECT_DOUBLE_EQ(machine.product_seconds(0.0, 1e9, 100e12), 1e-3);
  const Machine h200 = load_machine(std::string(TRIDENT_SOURCE_DIR) + "/input_decks/machines/dgx-h200.toml");
  EXPECT_DOUBLE_EQ(h200.memory_bandwidth, 4.8e12);
}

TEST(MachineFile, ValuesAreReadInTheirUnits) {
  const Machine machine = parse_machine(kComplete, "box.toml");
  EXPECT_EQ(machine.name, "test box");
  EXPECT_DOUBLE_EQ(machine.device_memory_bytes, 16.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(machine.memory_bandwidth, 1e12);
  EXPECT_DOUBLE_EQ(machine.intra_node.latency, 2e-6);
  EXPECT_DOUBLE_EQ(machine.inter_node.bandwidth, 1e10);
}

TEST(MachineFile, TheEfficiencyCurveIsLinearInLogFlopsAndFlatBeyondItsEnds) {
  const Machine machine = parse_machine(kComplete, "box.toml");
  EXPECT_DOUBLE_EQ(machine.gemm_fraction(0.01e9), 0.5);
  EXPECT_DOUBLE_EQ(machine.gemm_fraction(1e9), 0.5);
  EXPECT_NEAR(machine.gemm_fraction(10e9), 0.6, 1e-12);  // halfway between 1 and 100 GFLOP in log
  EXPECT_DOUBLE_EQ(machine.gemm_fraction(1e15), 0.7);
  EXPECT_NEAR(machine.gemm_seconds(10e9, 100e12), 10e9 / (100e12 * 0.6), 1e-15);
}

TEST(MachineFile, AMisspeltKeyGetsASuggestionAndItsLine) {
  const std::string message = error_of(replaced(kComplete, "peak_tflops_bf16", "peak_tflops_bf61"));
  EXPECT_NE(message.find("box.toml:7"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean `compute.peak_tflops_bf16`"), std::string::npos) << message;
}

TEST(MachineFile, AMissingKeyIsNamed) {
  const std::string message = error_of(replaced(kComplete, "inter_node_gbs = 10\n", ""));
  EXPECT_NE(message.find("missing key `network.inter_node_gbs`"), std::string::npos) << message;
}

TEST(MachineFile, BadValuesNameTheirKeyAndLine) {
  const std::string negative = error_of(replaced(kComplete, "intra_node_gbs = 100", "intra_node_gbs = -1"));
  EXPECT_NE(negative.find("box.toml:12: network.intra_node_gbs must be greater than 0"), std::string::npos) << negative;
  const std::string unordered = error_of(replaced(kComplete, "[[1, 0.5], [100, 0.7]]", "[[100, 0.5], [1, 0.7]]"));
  EXPECT_NE(unordered.find("compute.gemm_efficiency"), std::string::npos) << unordered;
  EXPECT_NE(unordered.find("increasing"), std::string::npos) << unordered;
  const std::string over_one = error_of(replaced(kComplete, "[100, 0.7]", "[100, 1.7]"));
  EXPECT_NE(over_one.find("must be in (0, 1]"), std::string::npos) << over_one;
  EXPECT_NE(error_of("[machine\n").find("box.toml:1: invalid TOML"), std::string::npos);
}

TEST(MachineFile, APrecisionWithoutAPeakIsAnInputError) {
  const Machine machine = parse_machine(kComplete, "box.toml");
  try {
    machine.peak_flops(MatmulPrecision::fp32);
    FAIL() << "fp32 has no peak in the file";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("compute.peak_tflops_fp32"), std::string::npos) << error.what();
  }
  EXPECT_NE(error_of(replaced(kComplete, "peak_tflops_bf16 = 100\n", "")).find("no matrix-product peak"),
            std::string::npos);
}

}  // namespace
}  // namespace trident
