#include "io/torch_file.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace trident {

namespace {

[[noreturn]] void reject(const std::string& path, const std::string& what) {
  throw InputError("PyTorch file '" + path + "': " + what);
}

// Little-endian fields of a byte range, each read checked against its end.
class Bytes {
 public:
  Bytes(const unsigned char* data, std::size_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}
  std::uint64_t le(std::size_t at, int width) const {
    need(at, width);
    std::uint64_t value = 0;
    for (int i = width; i-- > 0;) value = value << 8 | data_[at + i];
    return value;
  }
  std::string text(std::size_t at, std::size_t length) const {
    need(at, length);
    return std::string(reinterpret_cast<const char*>(data_ + at), length);
  }
  void need(std::size_t at, std::size_t length) const {
    if (at > size_ || length > size_ - at)
      reject(path_, "reads bytes [" + std::to_string(at) + ", +" + std::to_string(length) + ") past its end (" +
                        std::to_string(size_) + " bytes): truncated?");
  }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const unsigned char* data_;
  std::size_t size_;
  std::string path_;
};

// ---- the zip archive: entry name -> its data's place in the file --------------------------------

struct ZipEntry {
  std::size_t data = 0, size = 0;
};

constexpr std::uint32_t kEndOfDirectory = 0x06054b50, kZip64Locator = 0x07064b50, kZip64End = 0x06064b50,
                        kDirectoryEntry = 0x02014b50, kLocalHeader = 0x04034b50, kFull32 = 0xFFFFFFFF;

// (entries, offset) of the central directory, from the end record (zip64's where it says so).
std::pair<std::uint64_t, std::uint64_t> central_directory(const Bytes& zip) {
  if (zip.size() < 22) reject(zip.path(), "too short for a zip archive");
  std::size_t end = zip.size() - 22;
  const std::size_t lowest = end > 65535 ? end - 65535 : 0;
  while (zip.le(end, 4) != kEndOfDirectory) {
    if (end == lowest) reject(zip.path(), "not a zip archive (no end of central directory)");
    --end;
  }
  std::uint64_t entries = zip.le(end + 10, 2), offset = zip.le(end + 16, 4);
  if ((entries == 0xFFFF || offset == kFull32) && end >= 20 && zip.le(end - 20, 4) == kZip64Locator) {
    const std::size_t record = zip.le(end - 20 + 8, 8);
    if (zip.le(record, 4) != kZip64End) reject(zip.path(), "a zip64 locator that points to no zip64 record");
    entries = zip.le(record + 32, 8);
    offset = zip.le(record + 48, 8);
  }
  return {entries, offset};
}

// The 64-bit sizes and offset of a zip64 entry (extra field 0x0001), in the order the format gives.
void read_zip64_extra(const Bytes& zip, std::size_t extra, std::size_t length, std::uint64_t* fields[3]) {
  for (std::size_t at = extra; at + 4 <= extra + length;) {
    const std::uint64_t id = zip.le(at, 2), size = zip.le(at + 2, 2);
    if (id == 1) {
      std::size_t field = at + 4;
      for (int i = 0; i < 3; ++i)
        if (*fields[i] == kFull32) *fields[i] = zip.le(std::exchange(field, field + 8), 8);
      return;
    }
    at += 4 + size;
  }
}

std::map<std::string, ZipEntry> zip_entries(const Bytes& zip) {
  auto [count, at] = central_directory(zip);
  std::map<std::string, ZipEntry> entries;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (zip.le(at, 4) != kDirectoryEntry) reject(zip.path(), "a damaged zip central directory");
    const std::uint64_t method = zip.le(at + 10, 2), name_length = zip.le(at + 28, 2), extra = zip.le(at + 30, 2);
    std::uint64_t compressed = zip.le(at + 20, 4), plain = zip.le(at + 24, 4), local = zip.le(at + 42, 4);
    const std::string name = zip.text(at + 46, name_length);
    std::uint64_t* fields[3] = {&plain, &compressed, &local};
    read_zip64_extra(zip, at + 46 + name_length, extra, fields);
    if (method != 0) reject(zip.path(), "entry '" + name + "' is compressed; torch.save stores its entries");
    if (zip.le(local, 4) != kLocalHeader) reject(zip.path(), "entry '" + name + "' has no local header");
    const std::size_t data = local + 30 + zip.le(local + 26, 2) + zip.le(local + 28, 2);
    zip.need(data, compressed);
    entries[name] = {data, static_cast<std::size_t>(compressed)};
    at += 46 + name_length + extra + zip.le(at + 32, 2);
  }
  return entries;
}

