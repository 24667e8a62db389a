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
                                             {"deck", std::string("[model]\nlayers = 2\n")}});
    const double losses[] = {5.5, 4.25, 3.125};
    for (int step = 1; step <= 3; ++step) {
      trident::StepRecord record;
      record.step = step;
      record.loss = losses[step - 1];
      record.lr = 1e-3;
      record.tokens_per_s = 1000.0 * step;
      writer.append_step(record);
    }
  } catch (const std::exception& error) {
    std::cerr << "write_demo_timeline: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
