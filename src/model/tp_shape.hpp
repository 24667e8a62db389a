// What one tensor-parallel rank holds of the model's split dimensions (Megatron style): its query
// and key/value heads (and so its columns of q, k, v and of the attention output), its columns of
// the MLP's hidden layer, and its rows of the vocab-parallel embedding. The vocabulary is padded up to a multiple of
// tp, so the last rank(s) may hold fewer real vocab ids than rows.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>

#include "deck/config.hpp"

namespace trident {

struct TpShape {
  TpShape(const ModelConfig& cfg, int tp_rank, int tp_size)
      : heads(cfg.heads / tp_size),
        kv_heads(cfg.key_value_heads() / tp_size),
        head_dim(cfg.head_dim()),
        attn_width(cfg.d_model / tp_size),
        mlp_width(cfg.mlp_hidden() / tp_size),
        vocab_rows((cfg.vocab + tp_size - 1) / tp_size),
        vocab_first(tp_rank * vocab_rows),
        vocab_real(std::clamp(cfg.vocab - vocab_first, 0, vocab_rows)) {
    if (cfg.heads % tp_size != 0 || cfg.d_model % cfg.heads != 0 || cfg.key_value_heads() % tp_size != 0 ||
        cfg.mlp_hidden() % tp_size != 0)
      throw std::invalid_argument("tensor parallelism: " + std::to_string(cfg.heads) + " heads of d_model " +
                                  std::to_string(cfg.d_model) + " cannot be split across " +
                                  std::to_string(tp_size) + " ranks");
  }

  int heads;        // H / tp
  int kv_heads;     // KV / tp: key/value heads (= heads without grouped-query attention)
  int head_dim;     // C / H
  int attn_width;   // C / tp: columns of q and of the attention output (GPT-2: of k and v too)
  int mlp_width;    // F / tp (GPT-2: 4C / tp)
  int vocab_rows;   // ⌈V / tp⌉: wte rows and logit columns per rank, padding included
  int vocab_first;  // first vocab id of this rank's rows
  int vocab_real;   // how many of those rows are real vocab ids (the rest is padding)
};

}  // namespace trident
