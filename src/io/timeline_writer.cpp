#include "io/timeline_writer.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <system_error>
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
    {"val_loss", &StepRecord::val_loss},
    {"lr", &StepRecord::lr},
    {"grad_norm", &StepRecord::grad_norm},
    {"aux_loss", &StepRecord::aux_loss},
    {"expert_load", &StepRecord::expert_load},
    {"step_time_s", &StepRecord::step_time_s},
    {"tokens_per_s", &StepRecord::tokens_per_s},
    {"bubble", &StepRecord::bubble},
    {"achieved_gflops", &StepRecord::achieved_gflops},
    {"dp_exposed_s", &StepRecord::dp_exposed_s},
    {"tp_comm_s", &StepRecord::tp_comm_s},
    {"cp_comm_s", &StepRecord::cp_comm_s},
    {"ep_comm_s", &StepRecord::ep_comm_s},
    {"timeline_s", &StepRecord::timeline_s},
    {"mfu", &StepRecord::mfu},
    {"peak_activation_bytes", &StepRecord::peak_activation_bytes},
    {"peak_rss_bytes", &StepRecord::peak_rss_bytes},
};

// The one 2-D /steps dataset: [steps, stages].
constexpr const char* kPerStageName = "peak_activation_bytes_per_stage";
// Per-stage value of a row whose record left the vector empty.
constexpr std::int64_t kNotRecorded = -1;

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
    {"cp", +[](const EventRow& r) { return r.cp; }},
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

Hdf5Handle open_group(hid_t file, const char* name, const std::string& path) {
  return Hdf5Handle(checked(H5Gopen2(file, name, H5P_DEFAULT), path, std::string("open group /") + name), H5Gclose);
}

// Fixed-length, null-padded ASCII: h5py reads it as a numpy 'S24' array (bytes), which .asstr()
// or numpy's == b"F" handle without per-element Python objects.
Hdf5Handle make_kind_type(const std::string& path) {
  Hdf5Handle type(checked(H5Tcopy(H5T_C_S1), path, "copy string type"), H5Tclose);
  checked(H5Tset_size(type.get(), TimelineWriter::kKindBytes), path, "size /events/kind type");
  checked(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), path, "pad /events/kind type");
  checked(H5Tset_cset(type.get(), H5T_CSET_ASCII), path, "set character set of /events/kind type");
  return type;
}

// Rows per peak_activation_bytes_per_stage chunk: about the bytes of a 1-D /steps chunk.
std::int64_t per_stage_chunk_rows(int stages) {
  return std::max<std::int64_t>(1, Hdf5Column::kDefaultChunkRows / stages);
}

bool is_hdf5_file(const std::string& path) {
#if H5_VERSION_GE(1, 12, 0)
  return H5Fis_accessible(path.c_str(), H5P_DEFAULT) > 0;
#else
  return H5Fis_hdf5(path.c_str()) > 0;
#endif
}

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

// Deletes every attribute of `object` (in file `path`).
void delete_attributes(hid_t object, const std::string& path) {
  std::vector<std::string> names;
  checked(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_attribute_name, &names), path,
          "list root attributes");
  for (const std::string& name : names)
    checked(H5Adelete(object, name.c_str()), path, "delete root attribute '" + name + "'");
}

// The number of rows every column of a table has: the shortest's (a run killed between two
// column writes may leave some columns a row longer; that partial row goes).
std::int64_t common_rows(const std::vector<Hdf5Column>& columns) {
  std::int64_t rows = columns.front().rows();
  for (const Hdf5Column& column : columns) rows = std::min(rows, column.rows());
  return rows;
}

// Keeps the rows of `columns` whose `step` column (named `step_column`) is at most `after_step`;
// returns how many rows were dropped.
std::int64_t drop_steps_after(std::vector<Hdf5Column>& columns, std::size_t step_column, std::int64_t after_step) {
  const std::int64_t rows = common_rows(columns);
  for (Hdf5Column& column : columns) column.truncate(rows);
  std::vector<std::int64_t> steps(static_cast<std::size_t>(rows));
  columns[step_column].read_all(H5T_NATIVE_INT64, steps.data());
  std::vector<bool> keep(steps.size());
  std::transform(steps.begin(), steps.end(), keep.begin(), [&](std::int64_t step) { return step <= after_step; });
  for (Hdf5Column& column : columns) column.retain(keep);
  return rows - columns.front().rows();
}

