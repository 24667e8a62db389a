#include "deck/model_family.hpp"

#include <string>

#include "family/family.hpp"

namespace trident {

void resolve_model_family(Deck& deck, const toml::table& model_section, const KeyLocations& where) {
  ModelConfig& model = deck.model;
  const FamilyDescription& family = family_of(model);
  for (const FamilyDescription& other : families()) {
    for (std::string_view key : other.own_keys) {
      if (family.reads_key(key) || !model_section.contains(key)) continue;
      const std::string name = "model." + std::string(key);
      where.fail(name, name + " is a " + std::string(other.title) + " key, but model.family = \"" +
                           std::string(word_of(model.family)) + "\"" +
                           (model_section.contains("family") ? "" : " (the default)") +
                           "; remove it, or set model.family = \"" + std::string(word_of(other.family)) + "\"");
    }
  }
  if (!model_section.contains("tie_embeddings")) model.tie_embeddings = family.head_tied_by_default;
}

}  // namespace trident
