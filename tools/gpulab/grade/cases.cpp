/// @file cases.cpp
/// @brief Running and judging one test case (see cases.hpp).
#include "grade/cases.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "gpulab/report.hpp"
#include "launch/frame.hpp"
#include "run/mpi.hpp"

namespace gpulab::cli {
namespace {

std::string fixed0(double v) { return std::to_string(static_cast<long long>(v + 0.5)); }

/// A fresh token per run: a completion record carries it back, so that one left over (or written
/// by anything but this run's test runner) never counts.
std::string fresh_token() {
  static std::random_device device;
  char text[33];
  std::snprintf(text, sizeof text, "%08x%08x%08x%08x", device(), device(), device(), device());
  return text;
}

/// Every rank's output, each line prefixed "[rank r] ", after mpirun's own.
std::string merged_rank_output(const MpiRun& m) {
  std::string all = m.process.output;
  for (std::size_t r = 0; r < m.rank_output.size(); ++r) {
    std::istringstream in(m.rank_output[r]);
    for (std::string line; std::getline(in, line);) all += "[rank " + std::to_string(r) + "] " + line + "\n";
  }
  return all;
}

/// Failures by message; in a distributed case, with the ranks that reported each.
struct Findings {
  std::vector<std::pair<std::string, std::vector<int>>> failures;
  std::vector<std::string> not_run, info;
  std::vector<std::string> passed;  ///< the checks that held, with their figures (rank 0's; --verbose shows them)
  std::set<std::string> hints;
};

Findings read_records(const std::vector<nlohmann::json>& records) {
  Findings f;
  for (const auto& rec : records) {
    if (rec.contains("not_run")) {
      const std::string text = rec.value("summary", "");
      if (std::find(f.not_run.begin(), f.not_run.end(), text) == f.not_run.end()) f.not_run.push_back(text);
    }
    if (rec.value("kind", "") == "info" && rec.value("rank", 0) == 0) f.info.push_back(rec.value("summary", ""));
    // "ok": false is a failed check; null marks a check that could not run (not_run, above).
    const auto ok = rec.find("ok");
    if (ok != rec.end() && ok->is_boolean() && ok->get<bool>() && rec.value("rank", 0) == 0) {
      const std::string text = rec.value("summary", "");
      if (!text.empty() && std::find(f.passed.begin(), f.passed.end(), text) == f.passed.end()) f.passed.push_back(text);
    }
    if (ok == rec.end() || !ok->is_boolean() || ok->get<bool>()) continue;
    const std::string text = rec.value("summary", rec.dump());
    auto it = std::find_if(f.failures.begin(), f.failures.end(), [&](const auto& x) { return x.first == text; });
    if (it == f.failures.end()) it = f.failures.insert(f.failures.end(), {text, {}});
    if (rec.contains("rank")) it->second.push_back(rec["rank"].get<int>());
    if (rec.contains("hint") && f.hints.size() < 2) f.hints.insert(rec["hint"].get<std::string>());
  }
  return f;
}

std::vector<std::string> failure_lines(const Findings& f) {
  std::vector<std::string> lines;
  for (const auto& [text, ranks] : f.failures) {
    if (lines.size() >= 5) break;
    std::string who;
    for (int r : ranks) who += (who.empty() ? "" : ",") + std::to_string(r);
    lines.push_back(ranks.empty() ? text : (ranks.size() > 1 ? "ranks " : "rank ") + who + ": " + text);
  }
  return lines;
}

}  // namespace

namespace {

using gpulab::launch::kFrameMarker;

/// Counts frame markers in a stream that arrives in pieces (a marker may straddle two).
struct MarkerCount {
  std::string tail;
  int count = 0;
  void add(const std::string& piece) {
    const std::string text = tail + piece;
    for (std::size_t at = text.find(kFrameMarker); at != std::string::npos; at = text.find(kFrameMarker, at + 1)) ++count;
    const std::size_t keep = sizeof kFrameMarker - 2;
    tail = text.size() > keep ? text.substr(text.size() - keep) : text;
  }
};

/// The frames in one process's stream; @p rest gets the stream without them (each shortened to
/// a note); damage and anything printed after the last frame go to @p problems.
std::vector<nlohmann::json> frames_in(const std::string& stream, const std::string& who, std::string& rest, std::vector<std::string>& problems) {
  std::vector<nlohmann::json> frames;
  std::size_t copied = 0, after_last = std::string::npos;
  for (std::size_t at = stream.find(kFrameMarker); at != std::string::npos; at = stream.find(kFrameMarker, at + 1)) {
    rest += stream.substr(copied, at - copied);
    copied = at;
    std::size_t length = 0;
    unsigned long long sum = 0;
    int used = 0;
    const std::size_t head = at + sizeof kFrameMarker - 1;
    if (std::sscanf(stream.c_str() + head, "%zu %16llx %n", &length, &sum, &used) != 2 || used == 0) {
      problems.push_back("a damaged frame of records from " + who + ": something in the code under test printed over gpulab-launch's report");
      continue;
    }
    if (head + used + length > stream.size()) {
      // The stream ends inside it: mpirun stopped the job (a rank killed, the time limit) while
      // the report was on its way.
      problems.push_back("the report of " + who + " was cut off: the job was stopped while it was being sent");
      continue;
    }
    const std::string body = stream.substr(head + static_cast<std::size_t>(used), length);
    auto parsed = nlohmann::json::parse(body, nullptr, false);
    if (gpulab::launch::frame_checksum(body) != sum || parsed.is_discarded() || !parsed.is_object()) {
      problems.push_back("a damaged frame of records from " + who + ": something in the code under test printed over gpulab-launch's report");
      continue;
    }
    frames.push_back(std::move(parsed));
    copied = head + static_cast<std::size_t>(used) + length;
    after_last = copied;
    rest += "[gpulab-launch: its report on this process, " + std::to_string(length) + " bytes]";
    at = copied - 1;
  }
  rest += stream.substr(copied);
  if (after_last != std::string::npos && stream.find_first_not_of(" \n\r", after_last) != std::string::npos) {
    problems.push_back("output from " + who + " after gpulab-launch's report, which is written once the process and all it started have ended: not the launcher's");
  }
  return frames;
}

/// Each rank's output in mpirun's --tag-output stream: "[job,rank]<stdout>:" starts each line a
/// rank wrote (and each piece of one), and the piece runs to the end of its line; untagged lines
/// are mpirun's own words, which go to @p own.
struct RankStreams {
  std::map<int, std::string> out, err;
};
RankStreams rank_streams(const std::string& output, std::string& own) {
  static const std::regex tag(R"(\[\d+,(\d+)\]<std(out|err|diag)>:)");
  RankStreams streams;
  std::size_t at = 0;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::size_t start = static_cast<std::size_t>(it->position());
    if (start < at) continue;  // inside a piece already taken
    own += output.substr(at, start - at);
    const std::size_t body = start + static_cast<std::size_t>(it->length());
    std::size_t end = output.find('\n', body);
    end = end == std::string::npos ? output.size() : end + 1;
    // A piece without its newline ends where the next tag begins.
    auto next = it;
    if (++next != std::sregex_iterator() && static_cast<std::size_t>(next->position()) < end) end = static_cast<std::size_t>(next->position());
    ((*it)[2].str() == "out" ? streams.out : streams.err)[std::stoi((*it)[1].str())] += output.substr(body, end - body);
    at = end;
  }
  own += output.substr(std::min(at, output.size()));
  return streams;
}

/// What the frames say about a run: its records, and the launcher's findings as problems.
void read_frames(CaseRun& run, const std::vector<std::pair<std::string, nlohmann::json>>& frames, int markers) {
  const int expected = std::max(1, run.ranks);
  if (!run.process.timed_out && (markers > expected || static_cast<int>(frames.size()) > expected)) {
    run.problems.push_back("more reports than processes (" + std::to_string(std::max<int>(markers, static_cast<int>(frames.size()))) + " for " +
                           std::to_string(expected) + "): something other than gpulab-launch printed one — tampering");
  }
  for (const auto& [who, frame] : frames) {
    // The records, in the order the runner wrote them; the runner's "end" record is its last word.
    const std::size_t first = run.records.size();
    std::istringstream lines(frame.value("records", ""));
    bool ended = false;
    int after_end = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      auto rec = nlohmann::json::parse(line, nullptr, false);
      if (rec.is_discarded()) rec = nlohmann::json{{"parse_error", line}};
      // What the grader attaches below is the launcher's alone: never a field the process wrote.
      if (rec.is_object()) rec.erase("blobs");
      if (ended) ++after_end;
      if (rec.is_object() && rec.value("kind", "") == "end" && rec.value("token", "") == run.token) ended = true;
      run.records.push_back(std::move(rec));
    }
    // The checked values: each block belongs to the record just before it (an output record).
    // The checked values: each block belongs to the record just before it (an output record),
    // which takes its rank from the frame (the launcher's, under mpirun) rather than its own word.
    const nlohmann::json file = frame.value("outputs", nlohmann::json());
    const nlohmann::json blobs = frame.value("blobs", nlohmann::json::array());
    for (const auto& blob : blobs.is_array() ? blobs : nlohmann::json::array()) {
      const std::size_t before = blob.is_object() ? blob.value("record", std::size_t{0}) : 0;
      if (before == 0 || first + before > run.records.size()) continue;
      nlohmann::json& owner = run.records[first + before - 1];
      if (!owner.is_object()) continue;
      nlohmann::json where = blob;
      where.erase("record");
      where["file"] = file;
      where["id"] = frame.value("outputs_id", "");
      owner["rank"] = frame.value("rank", 0);
      owner["blobs"].push_back(std::move(where));
    }
    if (frame.value("outputs_cut", false)) run.problems.push_back(who + " sent more checked values than the grader keeps (8 GiB), or they could not be written; the rest was cut");
    if (after_end > 0) {
      run.problems.push_back(who + " wrote " + std::to_string(after_end) +
                             " record(s) after the test runner's last one (from a static destructor or an exit handler, once every case had ended): "
                             "records after the end are never evidence — tampering");
    }
    if (frame.value("records_cut", false)) run.problems.push_back(who + " wrote more than 64 MiB of records; the rest was cut");
    for (const auto& r : frame.value("refused", nlohmann::json::array())) {
      if (r.value("call", "") == "connect") {
        run.problems.push_back(who + " tried to connect to " + r.value("path", "?") +
                               ", which the sandbox refused: a test process has no network but loopback");
        continue;
      }
      run.problems.push_back(who + " tried to run another program (" + r.value("call", "execve") + " \"" + r.value("path", "?") +
                             "\"), which the sandbox refused: a test process runs its own code only");
    }
    if (const int left = frame.value("leftovers", 0); left > 0) {
      run.problems.push_back(who + " left " + std::to_string(left) + " process(es) running after it ended (killed by gpulab-launch)");
    }
    if (frame.contains("limit")) run.problems.push_back("killed: " + who + " " + frame.value("limit", "") + ", past the sandbox's limit");
    if (!frame.value("seccomp", false) && run.seccomp_note.empty()) run.seccomp_note = frame.value("seccomp_note", "no seccomp filter");
  }
}

}  // namespace

