// The activation gradients of one backward pass, shared by every micro-batch (they run backward one
// at a time), and the allocation of a buffer left uninitialised. Internal to the model module.
#pragma once

#include <string>

#include "kernels/attention.hpp"
#include "kernels/device.hpp"
#include "model/layer_context.hpp"
#include "model/tp_shape.hpp"

namespace trident {

inline FloatBuffer uninitialised(const char* name, std::size_t n) {
  return FloatBuffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), n);
}

// Activation gradients of one backward pass (micro-batches run backward one at a time).
struct Workspace {
  // mlp_inputs: the MLP's column-parallel outputs per token, in widths of F/tp (GPT-2's c_fc 1,
  // Llama's gate | up 2).
  Workspace(const ModelConfig& cfg, const TpShape& local, int tp_size, int B, int mlp_inputs,
            bool shared_probabilities, int sequence_shards)
      : att(shared_probabilities ? uninitialised("att", attention_saved_floats(attention_heads(cfg, B, tp_size)))
                                 : FloatBuffer()),
        gathered(sequence_shards > 1 ? uninitialised("gathered", rows(cfg, B) * cfg.d_model) : FloatBuffer()),
        dgathered(sequence_shards > 1 ? uninitialised("dgathered", rows(cfg, B) * cfg.d_model) : FloatBuffer()),
        dln_local(sequence_shards > 1 ? uninitialised("dln_local", rows(cfg, B) / sequence_shards * cfg.d_model)
                                      : FloatBuffer()),
        norm_grads(sequence_shards > 1 ? uninitialised("norm_grads", 2 * kMostNormTensors * cfg.d_model)
                                       : FloatBuffer()),
        dresidual(uninitialised("dresidual", rows(cfg, B) * cfg.d_model)),
        dln(uninitialised("dln", rows(cfg, B) * cfg.d_model)),
        datty(uninitialised("datty", rows(cfg, B) * local.attn_width)),
        dqkv(uninitialised("dqkv", 3 * rows(cfg, B) * local.attn_width)),
        attention(uninitialised("attention", attention_scratch_floats(attention_heads(cfg, B, tp_size)))),
        dfch(uninitialised("dfch", rows(cfg, B) * mlp_inputs * local.mlp_width)),
        norm_grad_sums(2, cfg.d_model) {}
  static std::size_t rows(const ModelConfig& cfg, int B) { return static_cast<std::size_t>(B) * cfg.seq_len; }
  BackwardScratch scratch() const {
    return {att.data(),      dln.data(),       datty.data(),     attention.data(),        dfch.data(), dqkv.data(),
            gathered.data(), dgathered.data(), dln_local.data(), norm_grad_sums.scratch()};
  }

  FloatBuffer att;        // selective recomputation: the attention probabilities of the layer at work
  FloatBuffer gathered, dgathered, dln_local;  // sequence parallelism: BackwardScratch's
  // Sequence parallelism: the norms' gradients set aside, then one micro-batch's contribution.
  static constexpr std::size_t kMostNormTensors = 4;
  FloatBuffer norm_grads;
  FloatBuffer dresidual;  // [B, T, C] gradient w.r.t. the residual stream, passed from block to block
  FloatBuffer dln, datty, dqkv, attention, dfch;
  ColumnSumBuffers norm_grad_sums;  // a norm backward's weight and bias gradients, per team
};

}  // namespace trident
