// `trident plan DECK --machine FILE`: the predicted step (predict/step_model.hpp) as text, or as
// one JSON object (`--json`) for scripts.
#pragma once

#include <ostream>

#include "deck/config.hpp"
#include "predict/machine.hpp"
#include "predict/search.hpp"
#include "predict/step_model.hpp"

namespace trident {

// The machine, the step time and where it goes, tokens/s, FLOP/s per device and MFU, memory per
// pipeline rank against the device's, and one micro-batch's actions on the first and the last
// virtual stage.
void print_prediction(std::ostream& out, const Deck& deck, const Machine& machine, const StepPrediction& p);

// One JSON object: machine, devices, schedule, step_time_s, tokens_per_s, tflops_per_device, mfu,
// bubble, the step's parts (pipeline_s, tp_comm_s, embedding_sync_s, dp_exposed_s, optimizer_s),
// memory_per_rank_bytes (per pipeline rank), device_memory_bytes and fits.
void print_prediction_json(std::ostream& out, const Deck& deck, const Machine& machine, const StepPrediction& p);

// `--search`: the fastest grids that fit (a table: grid, micro-batching, schedule, recomputation,
// step time, tokens/s, FLOP/s per device, MFU, bubble, the largest rank's memory), the deck's own
// grid and how many beat it, then why each of the first three is fast: where its step goes, and
// which choices and parts of the step differ from the deck's.
void print_search(std::ostream& out, const Machine& machine, int devices, const GridSearch& search);
// The same as one JSON object: {"devices", "predicted", "over_memory", "candidates": [the
// prediction object of each, with "recompute"], "deck": the deck's, "faster_than_deck"}.
void print_search_json(std::ostream& out, const Machine& machine, int devices, const GridSearch& search);

}  // namespace trident
