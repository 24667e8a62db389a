#include "predict/machine.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/error.hpp"
#include "deck/locations.hpp"
#include "deck/messages.hpp"
#include "deck/suggest.hpp"
#include "deck/values.hpp"

namespace trident {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;

struct MachineKey {
  std::string section, name;
  std::function<void(const toml::node&, Machine&, const KeySite&)> read;
  bool required = true;

  std::string full_name() const { return section + "." + name; }
};

MachineKey real_key(std::string section, std::string name, double Machine::*field, const Interval& allowed,
                    double scale, bool required = true) {
  return {std::move(section), std::move(name),
          [=](const toml::node& node, Machine& machine, const KeySite& site) {
            machine.*field = read_real(node, site, allowed) * scale;
          },
          required};
}

MachineKey link_key(std::string name, Link Machine::*link, double Link::*field, const Interval& allowed, double scale) {
  return {"network", std::move(name), [=](const toml::node& node, Machine& machine, const KeySite& site) {
            (machine.*link).*field = read_real(node, site, allowed) * scale;
          }};
}

// [[gflop, fraction], ...] with increasing gflop.
void read_gemm_efficiency(const toml::node& node, Machine& machine, const KeySite& site) {
  const std::string form =
      "must be a list of [GFLOP of one matrix product, fraction of the peak] pairs with "
      "increasing GFLOP, e.g. [[1, 0.5], [100, 0.8]]";
  const toml::array* points = node.as_array();
  if (points == nullptr || points->empty()) site.fail(form + ", got " + describe(node));
  for (const toml::node& point : *points) {
    const toml::array* pair = point.as_array();
    if (pair == nullptr || pair->size() != 2) site.fail(form + "; " + describe(point) + " is not a pair");
    const double gflop = read_real(*pair->get(0), site, kPositive);
    const double fraction = read_real(*pair->get(1), site, kShare);
    if (!machine.gemm_efficiency.empty() && gflop * kGB <= machine.gemm_efficiency.back().first)
      site.fail(form + "; " + format_number(gflop) + " GFLOP does not follow a larger size");
    machine.gemm_efficiency.emplace_back(gflop * kGB, fraction);
  }
}

const std::vector<MachineKey>& machine_keys() {
  static const std::vector<MachineKey> keys{
      {"machine", "name",
       [](const toml::node& node, Machine& machine, const KeySite& site) { machine.name = read_string(node, site); },
       false},
      {"machine", "devices_per_node",
       [](const toml::node& node, Machine& machine, const KeySite& site) {
         machine.devices_per_node = static_cast<int>(read_integer(node, site, 1, 1 << 20));
       }},
      real_key("machine", "device_memory_gib", &Machine::device_memory_bytes, kPositive, kGiB),
      real_key("compute", "peak_tflops_fp32", &Machine::peak_fp32, kNonNegative, 1e12, false),
      real_key("compute", "peak_tflops_tf32", &Machine::peak_tf32, kNonNegative, 1e12, false),
      real_key("compute", "peak_tflops_bf16", &Machine::peak_bf16, kNonNegative, 1e12, false),
      real_key("compute", "memory_bandwidth_gbs", &Machine::memory_bandwidth, kPositive, kGB),
      {"compute", "gemm_efficiency", read_gemm_efficiency},
      link_key("intra_node_gbs", &Machine::intra_node, &Link::bandwidth, kPositive, kGB),
      link_key("intra_node_latency_us", &Machine::intra_node, &Link::latency, kNonNegative, 1e-6),
      link_key("inter_node_gbs", &Machine::inter_node, &Link::bandwidth, kPositive, kGB),
      link_key("inter_node_latency_us", &Machine::inter_node, &Link::latency, kNonNegative, 1e-6),
  };
  return keys;
}

std::vector<std::string> key_names() {
  std::vector<std::string> names;
  for (const MachineKey& key : machine_keys()) names.push_back(key.full_name());
  return names;
}

const MachineKey* find_key(const std::string& full_name) {
  for (const MachineKey& key : machine_keys())
    if (key.full_name() == full_name) return &key;
  return nullptr;
}

void check_known_keys(const toml::table& root, const KeyLocations& where) {
  for (auto&& [section_name, section] : root) {
    const toml::table* table = section.as_table();
    if (table == nullptr)
      fail_at(where.of_node(section),
              "`" + std::string(section_name.str()) + "` is outside the sections [machine], [compute] and [network]");
    for (auto&& [name, value] : *table) {
      const std::string key = std::string(section_name.str()) + "." + std::string(name.str());
      if (find_key(key) != nullptr) continue;
      const auto near = closest_word(key, key_names());
      fail_at(where.of_node(value),
              "unknown key `" + key + "`" +
                  (near ? "; did you mean `" + *near + "`?" : "; the keys are " + join_quoted(key_names())));
    }
  }
}

}  // namespace

