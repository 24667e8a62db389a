// timeline.h5 written by TimelineWriter and read back through the plain HDF5 C API.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/timeline_writer.hpp"

namespace trident {
namespace {

std::string temp_h5() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (std::filesystem::path(::testing::TempDir()) / (std::string("trident_timeline_") + info->name() + ".h5"))
      .string();
}

StepRecord record(std::int64_t step) {
  StepRecord r;
  r.step = step;
  r.loss = 5.5 - 0.25 * step;
  r.lr = 1e-3 * step;
  r.grad_norm = 0.5 + step;
  r.step_time_s = 0.1 * step;
  r.tokens_per_s = 1000.0 * step;
  r.bubble = 0.01 * step;
  r.achieved_gflops = 20.0 * step;
  r.mfu = 0.2 + 0.1 * step;
  r.dp_exposed_s = 0.003 * step;
  r.tp_comm_s = 0.007 * step;
  r.timeline_s = 0.0001 * step;
  r.peak_activation_bytes = (std::int64_t{1} << 33) + step;  // beyond 32 bits
  return r;
}

// Minimal read-side helpers on the C API, as an outside tool would use it. `name` is a /steps
// column unless it names its group ("events/kind").
template <class T>
std::vector<T> read_column(hid_t file, const std::string& name, hid_t type) {
  const std::string path = name.find('/') == std::string::npos ? "/steps/" + name : "/" + name;
  const hid_t dataset = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
  EXPECT_GE(dataset, 0) << "no dataset " << path;
  const hid_t space = H5Dget_space(dataset);
  EXPECT_EQ(H5Sget_simple_extent_ndims(space), 1) << name;
  hsize_t length = 0;
  H5Sget_simple_extent_dims(space, &length, nullptr);
  std::vector<T> values(length);
  EXPECT_GE(H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0) << name;
  H5Sclose(space);
  H5Dclose(dataset);
  return values;
}

template <class T>
T read_attribute(hid_t file, const std::string& name, hid_t type) {
  T value{};
  const hid_t attribute = H5Aopen(file, name.c_str(), H5P_DEFAULT);
  EXPECT_GE(attribute, 0) << "no attribute " << name;
  EXPECT_GE(H5Aread(attribute, type, &value), 0) << name;
  H5Aclose(attribute);
  return value;
}

std::string read_string_attribute(hid_t file, const std::string& name) {
  const hid_t attribute = H5Aopen(file, name.c_str(), H5P_DEFAULT);
  const hid_t stored = H5Aget_type(attribute);
  EXPECT_EQ(H5Tget_class(stored), H5T_STRING);
  EXPECT_EQ(H5Tget_cset(stored), H5T_CSET_UTF8) << name;
  EXPECT_TRUE(H5Tis_variable_str(stored)) << name;
  char* characters = nullptr;
  EXPECT_GE(H5Aread(attribute, stored, &characters), 0) << name;
  std::string value = characters != nullptr ? characters : "";
  H5free_memory(characters);
  H5Tclose(stored);
  H5Aclose(attribute);
  return value;
}

TEST(TimelineWriter, StepsAndAttributesReadBack) {
  const std::string path = temp_h5();
  const std::string deck = "[model]\nlayers = 2  # ±µ\n";
  {
    TimelineWriter writer(path, {{"schedule", std::string("1f1b")},
                                 {"p", std::int64_t{4}},
                                 {"m", 8},
                                 {"peak_gflops", 123.5},
                                 {"deck", deck}});
    for (int step = 1; step <= 3; ++step) writer.append_step(record(step));
    EXPECT_EQ(writer.steps_written(), 3);
  }

  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_string_attribute(file, "schedule"), "1f1b");
  EXPECT_EQ(read_string_attribute(file, "deck"), deck);
  EXPECT_EQ(read_attribute<std::int64_t>(file, "p", H5T_NATIVE_INT64), 4);
  EXPECT_EQ(read_attribute<std::int64_t>(file, "m", H5T_NATIVE_INT64), 8);
  EXPECT_EQ(read_attribute<double>(file, "peak_gflops", H5T_NATIVE_DOUBLE), 123.5);

