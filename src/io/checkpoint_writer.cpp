#include "io/checkpoint_writer.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "io/hdf5_handle.hpp"

namespace trident {

namespace {

std::string dataset_path(const std::string& name) {
  std::string path = "/model/" + name;
  for (char& c : path)
    if (c == '.') c = '/';
  return path;
}

void write_tensor(hid_t file, const NamedTensor& tensor, const std::string& where) {
  const std::vector<hsize_t> dims(tensor.shape.begin(), tensor.shape.end());
  Hdf5Handle space(checked(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), where,
                           "dataspace of " + tensor.name),
                   H5Sclose);
  Hdf5Handle links(checked(H5Pcreate(H5P_LINK_CREATE), where, "link property list"), H5Pclose);
  checked(H5Pset_create_intermediate_group(links.get(), 1), where, "intermediate groups");
  Hdf5Handle dataset(checked(H5Dcreate2(file, dataset_path(tensor.name).c_str(), H5T_IEEE_F32LE, space.get(),
                                        links.get(), H5P_DEFAULT, H5P_DEFAULT),
                             where, "create dataset " + tensor.name),
                     H5Dclose);
  checked(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.values.data()), where,
          "write dataset " + tensor.name);
}

// Replaces `path` with `text` atomically: readers see the old or the new file, never a torn one.
void replace_text_file(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

std::string checkpoint_file_name(int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08d.h5", step);
  return name;
}

std::string write_checkpoint(const std::string& dir, int step, const std::vector<NamedTensor>& tensors,
                             const Attributes& attributes) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path final_path = std::filesystem::path(dir) / checkpoint_file_name(step);
  const std::string tmp_path = final_path.string() + ".tmp";
  silence_hdf5_error_printing();
  {
    Hdf5Handle file(checked(H5Fcreate(tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), tmp_path,
                            "create file"),
                    H5Fclose);
    for (const NamedTensor& tensor : tensors) write_tensor(file.get(), tensor, tmp_path);
    for (const auto& [name, value] : attributes) write_attribute(file.get(), name, value, tmp_path);
  }
  std::filesystem::rename(tmp_path, final_path);
  replace_text_file(std::filesystem::path(dir) / "latest", final_path.filename().string());
  return final_path.string();
}

}  // namespace trident
