// The synthetic stream: reproducible from its seed, in range, and predictable from the previous
// token (so that a model can learn it).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "data/synthetic.hpp"
#include "data/token_stream.hpp"

namespace trident {
namespace {

DataConfig synthetic_data(std::int64_t count) {
  DataConfig data;
  data.kind = DataKind::synthetic;
  data.synthetic_tokens = count;
  return data;
}

std::vector<std::int32_t> read_all(const TokenStream& stream) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(stream.size()));
  stream.read(0, stream.size(), tokens.data());
  return tokens;
}

// Plug-in estimate of H(next | prev) in nats from bigram counts.
double empirical_conditional_entropy(const std::vector<std::int32_t>& tokens, int vocab) {
  std::vector<double> pair_counts(static_cast<std::size_t>(vocab) * vocab, 0.0);
  std::vector<double> prev_counts(vocab, 0.0);
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    pair_counts[static_cast<std::size_t>(tokens[i - 1]) * vocab + tokens[i]] += 1;
    prev_counts[tokens[i - 1]] += 1;
  }
  const double pairs = static_cast<double>(tokens.size() - 1);
  double entropy = 0;
  for (int a = 0; a < vocab; ++a) {
    for (int b = 0; b < vocab; ++b) {
      const double n = pair_counts[static_cast<std::size_t>(a) * vocab + b];
      if (n > 0) entropy -= n / pairs * std::log(n / prev_counts[a]);
    }
  }
  return entropy;
}

TEST(Synthetic, SameSeedSameTokens) {
  const std::vector<std::int32_t> a = read_all(load_tokens(synthetic_data(5000), 256, 42));
  const std::vector<std::int32_t> b = read_all(load_tokens(synthetic_data(5000), 256, 42));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 5000u);
}

TEST(Synthetic, DifferentSeedsDifferentTokens) {
  const std::vector<std::int32_t> a = read_all(load_tokens(synthetic_data(5000), 256, 42));
  const std::vector<std::int32_t> b = read_all(load_tokens(synthetic_data(5000), 256, 43));
  std::size_t equal = 0;
  for (std::size_t i = 0; i < a.size(); ++i) equal += a[i] == b[i];
  EXPECT_LT(equal, a.size() / 20) << "two seeds should give unrelated streams";
}

TEST(Synthetic, TokensStayBelowVocabAndCoverIt) {
  for (int vocab : {1, 2, 17, 256, 50257}) {
    const std::vector<std::int32_t> tokens = synthetic_tokens(20000, vocab, 7);
    std::vector<bool> seen(vocab, false);
    for (std::int32_t token : tokens) {
      ASSERT_GE(token, 0);
      ASSERT_LT(token, vocab);
      seen[token] = true;
    }
    if (vocab <= 256) {
      for (int t = 0; t < vocab; ++t) EXPECT_TRUE(seen[t]) << "token " << t << " of " << vocab << " never drawn";
    }
  }
}

TEST(Synthetic, NextTokenIsPredictableFromThePrevious) {
  const int vocab = 64;
  const std::vector<std::int32_t> tokens = synthetic_tokens(400000, vocab, 3);
  const double theory = synthetic_conditional_entropy(vocab);
  EXPECT_LT(theory, 0.5 * std::log(vocab));
  EXPECT_NEAR(empirical_conditional_entropy(tokens, vocab), theory, 0.03);
}

TEST(Synthetic, ConditionalEntropyFormulaForGpt2ByteVocab) {
  EXPECT_NEAR(synthetic_conditional_entropy(256), 1.603, 0.001);  // vs ln 256 = 5.545
}

}  // namespace
}  // namespace trident