  const auto doubles = [&](const std::string& name) { return read_column<double>(file, name, H5T_NATIVE_DOUBLE); };
  const auto integers = [&](const std::string& name) {
    return read_column<std::int64_t>(file, name, H5T_NATIVE_INT64);
  };
  EXPECT_EQ(integers("step"), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(integers("peak_activation_bytes"), (std::vector<std::int64_t>{record(1).peak_activation_bytes,
                                                                          record(2).peak_activation_bytes,
                                                                          record(3).peak_activation_bytes}));
  const std::vector<std::pair<std::string, double StepRecord::*>> double_fields = {
      {"loss", &StepRecord::loss},         {"lr", &StepRecord::lr},
      {"grad_norm", &StepRecord::grad_norm}, {"step_time_s", &StepRecord::step_time_s},
      {"tokens_per_s", &StepRecord::tokens_per_s}, {"bubble", &StepRecord::bubble},
      {"achieved_gflops", &StepRecord::achieved_gflops}, {"mfu", &StepRecord::mfu},
      {"dp_exposed_s", &StepRecord::dp_exposed_s}, {"tp_comm_s", &StepRecord::tp_comm_s},
      {"timeline_s", &StepRecord::timeline_s}};
  for (const auto& [name, member] : double_fields) {
    const std::vector<double> column = doubles(name);
    ASSERT_EQ(column.size(), 3u) << name;
    for (int step = 1; step <= 3; ++step) EXPECT_EQ(column[step - 1], record(step).*member) << name << " " << step;
  }
  H5Fclose(file);
}

TEST(TimelineWriter, FinishedStepsSurviveACrash) {
  const std::string path = temp_h5();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    TimelineWriter writer(path, {});
    writer.append_step(record(1));
    writer.append_step(record(2));
    std::_Exit(0);  // no destructor, no H5Fclose: as if the run died here
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0) << "the timeline of a crashed run must stay readable";
  EXPECT_EQ(read_column<double>(file, "loss", H5T_NATIVE_DOUBLE), (std::vector<double>{record(1).loss, record(2).loss}));
  H5Fclose(file);
}

EventRow event_row(std::int32_t rank, std::int32_t step, EventKind kind, double t_start) {
  EventRow row;
  row.rank = rank;
  row.tp = rank % 2;
  row.pp = rank / 2;
  row.dp = 7;
  row.step = step;
  row.event.kind = kind;
  row.event.microbatch = kind == EventKind::optimizer ? -1 : rank + 10 * step;
  row.event.chunk = kind == EventKind::optimizer ? -1 : step % 2;
  row.event.t_start = t_start;
  row.event.t_end = t_start + 0.125;
  row.event.bytes = kind == EventKind::send ? (std::int64_t{1} << 35) + rank : 0;  // beyond 32 bits
  return row;
}

// The /events/kind strings, read through a memory type of the stored width.
std::vector<std::string> read_kinds(hid_t file) {
  const hid_t dataset = H5Dopen2(file, "/events/kind", H5P_DEFAULT);
  EXPECT_GE(dataset, 0) << "no dataset /events/kind";
  const hid_t stored = H5Dget_type(dataset);
  EXPECT_EQ(H5Tget_class(stored), H5T_STRING);
  EXPECT_FALSE(H5Tis_variable_str(stored));
  const std::size_t width = H5Tget_size(stored);
  EXPECT_EQ(width, TimelineWriter::kKindBytes);
  const hid_t space = H5Dget_space(dataset);
  hsize_t length = 0;
  H5Sget_simple_extent_dims(space, &length, nullptr);
  std::vector<char> characters(length * width);
  EXPECT_GE(H5Dread(dataset, stored, H5S_ALL, H5S_ALL, H5P_DEFAULT, characters.data()), 0);
  std::vector<std::string> kinds;
  for (hsize_t i = 0; i < length; ++i) {
    const char* begin = characters.data() + i * width;
    kinds.emplace_back(begin, strnlen(begin, width));  // null-padded, not null-terminated when full
  }
  H5Sclose(space);
  H5Tclose(stored);
  H5Dclose(dataset);
  return kinds;
}

const char* const kEventColumns[] = {"rank", "tp", "pp", "dp", "step", "kind",
                                     "microbatch", "chunk", "t_start", "t_end", "bytes"};

hsize_t rows_of(hid_t file, const std::string& path) {
  const hid_t dataset = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
  EXPECT_GE(dataset, 0) << "no dataset " << path;
  const hid_t space = H5Dget_space(dataset);
  hsize_t length = 0;
  H5Sget_simple_extent_dims(space, &length, nullptr);
  H5Sclose(space);
  H5Dclose(dataset);
  return length;
}

