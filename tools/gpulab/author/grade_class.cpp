/// @file grade_class.cpp
/// @brief `gpulab grade-class`: a folder of submissions graded into a gradebook and a leaderboard
/// (grade_class.hpp).
#include "author/grade_class.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/files.hpp"
#include "base/lab_config.hpp"
#include "base/process.hpp"
#include "grade/points.hpp"

namespace gpulab::cli {

using json = nlohmann::json;

namespace {

constexpr std::uint64_t kMaxEntryBytes = 4ull << 20, kMaxTotalBytes = 64ull << 20;
constexpr std::size_t kMaxEntries = 10000;

bool ends_with(const std::string& s, const std::string& tail) { return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0; }

std::vector<std::string> fields_of(const std::string& line, std::size_t count, std::string& rest) {
  std::vector<std::string> f;
  std::size_t i = 0;
  while (f.size() < count) {
    while (i < line.size() && line[i] == ' ') ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (start == i) throw std::runtime_error("cannot read the archive listing line \"" + line + "\"");
    f.push_back(line.substr(start, i - start));
  }
  if (i < line.size()) ++i;  // the one space before the name
  rest = line.substr(std::min(i, line.size()));
  return f;
}

char type_of(char mode) {
  switch (mode) {
    case '-': return 'f';
    case 'd': return 'd';
    case 'l': return 'l';
    case 'h': return 'h';
    default: return 'o';
  }
}

std::uint64_t size_of(const std::string& field) {
  if (field.empty() || field.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoull(field);
}

std::string csv(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

/// Where the lab's files are in an unpacked submission: its top, or its one folder.
fs::path lab_files_in(const fs::path& tree, const std::vector<std::string>& sources, std::string& problem) {
  auto has_all = [&](const fs::path& dir, std::string& missing) {
    for (const std::string& s : sources) {
      if (!fs::is_regular_file(dir / s)) {
        missing = s;
        return false;
      }
    }
    return true;
  };
  std::string missing;
  if (has_all(tree, missing)) return tree;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(tree)) {
    if (e.is_directory() && e.path().filename() != "__MACOSX") dirs.push_back(e.path());
  }
  std::string inner;
  if (dirs.size() == 1 && has_all(dirs.front(), inner)) return dirs.front();
  std::string all;
  for (const std::string& s : sources) all += (all.empty() ? "" : ", ") + s;
  problem = "not the lab's files: " + missing + " is missing (a folder or an archive with " + all + " at its top or inside one folder)";
  return {};
}

/// A folder submission copied file by file: no links followed, the archive limits kept.
std::string copy_folder(const fs::path& from, const fs::path& to) {
  std::uint64_t total = 0;
  std::size_t count = 0;
  for (auto it = fs::recursive_directory_iterator(from); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path rel = fs::relative(it->path(), from);
    if (it->is_symlink()) return "refused: " + rel.string() + " is a link (submit the files themselves)";
    if (++count > kMaxEntries) return "refused: more than " + std::to_string(kMaxEntries) + " files";
    if (it->is_directory()) {
      fs::create_directories(to / rel);
    } else if (it->is_regular_file()) {
      const std::uint64_t size = it->file_size();
      if (size > kMaxEntryBytes) return "refused: " + rel.string() + " is over 4 MiB";
      if ((total += size) > kMaxTotalBytes) return "refused: over 64 MiB in all";
      fs::create_directories((to / rel).parent_path());
      fs::copy_file(it->path(), to / rel);
    } else {
      return "refused: " + rel.string() + " is not a file or a folder";
    }
  }
  return "";
}

/// An archive listed, checked and unpacked into @p to (inside bubblewrap where it runs).
std::string unpack(const fs::path& archive, const fs::path& to) {
  const std::string name = archive.filename().string();
  const bool zip = ends_with(name, ".zip");
  const ProcessResult listed = run_process(zip ? std::vector<std::string>{"zipinfo", "-l", archive.string()}
                                               // -P: names as stored (tar would strip a leading / or ../ and only warn)
                                               : std::vector<std::string>{"tar", "-tvPf", archive.string()},
                                           {});
  if (!listed.exited(0)) return "not a readable archive (" + std::string(zip ? "zipinfo" : "tar") + ": " + listed.describe() + ")";
  std::vector<ArchiveEntry> entries;
  try {
    entries = zip ? parse_zipinfo_listing(listed.output) : parse_tar_listing(listed.output);
  } catch (const std::exception& e) {
    return std::string("not a readable archive (") + e.what() + ")";
  }
  if (const std::string why = archive_problem(entries); !why.empty()) return "refused: " + why;
  fs::create_directories(to);
  const std::vector<std::string> argv = zip ? std::vector<std::string>{"unzip", "-q", "-n", archive.string(), "-d", to.string()}
                                            : std::vector<std::string>{"tar", "-xf", archive.string(), "-C", to.string(), "--no-same-owner",
                                                                       "--no-same-permissions", "--no-overwrite-dir"};
  Sandbox box;  // the archive readable (also under /tmp, which the sandbox replaces), its folder writable
  box.keep = {archive.string()};
  box.writable = {to.string()};
  ProcessOptions o;
  o.timeout_s = 120;
  if (sandbox_available()) o.sandbox = &box;
  const ProcessResult r = run_process(argv, o);
  if (!r.exited(0)) return "could not unpack (" + r.describe() + ")";
  return "";
}

}  // namespace

std::string archive_problem(const std::vector<ArchiveEntry>& entries) {
  if (entries.size() > kMaxEntries) return "more than " + std::to_string(kMaxEntries) + " entries";
  std::uint64_t total = 0;
  for (const ArchiveEntry& e : entries) {
    if (e.name.empty()) return "an entry without a name";
    if (e.name.front() == '/') return e.name + " is an absolute path";
    std::istringstream parts(e.name);
    for (std::string part; std::getline(parts, part, '/');) {
      if (part == "..") return e.name + " leaves the archive's folder (..)";
    }
    if (e.type == 'l' || e.type == 'h') return e.name + " is a link";
    if (e.type == 'o') return e.name + " is not a file or a folder";
    if (e.size > kMaxEntryBytes) return e.name + " is over 4 MiB";
    if ((total += e.size) > kMaxTotalBytes) return "over 64 MiB in all";
  }
  return "";
}

std::vector<ArchiveEntry> parse_tar_listing(const std::string& listing) {
  std::vector<ArchiveEntry> out;
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line.rfind("tar: ", 0) == 0) throw std::runtime_error(line);  // a warning: something about this archive is odd
    std::string name;
    const std::vector<std::string> f = fields_of(line, 5, name);  // mode owner size date time
    ArchiveEntry e{name, type_of(f[0].front()), size_of(f[2])};
    if (e.type == 'l') e.name = name.substr(0, name.find(" -> "));
    if (e.type == 'h') e.name = name.substr(0, name.find(" link to "));
    out.push_back(e);
  }
  return out;
}

