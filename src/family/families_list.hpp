// Each family's description, one function per family file (gpt2.cpp, llama.cpp), listed once in
// family.cpp. Internal to the family module.
#pragma once

#include "family/family.hpp"

namespace trident {

const FamilyDescription& gpt2_family();
const FamilyDescription& llama_family();

}  // namespace trident
