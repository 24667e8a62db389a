#include "deck/schema.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>

#include "deck/locations.hpp"
#include "deck/messages.hpp"
#include "deck/suggest.hpp"
#include "deck/values.hpp"

namespace trident {

void KeySite::fail(const std::string& complaint) const { fail_at(location, key + " " + complaint); }

namespace {

// ---- key makers: one table row each; `part` selects the deck section, `field` the member ----

// A section's struct in the Deck: a member (&Deck::train), or a function for one nested deeper
// (mixture: [model.moe] fills ModelConfig::moe, so that the model's config stays one struct).
template <class Section>
Section& part_of(Deck& deck, Section Deck::*part) {
  return deck.*part;
}
template <class Section>
Section& part_of(Deck& deck, Section& (*part)(Deck&)) {
  return part(deck);
}
MoeConfig& mixture(Deck& deck) { return deck.model.moe; }

template <class Part, class Section, class Int>
KeySpec integer(std::string section, std::string name, Part part, Int Section::*field, std::int64_t min,
                std::int64_t max = largest<Int>()) {
  return {std::move(section), std::move(name), [=](const toml::node& node, Deck& deck, const KeySite& site) {
            part_of(deck, part).*field = static_cast<Int>(read_integer(node, site, min, max));
          }};
}

template <class Part, class Section>
KeySpec real(std::string section, std::string name, Part part, double Section::*field, Interval allowed) {
  return {std::move(section), std::move(name), [=](const toml::node& node, Deck& deck, const KeySite& site) {
            part_of(deck, part).*field = read_real(node, site, allowed);
          }};
}

template <class Section>
KeySpec boolean(std::string section, std::string name, Section Deck::*part, bool Section::*field) {
  return {std::move(section), std::move(name), [=](const toml::node& node, Deck& deck, const KeySite& site) {
            const auto* flag = node.as_boolean();
            if (flag == nullptr) site.fail("must be true or false, got " + describe(node));
            (deck.*part).*field = **flag;
          }};
}

// A string that must be one of the words of T's table (deck/choices.hpp), stored as its value.
template <class Section, class T>
KeySpec choice(std::string section, std::string name, Section Deck::*part, T Section::*field) {
  return {std::move(section), std::move(name), [=](const toml::node& node, Deck& deck, const KeySite& site) {
            std::vector<std::string> words;
            for (const Choice<T>& option : choices(T{})) words.emplace_back(option.word);
            if (!node.is_string()) site.fail("must be one of " + join_quoted(words) + ", got " + describe(node));
            const std::string& given = read_string(node, site);
            if (const std::optional<T> value = parse_choice<T>(given)) {
              (deck.*part).*field = *value;
              return;
            }
            const auto near = closest_word(given, words);
            site.fail("must be one of " + join_quoted(words) + ", got " + in_quotes(given) +
                      (near ? "; did you mean " + in_quotes(*near) + "?" : ""));
          }};
}

template <class Section>
KeySpec directory(std::string section, std::string name, Section Deck::*part, std::string Section::*field) {
  return {std::move(section), std::move(name), [=](const toml::node& node, Deck& deck, const KeySite& site) {
            const std::string& value = read_string(node, site);
            if (value.empty()) site.fail("must not be empty; give a directory such as \"runs/tiny\"");
            (deck.*part).*field = value;
          }};
}

// A path to an input file, stored resolved against the site's base directory; the empty string
// stays empty (= no file).
std::string resolved_path(const std::string& value, const KeySite& site) {
  return value.empty() ? value : (site.base_dir / value).lexically_normal().string();
}

// One input file's path (schedule.file), resolved against the site's base directory.
template <class Section>
KeySpec input_file(std::string section, std::string name, Section Deck::*part, std::string Section::*field) {
  return {std::move(section), std::move(name), [=](const toml::node& node, Deck& deck, const KeySite& site) {
            const std::string& value = read_string(node, site);
            if (value.empty()) site.fail("must not be empty; give the path of a file");
            (deck.*part).*field = resolved_path(value, site);
          }};
}

// A path or an array of them (data.path, eval.path), each resolved against the site's base
// directory; glob patterns stay patterns until deck/token_paths expands them.
template <class Section>
KeySpec input_paths(std::string section, std::string name, Section Deck::*part,
                    std::vector<std::string> Section::*field) {
  return {std::move(section), std::move(name), [=](const toml::node& node, Deck& deck, const KeySite& site) {
            std::vector<std::string> paths;
            if (const auto* array = node.as_array()) {
              for (const toml::node& element : *array) {
                const KeySite element_site{site.key + "[" + std::to_string(paths.size()) + "]", site.location,
                                           site.base_dir};
                paths.push_back(resolved_path(read_string(element, element_site), element_site));
              }
            } else if (node.is_string()) {
              paths.push_back(resolved_path(read_string(node, site), site));
            } else {
              site.fail("must be a path, a glob pattern, or an array of them, got " + describe(node));
            }
            if (std::ranges::any_of(paths, [](const std::string& path) { return path.empty(); }))
              site.fail("must not name an empty path");
            (deck.*part).*field = std::move(paths);
          }};
}

// checkpoint.resume: "auto", "none", or the path of a checkpoint file.
// schedule.replan: "off", "once" or "every N" (N >= 1).
KeySpec replan_choice() {
  return {"schedule", "replan", [](const toml::node& node, Deck& deck, const KeySite& site) {
            const std::string& value = read_string(node, site);
            using Replan = ScheduleConfig::Replan;
            ScheduleConfig& schedule = deck.schedule;
            int every = 0;
            char tail = 0;
            if (value == "off" || value == "once") {
              schedule.replan = value == "off" ? Replan::off : Replan::once;
            } else if (std::sscanf(value.c_str(), "every %d%c", &every, &tail) == 1 && every >= 1) {
              schedule.replan = Replan::every;
              schedule.replan_every = every;
            } else {
              site.fail("must be \"off\", \"once\" or \"every N\" with N >= 1 (steps between re-plans), got \"" +
                        value + "\"");
            }
          }};
}

KeySpec resume_choice() {
  return {"checkpoint", "resume", [](const toml::node& node, Deck& deck, const KeySite& site) {
            const std::string& value = read_string(node, site);
            using Resume = CheckpointConfig::Resume;
            CheckpointConfig& checkpoint = deck.checkpoint;
            if (value.empty()) site.fail("must be \"auto\", \"none\" or the path of a checkpoint file, got \"\"");
            checkpoint.resume = value == "auto" ? Resume::newest : value == "none" ? Resume::none : Resume::file;
            checkpoint.resume_file = checkpoint.resume == Resume::file ? resolved_path(value, site) : "";
          }};
}

// checkpoint.init: "" (none), "hf:DIR" (a Hugging Face model folder) or a trident checkpoint's path,
// each resolved against the deck's directory.
KeySpec init_choice() {
  return {"checkpoint", "init", [](const toml::node& node, Deck& deck, const KeySite& site) {
            const std::string& value = read_string(node, site);
            const bool folder = value.starts_with(kHfPrefix);
            const std::string path = folder ? value.substr(kHfPrefix.size()) : value;
            if (folder && path.empty()) site.fail("\"hf:\" needs a folder: \"hf:DIR\"");
            deck.checkpoint.init = (folder ? std::string(kHfPrefix) : "") + resolved_path(path, site);
          }};
}

std::vector<int> read_integer_list(const toml::node& node, const KeySite& site, std::int64_t min,
                                   const std::string& alternative) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    site.fail("must be an array of integers like [2, 2]" + alternative + ", got " + describe(node));
  }
  std::vector<int> values;
  for (const toml::node& element : *array) {
    const KeySite element_site{site.key + "[" + std::to_string(values.size()) + "]", site.location, site.base_dir};
    values.push_back(static_cast<int>(read_integer(element, element_site, min, largest<int>())));
  }
  return values;
}

