/// @file selftest_table.hpp
/// @brief What selftest's steps share: the table of rows (printed as they come, summarised last,
/// also written as JSON for scripts), and the checks that the skeleton and the mutants fail.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/lab_config.hpp"

namespace gpulab::cli {

/// selftest's rows: step, status (pass, fail, skip), a detail, and the seconds the step took —
/// the time since the previous row (selftest's steps run one after another, each adding its row
/// when it ends), so that the summary can say where the minutes go.
class Table {
 public:
  /// @p json_file: where finish() writes the rows.
  explicit Table(fs::path json_file) : json_file_(std::move(json_file)), last_(std::chrono::steady_clock::now()) {}
  void add(const std::string& step, const std::string& status, const std::string& detail);
  /// Prints the summary, the time per stage and the last line, writes the JSON; the exit code
  /// (0: nothing failed).
  int finish() const;
  /// The rows as JSON (a lab graded in another process hands them over this way), and
  /// rows from such JSON appended, as they were (not printed again, their seconds kept).
  nlohmann::json rows_json() const;
  void append(const nlohmann::json& rows);
  /// The wall time selftest took, when the labs ran side by side (the rows' seconds then add up
  /// to more); 0: the rows' sum.
  void set_wall_seconds(double s) { wall_seconds_ = s; }

 private:
  struct Row {
    std::string step, status, detail;
    double seconds = 0;
  };
  fs::path json_file_;
  std::vector<Row> rows_;
  std::chrono::steady_clock::time_point last_;
  double wall_seconds_ = 0;
};

/// The stage a selftest row belongs to, for the time table: "build", "unit tests", "mutants" (the
/// skeleton and each mutant fail their tests), "symbols" (they keep the symbol rules), "reference"
/// (graded), "plants", "lesson" (a section per TODO, the plants' manifest), "class" (selftest_class.hpp),
/// "sync" (and "other").
std::string stage_of(const std::string& step);

/// nvidia-smi lists a GPU.
bool gpu_visible();

/// The skeleton and every mutant of @p lab must fail their tests where they can run: natively,
/// and on the CPU emulator where the native [gpu] cases cannot run here.
void check_variants_fail(const Paths& paths, const LabConfig& lab, bool gpu, Table& table);

}  // namespace gpulab::cli
