#include "deck/model_family.hpp"

#include <string>

#include "family/family.hpp"

namespace trident {

namespace {

// A key or table ([model.moe]) that only another family reads is a mistake, not something to ignore.
void check_family_keys(const ModelConfig& model, const toml::table& model_section, const KeyLocations& where) {
  const FamilyDescription& family = family_of(model);
  for (const FamilyDescription& other : families()) {
    for (std::string_view key : other.own_keys) {
      if (family.reads_key(key) || !model_section.contains(key)) continue;
      const std::string name = "model." + std::string(key);
      const std::string title(other.title);
      const bool table = model_section.get(key)->is_table();
      const std::string given = table ? "[" + name + "] is a " + title + " section" : name + " is a " + title + " key";
      where.fail(name, given + ", but model.family = \"" + std::string(word_of(model.family)) + "\"" +
                           (model_section.contains("family") ? "" : " (the default)") +
                           "; remove it, or set model.family = \"" + std::string(word_of(other.family)) + "\"");
    }
  }
}

// [model.moe] turns the mixture on; its expert count has no default that could mean that, so a
// table without it (top_k alone, say) is an error rather than a silently dense model.
void check_mixture_table(const toml::table& model_section, const KeyLocations& where) {
  const toml::table* moe = model_section.get_as<toml::table>("moe");
  if (moe == nullptr || moe->contains("experts")) return;
  where.fail("model.moe", "[model.moe] needs model.moe.experts, the number of experts in each mixture layer (at "
                          "least 1); add experts = N to [model.moe], or remove the section for dense MLPs");
}

}  // namespace

void resolve_model_family(Deck& deck, const toml::table& model_section, const KeyLocations& where) {
  ModelConfig& model = deck.model;
  check_family_keys(model, model_section, where);
  check_mixture_table(model_section, where);
  if (!model_section.contains("tie_embeddings")) model.tie_embeddings = family_of(model).head_tied_by_default;
}

}  // namespace trident