// ---- the pickle: what torch.save writes for a state dict --------------------------------------

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind { none, integer, text, tuple, list, dict, global, storage, tensor, other } kind = Kind::none;
  std::int64_t number = 0;
  std::string text;             // text; global: "module.name"; storage and tensor: the storage's key
  std::string dtype;            // storage, tensor
  std::vector<ValuePtr> items;  // tuple, list; dict: key, value, key, value, ...
  std::vector<std::int64_t> shape, stride;
  std::int64_t offset = 0;  // tensor: elements into its storage
};

ValuePtr make(Value::Kind kind) {
  auto value = std::make_shared<Value>();
  value->kind = kind;
  return value;
}

// torch's storage classes as safetensors' dtypes.
std::string storage_dtype(const std::string& global) {
  static const std::map<std::string, std::string> dtypes = {
      {"torch.FloatStorage", "F32"}, {"torch.BFloat16Storage", "BF16"}, {"torch.HalfStorage", "F16"},
      {"torch.DoubleStorage", "F64"}, {"torch.LongStorage", "I64"},     {"torch.IntStorage", "I32"},
      {"torch.ShortStorage", "I16"},  {"torch.CharStorage", "I8"},      {"torch.ByteStorage", "U8"},
      {"torch.BoolStorage", "BOOL"}};
  const auto found = dtypes.find(global);
  return found == dtypes.end() ? "" : found->second;
}

std::vector<std::int64_t> integers(const Value& tuple) {
  std::vector<std::int64_t> out;
  for (const ValuePtr& item : tuple.items) out.push_back(item->number);
  return out;
}

class Unpickler {
 public:
  Unpickler(const Bytes& pickle, std::size_t begin, std::size_t end) : in_(pickle), at_(begin), end_(end) {}
  ValuePtr run();

 private:
  bool step(unsigned char opcode);
  bool step_integers_and_text(unsigned char opcode);
  bool step_containers(unsigned char opcode);
  bool step_memo_and_calls(unsigned char opcode);
  std::uint64_t take(int width) { return in_.le(std::exchange(at_, at_ + width), width); }
  std::string take_text(std::size_t length) { return in_.text(std::exchange(at_, at_ + length), length); }
  std::string line();
  ValuePtr pop();
  std::vector<ValuePtr> pop_to_mark();
  ValuePtr reduce(const Value& callable, const Value& args) const;
  ValuePtr persistent(const Value& id) const;
  [[noreturn]] void fail(const std::string& what) const {
    reject(in_.path(), "data.pkl at byte " + std::to_string(at_) + ": " + what);
  }

  const Bytes& in_;
  std::size_t at_, end_;
  std::vector<ValuePtr> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::uint64_t, ValuePtr> memo_;
};

std::string Unpickler::line() {
  std::string text;
  for (char c; (c = static_cast<char>(take(1))) != '\n';) text += c;
  return text;
}

ValuePtr Unpickler::pop() {
  if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) fail("pops an empty stack");
  ValuePtr top = stack_.back();
  stack_.pop_back();
  return top;
}

std::vector<ValuePtr> Unpickler::pop_to_mark() {
  if (marks_.empty()) fail("no mark to pop to");
  std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
  stack_.resize(marks_.back());
  marks_.pop_back();
  return items;
}

ValuePtr Unpickler::persistent(const Value& id) const {
  auto storage = make(Value::Kind::storage);
  if (id.kind != Value::Kind::tuple || id.items.size() < 3 || id.items[0]->text != "storage" ||
      id.items[1]->kind != Value::Kind::global)
    fail("a persistent id that is not torch.save's ('storage', type, key, ...)");
  storage->dtype = storage_dtype(id.items[1]->text);
  storage->text = id.items[2]->text;
  if (storage->dtype.empty()) storage->dtype = id.items[1]->text;  // refused by name if a tensor uses it
  return storage;
}

