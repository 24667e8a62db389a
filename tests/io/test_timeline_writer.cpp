// timeline.h5 written by TimelineWriter and read back through the plain HDF5 C API.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
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

// Minimal read-side helpers on the C API, as an outside tool would use it.
template <class T>
std::vector<T> read_column(hid_t file, const std::string& name, hid_t type) {
  const hid_t dataset = H5Dopen2(file, ("/steps/" + name).c_str(), H5P_DEFAULT);
  EXPECT_GE(dataset, 0) << "no dataset /steps/" << name;
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
