/// @file profile.cpp
/// @brief Nsight Compute's CSV and what the profile stage concludes from it (profile.hpp).
#include "grade/profile.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace gpulab::cli {
namespace {

/// One CSV line's fields ("a","b,c",d): quotes removed, doubled quotes kept as one.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(field);
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  out.push_back(field);
  return out;
}

/// "268,435,456" or "1.5e+06" as a number; NaN when it is not one ("n/a").
double number(const std::string& text) {
  std::string digits;
  for (char c : text) {
    if (c != ',' && c != ' ') digits += c;
  }
  try {
    std::size_t used = 0;
    const double v = std::stod(digits, &used);
    return used == digits.size() ? v : NAN;
  } catch (const std::exception&) {
    return NAN;
  }
}

/// A base unit's factor ("byte" 1, "Kbyte" 1e3 ... in case --print-units base was not honoured).
double unit_factor(const std::string& unit) {
  if (unit == "Kbyte" || unit == "KB") return 1e3;
  if (unit == "Mbyte" || unit == "MB") return 1e6;
  if (unit == "Gbyte" || unit == "GB") return 1e9;
  if (unit == "Ksector") return 1e3;
  if (unit == "Msector") return 1e6;
  return 1.0;
}

std::string megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f MB", bytes / 1e6);
  return text;
}

}  // namespace

std::vector<NcuKernel> parse_ncu_csv(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header, units;
  std::vector<NcuKernel> kernels;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '"') continue;  // ==PROF== notes and the program's own output
    const std::vector<std::string> f = csv_fields(line);
    if (header.empty()) {
      header = f;
      continue;
    }
    if (!f.empty() && f[0].empty() && units.empty()) {  // the units row
      units = f;
      continue;
    }
    NcuKernel k;
    for (std::size_t i = 0; i < header.size() && i < f.size(); ++i) {
      if (header[i] == "Kernel Name") k.name = f[i];
      if (header[i].find("__") == std::string::npos) continue;  // only metric columns (unit__counter.rollup)
      const double v = number(f[i]);
      if (v == v) k.metrics[header[i]] = v * (i < units.size() ? unit_factor(units[i]) : 1.0);
    }
    kernels.push_back(k);
  }
  bool named = false;
  for (const std::string& h : header) named = named || h == "Kernel Name";
  if (!named) throw std::runtime_error("ncu's output has no CSV header with \"Kernel Name\" (was it run with --csv --page raw?)");
  return kernels;
}

ProfileVerdict judge_profile(const std::vector<NcuKernel>& kernels, const std::string& range, double min_bytes, int max_kernels,
                             double max_factor) {
  ProfileVerdict v;
  double read = 0, written = 0;
  for (const NcuKernel& k : kernels) {
    const auto r = k.metrics.find("dram__bytes_read.sum");
    const auto w = k.metrics.find("lts__t_sectors_op_write.sum");
    if (r != k.metrics.end()) read += r->second;
    if (w != k.metrics.end()) written += 32.0 * w->second;
  }
  const double factor = min_bytes > 0 ? (read + written) / min_bytes : 0.0;
  char text[240];
  std::snprintf(text, sizeof text, "%zu kernel%s; read %s (DRAM), wrote %s (L2): %.2f× the minimum %s", kernels.size(), kernels.size() == 1 ? "" : "s",
                megabytes(read).c_str(), megabytes(written).c_str(), factor, megabytes(min_bytes).c_str());
  v.summary = text;
  if (kernels.empty()) {
    v.problem = "no kernel ran inside the NVTX range \"" + range + "\"";
  } else if (static_cast<int>(kernels.size()) > max_kernels) {
    v.problem = "\"" + range + "\" holds " + std::to_string(kernels.size()) + " kernels, and a fused range should hold " + std::to_string(max_kernels);
  } else if (factor > max_factor) {
    char why[200];
    std::snprintf(why, sizeof why, "you moved %.1f× the bytes %s needs (at most %.2f× passes): something is read or written twice", factor,
                  range.c_str(), max_factor);
    v.problem = why;
  }
  v.ok = v.problem.empty();
  return v;
}

bool ncu_lacks_permission(const std::string& output) { return output.find("ERR_NVGPUCTRPERM") != std::string::npos; }

}  // namespace gpulab::cli
