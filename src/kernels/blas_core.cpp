#include "kernels/blas_core.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#ifdef TRIDENT_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace trident {
namespace {

// Set in the environment of the restarted program: the core OpenBLAS had chosen.
constexpr char kFellBackFrom[] = "TRIDENT_BLAS_CORE_FELL_BACK_FROM";

struct CoreClass {
  std::string_view core;
  int vector_class;
};
constexpr std::array<CoreClass, 10> kCores{{{"Prescott", 1},
                                            {"Core2", 1},
                                            {"Nehalem", 1},
                                            {"Atom", 1},
                                            {"Sandybridge", 2},
                                            {"Haswell", 3},
                                            {"Zen", 3},
                                            {"SkylakeX", 4},
                                            {"Cooperlake", 4},
                                            {"SapphireRapids", 4}}};

bool has_all(const std::set<std::string>& flags, std::initializer_list<const char*> wanted) {
  return std::ranges::all_of(wanted, [&](const char* flag) { return flags.contains(flag); });
}

#ifdef TRIDENT_HAVE_OPENBLAS
// The first processor's flags and whether it is AMD's.
std::set<std::string> cpu_flags(bool& amd) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::string> flags;
  amd = false;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("vendor_id")) amd = line.find("AuthenticAMD") != std::string::npos;
    if (!line.starts_with("flags")) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string word; words >> word;) flags.insert(word);
    break;
  }
  return flags;
}
#endif

}  // namespace

int blas_core_vector_class(std::string_view core) {
  for (const CoreClass& known : kCores)
    if (known.core == core) return known.vector_class;
  return 0;
}

std::string best_blas_core(const std::set<std::string>& flags, bool amd) {
  if (has_all(flags, {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}))
    return flags.contains("avx512_bf16") ? "Cooperlake" : "SkylakeX";
  if (has_all(flags, {"avx2", "fma"})) return amd ? "Zen" : "Haswell";
  if (flags.contains("avx")) return "Sandybridge";
  if (flags.contains("sse4_2")) return "Nehalem";
  if (flags.contains("ssse3")) return "Core2";
  return "Prescott";
}

std::string better_blas_core(std::string_view chosen, const std::set<std::string>& flags, bool amd) {
  const int chosen_class = blas_core_vector_class(chosen);
  const std::string best = best_blas_core(flags, amd);
  if (chosen_class == 0 || blas_core_vector_class(best) <= chosen_class) return "";
  return best;
}

void choose_blas_core_or_restart(char** argv) {
#ifdef TRIDENT_HAVE_OPENBLAS
  if (std::getenv(kFellBackFrom) != nullptr) return;  // restarted already
  const char* asked = std::getenv("OPENBLAS_CORETYPE");
  const char* as_if_chosen = std::getenv("TRIDENT_TEST_BLAS_CORE_AS_IF_CHOSEN");
  if (asked != nullptr && (as_if_chosen == nullptr || std::strcmp(as_if_chosen, "1") != 0)) return;
  if (std::strstr(openblas_get_config(), "DYNAMIC_ARCH") == nullptr) return;  // one core compiled in
  const std::string chosen = openblas_get_corename();
  bool amd = false;
  const std::set<std::string> flags = cpu_flags(amd);  // before amd is read: argument order is unspecified
  const std::string better = better_blas_core(chosen, flags, amd);
  if (better.empty()) return;
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  setenv(kFellBackFrom, chosen.c_str(), 1);
  unsetenv("TRIDENT_TEST_BLAS_CORE_AS_IF_CHOSEN");
  execv("/proc/self/exe", argv);
  // Not restarted (no /proc?): run on OpenBLAS's choice, and say so.
  std::cerr << "trident: warning: OpenBLAS chose its " << chosen << " kernels where this CPU runs " << better
            << "'s; restarting with OPENBLAS_CORETYPE=" << better << " failed (" << std::strerror(errno)
            << "): set it yourself\n";
  unsetenv(kFellBackFrom);
#else
  (void)argv;
#endif
}

std::string blas_core_note() {
  const char* fell_back_from = std::getenv(kFellBackFrom);
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  if (fell_back_from == nullptr || core == nullptr) return "";
  return std::string("OpenBLAS chose ") + fell_back_from + " on this CPU; trident chose " + core + " from its flags";
}

std::string openblas_kernels_line() {
#ifdef TRIDENT_HAVE_OPENBLAS
  const std::string note = blas_core_note();
  return std::string(openblas_get_config()) + " | core " + openblas_get_corename() +
         (note.empty() ? "" : " (" + note + ")");
#else
  return "";
#endif
}

}  // namespace trident
