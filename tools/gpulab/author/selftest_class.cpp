/// @file selftest_class.cpp
/// @brief selftest's class of submissions, hostile ones included (selftest_class.hpp).
#include "author/selftest_class.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>

#include "author/grade_class.hpp"
#include "author/plants.hpp"
#include "base/files.hpp"
#include "base/lab_config.hpp"
#include "base/process.hpp"

namespace gpulab::cli {
namespace {

using json = nlohmann::json;

constexpr long kClassMemoryMb = 1024;  ///< grade-class --memory-mb for the class (the hog touches 3 GiB)

/// Where the attacks go in lab 06's reference: the first line of CachingAllocator::allocate (every
/// CPU case that allocates runs it), and their code before the lab's namespace.
constexpr char kHookFile[] = "allocator.cpp";
constexpr char kHookCall[] = "void* CachingAllocator::allocate(std::size_t bytes, Stream stream) { ";
constexpr char kHookCode[] = "namespace lab06 {";

/// A submission of the class and what its grade must say.
struct Student {
  std::string name;
  std::string attack;                 ///< C++ defining `static void gpulab_attack()` ("" none)
  std::string what;                   ///< the row's text: what it is and what must happen
  enum class Want { kFull, kFail, kNamed, kRefused } want = Want::kFull;
  std::vector<std::string> named;     ///< kNamed / kRefused: one of these in the scorecard / the status
  bool quick = false;                 ///< also in the quick class (CI)
  bool needs_sandbox = false;         ///< contained by bubblewrap (and the filter): not made where it is missing
};

std::string replaced(std::string text, const std::string& key, const std::string& value) {
  for (std::size_t at = 0; (at = text.find(key, at)) != std::string::npos; at += value.size()) text.replace(at, key.size(), value);
  return text;
}

/// The reference's sources with @p attack inserted (and called first in allocate).
std::string attacked(const LabConfig& lab, const fs::path& dir, const std::string& attack) {
  for (const std::string& f : lab.sources) fs::copy_file(lab.solutions / f, dir / f, fs::copy_options::overwrite_existing);
  if (attack.empty()) return "";
  std::string text = read_text(dir / kHookFile);
  const std::size_t call = text.find(kHookCall), code = text.find(kHookCode);
  if (call == std::string::npos || code == std::string::npos) {
    return std::string("solutions/") + lab.slug + "/" + kHookFile + " no longer has \"" + kHookCall + "\" and \"" + kHookCode +
           "\": move the class's hook (selftest_class.cpp)";
  }
  text.insert(call + std::strlen(kHookCall), "gpulab_attack(); ");
  text.insert(code, "// --- a hostile submission (selftest's class) ---\n" + attack + "\n// ---\n");
  write_text(dir / kHookFile, text);
  return "";
}

/// The class: every submission with its attack and what its grade must say. @p root, @p
/// submissions and @p out are written into the attacks that aim at them.
std::vector<Student> class_list(const fs::path& root, const fs::path& submissions, const fs::path& out, const std::string& slug) {
  using W = Student::Want;
  std::vector<Student> s;
  s.push_back({"ref-folder", "", "the reference as a folder: full points", W::kFull, {}, true});
  s.push_back({"ref-tgz", "", "the reference as a .tar.gz, in one folder: full points", W::kFull, {}, false});
  s.push_back({"ref-zip", "", "the reference as a .zip: full points", W::kFull, {}, false});
  s.push_back({"skeleton", "", "the unmodified skeleton: fails", W::kFail, {}, false});
  s.push_back({"archive-traversal", "", "an archive with ../../x: refused before unpacking", W::kRefused, {"leaves the archive's folder"}, true});
  s.push_back({"archive-link", "", "an archive with a link to /etc/passwd: refused before unpacking", W::kRefused, {"is a link"}, true});
  s.push_back({"does-not-compile", "this is not C++;\n", "code that does not compile: fails at the build", W::kNamed, {"error"}, false});
  s.push_back({"fork-back-door",
               "#include <sys/types.h>\nextern \"C\" pid_t _Fork(void);\n"
               "static void gpulab_attack() {\n  // glibc's fork without its name: 2^9 processes if nothing stops it\n"
               "  static bool done = false;\n  if (done) return;\n  done = true;\n  for (int i = 0; i < 9; ++i) (void)_Fork();\n}\n",
               "a fork bomb through glibc's _Fork: refused by the symbol rules", W::kNamed, {"calls _Fork"}, false});
  s.push_back({"kill-the-grader", "#include <signal.h>\n#include <unistd.h>\nstatic void gpulab_attack() { kill(getppid(), SIGKILL); }\n",
               "kill(getppid()): refused by the symbol rules", W::kNamed, {"calls kill"}, false});
  s.push_back({"memory-hog",
               "#include <vector>\nstatic void gpulab_attack() {\n  // 3 GiB touched and kept, 64 MiB at a time\n"
               "  static std::vector<std::vector<char>> hog;\n  while (hog.size() < 48) hog.emplace_back(std::size_t{64} << 20, 'x');\n}\n",
               "a memory hog (3 GiB): killed past the class's memory limit", W::kNamed, {"used more than " + std::to_string(kClassMemoryMb) + " MiB of memory"},
               true});
  s.push_back({"connect-out",
               "#include <arpa/inet.h>\n#include <sys/socket.h>\n#include <unistd.h>\n"
               "static void gpulab_attack() {\n  static bool tried = false;\n  if (tried) return;\n  tried = true;\n"
               "  const int s = socket(AF_INET, SOCK_STREAM, 0);\n  sockaddr_in to{};\n  to.sin_family = AF_INET;\n  to.sin_port = htons(80);\n"
               "  inet_pton(AF_INET, \"192.0.2.1\", &to.sin_addr);\n  (void)connect(s, reinterpret_cast<const sockaddr*>(&to), sizeof to);\n  close(s);\n}\n",
               "a connection to 192.0.2.1:80: refused and named (no network but loopback)", W::kNamed, {"tried to connect to 192.0.2.1:80"}, true, true});
  const std::string reader =
      "#include <dirent.h>\n#include <stdexcept>\n"
      "static void gpulab_attack() {\n  // The other students' files, their results and the reference, by their real paths: any\n"
      "  // entry seen fails this submission's tests (a sandbox shows empty folders).\n"
      "  for (const char* folder : {\"@SUBMISSIONS@\", \"@OUT@\", \"@ROOT@/solutions/@SLUG@\", \"@ROOT@/tests/@SLUG@\"}) {\n"
      "    DIR* d = opendir(folder);\n    if (d == nullptr) continue;\n    int seen = 0;\n"
      "    while (dirent* e = readdir(d)) seen += e->d_name[0] != '.';\n    closedir(d);\n"
      "    if (seen > 0) throw std::runtime_error(std::string(\"read \") + folder);\n  }\n}\n";
  s.push_back({"reads-the-class", reader, "reads the other students' folder, the results and the reference: sees them empty, full points", W::kFull, {},
               true, true});
  const std::string writer =
      "#include <cstdio>\n#include <stdexcept>\n"
      "static void gpulab_attack() {\n  // Writes where a test process must not: any file made fails this submission's tests.\n"
      "  for (const char* path : {\"@ROOT@/lessons/gpulab-class-escape\", \"@SUBMISSIONS@/gpulab-class-escape\", \"@OUT@/gpulab-class-escape\",\n"
      "                           \"@ROOT@/solutions/@SLUG@/allocator.cpp\", \"/var/tmp/gpulab-class-escape\"}) {\n"
      "    if (std::FILE* f = std::fopen(path, \"a\")) {\n      std::fputs(\"escaped\\n\", f);\n      std::fclose(f);\n"
      "      throw std::runtime_error(std::string(\"wrote \") + path);\n    }\n  }\n}\n";
  s.push_back({"writes-outside", writer, "writes into the course, the class and /var/tmp: read-only there, full points", W::kFull, {}, true, true});
  s.push_back({"output-flood",
               "#include <cstdio>\n#include <cstring>\nstatic void gpulab_attack() {\n  static char line[4096];\n"
               "  std::memset(line, 'x', sizeof line - 2);\n  line[sizeof line - 2] = '\\n';\n  for (;;) std::fputs(line, stdout);\n}\n",
               "prints without end: stopped past the output limit", W::kNamed, {"MiB of output, past the sandbox's limit"}, false});
  s.push_back({"crash", "static void gpulab_attack() { *static_cast<volatile int*>(nullptr) = 1; }\n", "writes through a null pointer: a crash, reported",
               W::kNamed, {"killed by signal", "crashed", "signal"}, false});
  for (Student& st : s) {
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {"@ROOT@", root.string()}, {"@SUBMISSIONS@", submissions.string()}, {"@OUT@", out.string()}, {"@SLUG@", slug}}) {
      st.attack = replaced(st.attack, key, value);
    }
  }
  return s;
}

