#include "io/timeline_writer.hpp"

#include <array>
#include <cstring>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <utility>
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

// One /events/kind value as stored: the name, null-padded to the fixed width.
using KindName = std::array<char, TimelineWriter::kKindBytes>;
static_assert(sizeof(KindName) == TimelineWriter::kKindBytes, "kind strings are written as one contiguous array");

KindName kind_name(EventKind kind) {
  const char* name = event_kind_name(kind);
  const std::size_t length = std::strlen(name);
  if (length > TimelineWriter::kKindBytes)
    throw std::logic_error(std::string("event kind name '") + name + "' does not fit /events/kind");
  KindName stored{};  // zeros: the null padding
  std::memcpy(stored.data(), name, length);
  return stored;
}

// Every /events dataset and how to read its value off an EventRow. The getter's return type
// chooses the dataset's element type (see event_type).
template <class T>
using Getter = T (*)(const EventRow&);

struct EventField {
  const char* name;
  std::variant<Getter<std::int32_t>, Getter<std::int64_t>, Getter<double>, Getter<KindName>> get;
};

const EventField kEventFields[] = {
    {"rank", +[](const EventRow& r) { return r.rank; }},
    {"tp", +[](const EventRow& r) { return r.tp; }},
    {"pp", +[](const EventRow& r) { return r.pp; }},
    {"dp", +[](const EventRow& r) { return r.dp; }},
    {"step", +[](const EventRow& r) { return r.step; }},
    {"kind", +[](const EventRow& r) { return kind_name(r.event.kind); }},
    {"microbatch", +[](const EventRow& r) { return r.event.microbatch; }},
    {"chunk", +[](const EventRow& r) { return r.event.chunk; }},
    {"t_start", +[](const EventRow& r) { return r.event.t_start; }},
    {"t_end", +[](const EventRow& r) { return r.event.t_end; }},
    {"bytes", +[](const EventRow& r) { return r.event.bytes; }},
};

// Element type of an /events dataset, in memory and in the file alike.
hid_t event_type(Getter<std::int32_t>, hid_t) { return H5T_NATIVE_INT32; }
hid_t event_type(Getter<std::int64_t>, hid_t) { return H5T_NATIVE_INT64; }
hid_t event_type(Getter<double>, hid_t) { return H5T_NATIVE_DOUBLE; }
hid_t event_type(Getter<KindName>, hid_t kind_type) { return kind_type; }

// Rows per /events chunk: a step of a large grid records thousands of events, so chunks are
// larger than the /steps ones (32-64 KiB per dataset).
constexpr std::int64_t kEventChunkRows = 8192;

Hdf5Handle create_group(hid_t file, const char* name, const std::string& path) {
  return Hdf5Handle(checked(H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path,
                            std::string("create group /") + name),
                    H5Gclose);
}

}  // namespace

TimelineWriter::TimelineWriter(const std::string& path, const Attributes& root_attributes) : path_(path) {
  silence_hdf5_error_printing();
  file_ = Hdf5Handle(checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path, "create file"),
                     H5Fclose);
  for (const auto& [name, value] : root_attributes) write_attribute(file_.get(), name, value, path);

  steps_ = create_group(file_.get(), "steps", path);
  for (const StepField& field : kStepFields) {
    const hid_t type = std::visit([](auto member) { return type_of(member); }, field.member);
    step_columns_.emplace_back(steps_.get(), field.name, type, path);
  }

  // Fixed-length, null-padded ASCII: h5py reads it as a numpy 'S16' array (bytes), which
  // .asstr() or numpy's == b"F" handle without per-element Python objects.
  kind_type_ = Hdf5Handle(checked(H5Tcopy(H5T_C_S1), path, "copy string type"), H5Tclose);
  checked(H5Tset_size(kind_type_.get(), kKindBytes), path, "size /events/kind type");
  checked(H5Tset_strpad(kind_type_.get(), H5T_STR_NULLPAD), path, "pad /events/kind type");
  checked(H5Tset_cset(kind_type_.get(), H5T_CSET_ASCII), path, "set character set of /events/kind type");
  events_ = create_group(file_.get(), "events", path);
  for (const EventField& field : kEventFields) {
    const hid_t type = std::visit([&](auto get) { return event_type(get, kind_type_.get()); }, field.get);
    event_columns_.emplace_back(events_.get(), field.name, type, path, kEventChunkRows);
  }
  flush_file("creation");
}

TimelineWriter::~TimelineWriter() {
  const std::size_t pending = pending_events_.size();
  if (pending == 0) return;
  try {
    flush();
  } catch (const std::exception& error) {
    std::cerr << "trident: warning: " << pending << " timeline events not written: " << error.what() << "\n";
  }
}

void TimelineWriter::append_step(const StepRecord& record) {
  for (std::size_t i = 0; i < step_columns_.size(); ++i) {
    std::visit([&](auto member) { step_columns_[i].append(type_of(member), &(record.*member)); },
               kStepFields[i].member);
  }
  flush_file("step " + std::to_string(record.step));
}

void TimelineWriter::append_events(const std::vector<EventRow>& rows) {
  pending_events_.insert(pending_events_.end(), rows.begin(), rows.end());
  if (pending_events_.size() >= kMaxPendingEvents) flush();
}

void TimelineWriter::flush() {
  const std::size_t count = pending_events_.size();
  write_pending_events();
  flush_file(std::to_string(count) + " events");
}

void TimelineWriter::write_pending_events() {
  if (pending_events_.empty()) return;
  // Taken out of the queue first: if a write fails part way the columns are unequal whatever we
  // do, and the exception says so; the destructor must not append the same rows a second time.
  const std::vector<EventRow> rows = std::move(pending_events_);
  pending_events_.clear();
  const auto count = static_cast<std::int64_t>(rows.size());
  for (std::size_t i = 0; i < event_columns_.size(); ++i) {
    std::visit(
        [&](auto get) {
          // One column at a time, so the transposed copy is one dataset's worth, not the table's.
          std::vector<decltype(get(rows.front()))> values;
          values.reserve(rows.size());
          for (const EventRow& row : rows) values.push_back(get(row));
          event_columns_[i].append_many(event_type(get, kind_type_.get()), values.data(), count);
        },
        kEventFields[i].get);
  }
}

void TimelineWriter::flush_file(const std::string& after) {
  checked(H5Fflush(file_.get(), H5F_SCOPE_LOCAL), path_, "flush after " + after);
}

}  // namespace trident
