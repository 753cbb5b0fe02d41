/// @file bundle.cpp
/// @brief Gradescope's autograder bundle for a lab (bundle.hpp).
#include "author/bundle.hpp"

#include <iostream>

#include "base/files.hpp"
#include "base/lab_config.hpp"
#include "base/process.hpp"

namespace gpulab::cli {

int make_bundle(const Paths& paths, const BundleOptions& options) {
  const std::optional<LabConfig> lab = find_lab(paths, options.lab);
  if (!lab) {
    std::cout << "gpulab bundle: no lab \"" << options.lab << "\"\n";
    return 2;
  }
  const fs::path out = fs::absolute(options.out.empty() ? paths.build / "bundle" / lab->slug : fs::path(options.out));
  if (fs::exists(out / "setup.sh")) {
    std::cout << "gpulab bundle: " << out.string() << " holds a bundle already (remove it first)\n";
    return 2;
  }
  fs::create_directories(out);
  for (const char* name : {"setup.sh", "run_autograder"}) {
    std::string text = read_text(paths.root / "tools" / "gradescope" / name);
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"@LAB@", lab->number}, {"@FIRST_SOURCE@", lab->sources.front()}}) {
      for (std::size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
    }
    write_text(out / name, text);
    fs::permissions(out / name, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  }
  ProcessOptions o;
  o.cwd = paths.root.string();
  const ProcessResult archive = run_process({"git", "archive", "--format=tar.gz", "-o", (out / "course.tar.gz").string(), "HEAD"}, o);
  if (!archive.exited(0)) {
    std::cout << "gpulab bundle: git archive failed (" << archive.describe() << "): the bundle needs the course as a git checkout\n" << archive.output;
    return 2;
  }
  if (!run_process({"git", "diff", "--quiet", "HEAD"}, o).exited(0)) {
    std::cout << "gpulab bundle: note: uncommitted changes are not in the bundle (it packs HEAD)\n";
  }
  const ProcessResult zip = run_process({"zip", "-q", "-j", (out / "autograder.zip").string(), (out / "setup.sh").string(), (out / "run_autograder").string(),
                                         (out / "course.tar.gz").string()});
  std::cout << "gpulab bundle " << lab->number << " --for gradescope: " << out.string() << "/{setup.sh, run_autograder, course.tar.gz}\n"
            << (zip.exited(0) ? "  upload " + (out / "autograder.zip").string() + " as the assignment's autograder\n"
                              : "  zip those three files (no folder) and upload the zip as the assignment's autograder (`zip` is not installed here)\n")
            << "  the image needs the CUDA toolkit for the GPU labs (setup.sh says how); [gpu] checks are reported as not run there, never passed\n";
  return 0;
}

}  // namespace gpulab::cli