/// Runs @p argv in @p cwd; "" or what went wrong.
std::string run_in(const fs::path& cwd, const std::vector<std::string>& argv) {
  ProcessOptions o;
  o.cwd = cwd.string();
  o.timeout_s = 120;
  const ProcessResult r = run_process(argv, o);
  return r.exited(0) ? "" : argv[0] + ": " + r.describe() + " " + r.output.substr(0, 300);
}

/// Writes @p st into @p submissions (a folder or an archive named after the student); "" or why not.
std::string make_submission(const LabConfig& lab, const Student& st, const fs::path& submissions, const fs::path& scratch) {
  const fs::path dir = scratch / st.name;
  fs::remove_all(dir);
  fs::create_directories(dir / "lab");
  if (st.name == "skeleton") {
    for (const std::string& f : lab.sources) fs::copy_file(lab.labs / f, dir / "lab" / f);
  } else if (const std::string why = attacked(lab, dir / "lab", st.attack); !why.empty()) {
    return why;
  }
  if (st.name == "ref-tgz") return run_in(dir, {"tar", "-czf", (submissions / (st.name + ".tar.gz")).string(), "lab"});
  if (st.name == "ref-zip") return run_in(dir / "lab", {"zip", "-q", "-r", (submissions / (st.name + ".zip")).string(), "."});
  if (st.name == "archive-traversal") {
    return run_in(dir / "lab", {"tar", "-czPf", (submissions / (st.name + ".tar.gz")).string(), "--transform", "s,^,../../,", kHookFile});
  }
  if (st.name == "archive-link") {
    fs::remove(dir / "lab" / kHookFile);
    fs::create_symlink("/etc/passwd", dir / "lab" / kHookFile);
    return run_in(dir, {"tar", "-czf", (submissions / (st.name + ".tar.gz")).string(), "lab"});
  }
  fs::rename(dir / "lab", submissions / st.name);
  return "";
}

