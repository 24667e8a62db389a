// Loading token files: both llm.c shard variants, plain text, several files as one stream, and
// every way a file can be wrong. (Megatron datasets: test_token_formats.py, written by numpy.)
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
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

// llm.c's header as data_common.py writes it: 256 int32, magic, version, token count.
struct ShardHeader {
  std::int32_t magic = 20240520;
  std::int32_t version = 1;
  std::int32_t count = -1;  // -1: the number of tokens written
};

// Writes an llm.c shard byte by byte, with a header that may lie about the file; Token is
// std::uint16_t or std::uint32_t.
template <class Token = std::uint16_t>
std::string write_shard(const std::vector<Token>& tokens, ShardHeader header = {}, const std::string& suffix = ".bin") {
  const std::string path = temp_file(suffix);
  std::vector<std::int32_t> ints(256, 0);
  ints[0] = header.magic;
  ints[1] = header.version;
  ints[2] = header.count >= 0 ? header.count : static_cast<std::int32_t>(tokens.size());
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(ints.data()), static_cast<std::streamsize>(ints.size() * 4));
  file.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * sizeof(Token)));
  return path;
}

DataConfig file_data(DataKind kind, std::vector<std::string> paths) {
  DataConfig data;
  data.kind = kind;
  data.paths = std::move(paths);
  return data;
}
DataConfig file_data(DataKind kind, const std::string& path) { return file_data(kind, std::vector{path}); }

std::vector<std::int32_t> read_all(const TokenStream& stream) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(stream.size()));
  stream.read(0, stream.size(), tokens.data());
  return tokens;
}

// Expects loading (and reading every token of) `data` to throw InputError whose message contains
// every one of `fragments`.
void expect_input_error(const DataConfig& data, int vocab, const std::vector<std::string>& fragments) {
  try {
    read_all(load_tokens(data, vocab, 1));
    FAIL() << "no InputError for " << data.paths.front();
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
  const std::vector<std::int32_t> tokens = read_all(stream);
  ASSERT_EQ(tokens.size(), written.size());
  for (std::size_t i = 0; i < written.size(); ++i) EXPECT_EQ(tokens[i], written[i]) << "at " << i;
  EXPECT_NE(stream.describe().find(path + " (llm.c, uint16)"), std::string::npos) << stream.describe();
}

TEST(BinShard, The32BitVariantHoldsLlama3Ids) {
  const std::vector<std::uint32_t> written = {0, 65535, 65536, 128000, 128255, 7};
  const std::string path = write_shard(written, {.magic = 20240801, .version = 7});
  const TokenStream stream = load_tokens(file_data(DataKind::bin, path), 128256, 1);
  EXPECT_EQ(read_all(stream), (std::vector<std::int32_t>{0, 65535, 65536, 128000, 128255, 7}));
  EXPECT_NE(stream.describe().find("uint32"), std::string::npos) << stream.describe();
}

TEST(BinShard, The32BitMagicWithTheUint16VersionIsRejected) {
  const std::string path = write_shard<std::uint32_t>({1, 2}, {.magic = 20240801, .version = 1});
  expect_input_error(file_data(DataKind::bin, path), 256, {path, "version 1", "expected 7"});
}

TEST(BinShard, SeveralFilesReadAsOneStreamAcrossTheirBoundaries) {
  const std::string a = write_shard<std::uint16_t>({10, 11, 12}, {}, ".a.bin");
  const std::string b = write_shard<std::uint16_t>({}, {}, ".b.bin");
  const std::string c = write_shard<std::uint16_t>({13, 14}, {}, ".c.bin");
  const TokenStream stream = load_tokens(file_data(DataKind::bin, {a, b, c}), 256, 1);
  ASSERT_EQ(stream.size(), 5);
  std::vector<std::int32_t> middle(3);
  stream.read(1, 3, middle.data());  // crosses a into c, over the empty b
  EXPECT_EQ(middle, (std::vector<std::int32_t>{11, 12, 13}));
  EXPECT_NE(stream.describe().find("+ 2 more"), std::string::npos) << stream.describe();
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
  expect_input_error(file_data(DataKind::bin, path), 256, {path, "token id 256", "position 3", "model.vocab = 256"});
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
  EXPECT_EQ(read_all(stream), (std::vector<std::int32_t>{'H', 'i', '\n', 255, 1}));
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
