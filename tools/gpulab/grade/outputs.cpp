/// @file outputs.cpp
/// @brief Judging a case's values outside its process (see outputs.hpp).
#include "grade/outputs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>

#include "gpulab/compare.hpp"
#include "gpulab/hash.hpp"

namespace gpulab::cli {
namespace {

/// Each rank's output records, in the order its process sent them.
std::map<int, std::vector<const nlohmann::json*>> by_rank(const nlohmann::json& outputs) {
  std::map<int, std::vector<const nlohmann::json*>> ranks;
  if (!outputs.is_array()) return ranks;
  for (const auto& o : outputs) {
    if (o.is_object()) ranks[o.value("rank", 0)].push_back(&o);
  }
  return ranks;
}

template <class T>
std::vector<T> as(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

/// compare_bitwise on two parts of element type @p type; false when the type is unknown.
bool bitwise(const std::string& type, const std::string& got, const std::string& want, CompareResult& r) {
  if (type == "f32") r = compare_bitwise(as<float>(got), as<float>(want));
  else if (type == "f64") r = compare_bitwise(as<double>(got), as<double>(want));
  else if (type == "i8") r = compare_bitwise(as<std::int8_t>(got), as<std::int8_t>(want));
  else if (type == "u8") r = compare_bitwise(as<std::uint8_t>(got), as<std::uint8_t>(want));
  else if (type == "i16") r = compare_bitwise(as<std::int16_t>(got), as<std::int16_t>(want));
  else if (type == "u16") r = compare_bitwise(as<std::uint16_t>(got), as<std::uint16_t>(want));
  else if (type == "i32") r = compare_bitwise(as<std::int32_t>(got), as<std::int32_t>(want));
  else if (type == "u32") r = compare_bitwise(as<std::uint32_t>(got), as<std::uint32_t>(want));
  else if (type == "i64") r = compare_bitwise(as<std::int64_t>(got), as<std::int64_t>(want));
  else if (type == "u64") r = compare_bitwise(as<std::uint64_t>(got), as<std::uint64_t>(want));
  else return false;
  return true;
}

std::size_t element_size(const std::string& type) {
  if (type == "f64" || type == "i64" || type == "u64") return 8;
  if (type == "f32" || type == "i32" || type == "u32") return 4;
  if (type == "i16" || type == "u16") return 2;
  return type == "i8" || type == "u8" ? 1 : 0;
}

}  // namespace

bool read_part(const nlohmann::json& output, const std::string& part, std::string& bytes, std::string& why) {
  const nlohmann::json parts = output.value("parts", nlohmann::json::array());
  const nlohmann::json blobs = output.value("blobs", nlohmann::json::array());
  std::size_t index = 0;
  while (index < parts.size() && parts[index] != part) ++index;
  if (index == parts.size()) {
    why = "its record names no \"" + part + "\" values";
    return false;
  }
  if (index >= blobs.size()) {
    why = "its \"" + part + "\" values never reached gpulab-launch";
    return false;
  }
  const nlohmann::json& blob = blobs[index];
  if (!blob.contains("hash") || blob.contains("short_by")) {
    why = "its \"" + part + "\" values were cut short: the process ended while sending them";
    return false;
  }
  const nlohmann::json file = blob.value("file", nlohmann::json());
  if (!file.is_string()) {
    why = "gpulab-launch kept no file of values (it could not make one)";
    return false;
  }
  const std::uint64_t size = blob.value("bytes", std::uint64_t{0}), offset = blob.value("offset", std::uint64_t{0});
  // The file gpulab-launch made, and no other: not a link, a FIFO or a file put in its place (the
  // folder was writable from inside the sandbox).
  const int fd = open(file.get<std::string>().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st {};
  const bool same = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                    std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) == blob.value("id", "");
  if (!same || static_cast<std::uint64_t>(st.st_size) < offset + size || offset + size < offset) {
    if (fd >= 0) close(fd);
    why = "gpulab-launch's file of values was replaced or cut after it wrote it — tampering";
    return false;
  }
  bytes.assign(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = pread(fd, bytes.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fd);
  if (got < size) {
    why = "its \"" + part + "\" values are missing from gpulab-launch's file";
    return false;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(bytes)));
  if (blob.value("hash", "") != hex) {
    why = "its \"" + part + "\" values were changed after gpulab-launch wrote them (their hash is not the one in its report) — tampering";
    return false;
  }
  return true;
}

namespace {

OutsideVerdict judge(const nlohmann::json& submission, const nlohmann::json& reference) {
  OutsideVerdict verdict;
  const auto mine = by_rank(submission);
  const auto theirs = by_rank(reference);
  std::vector<std::string> wrong;  // checks whose values do not hold: the process's own checks had passed them
  std::vector<std::string> sized;  // checks that looked at another number of values than the reference's run
  int missing = 0;
  const auto fail = [&](const std::string& why) {
    if (++missing <= 3) verdict.problems.push_back("judged outside the process: " + why);
  };
  for (const auto& [rank, wanted] : theirs) {
    const std::string who = theirs.size() > 1 || rank > 0 ? "rank " + std::to_string(rank) + ": " : "";
    const auto found = mine.find(rank);
    const std::size_t sent = found == mine.end() ? 0 : found->second.size();
    if (sent != wanted.size()) {
      fail(who + "sent the values of " + std::to_string(sent) + " of the reference's " + std::to_string(wanted.size()) +
           " checks: its checks did not all run, or something in the process kept their values from the grader");
      continue;
    }
    for (std::size_t k = 0; k < wanted.size(); ++k) {
      const nlohmann::json& want = *wanted[k];
      const nlohmann::json& got = *found->second[k];
      const std::string what = want.value("check", "?");
      if (got.value("check", "") != what || got.value("compare", "") != want.value("compare", "") || got.value("type", "") != want.value("type", "")) {
        fail(who + "check " + std::to_string(k + 1) + " is \"" + got.value("check", "?") + "\", the reference's is \"" + what +
             "\": the checks ran in another order or on other values");
        continue;
      }
      std::string got_bytes, want_bytes, bound_bytes, why;
      if (!read_part(got, "got", got_bytes, why)) {
        fail(who + what + ": " + why);
        continue;
      }
      if (!read_part(want, "want", want_bytes, why)) {
        fail(who + what + ": the reference's run: " + why);
        continue;
      }
      const std::string type = want.value("type", "");
      // Another number of values than the reference's run compared: what the check looks at was
      // chosen by the code under test (a chunk, a partition it computes), so its own check could
      // pass on less. Wrong, but no sign of tampering.
      const long got_count = got.value("count", 0L), want_count = want.value("count", 0L);
      if (got_count != want_count) {
        ++verdict.compared;
        sized.push_back(who + what + ": " + std::to_string(got_count) + " values, the reference's run " + std::to_string(want_count));
        continue;
      }
      CompareResult r;
      if (want.value("compare", "") == "within") {
        if (!read_part(want, "bound", bound_bytes, why)) {
          fail(who + what + ": the reference's run: " + why);
          continue;
        }
        r = compare_within(as<float>(got_bytes), as<double>(want_bytes), as<double>(bound_bytes));
      } else if (!bitwise(type, got_bytes, want_bytes, r)) {
        fail(who + what + ": values of an unknown type \"" + type + "\"");
        continue;
      }
      if (got_bytes.size() != static_cast<std::size_t>(got.value("count", 0L)) * element_size(type)) {
        fail(who + what + ": " + std::to_string(got_bytes.size()) + " bytes of values for " + std::to_string(got.value("count", 0L)) + " elements");
        continue;
      }
      ++verdict.compared;
      if (!r.ok()) wrong.push_back(who + r.summary(what));
    }
  }
  for (const auto& [rank, sent] : mine) {
    if (theirs.count(rank) == 0 && !sent.empty()) fail("rank " + std::to_string(rank) + " sent values the reference's run did not");
  }
  if (missing > 3) verdict.problems.push_back("(and " + std::to_string(missing - 3) + " more)");
  if (!sized.empty()) {
    verdict.problems.insert(verdict.problems.begin(),
                            "judged outside the process, against the reference's run on the same inputs: " + std::to_string(sized.size()) + " of " +
                                std::to_string(verdict.compared) + " checks looked at another number of values than the reference's: "
                                "what they check is chosen by your code (a chunk or a partition it computes), so your process's own checks "
                                "passed on less than they should have");
    for (std::size_t i = 0; i < sized.size() && i < 2; ++i) verdict.problems.insert(verdict.problems.begin() + 1 + static_cast<long>(i), "  " + sized[i]);
  }
  if (!wrong.empty()) {
    verdict.problems.insert(verdict.problems.begin(),
                            "judged outside the process, against the reference's run on the same inputs: " + std::to_string(wrong.size()) + " of " +
                                std::to_string(verdict.compared) + " checks do not hold, although the process's own checks passed them: "
                                "what it reported is not what it computed (its comparison or its records were changed) — tampering");
    for (std::size_t i = 0; i < wrong.size() && i < 2; ++i) verdict.problems.insert(verdict.problems.begin() + 1 + static_cast<long>(i), "  " + wrong[i]);
  }
  return verdict;
}

}  // namespace

OutsideVerdict judge_outputs(const nlohmann::json& submission, const nlohmann::json& reference) {
  try {
    return judge(submission, reference);
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong type: only the process under test writes such records.
    OutsideVerdict v;
    v.problems.push_back(std::string("judged outside the process: its records of checked values are malformed (") + e.what() + ") — tampering");
    return v;
  }
}

}  // namespace gpulab::cli