CaseRun run_case(const RunSpec& spec) {
  const fs::path report = spec.log_dir / (spec.stem + ".jsonl");
  ProcessOptions o;
  o.timeout_s = spec.timeout_s;
  o.env = spec.env;
  o.env["GPULAB_SEED"] = std::to_string(spec.seed);
  o.env["NVIDIA_TF32_OVERRIDE"] = "0";  // fp32 baselines stay fp32 whatever the caller's environment says
  std::vector<std::string> command = {spec.exe, spec.case_name, "--reporter", "compact", "--durations", "no"};
  const bool framed = spec.confine != nullptr && !spec.confine->launcher.empty();
  Sandbox box;
  if (framed) {
    std::vector<std::string> launch = {spec.confine->launcher.string()};
    if (!spec.confine->seccomp) launch.push_back("--no-seccomp");
    // CPU time: every thread of the process counts, so allow several cores' worth of the wall limit.
    launch.insert(launch.end(), {"--cpu-seconds", std::to_string(static_cast<long>(8 * spec.timeout_s) + 10)});
    if (spec.confine->memory_mb > 0) launch.insert(launch.end(), {"--max-memory-mb", std::to_string(spec.confine->memory_mb)});
    // Without a network of its own but loopback, a connection elsewhere is an attempt to report.
    // Not under mpirun: every connect() then waits for the launcher's answer, and OpenMPI's
    // start-up makes many over loopback; the sandbox's empty network contains the ranks alike.
    if (spec.confine->seccomp && spec.confine->sandbox && !spec.confine->sandbox->network && spec.ranks == 0) launch.push_back("--loopback-only");
    launch.push_back("--");
    command.insert(command.begin(), launch.begin(), launch.end());
    if (spec.confine->sandbox) {
      box = *spec.confine->sandbox;
      box.show.push_back(spec.exe);
      box.show.push_back(spec.confine->launcher.string());
      if (spec.ranks > 0) box.writable.push_back((spec.log_dir / (spec.stem + "-ranks")).string());
      o.sandbox = &box;
    }
    if (!spec.outputs.empty()) {
      // The launcher makes each process's file of checked values here (one per rank), before the
      // program starts; the grader reads them once every process has ended.
      const fs::path outputs = spec.log_dir / (spec.stem + "-outputs");
      std::error_code ec;
      fs::remove_all(outputs, ec);
      fs::create_directories(outputs, ec);
      command.insert(command.begin() + 1, {"--outputs", outputs.string()});
      o.env["GPULAB_OUTPUTS"] = spec.outputs;
      if (o.sandbox != nullptr) box.writable.push_back(outputs.string());
    }
  } else {
    fs::remove(report);
    o.env["GPULAB_REPORT"] = report.string();
  }
  MarkerCount markers;
  o.on_output = [&markers](const std::string& piece) { markers.add(piece); };
  o.keep_bytes = 8u << 20;  // the frames are at the end; a flood before them is cut
  o.max_output_bytes = kMaxCaseOutput;
  CaseRun run;
  run.token = fresh_token();
  run.ranks = spec.ranks;
  o.env["GPULAB_RUN_TOKEN"] = run.token;
  std::vector<std::pair<std::string, nlohmann::json>> frames;
  if (spec.ranks > 0) {
    const MpiRun m = run_mpi(spec.ranks, spec.log_dir / (spec.stem + "-ranks"), command, o);
    run.process = m.process;
    run.problems = m.problems;
    run.notes = m.notes;
    if (!m.leftovers.empty()) {
      std::string which;  // pids here, HOST:PID on a cluster's other hosts
      for (std::size_t i = 0; i < m.leftovers.size() && i < 4; ++i) which += (i ? ", " : "") + m.leftovers[i];
      run.problems.push_back(std::to_string(m.leftovers.size()) + " process(es) of the program were still running afterwards (now killed): " + which +
                             (m.leftovers.size() > 4 ? ", …" : ""));
    }
    MpiRun shown = m;
    if (framed) {
      std::string own;
      RankStreams streams = rank_streams(m.process.output, own);
      shown.process.output = own;
      std::string still_running, unreported;  // at the time limit: the ranks stopped then, and those whose report never came
      for (int r = 0; r < spec.ranks; ++r) {
        const auto host = m.rank_hosts.find(r);  // known across hosts
        const std::string who = "rank " + std::to_string(r) + (host == m.rank_hosts.end() ? "" : " (on " + host->second + ")");
        std::string rest;
        const std::vector<nlohmann::json> found = frames_in(streams.out[r], who, rest, run.problems);
        rest += streams.err[r];
        for (const auto& f : found) frames.emplace_back(who, f);
        if (found.empty() && !m.process.timed_out) run.problems.push_back("no report from gpulab-launch on " + who + ": its launcher was stopped before the process ended");
        // At the time limit mpirun passes the grader's SIGTERM on to every rank still running,
        // and its launcher reports that signal; a launcher killed before it could report (mpirun
        // is killed 2 s later) sends nothing. A rank that handles SIGTERM itself and exits is
        // not named: its report says how it ended.
        if (m.process.timed_out && !found.empty() && found.back().value("signal", 0) == SIGTERM) still_running += (still_running.empty() ? "" : ", ") + who;
        if (m.process.timed_out && found.empty()) unreported += (unreported.empty() ? "" : ", ") + who;
        if (found.size() > 1) run.problems.push_back(std::to_string(found.size()) + " reports for " + who + ": something other than gpulab-launch printed one — tampering");
        if (static_cast<std::size_t>(r) < shown.rank_output.size()) shown.rank_output[static_cast<std::size_t>(r)] = rest;
      }
      // Which ranks hung, and where (a rank waiting in MPI_Finalize for a hung one has not ended).
      if (!still_running.empty()) run.problems.push_back("still running at the time limit (stopped then): " + still_running);
      if (!unreported.empty()) run.problems.push_back("no report at the time limit (killed before its launcher could send one): " + unreported);
    } else {
      for (int r = 0; r < spec.ranks; ++r) {
        const fs::path rank_report = report.string() + ".rank" + std::to_string(r);
        if (!fs::exists(rank_report)) continue;
        for (auto& rec : gpulab::report::read_file(rank_report.string())) run.records.push_back(std::move(rec));
      }
    }
    run.process.output = merged_rank_output(shown);
    // Each rank's launcher ends with 0 when its rank exited (so that mpirun does not abort the
    // others and lose their reports): the ranks' own codes are in the reports. The worst wins, as
    // the test main agrees on it across ranks: a failure, then a skip (77), then a pass.
    if (framed && run.process.exited(0) && static_cast<int>(frames.size()) == spec.ranks) {
      int code = 0;
      for (const auto& [who, f] : frames) {
        const int mine = f.value("exit", 1);
        if (mine != 0 && mine != 77) code = code == 0 || code == 77 ? mine : code;
        if (mine == 77 && code == 0) code = 77;
      }
      run.process.exit_code = code;
    }
  } else {
    run.process = run_process(command, o);
    if (framed) {
      std::string rest;
      const std::vector<nlohmann::json> found = frames_in(run.process.output, "the test process", rest, run.problems);
      for (const auto& f : found) frames.emplace_back("the test process", f);
      run.process.output = rest;
      if (found.empty() && !run.process.timed_out && !run.process.failed_to_start && !run.process.output_exceeded) {
        run.problems.push_back("no report from gpulab-launch: it was stopped before the test process ended (" + run.process.describe() + ")");
      }
      if (!found.empty()) {
        // How the program ended, as its parent saw it (bwrap turns a signal into an exit code).
        const nlohmann::json& last = found.back();
        if (last.contains("signal")) {
          run.process.signal = last.value("signal", 0);
          run.process.exit_code = -1;
        } else if (last.contains("exit")) {
          run.process.signal = 0;
          run.process.exit_code = last.value("exit", -1);
        }
      }
    } else if (fs::exists(report)) {
      run.records = gpulab::report::read_file(report.string());
    }
  }
  if (framed) read_frames(run, frames, markers.count);
  if (run.process.output_exceeded) {
    run.problems.insert(run.problems.begin(), "killed: the test wrote more than " + std::to_string(kMaxCaseOutput >> 20) +
                                                  " MiB of output, past the sandbox's limit");
  }
  write_text(spec.log_dir / (spec.stem + ".log"), run.process.output);
  static const std::regex skipped(R"(gpulab: SKIPPED \d+ \[gpu\] case\(s\): (.*))");
  std::smatch m;
  if (std::regex_search(run.process.output, m, skipped)) run.skip_reason = m[1].str();
  return run;
}