TEST(TimelineWriter, EventKindNamesAreTheContractStrings) {
  const std::vector<std::string> expected = {"F",           "B",           "I",
                                             "W",           "SEND",        "RECV",
                                             "ALLREDUCE_TP", "ALLGATHER_TP", "REDUCE_SCATTER_TP",
                                             "RING_CP",     "ALLTOALL_EP", "ALLREDUCE_DP",
                                             "ALLREDUCE_EMB", "OPTIMIZER",  "CKPT_WRITE",
                                             "CKPT_BLOCKED"};
  for (std::size_t k = 0; k < expected.size(); ++k) {
    const std::string name = event_kind_name(static_cast<EventKind>(k));
    EXPECT_EQ(name, expected[k]);
    EXPECT_LE(name.size(), TimelineWriter::kKindBytes) << name;
  }
  EXPECT_TRUE(is_compute(EventKind::weight_grad));
  EXPECT_FALSE(is_compute(EventKind::send));
}

TEST(TimelineWriter, EventsAppendedInBatchesReadBack) {
  const std::string path = temp_h5();
  const std::vector<EventRow> first = {event_row(0, 1, EventKind::forward, 0.5),
                                       event_row(1, 1, EventKind::send, 0.75),
                                       event_row(2, 1, EventKind::allreduce_embedding, 1.0)};
  const std::vector<EventRow> second = {event_row(3, 2, EventKind::weight_grad, 2.5),
                                        event_row(0, 2, EventKind::optimizer, 3.0)};
  const std::vector<EventRow> third = {event_row(1, 3, EventKind::recv, 4.0)};
  {
    TimelineWriter writer(path, {});
    writer.append_events(first);
    EXPECT_EQ(writer.events_written(), 0) << "appending only queues";
    EXPECT_EQ(writer.events_pending(), 3);
    writer.append_step(record(1));
    writer.append_events(second);
    writer.flush();
    EXPECT_EQ(writer.events_written(), 5);
    EXPECT_EQ(writer.events_pending(), 0);
    writer.append_events({});
    writer.append_events(third);  // left for the destructor to write
  }
  std::vector<EventRow> all = first;
  all.insert(all.end(), second.begin(), second.end());
  all.insert(all.end(), third.begin(), third.end());

  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const char* name : kEventColumns) EXPECT_EQ(rows_of(file, std::string("/events/") + name), all.size()) << name;
  const auto int32s = [&](const std::string& name) {
    return read_column<std::int32_t>(file, "events/" + name, H5T_NATIVE_INT32);
  };
  const auto doubles = [&](const std::string& name) {
    return read_column<double>(file, "events/" + name, H5T_NATIVE_DOUBLE);
  };
  const std::vector<std::string> kinds = read_kinds(file);
  const std::vector<std::int64_t> bytes = read_column<std::int64_t>(file, "events/bytes", H5T_NATIVE_INT64);
  const auto rank = int32s("rank"), tp = int32s("tp"), pp = int32s("pp"), dp = int32s("dp"), step = int32s("step");
  const auto microbatch = int32s("microbatch"), chunk = int32s("chunk");
  const auto t_start = doubles("t_start"), t_end = doubles("t_end");
  ASSERT_EQ(kinds.size(), all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const EventRow& row = all[i];
    EXPECT_EQ(rank[i], row.rank) << i;
    EXPECT_EQ(tp[i], row.tp) << i;
    EXPECT_EQ(pp[i], row.pp) << i;
    EXPECT_EQ(dp[i], row.dp) << i;
    EXPECT_EQ(step[i], row.step) << i;
    EXPECT_EQ(kinds[i], event_kind_name(row.event.kind)) << i;
    EXPECT_EQ(microbatch[i], row.event.microbatch) << i;
    EXPECT_EQ(chunk[i], row.event.chunk) << i;
    EXPECT_EQ(t_start[i], row.event.t_start) << i;
    EXPECT_EQ(t_end[i], row.event.t_end) << i;
    EXPECT_EQ(bytes[i], row.event.bytes) << i;
  }
  EXPECT_EQ(read_column<std::int64_t>(file, "step", H5T_NATIVE_INT64), (std::vector<std::int64_t>{1}));
  H5Fclose(file);
}

TEST(TimelineWriter, ManyPendingEventsAreWrittenWithoutWaitingForFlush) {
  const std::string path = temp_h5();
  TimelineWriter writer(path, {});
  const std::vector<EventRow> batch(TimelineWriter::kMaxPendingEvents / 4, event_row(1, 1, EventKind::backward, 0.0));
  for (int i = 0; i < 3; ++i) writer.append_events(batch);
  EXPECT_EQ(writer.events_written(), 0);
  writer.append_events(batch);
  EXPECT_EQ(writer.events_written(), static_cast<std::int64_t>(TimelineWriter::kMaxPendingEvents));
  EXPECT_EQ(writer.events_pending(), 0);
}