ValuePtr Unpickler::reduce(const Value& callable, const Value& args) const {
  const std::string& name = callable.text;
  if (name == "collections.OrderedDict") return make(Value::Kind::dict);
  if (name == "torch._utils._rebuild_parameter" && !args.items.empty()) return args.items[0];
  if (name != "torch._utils._rebuild_tensor_v2") return make(Value::Kind::other);
  if (args.items.size() < 4 || args.items[0]->kind != Value::Kind::storage)
    fail("_rebuild_tensor_v2 without (storage, offset, size, stride)");
  auto tensor = make(Value::Kind::tensor);
  tensor->text = args.items[0]->text;
  tensor->dtype = args.items[0]->dtype;
  tensor->offset = args.items[1]->number;
  tensor->shape = integers(*args.items[2]);
  tensor->stride = integers(*args.items[3]);
  return tensor;
}

bool Unpickler::step_integers_and_text(unsigned char opcode) {
  auto push_integer = [&](std::int64_t number) {
    auto value = make(Value::Kind::integer);
    value->number = number;
    stack_.push_back(value);
  };
  auto push_text = [&](std::size_t length) {
    auto value = make(Value::Kind::text);
    value->text = take_text(length);
    stack_.push_back(value);
  };
  switch (opcode) {
    case 'K': push_integer(static_cast<std::int64_t>(take(1))); return true;                     // BININT1
    case 'M': push_integer(static_cast<std::int64_t>(take(2))); return true;                     // BININT2
    case 'J': push_integer(static_cast<std::int32_t>(take(4))); return true;                     // BININT
    case 0x88: case 0x89: push_integer(opcode == 0x88); return true;                            // NEWTRUE, NEWFALSE
    case 0x8a: {                                                                                 // LONG1
      const int width = static_cast<int>(take(1));
      if (width > 8) fail("an integer of " + std::to_string(width) + " bytes");
      const std::uint64_t bits = width ? take(width) : 0;
      const int shift = 64 - 8 * width;
      push_integer(width ? static_cast<std::int64_t>(bits << shift) >> shift : 0);
      return true;
    }
    case 'X': push_text(take(4)); return true;     // BINUNICODE
    case 0x8c: push_text(take(1)); return true;    // SHORT_BINUNICODE
    case 'N': stack_.push_back(make(Value::Kind::none)); return true;
    case 'G': take(8); stack_.push_back(make(Value::Kind::other)); return true;  // BINFLOAT: not a shape
    case 'c': {                                                                  // GLOBAL
      auto global = make(Value::Kind::global);
      global->text = line();  // module, then name: appended piecewise (GCC 12 warns falsely on "." + line())
      global->text += '.';
      global->text += line();
      stack_.push_back(global);
      return true;
    }
    default: return false;
  }
}

bool Unpickler::step_containers(unsigned char opcode) {
  switch (opcode) {
    case '}': stack_.push_back(make(Value::Kind::dict)); return true;
    case ']': stack_.push_back(make(Value::Kind::list)); return true;
    case ')': stack_.push_back(make(Value::Kind::tuple)); return true;
    case '(': marks_.push_back(stack_.size()); return true;
    case 't': case 0x85: case 0x86: case 0x87: {  // TUPLE, TUPLE1, TUPLE2, TUPLE3
      auto tuple = make(Value::Kind::tuple);
      if (opcode == 't') tuple->items = pop_to_mark();
      for (int n = opcode == 't' ? 0 : opcode - 0x84; n > 0; --n) tuple->items.insert(tuple->items.begin(), pop());
      stack_.push_back(tuple);
      return true;
    }
    case 'u': case 'e': case 's': case 'a': {  // SETITEMS, APPENDS, SETITEM, APPEND
      std::vector<ValuePtr> items;
      if (opcode == 'u' || opcode == 'e') items = pop_to_mark();
      if (opcode == 'a') items = {pop()};
      if (opcode == 's') {
        const ValuePtr value = pop(), key = pop();
        items = {key, value};
      }
      if (stack_.empty()) fail("adds items to nothing");
      Value& container = *stack_.back();
      container.items.insert(container.items.end(), items.begin(), items.end());
      return true;
    }
    default: return false;
  }
}

