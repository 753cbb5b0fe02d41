/// @file regions.cpp
/// @brief Parsing and rendering of SOLUTION regions.
#include "base/regions.hpp"

#include <regex>
#include <sstream>

namespace gpulab::cli {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const std::regex kBegin(R"(^(\s*)//\s*BEGIN SOLUTION\((\d+\.\d+)\)\s*(.*?)\s*$)");
const std::regex kStub(R"(^\s*//\s*STUB:\s?(.*)$)");
const std::regex kEnd(R"(^\s*//\s*END SOLUTION\s*$)");
const std::regex kAnyMarker(R"(//\s*(BEGIN SOLUTION|END SOLUTION|STUB:))");

std::string at(const std::string& where, std::size_t line) {
  return where + ":" + std::to_string(line) + ": ";
}

}  // namespace

std::vector<Region> parse_regions(const std::string& text, const std::string& where,
                                  const std::string& lab_number) {
  std::vector<Region> regions;
  const std::vector<std::string> lines = split_lines(text);
  bool inside = false;
  Region current;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    const std::size_t line_no = k + 1;
    std::smatch m;
    if (std::regex_match(lines[k], m, kBegin)) {
      if (inside) {
        throw RegionError(at(where, line_no) + "BEGIN SOLUTION(" + m[2].str() +
                          ") inside region " + current.id + " (begun at line " +
                          std::to_string(current.begin_line) + "); regions do not nest");
      }
      current = Region{m[2].str(), m[3].str(), line_no, 0, {}};
      if (current.title.empty()) throw RegionError(at(where, line_no) + "region " + current.id + " has no title");
      if (!lab_number.empty() && current.id.rfind(lab_number + ".", 0) != 0) {
        throw RegionError(at(where, line_no) + "region " + current.id + " does not belong to lab " + lab_number);
      }
      for (const Region& r : regions) {
        if (r.id == current.id) throw RegionError(at(where, line_no) + "region " + current.id + " appears twice");
      }
      inside = true;
    } else if (std::regex_match(lines[k], m, kStub)) {
      if (!inside) throw RegionError(at(where, line_no) + "STUB: outside a SOLUTION region");
      current.stub.push_back(m[1].str());
    } else if (std::regex_match(lines[k], kEnd)) {
      if (!inside) throw RegionError(at(where, line_no) + "END SOLUTION without BEGIN");
      current.end_line = line_no;
      regions.push_back(current);
      inside = false;
    } else if (std::regex_search(lines[k], kAnyMarker)) {
      throw RegionError(at(where, line_no) + "malformed marker (expected `// BEGIN SOLUTION(NN.k) title`, "
                        "`// STUB: code` or `// END SOLUTION` alone on the line)");
    }
  }
  if (inside) {
    throw RegionError(at(where, current.begin_line) + "region " + current.id + " is never closed with END SOLUTION");
  }
  return regions;
}

std::string render(const std::string& text, const std::string& where, const std::string& slug,
                   const std::string& only_region) {
  const std::vector<Region> regions = parse_regions(text, where);
  if (!only_region.empty()) {
    bool found = false;
    for (const Region& r : regions) found = found || r.id == only_region;
    if (!found) throw RegionError(where + ": no region " + only_region);
  }
  const std::vector<std::string> lines = split_lines(text);
  std::ostringstream out;
  std::size_t next = 0;  // index into regions
  for (std::size_t k = 0; k < lines.size(); ++k) {
    const std::size_t line_no = k + 1;
    if (next < regions.size() && line_no == regions[next].begin_line) {
      const Region& r = regions[next++];
      if (!only_region.empty() && r.id != only_region) {
        continue;  // mutant: other regions keep their reference code (the marker lines are comments)
      }
      std::smatch m;
      std::regex_match(lines[k], m, kBegin);
      const std::string indent = m[1].str();
      out << indent << "// TODO(" << r.id << "): " << r.title << '\n'
          << indent << "// See lessons/" << slug << ".md, section \"TODO(" << r.id << ")\".\n";
      for (const std::string& s : r.stub) out << indent << s << '\n';
      k = r.end_line - 1;  // skip the body and the END line
      continue;
    }
    if (!only_region.empty() &&
        (std::regex_match(lines[k], kBegin) || std::regex_match(lines[k], kEnd) ||
         std::regex_match(lines[k], kStub))) {
      continue;  // markers of the regions a mutant keeps
    }
    out << lines[k] << '\n';
  }
  return out.str();
}

}  // namespace gpulab::cli