TEST(TimelineWriter, FlushedEventsSurviveACrash) {
  const std::string path = temp_h5();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    TimelineWriter writer(path, {});
    writer.append_events({event_row(0, 1, EventKind::forward, 0.0), event_row(1, 1, EventKind::backward, 1.0)});
    writer.flush();
    writer.append_step(record(1));
    writer.append_events({event_row(0, 2, EventKind::forward, 2.0)});  // queued, never flushed
    writer.append_step(record(2));
    std::_Exit(0);  // no destructor, no H5Fclose: as if the run died here
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0) << "the timeline of a crashed run must stay readable";
  for (const char* name : kEventColumns) EXPECT_EQ(rows_of(file, std::string("/events/") + name), 2u) << name;
  EXPECT_EQ(read_column<double>(file, "events/t_start", H5T_NATIVE_DOUBLE), (std::vector<double>{0.0, 1.0}));
  EXPECT_EQ(read_kinds(file), (std::vector<std::string>{"F", "B"}));
  EXPECT_EQ(read_column<std::int64_t>(file, "step", H5T_NATIVE_INT64), (std::vector<std::int64_t>{1, 2}));
  H5Fclose(file);
}

TEST(TimelineWriter, UncreatableFileNamesFileAndOperation) {
  const std::string path = temp_h5() + ".missing-dir/timeline.h5";
  try {
    TimelineWriter writer(path, {});
    FAIL() << "created a file in a missing directory";
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("create file"), std::string::npos) << message;
  }
}

// What a re-planning records: an attribute replaced, another added.
TEST(TimelineWriter, SetAttributeReplacesOrAdds) {
  const std::string path = temp_h5();
  {
    TimelineWriter writer(path, {{"schedule_kind", std::string("1f1b")}});
    writer.set_attribute("schedule_kind", std::string("zb-h1"));
    writer.set_attribute("replans", std::string("after step 2: switching to zb-h1"));
  }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_string_attribute(file, "schedule_kind"), "zb-h1");
  EXPECT_EQ(read_string_attribute(file, "replans"), "after step 2: switching to zb-h1");
  H5Fclose(file);
}

TEST(TimelineWriter, DuplicateAttributeNamesTheAttribute) {
  const std::string path = temp_h5();
  try {
    TimelineWriter writer(path, {{"grid", std::string("1x1x1")}, {"grid", std::string("2x1x1")}});
    FAIL() << "two root attributes with one name";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("attribute 'grid'"), std::string::npos) << error.what();
  }
}

// ---- /steps/peak_activation_bytes_per_stage: the 2-D column --------------------------------------

// A 2-D int64 dataset read whole: its dimensions and row-major values.
struct Table2D {
  hsize_t rows = 0, width = 0;
  std::vector<std::int64_t> values;
};

Table2D read_2d(hid_t file, const std::string& path) {
  Table2D table;
  const hid_t dataset = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
  EXPECT_GE(dataset, 0) << "no dataset " << path;
  const hid_t space = H5Dget_space(dataset);
  EXPECT_EQ(H5Sget_simple_extent_ndims(space), 2) << path;
  hsize_t dims[2] = {0, 0}, maximum[2] = {0, 0};
  H5Sget_simple_extent_dims(space, dims, maximum);
  EXPECT_EQ(maximum[0], H5S_UNLIMITED) << path;
  table.rows = dims[0];
  table.width = dims[1];
  table.values.resize(dims[0] * dims[1]);
  if (!table.values.empty()) {
    EXPECT_GE(H5Dread(dataset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, table.values.data()), 0) << path;
  }
  H5Sclose(space);
  H5Dclose(dataset);
  return table;
}

std::vector<std::int64_t> stage_peaks(std::int64_t step, int stages) {
  std::vector<std::int64_t> peaks;
  for (int s = 0; s < stages; ++s) peaks.push_back((std::int64_t{1} << 34) + 1000 * step + s);  // beyond 32 bits
  return peaks;
}