nlohmann::json Confinement::to_json() const {
  nlohmann::json j = {{"sandboxed", sandbox.has_value()}, {"seccomp", seccomp}};
  if (!sandbox) j["not_sandboxed"] = not_sandboxed;
  if (!seccomp) j["no_seccomp"] = no_seccomp;
  // The limits each test process ran under (README.md, "The grader").
  j["limits"] = {{"cpu_seconds", "8 x the case's time limit + 10"},
                 {"processes_at_once", seccomp ? nlohmann::json(64) : nlohmann::json(nullptr)},
                 {"memory_mb", memory_mb > 0 ? nlohmann::json(memory_mb) : nlohmann::json(nullptr)},
                 {"output_mb", kMaxCaseOutput >> 20}};
  return j;
}

std::string Confinement::missing() const {
  std::string line;
  if (!sandbox) line = "not sandboxed: " + not_sandboxed;
  if (!seccomp && no_seccomp != not_sandboxed) line += (line.empty() ? "" : "; ") + std::string("execve not refused: ") + no_seccomp;
  return line;
}

std::vector<std::string> catch_failures(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line) && lines.size() < 4;) {
    // Catch2's failures, and the emulator's own findings ("runtime error: ...", "emulate: ...").
    if (line.find(": failed:") == std::string::npos && line.find("FAILED") == std::string::npos &&
        line.find("runtime error: ") == std::string::npos && line.rfind("emulate: ", 0) != 0) {
      continue;
    }
    const std::size_t msg = line.find("unexpected exception with message:");
    const std::string entry = msg != std::string::npos ? line.substr(msg) : line;
    if (std::find(lines.begin(), lines.end(), entry) == lines.end()) lines.push_back(entry);
  }
  return lines;
}

