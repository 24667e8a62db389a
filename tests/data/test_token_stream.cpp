// Loading token files: the llm.c shard format, plain text, and every way a file can be wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/llmc_shard.hpp"
#include "data/token_stream.hpp"

namespace trident {
namespace {

// A file under the test temp dir named after the running test, so parallel ctest runs don't collide.
std::string temp_file(const std::string& suffix) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (std::filesystem::path(::testing::TempDir()) /
          (std::string("trident_") + info->test_suite_name() + "_" + info->name() + suffix))
      .string();
}

struct ShardHeader {
  std::int32_t magic = kLlmcShardMagic;
  std::int32_t version = kLlmcShardVersion;
  std::int32_t count = -1;  // -1: the number of tokens written
};

// Writes an llm.c shard byte by byte, with a header that may lie about the file.
std::string write_shard(const std::vector<std::uint16_t>& tokens, ShardHeader header = {}) {
  const std::string path = temp_file(".bin");
  std::vector<std::int32_t> ints(kLlmcShardHeaderInts, 0);
  ints[0] = header.magic;
  ints[1] = header.version;
  ints[2] = header.count >= 0 ? header.count : static_cast<std::int32_t>(tokens.size());
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(ints.data()), static_cast<std::streamsize>(ints.size() * 4));
  file.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
  return path;
}

DataConfig file_data(DataKind kind, const std::string& path) {
  DataConfig data;
  data.kind = kind;
  data.path = path;
  return data;
}

// Expects load_tokens to throw InputError whose message contains every one of `fragments`.
void expect_input_error(const DataConfig& data, int vocab, const std::vector<std::string>& fragments) {
  try {
    load_tokens(data, vocab, 1);
    FAIL() << "no InputError for " << data.path;
  } catch (const InputError& error) {
    const std::string message = error.what();
    for (const auto& fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos)
        << "'" << fragment << "' missing from: " << message;
  }
}

TEST(BinShard, RoundTripKeepsEveryToken) {
  const std::vector<std::uint16_t> written = {0, 1, 50256, 65535, 7, 7, 300};
  const std::string path = write_shard(written);
  const TokenStream stream = load_tokens(file_data(DataKind::bin, path), 65536, 1);
  ASSERT_EQ(stream.tokens.size(), written.size());
  for (std::size_t i = 0; i < written.size(); ++i) EXPECT_EQ(stream.tokens[i], written[i]) << "at " << i;
  EXPECT_EQ(stream.source, path);
}

TEST(BinShard, WrongMagicNamesFoundAndExpected) {
  const std::string path = write_shard({1, 2, 3}, {.magic = 12345});
  expect_input_error(file_data(DataKind::bin, path), 256, {path, "magic", "12345", "20240520"});
}

TEST(BinShard, WrongVersionIsRejected) {
  const std::string path = write_shard({1, 2, 3}, {.version = 2});
  expect_input_error(file_data(DataKind::bin, path), 256, {path, "version 2", "expected 1"});
}

TEST(BinShard, TruncatedPayloadNamesBothCounts) {
  const std::string path = write_shard({1, 2, 3}, {.count = 10});
  expect_input_error(file_data(DataKind::bin, path), 256, {path, "truncated", "10 tokens", "only 3"});
}

TEST(BinShard, TruncatedHeaderIsRejected) {
  const std::string path = temp_file(".bin");
  std::ofstream(path, std::ios::binary) << "short";
  expect_input_error(file_data(DataKind::bin, path), 256, {path, "truncated"});
}

TEST(BinShard, TrailingBytesAreRejected) {
  const std::string path = write_shard({1, 2, 3, 4}, {.count = 3});
  expect_input_error(file_data(DataKind::bin, path), 256, {path, "need exactly"});
}

TEST(BinShard, TokenNotBelowVocabNamesPositionAndKey) {
  const std::string path = write_shard({5, 9, 255, 256, 1000, 3});
  expect_input_error(file_data(DataKind::bin, path), 256,
                     {path, "token id 256", "position 3", "model.vocab = 256", "at least 1001"});
}

TEST(BinShard, MissingFileNamesPathAndKey) {
  const std::string path = temp_file(".does-not-exist.bin");
  expect_input_error(file_data(DataKind::bin, path), 256, {path, "data.path", "cannot open"});
}

TEST(TextFile, TokensAreTheBytes) {
  const std::string path = temp_file(".txt");
  const std::string text = "Hi\n\xff\x01";
  std::ofstream(path, std::ios::binary) << text;
  const TokenStream stream = load_tokens(file_data(DataKind::text, path), 256, 1);
  EXPECT_EQ(stream.tokens, (std::vector<std::int32_t>{'H', 'i', '\n', 255, 1}));
}

TEST(TextFile, BytesAboveASmallerVocabAreRejected) {
  const std::string path = temp_file(".txt");
  std::ofstream(path, std::ios::binary) << "abc";
  expect_input_error(file_data(DataKind::text, path), 98, {path, "token id 98", "position 1", "model.vocab"});
}

TEST(TextFile, MissingFileNamesPath) {
  const std::string path = temp_file(".does-not-exist.txt");
  expect_input_error(file_data(DataKind::text, path), 256, {path, "data.path"});
}

}  // namespace
}  // namespace trident