std::size_t index_of(const char* name, const auto& fields) {
  for (std::size_t i = 0; i < std::size(fields); ++i)
    if (std::strcmp(fields[i].name, name) == 0) return i;
  throw std::logic_error(std::string("no column ") + name);
}

}  // namespace

TimelineWriter::TimelineWriter(const std::string& path, const Attributes& root_attributes, int stages)
    : path_(path), stages_(stages) {
  if (stages < 1) throw std::invalid_argument("TimelineWriter: stages must be at least 1, not " + std::to_string(stages));
  silence_hdf5_error_printing();
  create(root_attributes);
}

TimelineWriter::TimelineWriter(const std::string& path, const Attributes& root_attributes, int stages, Resume resume)
    : path_(path), stages_(stages) {
  if (stages < 1) throw std::invalid_argument("TimelineWriter: stages must be at least 1, not " + std::to_string(stages));
  silence_hdf5_error_printing();
  const std::optional<Fallback> fallback = open_existing(resume.after_step, root_attributes);
  if (!fallback) return;
  std::string kept_aside;
  if (fallback->keep_old_file) {
    std::error_code error;
    std::filesystem::rename(path, path + ".old", error);
    kept_aside = error ? "; could not rename it to " + path + ".old (" + error.message() + "), overwritten"
                       : "; the old file is now " + path + ".old";
  }
  create(root_attributes);
  note_ = "timeline: cannot continue " + path + " after step " + std::to_string(resume.after_step) + ": " +
          fallback->reason + kept_aside + "; started a new timeline";
}

void TimelineWriter::create(const Attributes& root_attributes) {
  const std::string& path = path_;
  file_ = Hdf5Handle(checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path, "create file"),
                     H5Fclose);
  for (const auto& [name, value] : root_attributes) write_attribute(file_.get(), name, value, path);

  steps_ = create_group(file_.get(), "steps", path);
  for (const StepField& field : kStepFields) {
    const hid_t type = std::visit([](auto member) { return type_of(member); }, field.member);
    step_columns_.emplace_back(steps_.get(), field.name, type, path);
  }
  step_columns_.emplace_back(steps_.get(), kPerStageName, native_type<std::int64_t>(), path,
                             per_stage_chunk_rows(stages_), stages_);

  kind_type_ = make_kind_type(path);
  events_ = create_group(file_.get(), "events", path);
  for (const EventField& field : kEventFields) {
    const hid_t type = std::visit([&](auto get) { return event_type(get, kind_type_.get()); }, field.get);
    event_columns_.emplace_back(events_.get(), field.name, type, path, kEventChunkRows);
  }
  flush_file("creation");
}