double Machine::peak_flops(MatmulPrecision precision) const {
  if (precision == MatmulPrecision::automatic)
    precision = peak_tf32 > 0.0 ? MatmulPrecision::tf32 : MatmulPrecision::fp32;
  const double peak = precision == MatmulPrecision::bf16   ? peak_bf16
                      : precision == MatmulPrecision::tf32 ? peak_tf32
                                                           : peak_fp32;
  if (peak <= 0.0)
    throw InputError(path + ": compute.peak_tflops_" + word_of(precision) + " is not given, but the deck's " +
                     "train.precision asks for " + word_of(precision) + " matrix products; add it or change " +
                     "train.precision");
  return peak;
}

double Machine::gemm_fraction(double flops) const {
  const auto& points = gemm_efficiency;
  if (flops <= points.front().first) return points.front().second;
  if (flops >= points.back().first) return points.back().second;
  std::size_t upper = 1;
  while (points[upper].first < flops) ++upper;
  const auto& [x0, y0] = points[upper - 1];
  const auto& [x1, y1] = points[upper];
  const double weight = std::log(flops / x0) / std::log(x1 / x0);
  return y0 + weight * (y1 - y0);
}

double Machine::gemm_seconds(double flops, double peak) const { return flops / (peak * gemm_fraction(flops)); }

double Machine::kernel_seconds(double bytes, double flops) const {
  const double compute = peak_fp32 > 0.0 ? flops / peak_fp32 : 0.0;
  return std::max(bytes / memory_bandwidth, compute);
}

double Machine::product_seconds(double flops, double bytes, double peak) const {
  return std::max(flops > 0.0 ? gemm_seconds(flops, peak) : 0.0, bytes / memory_bandwidth);
}

Machine parse_machine(const std::string& text, const std::string& source_name) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(source_name));
  } catch (const toml::parse_error& error) {
    fail_at(source_name + ":" + std::to_string(error.source().begin.line),
            "invalid TOML: " + std::string(error.description()));
  }
  const KeyLocations where(source_name, root);
  check_known_keys(root, where);
  Machine machine;
  machine.path = source_name;
  machine.name = std::filesystem::path(source_name).stem().string();
  for (const MachineKey& key : machine_keys()) {
    const toml::node* value = root.at_path(key.full_name()).node();
    if (value == nullptr) {
      if (key.required)
        fail_at(source_name, "missing key `" + key.full_name() + "` (see input_decks/machines/ for complete files)");
      continue;
    }
    key.read(*value, machine, KeySite{key.full_name(), where.of(key.full_name()), {}});
  }
  if (machine.peak_fp32 <= 0.0 && machine.peak_tf32 <= 0.0 && machine.peak_bf16 <= 0.0)
    fail_at(source_name, "no matrix-product peak: give compute.peak_tflops_fp32, _tf32 or _bf16");
  return machine;
}

Machine load_machine(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    fail_at(path, "machine file not found (working directory " + std::filesystem::current_path().string() +
                      "); give a TOML machine file, e.g. input_decks/machines/dgx-a100-80g.toml");
  std::ifstream file(path, std::ios::binary);
  if (!file) fail_at(path, "cannot open the machine file; check its permissions");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_machine(text.str(), path);
}

}  // namespace trident