// parallel.stage_layers: layer counts per virtual stage, or the word "balanced" (the plan module
// then splits the layers so that the embedding and the head + loss weigh on their stages).
KeySpec stage_layers() {
  return {"parallel", "stage_layers", [](const toml::node& node, Deck& deck, const KeySite& site) {
            const std::string balanced = "balanced";
            const std::string alternative = " (layers per stage) or the string \"balanced\"";
            ParallelConfig& parallel = deck.parallel;
            if (const auto* word = node.as_string()) {
              if (**word != balanced) {
                const bool near = closest_word(**word, {balanced}).has_value();
                site.fail("must be an array of integers like [2, 2]" + alternative + ", got " + describe(node) +
                          (near ? "; did you mean \"balanced\"?" : ""));
              }
              parallel.stage_layers.clear();
              parallel.stage_layers_balanced = true;
              return;
            }
            parallel.stage_layers = read_integer_list(node, site, 1, alternative);
            parallel.stage_layers_balanced = false;
          }};
}

// [model] and [model.moe].
std::vector<KeySpec> model_keys() {
  return {
    integer("model", "layers", &Deck::model, &ModelConfig::layers, 1),
    integer("model", "d_model", &Deck::model, &ModelConfig::d_model, 1),
    integer("model", "heads", &Deck::model, &ModelConfig::heads, 1),
    integer("model", "seq_len", &Deck::model, &ModelConfig::seq_len, 1),
    integer("model", "vocab", &Deck::model, &ModelConfig::vocab, 2),
    boolean("model", "tie_embeddings", &Deck::model, &ModelConfig::tie_embeddings),
    choice("model", "family", &Deck::model, &ModelConfig::family),
    choice("model", "attention", &Deck::model, &ModelConfig::attention),
    integer("model", "kv_heads", &Deck::model, &ModelConfig::kv_heads, 1),
    integer("model", "ffn_hidden", &Deck::model, &ModelConfig::ffn_hidden, 1),
    real("model", "rope_theta", &Deck::model, &ModelConfig::rope_theta, kPositive),
    real("model", "norm_eps", &Deck::model, &ModelConfig::norm_eps, kPositive),

    integer("model.moe", "experts", mixture, &MoeConfig::experts, 1),
    integer("model.moe", "top_k", mixture, &MoeConfig::top_k, 1),
    integer("model.moe", "expert_ffn_hidden", mixture, &MoeConfig::expert_ffn_hidden, 1),
    integer("model.moe", "layer_freq", mixture, &MoeConfig::layer_freq, 1),
    real("model.moe", "aux_loss_coef", mixture, &MoeConfig::aux_loss_coef, kNonNegative),
    real("model.moe", "capacity_factor", mixture, &MoeConfig::capacity_factor, kNonNegative),
  };
}

