#include "io/timeline_writer.hpp"

#include <variant>

namespace trident {

namespace {

// Every StepRecord field and the /steps dataset that holds it (same name).
struct StepField {
  const char* name;
  std::variant<std::int64_t StepRecord::*, double StepRecord::*> member;
};

const StepField kStepFields[] = {
    {"step", &StepRecord::step},
    {"loss", &StepRecord::loss},
    {"lr", &StepRecord::lr},
    {"grad_norm", &StepRecord::grad_norm},
    {"step_time_s", &StepRecord::step_time_s},
    {"tokens_per_s", &StepRecord::tokens_per_s},
    {"bubble", &StepRecord::bubble},
    {"achieved_gflops", &StepRecord::achieved_gflops},
    {"dp_exposed_s", &StepRecord::dp_exposed_s},
    {"mfu", &StepRecord::mfu},
    {"peak_activation_bytes", &StepRecord::peak_activation_bytes},
};

template <class T>
hid_t type_of(T StepRecord::*) {
  return native_type<T>();
}

}  // namespace

TimelineWriter::TimelineWriter(const std::string& path, const Attributes& root_attributes) : path_(path) {
  silence_hdf5_error_printing();
  file_ = Hdf5Handle(checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path, "create file"),
                     H5Fclose);
  for (const auto& [name, value] : root_attributes) write_attribute(file_.get(), name, value, path);
  steps_ = Hdf5Handle(
      checked(H5Gcreate2(file_.get(), "steps", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path, "create group /steps"),
      H5Gclose);
  for (const StepField& field : kStepFields) {
    const hid_t type = std::visit([](auto member) { return type_of(member); }, field.member);
    columns_.emplace_back(steps_.get(), field.name, type, path);
  }
  checked(H5Fflush(file_.get(), H5F_SCOPE_LOCAL), path, "flush");
}

TimelineWriter::~TimelineWriter() = default;

void TimelineWriter::append_step(const StepRecord& record) {
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    std::visit(
        [&](auto member) { columns_[i].append(type_of(member), &(record.*member)); }, kStepFields[i].member);
  }
  checked(H5Fflush(file_.get(), H5F_SCOPE_LOCAL), path_, "flush after step " + std::to_string(record.step));
}

}  // namespace trident