Completion read_completion(const CaseRun& run, const std::string& case_name) {
  Completion done;
  std::map<int, int> per_rank;
  int skipped = 0;
  for (const auto& rec : run.records) {
    if (rec.value("kind", "") != "completion" || rec.value("case", "") != case_name) continue;
    if (rec.value("token", "") != run.token) continue;  // not this run's: never evidence
    ++done.records;
    if (++per_rank[rec.value("rank", 0)] == 2) ++done.duplicates;
    if (rec.contains("skipped")) {
      ++skipped;
      done.skip_reason = rec.value("skipped", "");
    }
    done.passed += rec.value("assertions_passed", 0L);
    done.failed += rec.value("assertions_failed", 0L);
  }
  done.skipped = skipped > 0 && skipped == done.records;
  done.skipped_records = skipped;
  return done;
}

namespace {

/// The verdict when the process ended normally (exit 0 or 1) with its evidence in hand.
void judge_ended(const CaseInfo& c, const CaseRun& run, const JudgeContext& context, const Findings& found, Check& check) {
  const ProcessResult& p = run.process;
  const int ranks = std::max(1, run.ranks);
  const Completion done = read_completion(run, c.name);
  if (done.duplicates > 0 || done.records > ranks) {
    check.details.insert(check.details.begin(), "more than one completion record for this case: something other than the test runner wrote them");
    return;
  }
  if (done.records < ranks) {
    check.details.insert(check.details.begin(), "ended before its checks finished (" + p.describe() +
                                                    (run.ranks > 0 ? ", " + std::to_string(ranks - done.records) + " rank(s) without a completion record" : "") +
                                                    "): something in the code under test ended the process");
    for (const std::string& line : catch_failures(p.output)) {
      if (check.details.size() < 6) check.details.push_back(line);  // e.g. the sanitizer's "runtime error: ..."
    }
    return;
  }
  if (done.skipped_records > 0) {
    // A skip ends the runner with exit 77 (judge_skip); a skip's record beside exit 0 or 1 is not
    // a run of the case, whatever else the process wrote.
    check.details.insert(check.details.begin(), "its record says the case was skipped (" + done.skip_reason + "), yet the process " + p.describe() +
                                                    " instead of exit 77: something in the code under test ended it; a skipped case is never a pass");
    return;
  }
  if (!p.exited(0) || done.failed > 0 || !found.failures.empty()) {
    // failed checks; add Catch2's own message when no record explains it
    const std::vector<std::string> own = catch_failures(p.output);
    if (check.details.empty()) check.details = own;
    for (const std::string& line : own) {
      if (line.rfind("unexpected exception", 0) == 0 && check.details.size() < 6) check.details.push_back(line);
    }
    if (check.details.empty()) check.details.push_back("failed (see the log)");
    return;
  }
  if (!found.not_run.empty()) {
    check.status = Status::kNotRun;
    check.details = found.not_run;
    return;
  }
  if (context.reference_assertions > 0 && done.passed < context.reference_assertions) {
    check.details = {"ran " + std::to_string(done.passed) + " of the reference's " + std::to_string(context.reference_assertions) +
                     " checks on this case: the case did not run to its end"};
    check.data["fewer_assertions"] = true;
    return;
  }
  check.status = Status::kPass;
  check.details = found.info;  // what a test reports for the learner's information, shown on a pass too
  check.data["assertions"] = done.passed;
}

/// Exit 77: "no GPU" only for a [gpu] case, on a machine the grader found without one, with the
/// runner's own record of the skip.
void judge_skip(const CaseInfo& c, const CaseRun& run, const JudgeContext& context, Check& check) {
  const Completion done = read_completion(run, c.name);
  if (c.where == "gpu" && !context.gpu_missing.empty() && done.skipped && done.records >= std::max(1, run.ranks)) {
    check.status = Status::kNotRun;
    check.details = {"needs a GPU: " + (run.skip_reason.empty() ? context.gpu_missing : run.skip_reason)};
    return;
  }
  check.details.insert(check.details.begin(),
                       "exit 77, which is reserved for \"no GPU\"" +
                           std::string(c.where != "gpu" ? ": this case needs none" : context.gpu_missing.empty() ? ": this machine has one" : "") +
                           " (something in the code under test ended the process)");
}

}  // namespace

