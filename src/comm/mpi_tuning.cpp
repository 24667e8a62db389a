#include "comm/mpi_tuning.hpp"

#include <mpi.h>

#include <cstdlib>
#include <map>

namespace trident {

namespace {

struct Default {
  const char* variable;
  const char* value;
  const char* what;                               // the banner's name for the setting
  std::map<std::string, std::string> meanings;    // value -> what it selects
};

const std::vector<Default>& defaults() {
  static const std::vector<Default> table = {
      {"OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", "non-blocking all-reduce",
       {{"0", "Open MPI's choice"}, {"1", "ring"}, {"2", "binomial tree"}, {"3", "Rabenseifner"},
        {"4", "recursive doubling"}}},
  };
  return table;
}

}  // namespace

std::vector<MpiSetting> apply_mpi_tuning_defaults() {
  std::vector<MpiSetting> settings;
  for (const Default& d : defaults()) {
    const char* current = std::getenv(d.variable);
    const bool from_user = current != nullptr;
    if (!from_user) setenv(d.variable, d.value, /*overwrite=*/0);
    const std::string value = from_user ? current : d.value;
    const auto meaning = d.meanings.find(value);
    settings.push_back({d.variable, value, from_user,
                        std::string(d.what) + ": " + (meaning != d.meanings.end() ? meaning->second : "algorithm " + value)});
  }
  return settings;
}

std::string describe_mpi(const std::vector<MpiSetting>& settings) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string library(version, static_cast<std::size_t>(length));
  library = library.substr(0, library.find_first_of(",\n"));
  if (library.rfind("Open MPI", 0) != 0) return library;
  for (const MpiSetting& s : settings)
    library += " | " + s.meaning + " (" + (s.from_user ? "your " : "trident's default ") + s.variable + "=" + s.value + ")";
  return library;
}

}  // namespace trident
