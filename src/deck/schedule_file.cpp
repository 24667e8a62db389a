#include "deck/schedule_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "schedule/csv_schedule.hpp"

namespace trident {
namespace {

std::string read_text(const std::string& path, const KeyLocations& where) {
  std::ifstream in(path);
  if (!in)
    where.fail("schedule.file", "schedule.file: cannot read " + path + " (" + std::strerror(errno) +
                                    "); give a CSV action list per pipeline rank, as `trident plan DECK "
                                    "--show-schedule --csv` writes");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The file's shape against the deck's grid and batch.
void check_shape(const Schedule& schedule, const ScheduleConfig& config, int pp, const KeyLocations& where) {
  const std::string file = config.file;
  if (schedule.stages != pp)
    where.fail("schedule.file", "schedule.file " + file + " has " + std::to_string(schedule.stages) +
                                    " row(s) (pipeline ranks) but parallel.pp = " + std::to_string(pp) +
                                    "; give one row per pipeline rank");
  if (schedule.chunks != config.virtual_stages)
    where.fail("schedule.virtual_stages",
               "schedule.file " + file + " places " + std::to_string(schedule.chunks) +
                   " chunks per rank but schedule.virtual_stages = " + std::to_string(config.virtual_stages) +
                   "; set virtual_stages = " + std::to_string(schedule.chunks));
  if (schedule.microbatches != config.microbatches)
    where.fail("schedule.microbatches", "schedule.file " + file + " runs micro-batches 0 … " +
                                            std::to_string(schedule.microbatches - 1) +
                                            " but schedule.microbatches = " + std::to_string(config.microbatches) +
                                            "; set microbatches = " + std::to_string(schedule.microbatches));
}

}  // namespace

void read_schedule_file(Deck& deck, const KeyLocations& where) {
  ScheduleConfig& config = deck.schedule;
  if (config.kind != ScheduleKind::file) {
    if (!config.file.empty())
      where.fail("schedule.file", "schedule.file is read only with schedule.kind = \"file\" (kind is \"" +
                                      word_of(config.kind) + "\"); set kind = \"file\" or remove schedule.file");
    return;
  }
  if (config.file.empty())
    where.fail("schedule.kind",
               "schedule.kind = \"file\" needs schedule.file, the path of a CSV action list per "
               "pipeline rank (`trident plan DECK --show-schedule --csv` writes one)");
  const std::string text = read_text(config.file, where);
  Schedule schedule;
  try {
    schedule = read_schedule_csv(text);
  } catch (const InputError& error) {
    where.fail("schedule.file", "schedule.file " + config.file + ": " + error.what());
  }
  check_shape(schedule, config, deck.parallel.pp, where);
  config.from_file = std::make_shared<const Schedule>(std::move(schedule));
}

}  // namespace trident
