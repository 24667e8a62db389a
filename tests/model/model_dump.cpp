// Writes a whole model's loss and gradients on one rank (trident's own initialisation, random
// tokens) for the PyTorch reference in test_model_reference.py (not a test itself):
//   model_dump DIR gpt2|llama [tied|untied] [documents]
// DIR/<param>.f32 and <param>.grad.f32 hold every parameter and the gradient of the mean loss, as
// raw little-endian float32 in the store's layout; tokens.i32 and targets.i32 the micro-batch;
// config.txt the shape and the loss as "key value" lines. With `documents` the tokens hold
// end-of-document tokens (config's eod) and the model masks attention and restarts positions at
// them (data.document_mask).
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "llama_block_case.hpp"

namespace {

using namespace trident;
using namespace trident::testing;

template <class T>
void write(const std::string& path, const std::vector<T>& values) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
}

std::vector<int> host_ints(const IntBuffer& buffer) {
  auto mirror = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buffer);
  return std::vector<int>(mirror.data(), mirror.data() + mirror.size());
}

// Random tokens of two sequences of 12, the last vocabulary id ending documents after positions
// 3 and 8 of the first and 5 of the second (and nowhere else), or nowhere without documents.
std::vector<int> input_tokens(const ModelConfig& cfg, int rows, bool documents) {
  std::vector<int> tokens = host_ints(random_tokens(rows, cfg.vocab - 1, 1));
  if (documents)
    for (int at : {3, 8, cfg.seq_len + 5}) tokens[at] = cfg.vocab - 1;
  return tokens;
}

ModelConfig dump_config(const std::string& family, bool tied) {
  ModelConfig cfg = family == "llama" ? llama_block_config() : tiny_config();  // Llama: 4 query heads on 2 kv heads
  cfg.layers = 2;
  cfg.seq_len = 12;
  cfg.tie_embeddings = tied;
  return cfg;
}

void dump(const std::string& dir, const std::string& family, bool tied, bool with_documents) {
  const ModelConfig cfg = dump_config(family, tied);
  const int B = 2, rows = B * cfg.seq_len, eod = with_documents ? cfg.vocab - 1 : -1;
  Transformer model(cfg, B, 7, no_tp());
  const std::vector<int> inputs = input_tokens(cfg, rows, with_documents);
  std::vector<int> starts(rows), positions(rows);  // position ids restart at each document
  for (int b = 0; b < B; ++b) document_starts(&inputs[b * cfg.seq_len], cfg.seq_len, eod, &starts[b * cfg.seq_len]);
  for (int row = 0; row < rows; ++row) positions[row] = row % cfg.seq_len - starts[row];
  const IntBuffer tokens = int_buffer(inputs), targets = random_tokens(rows, cfg.vocab, 2);
  const IntBuffer device_starts = int_buffer(starts), device_positions = int_buffer(positions);
  TokenPositions at;
  if (with_documents) at = {device_positions.data(), {device_starts.data(), starts.data()}};
  const double loss = model.forward(0, tokens, targets, at) / rows;
  model.backward(0, 1.0f / static_cast<float>(rows));
  write(dir + "/tokens.i32", inputs);
  write(dir + "/targets.i32", host_ints(targets));
  const std::vector<float> values = to_host(model.params().values), grads = to_host(model.params().grads);
  for (const ParamTensor& tensor : model.params().tensors()) {
    auto part = [&](const std::vector<float>& all) {
      return std::vector<float>(all.begin() + tensor.offset, all.begin() + tensor.offset + tensor.size);
    };
    write(dir + "/" + tensor.name + ".f32", part(values));
    write(dir + "/" + tensor.name + ".grad.f32", part(grads));
  }
  std::ofstream config(dir + "/config.txt");
  config.precision(17);
  config << "batch " << B << "\nseq_len " << cfg.seq_len << "\nd_model " << cfg.d_model << "\nheads " << cfg.heads
         << "\nkv_heads " << cfg.key_value_heads() << "\nffn_hidden " << cfg.mlp_hidden() << "\nlayers " << cfg.layers
         << "\nvocab " << cfg.vocab << "\nrope_theta " << cfg.rope_theta << "\nnorm_eps " << cfg.norm_eps << "\neod "
         << eod << "\nloss " << loss << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string family = argc > 2 ? argv[2] : "";
  if (argc < 3 || argc > 5 || (family != "gpt2" && family != "llama")) {
    std::fprintf(stderr, "usage: model_dump DIR gpt2|llama [tied|untied] [documents]\n");
    return 2;
  }
  Kokkos::ScopeGuard kokkos(argc, argv);
  const bool tied = argc > 3 ? std::string(argv[3]) == "tied" : family == "gpt2";
  dump(argv[1], family, tied, argc == 5 && std::string(argv[4]) == "documents");
  return 0;
}