TEST(TimelineWriter, PerStagePeaksAreOneRowOfStagesValuesPerStep) {
  const std::string path = temp_h5();
  {
    TimelineWriter writer(path, {}, /*stages=*/3);
    EXPECT_EQ(writer.stages(), 3);
    EXPECT_FALSE(writer.resumed());
    EXPECT_EQ(writer.note(), "");
    for (int step = 1; step <= 2; ++step) {
      StepRecord r = record(step);
      r.peak_activation_bytes_per_stage = stage_peaks(step, 3);
      writer.append_step(r);
    }
    writer.append_step(record(3));  // no per-stage values: the row holds -1
    StepRecord wrong = record(4);
    wrong.peak_activation_bytes_per_stage = {1, 2};
    EXPECT_THROW(writer.append_step(wrong), std::invalid_argument);
    EXPECT_EQ(writer.steps_written(), 3) << "a rejected record writes no column";
  }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const Table2D table = read_2d(file, "/steps/peak_activation_bytes_per_stage");
  EXPECT_EQ(table.rows, 3u);
  EXPECT_EQ(table.width, 3u);
  std::vector<std::int64_t> expected = stage_peaks(1, 3);
  for (std::int64_t v : stage_peaks(2, 3)) expected.push_back(v);
  for (int s = 0; s < 3; ++s) expected.push_back(-1);
  EXPECT_EQ(table.values, expected);
  // Every other /steps column stays 1-D, as long.
  EXPECT_EQ(read_column<std::int64_t>(file, "step", H5T_NATIVE_INT64), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(rows_of(file, "/steps/peak_activation_bytes"), 3u);
  H5Fclose(file);
}

TEST(TimelineWriter, StagesMustBePositive) {
  EXPECT_THROW(TimelineWriter(temp_h5(), {}, 0), std::invalid_argument);
}

// ---- resume ----------------------------------------------------------------------------------

// A record of the first run, with per-stage peaks.
StepRecord first_run_record(std::int64_t step, int stages) {
  StepRecord r = record(step);
  r.peak_activation_bytes_per_stage = stage_peaks(step, stages);
  return r;
}

// A record of the resumed run: other values than the first run's.
StepRecord resumed_record(std::int64_t step, int stages) {
  StepRecord r = record(step);
  r.loss += 100.0;
  r.peak_activation_bytes += 7;
  r.peak_activation_bytes_per_stage = stage_peaks(step + 100, stages);
  return r;
}

// The first run: steps 1..last, each with two events (F at t = 10·step, B after it) flushed.
void write_first_run(const std::string& path, std::int64_t last, int stages) {
  TimelineWriter writer(path, {{"deck", std::string("old deck")}, {"only_in_old", std::int64_t{1}}}, stages);
  for (std::int64_t step = 1; step <= last; ++step) {
    const auto s = static_cast<std::int32_t>(step);
    writer.append_events({event_row(0, s, EventKind::forward, 10.0 * s), event_row(1, s, EventKind::backward, 10.0 * s + 1)});
    writer.append_step(first_run_record(step, stages));
  }
  writer.flush();
}

bool has_attribute(hid_t file, const char* name) { return H5Aexists(file, name) > 0; }

TEST(TimelineWriter, ResumeDropsTheRowsOfLaterStepsAndAppends) {
  const std::string path = temp_h5();
  write_first_run(path, 5, 2);
  {
    TimelineWriter writer(path, {{"deck", std::string("new deck")}, {"p", std::int64_t{2}}}, 2,
                          TimelineWriter::Resume{3});
    EXPECT_TRUE(writer.resumed());
    EXPECT_NE(writer.note().find("kept 3 of 5 steps and 6 of 10 events"), std::string::npos) << writer.note();
    EXPECT_EQ(writer.steps_written(), 3);
    EXPECT_EQ(writer.events_written(), 6);
    for (std::int64_t step = 4; step <= 6; ++step) {
      const auto s = static_cast<std::int32_t>(step);
      writer.append_events({event_row(2, s, EventKind::input_grad, 100.0 * s)});
      writer.append_step(resumed_record(step, 2));
    }
  }  // the destructor writes the queued events

  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_string_attribute(file, "deck"), "new deck");
  EXPECT_EQ(read_attribute<std::int64_t>(file, "p", H5T_NATIVE_INT64), 2);
  EXPECT_FALSE(has_attribute(file, "only_in_old")) << "the root attributes are replaced, not merged";

  EXPECT_EQ(read_column<std::int64_t>(file, "step", H5T_NATIVE_INT64), (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}));
  const std::vector<double> loss = read_column<double>(file, "loss", H5T_NATIVE_DOUBLE);
  const std::vector<std::int64_t> peak = read_column<std::int64_t>(file, "peak_activation_bytes", H5T_NATIVE_INT64);
  const Table2D per_stage = read_2d(file, "/steps/peak_activation_bytes_per_stage");
  ASSERT_EQ(loss.size(), 6u);
  ASSERT_EQ(peak.size(), 6u);
  ASSERT_EQ(per_stage.rows, 6u);
  ASSERT_EQ(per_stage.width, 2u);
  for (std::int64_t step = 1; step <= 6; ++step) {
    const StepRecord expected = step <= 3 ? first_run_record(step, 2) : resumed_record(step, 2);
    const auto i = static_cast<std::size_t>(step - 1);
    EXPECT_EQ(loss[i], expected.loss) << step;
    EXPECT_EQ(peak[i], expected.peak_activation_bytes) << step;
    EXPECT_EQ(std::vector<std::int64_t>(per_stage.values.begin() + 2 * i, per_stage.values.begin() + 2 * i + 2),
              expected.peak_activation_bytes_per_stage)
        << step;
  }
  for (const char* name : kEventColumns) EXPECT_EQ(rows_of(file, std::string("/events/") + name), 9u) << name;
  EXPECT_EQ(read_column<std::int32_t>(file, "events/step", H5T_NATIVE_INT32),
            (std::vector<std::int32_t>{1, 1, 2, 2, 3, 3, 4, 5, 6}));
  EXPECT_EQ(read_column<double>(file, "events/t_start", H5T_NATIVE_DOUBLE),
            (std::vector<double>{10, 11, 20, 21, 30, 31, 400, 500, 600}))
      << "the first run's events of steps 4 and 5 are gone";
  EXPECT_EQ(read_kinds(file), (std::vector<std::string>{"F", "B", "F", "B", "F", "B", "I", "I", "I"}));
  H5Fclose(file);
}

