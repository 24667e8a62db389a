// Writes one Llama block's forward and backward (llama_block_case.hpp) for the PyTorch reference
// in test_llama_block_reference.py (not a test itself):
//   llama_block_dump DIR [mixture]
// DIR/<name>.f32 holds raw little-endian float32: input [B, T, C], output_grad (the projection whose
// dot with the output is the objective), output, input_grad, and for every parameter its value
// (<param>.f32, the store's [out, in] layout) and gradient (<param>.grad.f32). The shape is in
// DIR/config.txt as "key value" lines. With `mixture` the block's MLP is a mixture of experts
// (mixture_block_config): the objective then adds loss_scale × the load-balancing loss's sum
// (aux_sum in config.txt), and router_probs.f32 holds the router's softmax [B·T, experts].
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <string>
#include <vector>

#include "llama_block_case.hpp"

namespace {

using namespace trident;
using namespace trident::testing;

void write(const std::string& path, const std::vector<float>& values) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
}

std::vector<float> part(const std::vector<float>& all, std::size_t first, std::size_t count) {
  return std::vector<float>(all.begin() + first, all.begin() + first + count);
}

void dump(const std::string& dir, bool mixture) {
  BlockCase block(mixture ? mixture_block_config() : llama_block_config());
  const ModelConfig& cfg = block.cfg;
  block.ctx.loss_scale = 0.5f;
  const FloatBuffer output_grad = random_buffer(block.rows * block.C, 2);
  FloatBuffer dresidual("dresidual", output_grad.size());
  Kokkos::deep_copy(dresidual, output_grad);
  block.forward();
  LlamaBlock::backward(block.ctx, block.weights(), block.grads(), block.stash, block.input.data(), dresidual.data(),
                       LlamaBlock::in_place(block.ctx, dresidual.data()), WeightGrads::now);
  write(dir + "/input.f32", to_host(block.input));
  write(dir + "/output_grad.f32", to_host(output_grad));
  write(dir + "/output.f32", to_host(block.output()));
  write(dir + "/input_grad.f32", to_host(dresidual));
  const std::vector<float> values = to_host(block.params.values), grads = to_host(block.params.grads);
  for (const ParamTensor& tensor : block.params.tensors()) {
    write(dir + "/" + tensor.name + ".f32", part(values, tensor.offset, tensor.size));
    write(dir + "/" + tensor.name + ".grad.f32", part(grads, tensor.offset, tensor.size));
  }
  std::ofstream config(dir + "/config.txt");
  if (mixture) {
    double aux_sum = 0.0;
    Kokkos::deep_copy(aux_sum, block.moe->aux_sum);
    write(dir + "/router_probs.f32",
          to_host(FloatBuffer(block.stash.moe.probs, block.rows * static_cast<std::size_t>(cfg.moe.experts))));
    config << "experts " << cfg.moe.experts << "\ntop_k " << cfg.moe.top_k << "\nexpert_ffn_hidden "
           << cfg.expert_hidden() << "\naux_loss_coef " << cfg.moe.aux_loss_coef << "\nloss_scale "
           << block.ctx.loss_scale << "\naux_sum " << std::setprecision(17) << aux_sum << "\n";
  }
  config << "batch " << BlockCase::B << "\nseq_len " << cfg.seq_len << "\nd_model "
                                     << cfg.d_model << "\nheads " << cfg.heads << "\nkv_heads " << cfg.kv_heads
                                     << "\nffn_hidden " << cfg.mlp_hidden() << "\nrope_theta " << cfg.rope_theta
                                     << "\nnorm_eps " << block.ctx.norm_eps << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const bool mixture = argc == 3 && std::string(argv[2]) == "mixture";
  if (argc != 2 && !mixture) {
    std::fprintf(stderr, "usage: llama_block_dump DIR [mixture]\n");
    return 2;
  }
  Kokkos::ScopeGuard kokkos(argc, argv);
  dump(argv[1], mixture);
  return 0;
}
