#include "gpu/device_selection.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"

namespace trident {
namespace {

std::string error_of(const NodePlacement& placement, int devices, bool share = false) {
  try {
    choose_device(placement, devices, share);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceSelection, EachRankOfANodeTakesTheGpuOfItsNodeLocalRank) {
  for (int local = 0; local < 4; ++local) EXPECT_EQ(choose_device({local, 4, "n1"}, 4), local);
  EXPECT_EQ(choose_device({1, 2, "n1"}, 8), 1);  // fewer ranks than GPUs: the first ones are used
}

TEST(DeviceSelection, MoreRanksThanGpusIsAClearError) {
  const std::string message = error_of({4, 5, "gpu17"}, 4);
  EXPECT_NE(message.find("5 ranks run on node gpu17 but it has 4 GPU(s)"), std::string::npos) << message;
  EXPECT_NE(message.find("--ntasks-per-node=4"), std::string::npos) << message;
  EXPECT_NE(message.find("parallel.share_device = true"), std::string::npos) << message;
  EXPECT_NE(error_of({0, 5, "gpu17"}, 4), "") << "every rank of the node reports it, not only the extra one";
}

// parallel.share_device: four ranks on one GPU all take it; five on two go round them.
TEST(DeviceSelection, SharingRanksGoRoundTheGpus) {
  for (int local = 0; local < 4; ++local) EXPECT_EQ(choose_device({local, 4, "n1"}, 1, true), 0);
  for (int local = 0; local < 5; ++local) EXPECT_EQ(choose_device({local, 5, "n1"}, 2, true), local % 2);
  EXPECT_NE(error_of({0, 4, "n1"}, 0, true).find("no CUDA device is visible"), std::string::npos);
}

TEST(DeviceSelection, NoVisibleGpuIsAClearError) {
  const std::string message = error_of({0, 1, "n1"}, 0);
  EXPECT_NE(message.find("no CUDA device is visible on node n1"), std::string::npos) << message;
  EXPECT_NE(message.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << message;
}

}  // namespace
}  // namespace trident