TEST(TimelineWriter, ResumeFactoryAfterTheLastStepKeepsEverything) {
  const std::string path = temp_h5();
  write_first_run(path, 2, 1);
  TimelineWriter writer = TimelineWriter::resume(path, {}, 2);
  EXPECT_TRUE(writer.resumed());
  EXPECT_EQ(writer.steps_written(), 2);
  EXPECT_EQ(writer.events_written(), 4);
  EXPECT_EQ(writer.note().find("dropped"), std::string::npos) << writer.note();
}

TEST(TimelineWriter, ResumeDropsLaterRowsWhereverTheyAre) {
  // Rows out of step order (not what the trainer writes): the later steps are compacted away, the
  // kept rows keep their order, in every column alike.
  const std::string path = temp_h5();
  const std::vector<std::int64_t> order = {1, 4, 2, 5, 3};
  {
    TimelineWriter writer(path, {}, 2);
    for (std::int64_t step : order) {
      const auto s = static_cast<std::int32_t>(step);
      writer.append_events({event_row(0, s, EventKind::forward, 10.0 * s), event_row(1, s, EventKind::send, 10.0 * s + 1)});
      writer.append_step(first_run_record(step, 2));
    }
  }
  {
    TimelineWriter writer(path, {}, 2, TimelineWriter::Resume{3});
    EXPECT_EQ(writer.steps_written(), 3);
    EXPECT_EQ(writer.events_written(), 6);
  }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_column<std::int64_t>(file, "step", H5T_NATIVE_INT64), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(read_column<double>(file, "lr", H5T_NATIVE_DOUBLE),
            (std::vector<double>{record(1).lr, record(2).lr, record(3).lr}));
  std::vector<std::int64_t> expected;
  for (std::int64_t step : {1, 2, 3})
    for (std::int64_t v : stage_peaks(step, 2)) expected.push_back(v);
  EXPECT_EQ(read_2d(file, "/steps/peak_activation_bytes_per_stage").values, expected);
  EXPECT_EQ(read_column<std::int32_t>(file, "events/step", H5T_NATIVE_INT32), (std::vector<std::int32_t>{1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(read_column<double>(file, "events/t_start", H5T_NATIVE_DOUBLE), (std::vector<double>{10, 11, 20, 21, 30, 31}));
  EXPECT_EQ(read_kinds(file), (std::vector<std::string>{"F", "SEND", "F", "SEND", "F", "SEND"}));
  EXPECT_EQ(read_column<std::int64_t>(file, "events/bytes", H5T_NATIVE_INT64),
            (std::vector<std::int64_t>{0, (std::int64_t{1} << 35) + 1, 0, (std::int64_t{1} << 35) + 1, 0,
                                       (std::int64_t{1} << 35) + 1}));
  H5Fclose(file);
}

TEST(TimelineWriter, ResumeDropsAPartialRowLeftByACrash) {
  // As if a run died between two column writes of step 3: /steps/loss is one row longer.
  const std::string path = temp_h5();
  write_first_run(path, 2, 1);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hid_t loss = H5Dopen2(file, "/steps/loss", H5P_DEFAULT);
    const hsize_t longer = 3;
    ASSERT_GE(H5Dset_extent(loss, &longer), 0);
    H5Dclose(loss);
    H5Fclose(file);
  }
  {
    TimelineWriter writer(path, {}, 1, TimelineWriter::Resume{10});
    EXPECT_TRUE(writer.resumed());
    EXPECT_EQ(writer.steps_written(), 2);
    writer.append_step(record(3));
  }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_column<double>(file, "loss", H5T_NATIVE_DOUBLE),
            (std::vector<double>{record(1).loss, record(2).loss, record(3).loss}));
  EXPECT_EQ(read_column<std::int64_t>(file, "step", H5T_NATIVE_INT64), (std::vector<std::int64_t>{1, 2, 3}));
  H5Fclose(file);
}

TEST(TimelineWriter, ResumeOfACrashedRunsTimeline) {
  // The usual case: the run died (no H5Fclose) after step 3; its last checkpoint was step 2.
  const std::string path = temp_h5();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    TimelineWriter writer(path, {}, 2);
    for (std::int64_t step = 1; step <= 3; ++step) {
      writer.append_events({event_row(0, static_cast<std::int32_t>(step), EventKind::forward, 1.0 * step)});
      writer.flush();
      writer.append_step(first_run_record(step, 2));
    }
    std::_Exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  {
    TimelineWriter writer(path, {}, 2, TimelineWriter::Resume{2});
    EXPECT_TRUE(writer.resumed()) << writer.note();
    EXPECT_EQ(writer.steps_written(), 2);
    EXPECT_EQ(writer.events_written(), 2);
    writer.append_step(resumed_record(3, 2));
  }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_column<double>(file, "loss", H5T_NATIVE_DOUBLE),
            (std::vector<double>{record(1).loss, record(2).loss, resumed_record(3, 2).loss}));
  EXPECT_EQ(read_column<double>(file, "events/t_start", H5T_NATIVE_DOUBLE), (std::vector<double>{1.0, 2.0}));
  H5Fclose(file);
}