// [parallel] and [schedule].
std::vector<KeySpec> grid_and_schedule_keys() {
  return {
    integer("parallel", "tp", &Deck::parallel, &ParallelConfig::tp, 1),
    integer("parallel", "pp", &Deck::parallel, &ParallelConfig::pp, 1),
    integer("parallel", "dp", &Deck::parallel, &ParallelConfig::dp, 1),
    integer("parallel", "cp", &Deck::parallel, &ParallelConfig::cp, 1),
    integer("parallel", "ep", &Deck::parallel, &ParallelConfig::ep, 1),
    choice("parallel", "order", &Deck::parallel, &ParallelConfig::order),
    stage_layers(),
    boolean("parallel", "sequence_parallel", &Deck::parallel, &ParallelConfig::sequence_parallel),
    integer("parallel", "zero", &Deck::parallel, &ParallelConfig::zero, 0, 1),
    real("parallel", "bucket_mb", &Deck::parallel, &ParallelConfig::bucket_mb, kPositive),
    choice("parallel", "p2p", &Deck::parallel, &ParallelConfig::p2p),
    boolean("parallel", "share_device", &Deck::parallel, &ParallelConfig::share_device),

    choice("schedule", "kind", &Deck::schedule, &ScheduleConfig::kind),
    integer("schedule", "microbatches", &Deck::schedule, &ScheduleConfig::microbatches, 1),
    integer("schedule", "micro_batch_size", &Deck::schedule, &ScheduleConfig::micro_batch_size, 1),
    integer("schedule", "virtual_stages", &Deck::schedule, &ScheduleConfig::virtual_stages, 1),
    choice("schedule", "recompute", &Deck::schedule, &ScheduleConfig::recompute),
    real("schedule", "timeout_s", &Deck::schedule, &ScheduleConfig::timeout_s, kPositive),
    real("schedule", "auto_memory_limit", &Deck::schedule, &ScheduleConfig::auto_memory_limit, kNonNegative),
    real("schedule", "activation_budget", &Deck::schedule, &ScheduleConfig::activation_budget, kShare),
    replan_choice(),
    input_file("schedule", "file", &Deck::schedule, &ScheduleConfig::file),
  };
}