std::optional<TimelineWriter::Fallback> TimelineWriter::open_existing(std::int64_t after_step,
                                                                      const Attributes& root_attributes) {
  const std::string& path = path_;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return Fallback{"no such file"};
  if (!is_hdf5_file(path)) return Fallback{"not an HDF5 file"};
  file_ = Hdf5Handle(checked(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), path, "open file read-write"),
                     H5Fclose);
  if (H5Lexists(file_.get(), "steps", H5P_DEFAULT) <= 0) {
    close_all();
    return Fallback{"no /steps group, not a trident timeline"};
  }

  // The layout this writer appends to, checked before anything changes.
  kind_type_ = make_kind_type(path);
  std::string mismatch;
  try {
    steps_ = open_group(file_.get(), "steps", path);
    events_ = open_group(file_.get(), "events", path);
    const auto open_column = [&](std::vector<Hdf5Column>& columns, hid_t group, const char* name, hid_t type,
                          std::int64_t width) {
      Hdf5Column& column = columns.emplace_back(Hdf5Column::OpenExisting{}, group, name, path);
      if (!column.stores(type)) mismatch = std::string("dataset '") + name + "' has another element type";
      else if (column.width() != width)
        mismatch = std::string("dataset '") + name + "' has " +
                   (column.width() == 0 ? std::string("one value") : std::to_string(column.width()) + " values") +
                   " per row, this run writes " + (width == 0 ? std::string("one") : std::to_string(width));
    };
    for (const StepField& field : kStepFields) {
      if (!mismatch.empty()) break;
      open_column(step_columns_, steps_.get(), field.name, std::visit([](auto m) { return type_of(m); }, field.member), 0);
    }
    if (mismatch.empty()) open_column(step_columns_, steps_.get(), kPerStageName, native_type<std::int64_t>(), stages_);
    for (const EventField& field : kEventFields) {
      if (!mismatch.empty()) break;
      open_column(event_columns_, events_.get(), field.name,
           std::visit([&](auto get) { return event_type(get, kind_type_.get()); }, field.get), 0);
    }
  } catch (const std::runtime_error& failure) {
    mismatch = failure.what();
  }
  if (!mismatch.empty()) {
    close_all();
    return Fallback{"another timeline layout (" + mismatch + ")", true};
  }

  const std::int64_t steps_before = common_rows(step_columns_);
  const std::int64_t events_before = common_rows(event_columns_);
  const std::int64_t steps_dropped = drop_steps_after(step_columns_, index_of("step", kStepFields), after_step);
  const std::int64_t events_dropped = drop_steps_after(event_columns_, index_of("step", kEventFields), after_step);

  const Hdf5Handle root(checked(H5Gopen2(file_.get(), "/", H5P_DEFAULT), path, "open group /"), H5Gclose);
  delete_attributes(root.get(), path);
  for (const auto& [name, value] : root_attributes) write_attribute(root.get(), name, value, path);
  flush_file("resume");

  resumed_ = true;
  note_ = "timeline: continuing " + path + " after step " + std::to_string(after_step) + ": kept " +
          std::to_string(steps_written()) + " of " + std::to_string(steps_before) + " steps and " +
          std::to_string(events_written()) + " of " + std::to_string(events_before) + " events";
  if (steps_dropped > 0 || events_dropped > 0) note_ += " (dropped the rows of later steps)";
  return std::nullopt;
}

void TimelineWriter::close_all() {
  step_columns_.clear();
  event_columns_.clear();
  kind_type_ = Hdf5Handle();
  events_ = Hdf5Handle();
  steps_ = Hdf5Handle();
  file_ = Hdf5Handle();
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
  const std::vector<std::int64_t>& per_stage = record.peak_activation_bytes_per_stage;
  if (!per_stage.empty() && per_stage.size() != static_cast<std::size_t>(stages_))
    throw std::invalid_argument("TimelineWriter: step " + std::to_string(record.step) + " has " +
                                std::to_string(per_stage.size()) + " per-stage peak activation values for " +
                                std::to_string(stages_) + " stages");
  for (std::size_t i = 0; i < std::size(kStepFields); ++i) {
    std::visit([&](auto member) { step_columns_[i].append(type_of(member), &(record.*member)); },
               kStepFields[i].member);
  }
  const std::vector<std::int64_t> not_recorded(per_stage.empty() ? static_cast<std::size_t>(stages_) : 0,
                                               kNotRecorded);
  step_columns_.back().append(native_type<std::int64_t>(), per_stage.empty() ? not_recorded.data() : per_stage.data());
  flush_file("step " + std::to_string(record.step));
}

void TimelineWriter::append_events(const std::vector<EventRow>& rows) {
  pending_events_.insert(pending_events_.end(), rows.begin(), rows.end());
  if (pending_events_.size() >= kMaxPendingEvents) flush();
}

void TimelineWriter::set_attribute(const std::string& name, const AttributeValue& value) {
  if (H5Aexists(file_.get(), name.c_str()) > 0 && H5Adelete(file_.get(), name.c_str()) < 0)
    throw std::runtime_error("HDF5: replace attribute '" + name + "' failed for '" + path_ + "'");
  write_attribute(file_.get(), name, value, path_);
  flush_file("attribute " + name);
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
