/// @file report.cpp
/// @brief JSON-lines records shared by tests and the grader.
#include "gpulab/report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

namespace gpulab::report {
namespace {
std::string& case_slot() {
  static std::string name;
  return name;
}
int& rank_slot() {
  static int rank = -1;
  return rank;
}
std::vector<nlohmann::json>& record_slot() {
  static std::vector<nlohmann::json> all;
  return all;
}

/// The records' descriptor under the grader, or -1.
int report_fd() {
  const char* fd_text = std::getenv("GPULAB_REPORT_FD");
  return fd_text != nullptr && *fd_text != '\0' ? std::atoi(fd_text) : -1;
}

bool write_all(int fd, const char* data, std::size_t size) {
  for (std::size_t at = 0; at < size;) {
    const ssize_t n = write(fd, data + at, size - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // the grader finds the record missing
    at += static_cast<std::size_t>(n);
  }
  return true;
}

std::string line_of(const nlohmann::json& rec) {
  // Non-finite numbers are not JSON; dump() writes them as null, which the grader treats as
  // "not a number" and fails.
  return rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

void set_current_case(const std::string& name) { case_slot() = name; }
void set_rank(int rank) { rank_slot() = rank; }
const std::string& current_case() { return case_slot(); }

nlohmann::json record(nlohmann::json rec) {
  if (!rec.is_object()) rec = nlohmann::json{{"value", rec}};
  if (!rec.contains("case")) rec["case"] = case_slot();
  if (rank_slot() >= 0) rec["rank"] = rank_slot();
  record_slot().push_back(rec);
  if (const int fd = report_fd(); fd >= 0) {
    const std::string line = line_of(rec);
    write_all(fd, line.data(), line.size());
    return rec;
  }
  if (const char* path = std::getenv("GPULAB_REPORT"); path != nullptr && *path != '\0') {
    const std::string file =
        rank_slot() >= 0 ? std::string(path) + ".rank" + std::to_string(rank_slot()) : std::string(path);
    std::ofstream out(file, std::ios::app);
    out << line_of(rec);
  }
  return rec;
}

Outputs outputs_wanted() {
  const char* v = std::getenv("GPULAB_OUTPUTS");
  if (v == nullptr || report_fd() < 0) return Outputs::kNone;
  const std::string which = v;
  return which == "all" ? Outputs::kAll : which == "got" ? Outputs::kGot : Outputs::kNone;
}

void output(nlohmann::json header, const std::vector<Block>& blocks) {
  const int fd = report_fd();
  if (outputs_wanted() == Outputs::kNone || fd < 0) return;
  header["kind"] = "output";
  if (!header.contains("case")) header["case"] = case_slot();
  if (rank_slot() >= 0) header["rank"] = rank_slot();
  const std::string line = line_of(header);
  if (!write_all(fd, line.data(), line.size())) return;
  for (const Block& b : blocks) {
    const std::string head = "@blob " + std::to_string(b.bytes) + "\n";
    if (!write_all(fd, head.data(), head.size()) || !write_all(fd, static_cast<const char*>(b.data), b.bytes)) return;
  }
}

const std::vector<nlohmann::json>& records() { return record_slot(); }

std::vector<nlohmann::json> read_file(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
      out.push_back({{"parse_error", line}});
    } else {
      out.push_back(std::move(parsed));
    }
  }
  return out;
}

}  // namespace gpulab::report
