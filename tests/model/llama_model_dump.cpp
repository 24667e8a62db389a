// Writes a whole Llama model's loss and gradients on one rank (trident's own initialisation, random
// tokens) for the PyTorch reference in test_llama_model_reference.py (not a test itself):
//   llama_model_dump DIR [tied]
// DIR/<param>.f32 and <param>.grad.f32 hold every parameter and the gradient of the mean loss, as
// raw little-endian float32 in the store's layout; tokens.i32 and targets.i32 the micro-batch;
// config.txt the shape and the loss as "key value" lines.
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

void dump(const std::string& dir, bool tied) {
  ModelConfig cfg = llama_block_config();  // grouped-query: 4 query heads on 2 kv heads
  cfg.layers = 2;
  cfg.tie_embeddings = tied;
  const int B = BlockCase::B;
  Transformer model(cfg, B, 7, no_tp());
  const int rows = B * cfg.seq_len;
  const IntBuffer tokens = random_tokens(rows, cfg.vocab, 1), targets = random_tokens(rows, cfg.vocab, 2);
  const double loss = model.forward(0, tokens, targets) / rows;
  model.backward(0, 1.0f / static_cast<float>(rows));
  write(dir + "/tokens.i32", host_ints(tokens));
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
         << "\nkv_heads " << cfg.kv_heads << "\nffn_hidden " << cfg.ffn_hidden << "\nlayers " << cfg.layers
         << "\nvocab " << cfg.vocab << "\nrope_theta " << cfg.rope_theta << "\nnorm_eps " << cfg.norm_eps << "\nloss "
         << loss << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: llama_model_dump DIR [tied]\n");
    return 2;
  }
  Kokkos::ScopeGuard kokkos(argc, argv);
  dump(argv[1], argc == 3 && std::string(argv[2]) == "tied");
  return 0;
}
