#include "deck/model_family.hpp"

#include <string>

namespace trident {

namespace {

// Keys only a Llama model reads: a GPT-2 deck that sets one is asking for something it will not get.
constexpr const char* kLlamaOnlyKeys[] = {"kv_heads", "ffn_hidden", "rope_theta", "norm_eps"};

}  // namespace

void resolve_model_family(Deck& deck, const toml::table& model_section, const KeyLocations& where) {
  ModelConfig& model = deck.model;
  auto given = [&](const char* key) { return model_section.contains(key); };
  if (model.family == ModelFamily::gpt2) {
    for (const char* key : kLlamaOnlyKeys) {
      if (given(key))
        where.fail(std::string("model.") + key, std::string("model.") + key +
                                                    " is a Llama key, but model.family = \"gpt2\" (the default); " +
                                                    "remove it, or set model.family = \"llama\"");
    }
    return;
  }
  if (!given("tie_embeddings")) model.tie_embeddings = false;
}

}  // namespace trident