bool Unpickler::step_memo_and_calls(unsigned char opcode) {
  switch (opcode) {
    case 'q': case 'r': case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
      const std::uint64_t key = opcode == 0x94 ? memo_.size() : take(opcode == 'q' ? 1 : 4);
      if (stack_.empty()) fail("memoizes an empty stack");
      memo_[key] = stack_.back();
      return true;
    }
    case 'h': case 'j': {                                                                   // BINGET, LONG_BINGET
      const auto found = memo_.find(take(opcode == 'h' ? 1 : 4));
      if (found == memo_.end()) fail("gets a memo entry never put");
      stack_.push_back(found->second);
      return true;
    }
    case 'Q': stack_.push_back(persistent(*pop())); return true;  // BINPERSID
    case 'R': {                                                    // REDUCE
      const ValuePtr args = pop(), callable = pop();
      stack_.push_back(reduce(*callable, *args));
      return true;
    }
    case 'b': pop(); return true;  // BUILD: an object's state (a state dict's _metadata) is not needed
    case 0x80: take(1); return true;  // PROTO
    case 0x95: take(8); return true;  // FRAME
    default: return false;
  }
}

ValuePtr Unpickler::run() {
  while (at_ < end_) {
    const auto opcode = static_cast<unsigned char>(take(1));
    if (opcode == '.') return pop();  // STOP
    if (!step_integers_and_text(opcode) && !step_containers(opcode) && !step_memo_and_calls(opcode)) {
      at_ -= 1;
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", opcode);
      fail(std::string("opcode ") + hex + ", which torch.save does not write");
    }
  }
  fail("ends without STOP");
}

// ---- the tensors ------------------------------------------------------------------------------

StoredTensor stored(const Value& tensor, const std::string& name, const ZipEntry& storage, const std::string& path) {
  const auto fail = [&](const std::string& what) { reject(path, "tensor '" + name + "' " + what); };
  const std::size_t width = dtype_bytes(tensor.dtype);
  if (width == 0) fail("has storage " + tensor.dtype + ", which trident does not read");
  if (tensor.stride.size() != tensor.shape.size() || tensor.offset < 0) fail("has a malformed size or stride");
  std::uint64_t elements = 1, expected_stride = 1;
  for (std::size_t d = tensor.shape.size(); d-- > 0;) {
    const std::int64_t extent = tensor.shape[d];
    if (extent < 0) fail("has a negative size");
    if (extent > 1 && tensor.stride[d] != static_cast<std::int64_t>(expected_stride))
      fail("is not contiguous (a view: save a .contiguous() copy, as save_pretrained does)");
    if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(extent), &elements) ||
        __builtin_mul_overflow(expected_stride, static_cast<std::uint64_t>(std::max<std::int64_t>(extent, 1)),
                               &expected_stride))
      fail("has more elements than 64 bits count");
  }
  const std::uint64_t first = static_cast<std::uint64_t>(tensor.offset);
  if (first > storage.size / width || elements > storage.size / width - first)
    fail("runs past the end of its storage " + tensor.text);
  StoredTensor out{tensor.dtype, tensor.shape};
  out.begin = storage.data + first * width;
  out.end = out.begin + elements * width;
  return out;
}

}  // namespace

TorchFile::TorchFile(const std::string& path) : TensorFile(path) {
  const Bytes file(bytes(), size(), path);
  if (size() >= 8 && file.le(0, 4) != kLocalHeader)
    reject(path, "not a zip archive: written by torch.save before PyTorch 1.6 (or not by PyTorch); "
                 "save it again with a newer PyTorch or as safetensors");
  const std::map<std::string, ZipEntry> entries = zip_entries(file);
  const auto pickle = std::ranges::find_if(entries, [](const auto& entry) {
    return entry.first.ends_with("/data.pkl") && std::ranges::count(entry.first, '/') == 1;
  });
  if (pickle == entries.end()) reject(path, "no <archive>/data.pkl: not a torch.save archive");
  const std::string prefix = pickle->first.substr(0, pickle->first.size() - std::string("data.pkl").size());
  const ValuePtr root = Unpickler(file, pickle->second.data, pickle->second.data + pickle->second.size).run();
  if (root->kind != Value::Kind::dict) reject(path, "holds no dict: not a state dict");
  for (std::size_t i = 0; i + 1 < root->items.size(); i += 2) {
    const Value &key = *root->items[i], &value = *root->items[i + 1];
    if (value.kind != Value::Kind::tensor) continue;  // e.g. a step counter beside the weights
    const auto storage = entries.find(prefix + "data/" + value.text);
    if (storage == entries.end())
      reject(path, "tensor '" + key.text + "' names storage " + value.text + ", which the archive lacks");
    tensors_[key.text] = stored(value, key.text, storage->second, path);
  }
}

}  // namespace trident
