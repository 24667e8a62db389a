// Safetensors files and Hugging Face folders are composed byte by byte here, independently of the
// reader: what a download holds is read exactly, and every broken file is an InputError naming the
// file (and the tensor), never a crash or wrong weights.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.hpp"
#include "io/hf_weights.hpp"
#include "io/safetensors.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;

// A fresh directory named after the test, removed with its files at the end.
class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() /
              ("trident_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
               std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string dir() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A safetensors file: the header's length as a little-endian uint64, the header, the data.
std::string safetensors(const std::string& header, const std::string& data) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return bytes + header + data;
}

template <class T>
std::string bytes_of(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(0.5f, 2.0f);
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = (i % 2 ? -1.0f : 1.0f) * uniform(generator);
  return values;
}

// The slice that reads a whole tensor of `shape` into `out`, filled with NaN beforehand.
TensorSlice whole(const std::vector<std::int64_t>& shape, std::vector<float>& out) {
  out.assign(static_cast<std::size_t>(element_count(shape)), NAN);
  const std::vector<std::int64_t> origin(shape.size(), 0);
  return {"t", shape, shape, out.data(), {{origin, origin, shape}}};
}

// The message of the InputError `act` throws.
template <class Act>
std::string input_error(const Act& act) {
  try {
    act();
  } catch (const InputError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
}

std::string refusal_of_header(const TempDir& tmp, const std::string& header, const std::string& data) {
  write(tmp.file("bad.safetensors"), safetensors(header, data));
  return input_error([&] { SafetensorsFile file(tmp.file("bad.safetensors")); });
}

TEST(Safetensors, ReadsF32ExactlyAndIgnoresMetadata) {
  TempDir tmp;
  const std::vector<float> values = random_floats(6, 1);
  write(tmp.file("m.safetensors"),
        safetensors(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})",
                    bytes_of(values)));
  const SafetensorsFile file(tmp.file("m.safetensors"));
  ASSERT_EQ(file.tensors().size(), 1u);
  EXPECT_EQ(file.tensors().at("w").dtype, "F32");
  EXPECT_EQ(file.tensors().at("w").shape, (std::vector<std::int64_t>{2, 3}));
  std::vector<float> out;
  file.read("w", whole({2, 3}, out));
  EXPECT_EQ(out, values);
}

TEST(Safetensors, WidensBf16AndF16Exactly) {
  TempDir tmp;
  const std::vector<std::uint16_t> bf16 = {0x3FC0, 0xC049, 0x3E80, 0x4128};
  const std::vector<std::uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x3555, 0x8400};
  write(tmp.file("h.safetensors"), safetensors(R"({"b":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},)"
                                               R"("h":{"dtype":"F16","shape":[2,3],"data_offsets":[8,20]}})",
                                               bytes_of(bf16) + bytes_of(f16)));
  const SafetensorsFile file(tmp.file("h.safetensors"));
  std::vector<float> out;
  file.read("b", whole({4}, out));
  EXPECT_EQ(out, (std::vector<float>{1.5f, -3.140625f, 0.25f, 10.5f}));
  file.read("h", whole({2, 3}, out));
  EXPECT_EQ(
      out, (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65504.0f, 0.333251953125f, -std::ldexp(1.0f, -14)}));
}

TEST(Safetensors, ReadsBoxesIntoALocalArray) {
  TempDir tmp;
  const std::vector<float> values = random_floats(4 * 6, 2);  // global [4, 6]
  write(tmp.file("m.safetensors"),
        safetensors(R"({"w":{"dtype":"F32","shape":[4,6],"data_offsets":[0,96]}})", bytes_of(values)));
  // Local [5, 2]: global columns 4..5 of all rows in local rows 0..3, global row 2's columns 0..1 in row 4.
  std::vector<float> out(10, NAN);
  const TensorSlice slice{"w", {4, 6}, {5, 2}, out.data(), {{{0, 4}, {0, 0}, {4, 2}}, {{2, 0}, {4, 0}, {1, 2}}}};
  SafetensorsFile(tmp.file("m.safetensors")).read("w", slice);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) EXPECT_EQ(out[r * 2 + c], values[r * 6 + 4 + c]) << r << ", " << c;
  EXPECT_EQ(out[8], values[2 * 6 + 0]);
  EXPECT_EQ(out[9], values[2 * 6 + 1]);
}

