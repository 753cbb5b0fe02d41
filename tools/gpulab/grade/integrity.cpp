/// @file integrity.cpp
/// @brief Tamper checks and repair (see integrity.hpp).
#include "grade/integrity.hpp"

#include "grade/reference_profile.hpp"

namespace gpulab::cli {

TreeGuard::TreeGuard(std::vector<fs::path> artefacts, std::vector<fs::path> folders, std::vector<fs::path> documents, fs::path snapshot)
    : files_(std::move(artefacts)), folders_(std::move(folders)), documents_(std::move(documents)), snapshot_(std::move(snapshot)) {
  for (const fs::path& f : files_) file_hashes_.push_back(file_hash(f));
  fs::remove_all(snapshot_);
  fs::create_directories(snapshot_);
  for (std::size_t i = 0; i < documents_.size(); ++i) {
    document_hashes_.push_back(file_hash(documents_[i]));
    std::error_code no_time;
    document_times_.push_back(fs::last_write_time(documents_[i], no_time));
    if (fs::exists(documents_[i])) fs::copy_file(documents_[i], snapshot_ / ("document-" + std::to_string(i)));
  }
  for (std::size_t i = 0; i < folders_.size(); ++i) {
    folder_hashes_.push_back(hash_tree(folders_[i]));
    const fs::path copy = snapshot_ / std::to_string(i);
    fs::create_directories(copy);
    if (fs::exists(folders_[i])) fs::copy(folders_[i], copy, fs::copy_options::recursive);
  }
}

void TreeGuard::rehash_artefacts() {
  for (std::size_t i = 0; i < files_.size(); ++i) file_hashes_[i] = file_hash(files_[i]);
}

void TreeGuard::keep_changed(const fs::path& path) const {
  // Nothing is lost: if the change was someone's own edit made during the grade, it is here.
  const fs::path kept = snapshot_ / "changed" / path.filename();
  fs::remove_all(kept);
  fs::create_directories(kept.parent_path());
  if (fs::exists(path)) fs::copy(path, kept, fs::copy_options::recursive);
}

std::string TreeGuard::check_and_repair() {
  std::string change;
  for (std::size_t i = 0; i < files_.size(); ++i) {
    if (file_hash(files_[i]) == file_hashes_[i]) continue;
    if (change.empty()) change = files_[i].string() + (fs::exists(files_[i]) ? " changed" : " was removed");
    fs::remove(files_[i]);  // the next build makes it again
  }
  for (std::size_t i = 0; i < documents_.size(); ++i) {
    if (file_hash(documents_[i]) == document_hashes_[i]) continue;
    if (change.empty()) change = documents_[i].string() + " changed";
    keep_changed(documents_[i]);
    const fs::path copy = snapshot_ / ("document-" + std::to_string(i));
    if (fs::exists(copy)) {
      fs::copy_file(copy, documents_[i], fs::copy_options::overwrite_existing);
      // Its time too: a source put back as it was is not rebuilt, nor is what depends on it.
      std::error_code ignored;
      fs::last_write_time(documents_[i], document_times_[i], ignored);
    } else {
      fs::remove(documents_[i]);
    }
  }
  for (std::size_t i = 0; i < folders_.size(); ++i) {
    const std::string here = first_tree_change(folder_hashes_[i], hash_tree(folders_[i]), folders_[i].string() + "/");
    if (here.empty()) continue;
    if (change.empty()) change = here;
    keep_changed(folders_[i]);
    fs::remove_all(folders_[i]);
    fs::create_directories(folders_[i]);
    fs::copy(snapshot_ / std::to_string(i), folders_[i], fs::copy_options::recursive);
  }
  if (!change.empty() && change.find("/build/") == std::string::npos) {
    change += " (the changed version is kept in " + (snapshot_ / "changed").string() + ")";
  }
  return change;
}

}  // namespace gpulab::cli
