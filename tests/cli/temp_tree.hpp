/// @file temp_tree.hpp
/// @brief A throwaway source tree with one lab (05-x) for the CLI's unit tests: solutions/,
/// tests/05-x/lab.json (and the test file its build names) and a lesson, under a temporary folder removed afterwards.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>

#include "base/files.hpp"
#include "base/paths.hpp"

namespace gpulab::testing {

struct TempTree {
  cli::Paths paths;
  /// @p name: a word that keeps concurrent test programs apart.
  explicit TempTree(const std::string& name, const std::string& lab_json = R"({"title": "X", "sources": ["a.cu"], "build": {"tests": ["test_x.cpp"]}})") {
    paths.root = std::filesystem::temp_directory_path() / ("gpulab-" + name + "-test-" + std::to_string(::getpid()));
    paths.build = paths.root / "build";
    std::filesystem::remove_all(paths.root);
    write("solutions/05-x/a.cu",
          "int a() {\n  // BEGIN SOLUTION(05.1) Return one\n  return 1;\n  // STUB: return 0;\n  // END SOLUTION\n}\n"
          "// BEGIN SOLUTION(05.2) Return two\nint b() { return 2; }\n// END SOLUTION\n");
    write("tests/05-x/lab.json", lab_json);
    write("tests/05-x/test_x.cpp", "// the lab's tests\n");
    write("lessons/05-x.md", "## TODO(05.1) Return one\n## TODO(05.2) Return two\n");
  }
  ~TempTree() { std::filesystem::remove_all(paths.root); }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;
  void write(const std::string& relative, const std::string& text) const { cli::write_text(paths.root / relative, text); }
  std::string read(const std::string& relative) const { return cli::read_text(paths.root / relative); }
};

/// What @p run printed on std::cout.
inline std::string captured(const std::function<void()>& run) {
  std::ostringstream out;
  std::streambuf* old = std::cout.rdbuf(out.rdbuf());
  run();
  std::cout.rdbuf(old);
  return out.str();
}

}  // namespace gpulab::testing