Check judge_case(const CaseInfo& c, const CaseRun& run, const LabConfig& lab, const JudgeContext& context) {
  Check check;
  check.name = c.name;
  check.kind = Kind::kCorrectness;
  check.where = where_from_string(c.where);
  check.seconds = run.process.seconds;
  const ProcessResult& p = run.process;
  const Findings found = read_records(run.records);
  std::set<std::string> hints = found.hints;
  check.details = failure_lines(found);
  if (!run.problems.empty()) {
    check.details.insert(check.details.begin(), run.problems.begin(), run.problems.end());
    // A fault the grader injected (--fault) explains the failure; the lab's hints would blame the code.
    const bool injected = std::any_of(run.problems.begin(), run.problems.end(),
                                      [](const std::string& line) { return line.rfind("fault injected", 0) == 0; });
    const bool limited = std::any_of(run.problems.begin(), run.problems.end(), [](const std::string& line) { return line.rfind("killed: ", 0) == 0; });
    const bool confined = std::any_of(run.problems.begin(), run.problems.end(), [](const std::string& line) {
      return line.find("tampering") != std::string::npos || line.find("sandbox") != std::string::npos;
    });
    hints.insert(injected   ? std::string("the grader injected this fault (--fault): how a run fails when a rank or a link is lost, not a fault in your code")
                 : limited  ? std::string("each test process has limits (CPU time, memory, processes at once, output; README.md, \"The grader\"): "
                                          "a test needs far less than any of them, so look for a loop that does not end or grows without bound")
                 : confined ? std::string("each test process runs under gpulab-launch, in a sandbox: it runs no other program, writes no record after the "
                                          "test runner's last and prints no launcher report (README.md, \"The grader\")")
                 : p.timed_out ? lab.timeout_hint
                               : lab.crash_hint);
  } else if (p.timed_out) {
    check.details.insert(check.details.begin(), "did not finish within " + fixed0(context.timeout_s) + " s; the process was killed");
    hints.insert(lab.timeout_hint);
  } else if (p.exited(77)) {
    judge_skip(c, run, context, check);
  } else if (p.signal != 0 || (p.exit_code != 1 && p.exit_code != 0)) {
    check.details.insert(check.details.begin(), "the test process " + p.describe());
    hints.insert(lab.crash_hint);
  } else {
    judge_ended(c, run, context, found, check);
  }
  check.details.insert(check.details.end(), run.notes.begin(), run.notes.end());
  if (p.timed_out) check.data["hung"] = true;
  if (!found.passed.empty()) check.data["facts"] = found.passed;  // every check that held, with its figures
  if (check.status != Status::kFail) hints.clear();
  check.hints.assign(hints.begin(), hints.end());
  check.data["process"] = p.describe();
  check.data["records"] = run.records;
  // The values its checks compared, for the grader to judge outside the process (outputs.hpp).
  nlohmann::json outputs = nlohmann::json::array();
  for (const auto& rec : run.records) {
    if (rec.is_object() && rec.value("kind", "") == "output") outputs.push_back(rec);
  }
  check.data["outputs"] = std::move(outputs);
  return check;
}