TEST(Safetensors, RefusesTruncatedFilesAndHeaderLengths) {
  TempDir tmp;
  write(tmp.file("short.safetensors"), std::string("\x10\x00\x00", 3));
  expect_mentions(input_error([&] { SafetensorsFile file(tmp.file("short.safetensors")); }),
                  {"short.safetensors", "fewer than the 8-byte"});
  const std::string good =
      safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", bytes_of(random_floats(2, 3)));
  write(tmp.file("cut.safetensors"), good.substr(0, 30));  // cut inside the header
  expect_mentions(input_error([&] { SafetensorsFile file(tmp.file("cut.safetensors")); }),
                  {"cut.safetensors", "runs past the end of the file"});
  write(tmp.file("data.safetensors"), good.substr(0, good.size() - 2));  // cut inside the data
  expect_mentions(input_error([&] { SafetensorsFile file(tmp.file("data.safetensors")); }),
                  {"data.safetensors", "'w'", "names bytes [0, 8) but the file holds only 6 data bytes: truncated?"});
}

TEST(Safetensors, RefusesHeadersThatAreNotObjectsOfEntries) {
  TempDir tmp;
  const std::string data = bytes_of(random_floats(2, 4));
  expect_mentions(refusal_of_header(tmp, R"({"w": {"dtype": "F32",)", data), {"bad.safetensors", "not valid JSON"});
  expect_mentions(refusal_of_header(tmp, "[1, 2]", data), {"bad.safetensors", "JSON array, not an object"});
  expect_mentions(refusal_of_header(tmp, R"({"w":{"dtype":"F32","shape":[2]}})", data),
                  {"bad.safetensors", "'w'", "not an object with dtype, shape and data_offsets"});
  expect_mentions(refusal_of_header(tmp, R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", data),
                  {"bad.safetensors", "'w'", "not a string"});
  expect_mentions(refusal_of_header(tmp, R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", data),
                  {"bad.safetensors", "'w'", "not an array"});
  expect_mentions(refusal_of_header(tmp, R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
                  {"bad.safetensors", "'w'", "negative dimension"});
  expect_mentions(refusal_of_header(tmp, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data),
                  {"bad.safetensors", "'w'", "not two non-negative integers"});
}

TEST(Safetensors, RefusesOffsetsThatDisagreeWithTheFileOrTheShape) {
  TempDir tmp;
  const std::string data = bytes_of(random_floats(4, 5));  // 16 bytes
  expect_mentions(refusal_of_header(tmp, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data),
                  {"bad.safetensors", "'w'", "end before they begin"});
  expect_mentions(refusal_of_header(tmp, R"({"w":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}})", data),
                  {"bad.safetensors", "'w'", "names bytes [0, 24) but the file holds only 16 data bytes"});
  expect_mentions(refusal_of_header(tmp, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", data),
                  {"bad.safetensors", "'w'", "F32 of shape [3] (12 bytes) but data_offsets [0, 16) hold 16"});
  expect_mentions(refusal_of_header(tmp,
                                    R"({"w":{"dtype":"BF16","shape":[4294967296,4294967296,16],)"
                                    R"("data_offsets":[0,16]}})",
                                    data),
                  {"bad.safetensors", "'w'", "more bytes than 64 bits count"});
}

TEST(Safetensors, ReadRefusesOtherDtypesShapesAndNames) {
  TempDir tmp;
  write(tmp.file("m.safetensors"),
        safetensors(R"({"i":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                    R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[16,32]}})",
                    bytes_of(std::vector<std::int64_t>{7, -3}) + bytes_of(random_floats(4, 6))));
  const SafetensorsFile file(tmp.file("m.safetensors"));
  std::vector<float> out;
  expect_mentions(input_error([&] { file.read("i", whole({2}, out)); }),
                  {"m.safetensors", "'i'", "is I64; trident reads F32, BF16 and F16"});
  expect_mentions(input_error([&] {
                    file.read("w", whole({2, 3}, out));
                  }),
                  {"m.safetensors", "'w'", "has shape [2, 2], the deck's model needs [2, 3]"});
  expect_mentions(input_error([&] { file.read("v", whole({2}, out)); }), {"m.safetensors", "no tensor 'v'"});
}

TEST(HfWeights, ReadsASingleFileFolder) {
  TempDir tmp;
  const std::vector<float> values = random_floats(3, 7);
  write(tmp.file("model.safetensors"),
        safetensors(R"({"wte.weight":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", bytes_of(values)));
  const HfWeights weights(tmp.dir());
  EXPECT_EQ(weights.names(), std::vector<std::string>{"wte.weight"});
  EXPECT_TRUE(weights.contains("wte.weight"));
  EXPECT_FALSE(weights.contains("wpe.weight"));
  std::vector<float> out;
  weights.read("wte.weight", whole({3}, out));
  EXPECT_EQ(out, values);
  expect_mentions(input_error([&] { weights.shape("wpe.weight"); }), {tmp.dir(), "has no tensor 'wpe.weight'"});
  expect_mentions(input_error([&] { weights.read("wpe.weight", whole({3}, out)); }),
                  {tmp.dir(), "has no tensor 'wpe.weight'"});
}

void write_two_shards(const TempDir& tmp, const std::vector<float>& a, const std::vector<float>& b) {
  write(tmp.file("model-00001-of-00002.safetensors"),
        safetensors(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", bytes_of(a)));
  write(tmp.file("model-00002-of-00002.safetensors"),
        safetensors(R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})",
                    bytes_of(b)));
}

TEST(HfWeights, ReadsShardsThroughTheIndex) {
  TempDir tmp;
  const std::vector<float> a = random_floats(4, 8), b = random_floats(3, 9);
  write_two_shards(tmp, a, b);
  write(tmp.file("model.safetensors.index.json"),
        R"({"metadata":{"total_size":28},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
        R"("b":"model-00002-of-00002.safetensors"}})");
  const HfWeights weights(tmp.dir());
  EXPECT_EQ(weights.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(weights.shape("a"), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(weights.shape("b"), (std::vector<std::int64_t>{3}));
  std::vector<float> out;
  weights.read("a", whole({2, 2}, out));
  EXPECT_EQ(out, a);
  weights.read("b", whole({3}, out));
  EXPECT_EQ(out, b);
}

TEST(HfWeights, RefusesAMissingShardOrATensorAbsentFromItsShard) {
  TempDir tmp;
  write_two_shards(tmp, random_floats(4, 10), random_floats(3, 11));
  write(tmp.file("model.safetensors.index.json"),
        R"({"weight_map":{"a":"model-00001-of-00002.safetensors","c":"model-00003-of-00003.safetensors"}})");
  expect_mentions(input_error([&] { HfWeights weights(tmp.dir()); }),
                  {"model.safetensors.index.json", "model-00003-of-00003.safetensors", "'c'", "does not exist"});
  write(tmp.file("model.safetensors.index.json"),
        R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors"}})");
  expect_mentions(input_error([&] { HfWeights weights(tmp.dir()); }),
                  {"model.safetensors.index.json", "model-00001-of-00002.safetensors", "'b'", "holds no such tensor"});
}

// Files torch.save writes are read in tests/postprocess/test_hf_import.py (written there by torch).
TEST(HfWeights, NamesAPytorchFileThatIsNotATorchSaveArchive) {
  TempDir tmp;
  write(tmp.file("pytorch_model.bin"), "\x80\x02 a pickle of the legacy format");
  expect_mentions(input_error([&] { HfWeights weights(tmp.dir()); }),
                  {tmp.file("pytorch_model.bin"), "not a zip archive", "before PyTorch 1.6"});
}

TEST(HfWeights, RefusesAFolderWithoutWeights) {
  TempDir tmp;
  expect_mentions(input_error([&] { HfWeights weights(tmp.dir()); }),
                  {tmp.dir(), "model.safetensors", "model.safetensors.index.json"});
  expect_mentions(input_error([&] { HfWeights weights(tmp.file("absent")); }), {"absent", "not a directory"});
}

TEST(HfConfig, GivesTopLevelFieldsAsText) {
  TempDir tmp;
  write(tmp.file("config.json"),
        R"({"model_type": "gpt2", "n_embd": 768, "layer_norm_epsilon": 1e-05,)"
        R"( "tie_word_embeddings": true, "pad_token_id": null, "rope_scaling": {"factor": 8.0}})");
  const std::map<std::string, std::string> config = read_hf_config(tmp.dir());
  EXPECT_EQ(config.at("model_type"), "gpt2");
  EXPECT_EQ(config.at("n_embd"), "768");
  EXPECT_EQ(config.at("layer_norm_epsilon"), "1e-05");
  EXPECT_EQ(config.at("tie_word_embeddings"), "true");
  EXPECT_EQ(config.at("pad_token_id"), "null");
  EXPECT_EQ(config.at("rope_scaling"), R"({"factor":8.0})");
}

TEST(HfConfig, RefusesAMissingOrMalformedConfig) {
  TempDir tmp;
  expect_mentions(input_error([&] { read_hf_config(tmp.dir()); }), {tmp.file("config.json"), "does not exist"});
  write(tmp.file("config.json"), "[768]");
  expect_mentions(input_error([&] { read_hf_config(tmp.dir()); }),
                  {tmp.file("config.json"), "JSON array, not an object"});
  write(tmp.file("config.json"), "{\"n_embd\": 768,");
  expect_mentions(input_error([&] { read_hf_config(tmp.dir()); }), {tmp.file("config.json"), "not valid JSON"});
}

}  // namespace
}  // namespace trident
