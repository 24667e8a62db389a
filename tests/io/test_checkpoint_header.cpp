// The checkpoint metadata a resume relies on is checked when read: bad metadata is a bad
// checkpoint (CheckpointError naming the file and the attribute), never a crash or a wrong step.
#include <gtest/gtest.h>

#include <limits>

#include "io/checkpoint_header.hpp"
#include "io/parallel_checkpoint.hpp"

namespace trident {
namespace {

Attributes good() {
  return {{"data_shuffle", std::int64_t{1}},
          {"data_windows", std::int64_t{4095}},
          {"grid", std::string("2x2x1")},
          {"step", std::int64_t{7}}};
}

Attributes with(const std::string& name, AttributeValue value) {
  Attributes attributes = good();
  for (auto& [key, old] : attributes)
    if (key == name) old = std::move(value);
  return attributes;
}

Attributes without(const std::string& name) {
  Attributes attributes = good();
  std::erase_if(attributes, [&](const auto& entry) { return entry.first == name; });
  return attributes;
}

std::string refusal(const Attributes& attributes) {
  try {
    checkpoint_header(attributes, "ck.h5");
  } catch (const CheckpointError& error) {
    return error.what();
  }
  return "accepted";
}

TEST(CheckpointHeader, ReadsWhatAResumeNeeds) {
  const CheckpointHeader header = checkpoint_header(good(), "ck.h5");
  EXPECT_EQ(header.step, 7);
  EXPECT_EQ(header.grid, "2x2x1");
  EXPECT_EQ(header.data_windows, 4095);
  EXPECT_TRUE(header.data_shuffled);
  EXPECT_FALSE(checkpoint_header(without("data_windows"), "ck.h5").data_windows.has_value());
}

TEST(CheckpointHeader, RefusesMissingMistypedAndImpossibleMetadata) {
  EXPECT_EQ(refusal(without("step")), "checkpoint 'ck.h5': attribute 'step' is missing");
  EXPECT_EQ(refusal(with("step", std::string("7"))),
            "checkpoint 'ck.h5': attribute 'step' has the wrong type (expected an integer)");
  EXPECT_EQ(refusal(with("step", std::int64_t{-1})),
            "checkpoint 'ck.h5': attribute 'step' is -1, outside [0, 2147483647]");
  EXPECT_NE(refusal(with("step", std::int64_t{std::numeric_limits<int>::max()} + 1)).find("outside"),
            std::string::npos);
  EXPECT_EQ(refusal(with("grid", 2.0)), "checkpoint 'ck.h5': attribute 'grid' has the wrong type (expected a string)");
  EXPECT_NE(refusal(with("data_windows", std::int64_t{0})).find("'data_windows' is 0"), std::string::npos);
  EXPECT_NE(refusal(with("data_shuffle", std::int64_t{2})).find("'data_shuffle' is 2"), std::string::npos);
  EXPECT_EQ(refusal(without("data_shuffle")), "checkpoint 'ck.h5': attribute 'data_shuffle' is missing");
}

}  // namespace
}  // namespace trident
