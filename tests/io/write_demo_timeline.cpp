// Writes a small known timeline to argv[1] for tests/io/test_timeline_h5py.py, which checks
// these exact values through h5py (keep the two files in step).
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>

#include "io/timeline_writer.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_demo_timeline OUTPUT.h5\n";
    return 2;
  }
  try {
    trident::TimelineWriter writer(argv[1], {{"schedule", std::string("1f1b")},
                                             {"p", std::int64_t{2}},
                                             {"m", std::int64_t{4}},
                                             {"grid", std::string("tp=1 pp=2 dp=1")},
                                             {"deck", std::string("[model]\nlayers = 2\n")}},
                                 /*stages=*/2);
    const double losses[] = {5.5, 4.25, 3.125};
    for (int step = 1; step <= 3; ++step) {
      trident::StepRecord record;
      record.step = step;
      record.loss = losses[step - 1];
      record.lr = 1e-3;
      record.tokens_per_s = 1000.0 * step;
      // Stage 0 holds more activations than stage 1 (1F1B); stage 0's peak of step 3 needs 64 bits.
      record.peak_activation_bytes_per_stage = {step == 3 ? (std::int64_t{1} << 33) : 4096 * step, 1024 * step};
      record.peak_activation_bytes = record.peak_activation_bytes_per_stage[0];
      writer.append_step(record);
    }
    // Step 1 of a 2-stage pipeline, micro-batch 0 only: stage 0 computes and sends, stage 1 waits.
    const auto row = [](std::int32_t rank, trident::EventKind kind, std::int32_t microbatch, double t_start,
                        double t_end, std::int64_t bytes) {
      trident::EventRow r;
      r.rank = rank;
      r.pp = rank;
      r.step = 1;
      r.event = {kind, microbatch, /*chunk=*/microbatch < 0 ? -1 : 0, t_start, t_end, bytes};
      return r;
    };
    using trident::EventKind;
    writer.append_events({row(0, EventKind::forward, 0, 0.0, 0.25, 0), row(0, EventKind::send, 0, 0.25, 0.375, 4096)});
    writer.flush();
    writer.append_events({row(1, EventKind::recv, 0, 0.0, 0.375, 4096), row(1, EventKind::forward, 0, 0.375, 0.625, 0),
                          row(0, EventKind::optimizer, -1, 0.75, 1.0, 0)});
    writer.flush();
  } catch (const std::exception& error) {
    std::cerr << "write_demo_timeline: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