std::vector<ArchiveEntry> parse_zipinfo_listing(const std::string& listing) {
  std::vector<ArchiveEntry> out;
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);) {
    // The header ("Archive:", "Zip file size:") and the totals line ("N files, ...") are not entries.
    if (line.empty() || line.rfind("Archive:", 0) == 0 || line.rfind("Zip file size:", 0) == 0 || line.find(" files, ") != std::string::npos ||
        line.find(" file, ") != std::string::npos || line.rfind("Empty zipfile", 0) == 0) {
      continue;
    }
    std::string name;
    const std::vector<std::string> f = fields_of(line, 9, name);  // mode version os size type csize method date time
    // '?': a zip tool that recorded no file type (Python's zipfile, some Windows tools): unzip
    // writes such an entry as a plain file. Links say 'l'.
    const char mode = f[0].front() == '?' ? '-' : f[0].front();
    out.push_back({name, ends_with(name, "/") && mode != 'l' ? 'd' : type_of(mode), size_of(f[3])});
  }
  return out;
}

std::string student_of(const std::string& file_name) {
  if (file_name.empty() || file_name.front() == '.') return "";
  for (const char* ext : {".tar.gz", ".tgz", ".zip", ".tar"}) {
    if (ends_with(file_name, ext)) return file_name.substr(0, file_name.size() - std::string(ext).size());
  }
  return file_name.find('.') == std::string::npos ? file_name : "";
}