void mark_stretch(const CaseInfo& c, Check& check) {
  if (!c.stretch()) return;
  // Which work the case credits, by its TODO tags: a case may run a stretch configuration of an
  // earlier TODO (lab 09's executor on the tests' interleaved schedule is 09.4's, not 09.5's).
  static const std::regex todo(R"(\[(\d\d\.\d+)\])");
  std::string todos;
  for (auto it = std::sregex_iterator(c.tags.begin(), c.tags.end(), todo); it != std::sregex_iterator(); ++it) {
    todos += (todos.empty() ? "TODO " : ", ") + (*it)[1].str();
  }
  const std::string goal = "a stretch goal" + (todos.empty() ? std::string() : " of " + todos);
  if (check.status == Status::kFail || check.status == Status::kEmuFail) {
    check.status = Status::kStretch;
    check.details.push_back(goal + ": not counted in the result");
  } else if (check.status == Status::kPass || check.status == Status::kEmuPass) {
    check.details.push_back(goal + ", reached");
  }
}

std::string device_missing(const std::string& exe) {
  ProcessOptions o;
  o.timeout_s = 60;
  const ProcessResult r = run_process({exe, "--gpulab-probe"}, o);
  if (r.exited(0)) return "";
  std::string why = r.output;
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  return r.exited(77) ? why : "the device probe " + r.describe() + (why.empty() ? "" : ": " + why);
}

}  // namespace gpulab::cli
