// timeline.h5 written by TimelineWriter and read back through the plain HDF5 C API.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

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
      {"dp_exposed_s", &StepRecord::dp_exposed_s}};
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
  const std::vector<std::string> expected = {"F",    "B",           "I",           "W",           "SEND",
                                             "RECV", "ALLREDUCE_TP", "ALLREDUCE_DP", "ALLREDUCE_EMB", "OPTIMIZER"};
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

TEST(TimelineWriter, DuplicateAttributeNamesTheAttribute) {
  const std::string path = temp_h5();
  try {
    TimelineWriter writer(path, {{"grid", std::string("1x1x1")}, {"grid", std::string("2x1x1")}});
    FAIL() << "two root attributes with one name";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("attribute 'grid'"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace trident