// The resume constructor on something it cannot continue: a fresh timeline, and a note saying why.
void expect_fresh_timeline(const std::string& path, const TimelineWriter& writer, const std::string& reason) {
  EXPECT_FALSE(writer.resumed());
  EXPECT_NE(writer.note().find(reason), std::string::npos) << writer.note();
  EXPECT_NE(writer.note().find("started a new timeline"), std::string::npos) << writer.note();
  EXPECT_EQ(writer.steps_written(), 0);
  EXPECT_EQ(writer.events_written(), 0);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_EQ(read_string_attribute(file, "deck"), "d");
  EXPECT_EQ(rows_of(file, "/steps/step"), 0u);
  H5Fclose(file);
}

TEST(TimelineWriter, ResumeWithoutAFileCreatesOne) {
  const std::string path = temp_h5();
  std::filesystem::remove(path);
  TimelineWriter writer(path, {{"deck", std::string("d")}}, 2, TimelineWriter::Resume{3});
  expect_fresh_timeline(path, writer, "no such file");
}

TEST(TimelineWriter, ResumeOfANonHdf5FileReplacesIt) {
  const std::string path = temp_h5();
  {
    FILE* text = std::fopen(path.c_str(), "w");
    ASSERT_NE(text, nullptr);
    std::fputs("not hdf5\n", text);
    std::fclose(text);
  }
  TimelineWriter writer(path, {{"deck", std::string("d")}}, 2, TimelineWriter::Resume{3});
  expect_fresh_timeline(path, writer, "not an HDF5 file");
}