int grade_class(const Paths& paths, const ClassOptions& options) {
  const std::optional<LabConfig> lab = find_lab(paths, options.lab);
  if (!lab) {
    std::cout << "gpulab grade-class: no lab \"" << options.lab << "\"\n";
    return 2;
  }
  const fs::path submissions = fs::absolute(options.submissions);
  if (!fs::is_directory(submissions)) {
    std::cout << "gpulab grade-class: " << options.submissions << " is not a folder of submissions\n";
    return 2;
  }
  const fs::path out = fs::absolute(options.out.empty() ? paths.build / "class" / lab->slug : fs::path(options.out));
  fs::create_directories(out / "students");
  std::vector<std::pair<std::string, fs::path>> students;
  for (const auto& e : fs::directory_iterator(submissions)) {
    const std::string s = student_of(e.path().filename().string());
    if (!s.empty() && (e.is_directory() || e.is_regular_file())) students.emplace_back(s, e.path());
  }
  std::sort(students.begin(), students.end());
  const fs::path cli = paths.build / "bin" / "gpulab-cli";
  std::cout << "gpulab grade-class " << lab->number << ": " << students.size() << " submission(s) in " << submissions.string() << " -> " << out.string()
            << "\n";
  int unreadable = 0;
  json rows = json::array();
  for (const auto& [student, source] : students) {
    const fs::path dir = out / "students" / student, work = out / "work" / student;
    fs::create_directories(dir);
    fs::remove_all(work);
    fs::create_directories(work);
    json row = {{"student", student}, {"score", 0.0}, {"max_score", 0.0}, {"exit", 2}, {"seconds", 0.0}, {"status", ""}, {"tests", json::array()},
                {"leaderboard", json::array()}};
    std::string problem = fs::is_directory(source) ? copy_folder(source, work) : unpack(source, work);
    fs::path files;
    if (problem.empty()) files = lab_files_in(work, lab->sources, problem);
    if (!problem.empty()) {
      row["status"] = problem;
      ++unreadable;
      std::cout << "  " << student << ": " << problem << "\n";
      write_text(dir / "status.txt", problem + "\n");
      rows.push_back(row);
      continue;
    }
    std::string content;
    for (const std::string& s : lab->sources) content += s + '\0' + read_text(files / s) + '\0';
    const std::string hash = content_hash(content);
    const fs::path results = dir / "results.json", card = dir / "scorecard.json";
    const bool unchanged = fs::exists(dir / "hash") && read_text(dir / "hash") == hash + "\n" && fs::exists(results) && fs::exists(card);
    if (!unchanged) {
      fs::remove(dir / "hash");
      const auto t0 = std::chrono::steady_clock::now();
      ProcessOptions o;
      o.timeout_s = options.timeout_s;
      // The code under test must not read the other students' submissions or results.
      o.env["GPULAB_SANDBOX_HIDE"] = submissions.string() + ":" + out.string();
      o.env["GPULAB_LIMIT_MEMORY_MB"] = std::to_string(options.memory_mb);
      const ProcessResult r = run_process({cli.string(), "grade", lab->number, "--submission", files.string(), "--json", card.string(), "--format",
                                           "gradescope", "--out", results.string()},
                                          o);
      write_text(dir / "scorecard.txt", r.output);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!fs::exists(results) || !fs::exists(card) || r.timed_out || r.signal != 0) {
        const std::string why = "the grader could not grade it (" + r.describe() + "; its output: " + (dir / "scorecard.txt").string() + ")";
        row["status"] = why;
        ++unreadable;
        std::cout << "  " << student << ": " << why << "\n";
        rows.push_back(row);
        continue;
      }
      write_text(dir / "exit", std::to_string(r.exit_code) + " " + number(seconds) + "\n");
      write_text(dir / "hash", hash + "\n");  // last: a grade cut short is graded again
    }
    const json gs = json::parse(read_text(results));
    std::istringstream exit_line(read_text(dir / "exit"));
    int exit_code = 2;
    double seconds = 0.0;
    exit_line >> exit_code >> seconds;
    row.update({{"score", gs.value("score", 0.0)}, {"max_score", gs.value("max_score", 0.0)}, {"exit", exit_code}, {"seconds", seconds},
                {"status", unchanged ? "unchanged since its last grade" : "graded"}, {"tests", gs.value("tests", json::array())},
                {"leaderboard", gs.value("leaderboard", json::array())}});
    std::cout << "  " << student << ": " << row["score"].get<double>() << " of " << row["max_score"].get<double>() << " points, exit " << exit_code
              << (unchanged ? " (unchanged since its last grade)" : "") << "\n";
    rows.push_back(row);
  }
  // The gradebook: a row per student, a column per check (its points).
  std::vector<std::string> columns;
  std::set<std::string> seen;
  for (const json& r : rows) {
    for (const json& t : r["tests"]) {
      const std::string n = t.value("name", "");
      if (seen.insert(n).second) columns.push_back(n);
    }
  }
  std::ostringstream book;
  book << "student,score,max_score,exit,seconds,status";
  for (const std::string& c : columns) book << "," << csv(c);
  book << "\n";
  for (const json& r : rows) {
    book << csv(r["student"]) << "," << number(r["score"]) << "," << number(r["max_score"]) << "," << r["exit"].get<int>() << ","
         << number(r["seconds"]) << "," << csv(r["status"]);
    std::map<std::string, double> points;
    for (const json& t : r["tests"]) points[t.value("name", "")] = t.value("score", 0.0);
    for (const std::string& c : columns) book << "," << (points.count(c) ? number(points[c]) : "");
    book << "\n";
  }
  write_text(out / "gradebook.csv", book.str());
  // The leaderboard: each figure, best first; ties by the grade's time.
  std::map<std::string, std::vector<std::tuple<double, double, std::string>>> boards;
  for (const json& r : rows) {
    for (const json& l : r["leaderboard"]) boards[l.value("name", "")].emplace_back(l.value("value", 0.0), r["seconds"].get<double>(), r["student"]);
  }
  std::ostringstream lcsv, page;
  lcsv << "figure,rank,student,value\n";
  page << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << xml_escape(lab->slug) << " leaderboard</title>"
       << "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse;margin-bottom:2em}"
       << "td,th{border:1px solid #ccc;padding:.3em .8em;text-align:left}</style></head><body>\n<h1>" << xml_escape(lab->slug) << ": leaderboard</h1>\n"
       << "<p>Each performance figure that passed its check, best first (ties: the shorter grade first).</p>\n";
  for (auto& [figure, entries] : boards) {
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b) : std::get<1>(a) < std::get<1>(b);
    });
    page << "<h2>" << xml_escape(figure) << "</h2>\n<table><tr><th>rank</th><th>student</th><th>value</th></tr>\n";
    for (std::size_t k = 0; k < entries.size(); ++k) {
      lcsv << csv(figure) << "," << k + 1 << "," << csv(std::get<2>(entries[k])) << "," << number(std::get<0>(entries[k])) << "\n";
      page << "<tr><td>" << k + 1 << "</td><td>" << xml_escape(std::get<2>(entries[k])) << "</td><td>" << number(std::get<0>(entries[k])) << "</td></tr>\n";
    }
    page << "</table>\n";
  }
  page << "</body></html>\n";
  write_text(out / "leaderboard.csv", lcsv.str());
  write_text(out / "leaderboard.html", page.str());
  std::cout << "gpulab grade-class: " << rows.size() - static_cast<std::size_t>(unreadable) << " graded, " << unreadable
            << " could not be graded; " << (out / "gradebook.csv").string() << ", " << (out / "leaderboard.html").string() << "\n";
  return unreadable > 0 ? 1 : 0;
}

}  // namespace gpulab::cli