// [train], [data], [eval], [checkpoint], [output] and [emulate].
std::vector<KeySpec> run_keys() {
  return {
    integer("train", "steps", &Deck::train, &TrainConfig::steps, 1),
    integer("train", "seed", &Deck::train, &TrainConfig::seed, 0),
    real("train", "lr", &Deck::train, &TrainConfig::lr, kPositive),
    real("train", "min_lr", &Deck::train, &TrainConfig::min_lr, kNonNegative),
    integer("train", "warmup_steps", &Deck::train, &TrainConfig::warmup_steps, 0),
    choice("train", "decay", &Deck::train, &TrainConfig::decay),
    real("train", "beta1", &Deck::train, &TrainConfig::beta1, kFraction),
    real("train", "beta2", &Deck::train, &TrainConfig::beta2, kFraction),
    real("train", "eps", &Deck::train, &TrainConfig::eps, kPositive),
    real("train", "weight_decay", &Deck::train, &TrainConfig::weight_decay, kNonNegative),
    real("train", "grad_clip", &Deck::train, &TrainConfig::grad_clip, kNonNegative),
    choice("train", "precision", &Deck::train, &TrainConfig::precision),
    boolean("train", "cuda_graph", &Deck::train, &TrainConfig::cuda_graph),

    choice("data", "kind", &Deck::data, &DataConfig::kind),
    input_paths("data", "path", &Deck::data, &DataConfig::paths),
    integer("data", "synthetic_tokens", &Deck::data, &DataConfig::synthetic_tokens, 2),
    boolean("data", "shuffle", &Deck::data, &DataConfig::shuffle),
    boolean("data", "document_mask", &Deck::data, &DataConfig::document_mask),
    integer("data", "eod_token", &Deck::data, &DataConfig::eod_token, 0),

    input_paths("eval", "path", &Deck::eval, &EvalConfig::paths),
    integer("eval", "every", &Deck::eval, &EvalConfig::every, 0),
    integer("eval", "batches", &Deck::eval, &EvalConfig::batches, 1),

    directory("checkpoint", "dir", &Deck::checkpoint, &CheckpointConfig::dir),
    integer("checkpoint", "every", &Deck::checkpoint, &CheckpointConfig::every, 0),
    integer("checkpoint", "keep", &Deck::checkpoint, &CheckpointConfig::keep, 1),
    choice("checkpoint", "on_failure", &Deck::checkpoint, &CheckpointConfig::on_failure),
    boolean("checkpoint", "async", &Deck::checkpoint, &CheckpointConfig::async),
    real("checkpoint", "timeout_s", &Deck::checkpoint, &CheckpointConfig::timeout_s, kPositive),
    resume_choice(),
    init_choice(),

    directory("output", "dir", &Deck::output, &OutputConfig::dir),
    integer("output", "log_every", &Deck::output, &OutputConfig::log_every, 1),

    boolean("emulate", "enabled", &Deck::emulate, &EmulateConfig::enabled),
    real("emulate", "forward_ms", &Deck::emulate, &EmulateConfig::forward_ms, kNonNegative),
    real("emulate", "backward_ms", &Deck::emulate, &EmulateConfig::backward_ms, kNonNegative),
    real("emulate", "input_grad_ms", &Deck::emulate, &EmulateConfig::input_grad_ms, kNonNegative),
    real("emulate", "weight_grad_ms", &Deck::emulate, &EmulateConfig::weight_grad_ms, kNonNegative),
  };
}

}  // namespace

const std::vector<KeySpec>& deck_keys() {
  static const std::vector<KeySpec> keys = [] {
    std::vector<KeySpec> all;
    for (auto part : {model_keys, grid_and_schedule_keys, run_keys}) std::ranges::move(part(), std::back_inserter(all));
    return all;
  }();
  return keys;
}

const KeySpec* find_key(std::string_view section, std::string_view name) {
  for (const KeySpec& key : deck_keys()) {
    if (key.section == section && key.name == name) return &key;
  }
  return nullptr;
}

std::vector<std::string> section_names() {
  std::vector<std::string> sections;
  for (const KeySpec& key : deck_keys()) {
    if (std::ranges::find(sections, key.section) == sections.end()) sections.push_back(key.section);
  }
  return sections;
}

std::vector<std::string> key_names() {
  std::vector<std::string> names;
  for (const KeySpec& key : deck_keys()) names.push_back(key.full_name());
  return names;
}

std::vector<std::string> key_names_in(std::string_view section) {
  std::vector<std::string> names;
  for (const KeySpec& key : deck_keys()) {
    if (key.section == section) names.push_back(key.name);
  }
  return names;
}

}  // namespace trident