TEST(TimelineWriter, ResumeOfAnHdf5FileWithoutStepsReplacesIt) {
  const std::string path = temp_h5();
  H5Fclose(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  TimelineWriter writer(path, {{"deck", std::string("d")}}, 2, TimelineWriter::Resume{3});
  expect_fresh_timeline(path, writer, "no /steps group");
}

TEST(TimelineWriter, ResumeOfAnotherLayoutKeepsTheOldFileAside) {
  const std::string path = temp_h5();
  std::filesystem::remove(path + ".old");
  write_first_run(path, 2, 2);
  {
    TimelineWriter writer(path, {{"deck", std::string("d")}}, 4, TimelineWriter::Resume{2});  // pp 2 -> 4
    expect_fresh_timeline(path, writer, "peak_activation_bytes_per_stage' has 2 values per row, this run writes 4");
    EXPECT_NE(writer.note().find(path + ".old"), std::string::npos) << writer.note();
  }
  const hid_t old = H5Fopen((path + ".old").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(old, 0) << "the other layout's timeline is kept as " << path << ".old";
  EXPECT_EQ(read_column<std::int64_t>(old, "step", H5T_NATIVE_INT64), (std::vector<std::int64_t>{1, 2}));
  H5Fclose(old);

  // A timeline without a column this writer appends to (an older layout) is another layout too.
  std::filesystem::remove(path + ".old");
  write_first_run(path, 2, 1);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    ASSERT_GE(H5Ldelete(file, "/steps/mfu", H5P_DEFAULT), 0);
    H5Fclose(file);
  }
  TimelineWriter writer(path, {{"deck", std::string("d")}}, 1, TimelineWriter::Resume{2});
  expect_fresh_timeline(path, writer, "another timeline layout");
  EXPECT_NE(writer.note().find("'mfu'"), std::string::npos) << writer.note();
  EXPECT_TRUE(std::filesystem::exists(path + ".old"));
}

// ---- Hdf5Column on its own ----------------------------------------------------------------------

TEST(Hdf5Column, OpenExistingTruncateAndRetain) {
  const std::string path = temp_h5();
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  {
    Hdf5Column one(file, "one", H5T_NATIVE_INT32, path, 4);
    Hdf5Column two(file, "two", H5T_NATIVE_DOUBLE, path, 4, /*width=*/2);
    const std::int32_t ints[] = {10, 11, 12, 13, 14, 15};
    const double doubles[] = {0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5};
    one.append_many(H5T_NATIVE_INT32, ints, 6);
    two.append_many(H5T_NATIVE_DOUBLE, doubles, 6);
    EXPECT_EQ(two.rows(), 6);
    EXPECT_EQ(two.width(), 2);
    EXPECT_THROW(one.truncate(7), std::invalid_argument);
    EXPECT_THROW(one.truncate(-1), std::invalid_argument);
    EXPECT_THROW(one.retain({true}), std::invalid_argument);
  }
  {
    Hdf5Column one(Hdf5Column::OpenExisting{}, file, "one", path);
    Hdf5Column two(Hdf5Column::OpenExisting{}, file, "two", path);
    EXPECT_EQ(one.rows(), 6);
    EXPECT_EQ(one.width(), 0);
    EXPECT_EQ(two.rows(), 6);
    EXPECT_EQ(two.width(), 2);
    EXPECT_TRUE(one.stores(H5T_NATIVE_INT32));
    EXPECT_FALSE(one.stores(H5T_NATIVE_INT64));
    EXPECT_FALSE(one.stores(H5T_NATIVE_FLOAT));
    EXPECT_TRUE(two.stores(H5T_NATIVE_DOUBLE));
    const std::vector<bool> keep = {false, true, true, false, true, false};
    one.retain(keep);
    two.retain(keep);
    EXPECT_EQ(one.rows(), 3);
    std::vector<std::int64_t> ints(3);
    one.read_all(H5T_NATIVE_INT64, ints.data());  // converted from the stored int32
    EXPECT_EQ(ints, (std::vector<std::int64_t>{11, 12, 14}));
    std::vector<double> doubles(6);
    two.read_all(H5T_NATIVE_DOUBLE, doubles.data());
    EXPECT_EQ(doubles, (std::vector<double>{1, 1.5, 2, 2.5, 4, 4.5}));
    two.truncate(1);
    const double more[] = {9, 9.5};
    two.append(H5T_NATIVE_DOUBLE, more);
    doubles.assign(4, 0);
    two.read_all(H5T_NATIVE_DOUBLE, doubles.data());
    EXPECT_EQ(doubles, (std::vector<double>{1, 1.5, 9, 9.5}));
  }
  try {
    Hdf5Column missing(Hdf5Column::OpenExisting{}, file, "missing", path);
    FAIL() << "opened a missing dataset";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("dataset 'missing'"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
  H5Fclose(file);
}

}  // namespace
}  // namespace trident