/// Every check's status in a scorecard JSON, by name.
std::map<std::string, std::string> statuses(const fs::path& card) {
  std::map<std::string, std::string> out;
  const json j = json::parse(read_text(card), nullptr, false);
  if (!j.is_object()) return out;
  for (const json& c : j.value("checks", json::array())) out[c.value("name", "")] = c.value("status", "");
  return out;
}

/// The fields of one CSV line (quotes as grade_class writes them).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      f.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      f.emplace_back();
    } else {
      f.back() += c;
    }
  }
  return f;
}

/// Each gradebook row's score equals the sum of its checks' points; "" or the first that does not.
std::string gradebook_sums(const fs::path& book, std::size_t& rows) {
  std::istringstream in(read_text(book));
  std::string line;
  std::getline(in, line);
  rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    const std::vector<std::string> f = csv_fields(line);
    if (f.size() < 6) return "a short row: " + line;
    double sum = 0.0;
    for (std::size_t k = 6; k < f.size(); ++k) sum += f[k].empty() ? 0.0 : std::stod(f[k]);
    if (std::abs(sum - std::stod(f[1])) > 1e-6) return f[0] + ": the checks add up to " + std::to_string(sum) + ", the score is " + f[1];
  }
  return "";
}

std::string fixed_points(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

std::string git_status(const fs::path& root) {
  ProcessOptions o;
  o.cwd = root.string();
  return run_process({"git", "status", "--porcelain"}, o).output;
}

}  // namespace

void check_class(const Paths& paths, bool full, Table& table) {
  const std::optional<LabConfig> lab = find_lab(paths, "06");
  if (!lab) {
    table.add("class: lab 06", "fail", "no lab 06 to build the class from");
    return;
  }
  const fs::path base = paths.build / "selftest" / "class", submissions = base / "submissions", out = base / "results", scratch = base / "scratch";
  fs::remove_all(base);
  fs::create_directories(submissions);
  fs::create_directories(scratch);
  const std::vector<Plant> plants = load_plants(*lab);
  std::vector<Student> students;
  for (const Student& st : class_list(paths.root, submissions, out, lab->slug)) {
    if (full || st.quick) students.push_back(st);
  }
  const bool have_zip = run_process({"zip", "-v"}).exited(0);
  std::string first_plant;
  for (const Plant& p : plants) {
    if (!full || p.needs_gpu || p.needs_root || p.interrupt || !p.sandbox || p.busy_processes > 0) continue;
    const std::string name = "plant-" + std::to_string(students.size());
    const std::string why = apply_plant(*lab, p, submissions / name);
    if (!why.empty()) {
      table.add("class: " + name, "fail", why);
      continue;
    }
    if (first_plant.empty()) first_plant = name;
    students.push_back({name, "", "plant \"" + p.name + "\": fails", Student::Want::kFail, {}, false});
  }
  for (auto it = students.begin(); it != students.end();) {
    if (it->name.rfind("plant-", 0) == 0) {
      ++it;
      continue;
    }
    if (it->name == "ref-zip" && !have_zip) {
      table.add("class: ref-zip", "skip", "no zip here");
      it = students.erase(it);
      continue;
    }
    if (it->needs_sandbox && !sandbox_available()) {
      // Unconfined, the writer would write into the course: not made at all.
      table.add("class: " + it->name, "skip", "needs the grader's sandbox: " + sandbox_missing());
      it = students.erase(it);
      continue;
    }
    if (const std::string why = make_submission(*lab, *it, submissions, scratch); !why.empty()) {
      table.add("class: " + it->name, "fail", "could not make it: " + why);
      it = students.erase(it);
      continue;
    }
    ++it;
  }
  const std::string before = git_status(paths.root);
  ClassOptions o;
  o.lab = lab->number;
  o.submissions = submissions.string();
  o.out = out.string();
  o.timeout_s = 900;
  o.memory_mb = kClassMemoryMb;
  const auto t0 = std::chrono::steady_clock::now();
  (void)grade_class(paths, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  for (const Student& st : students) {
    const fs::path dir = out / "students" / st.name;
    const std::string status = fs::exists(dir / "status.txt") ? read_text(dir / "status.txt") : "";
    const json gs = fs::exists(dir / "results.json") ? json::parse(read_text(dir / "results.json"), nullptr, false) : json();
    const std::string card = fs::exists(dir / "scorecard.json") ? read_text(dir / "scorecard.json") : "";
    int exit_code = 2;
    if (fs::exists(dir / "exit")) std::istringstream(read_text(dir / "exit")) >> exit_code;
    const double score = gs.is_object() ? gs.value("score", -1.0) : -1.0, max = gs.is_object() ? gs.value("max_score", -1.0) : -1.0;
    std::string problem;
    switch (st.want) {
      case Student::Want::kFull: {
        // The reference's verdict: nothing failed (exit 2 where the [gpu] checks cannot run here:
        // their points are not earned, never given), and the points of everything that ran.
        const json summary = json::parse(card.empty() ? "{}" : card, nullptr, false).value("summary", json::object());
        if ((exit_code != 0 && exit_code != 2) || summary.value("failed", 1) != 0 || score <= 0 || (exit_code == 0 && score != max)) {
          problem = "exit " + std::to_string(exit_code) + ", " + std::to_string(summary.value("failed", -1)) + " failed, " + fixed_points(score) +
                    " of " + fixed_points(max) + " points";
        }
        break;
      }
      case Student::Want::kFail:
        if (exit_code != 1 || !(score < max)) problem = "exit " + std::to_string(exit_code) + ", " + fixed_points(score) + " of " + fixed_points(max) + " points";
        break;
      case Student::Want::kNamed:
      case Student::Want::kRefused: {
        const std::string& where = st.want == Student::Want::kNamed ? card : status;
        bool found = false;
        for (const std::string& n : st.named) found = found || where.find(n) != std::string::npos;
        if (!found) problem = "no \"" + st.named.front() + "\" in its " + (st.want == Student::Want::kNamed ? "scorecard" : "status (" + status + ")");
        if (st.want == Student::Want::kNamed && exit_code != 1) problem += (problem.empty() ? "" : "; ") + std::string("exit ") + std::to_string(exit_code);
        break;
      }
    }
    table.add("class: " + st.name + " (" + st.what + ")", problem.empty() ? "pass" : "fail", problem);
  }
  // The class-wide checks: the gradebook adds up, two verdicts equal grading alone, nothing changed.
  std::size_t rows = 0;
  const std::string sums = gradebook_sums(out / "gradebook.csv", rows);
  table.add("class: gradebook.csv has a row per submission and each score is its checks' points",
            sums.empty() && rows == students.size() ? "pass" : "fail",
            sums.empty() ? std::to_string(rows) + " rows, " + std::to_string(students.size()) + " submissions" : sums);
  for (const std::string& name : {std::string("ref-folder"), first_plant}) {
    if (name.empty() || !fs::exists(out / "students" / name / "scorecard.json")) continue;
    const fs::path alone = base / ("alone-" + name + ".json");
    const fs::path files = out / "work" / name;
    (void)run_process({(paths.build / "bin" / "gpulab-cli").string(), "grade", lab->number, "--submission", files.string(), "--json", alone.string()});
    const auto a = statuses(alone), c = statuses(out / "students" / name / "scorecard.json");
    table.add("class: " + name + " graded alone reads as in the class", a == c && !a.empty() ? "pass" : "fail",
              std::to_string(a.size()) + " checks alone, " + std::to_string(c.size()) + " in the class");
  }
  std::string changed;
  for (const std::string& p : {paths.root.string() + "/lessons/gpulab-class-escape", submissions.string() + "/gpulab-class-escape",
                               out.string() + "/gpulab-class-escape", std::string("/var/tmp/gpulab-class-escape")}) {
    if (fs::exists(p)) changed += p + " ";
  }
  if (git_status(paths.root) != before) changed += "the course's git status changed";
  table.add("class: nothing outside the results changed (the course, the class, /var/tmp)", changed.empty() ? "pass" : "fail", changed);
  std::cout << "class: " << students.size() << " submissions graded in " << static_cast<int>(seconds) << " s\n";
}

}  // namespace gpulab::cli
