/// @file test_outputs.cpp
/// @brief The values of a case's checks, judged outside its process: gpulab-launch takes them out
/// of the records into a file it lists with hashes, and grade/outputs holds a submission's values
/// to the reference's run.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/files.hpp"
#include "base/process.hpp"
#include "gpulab/hash.hpp"
#include "grade/outputs.hpp"
#include "launch_frame.hpp"

namespace fs = std::filesystem;
using gpulab::cli::judge_outputs;

namespace {

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("gpulab-outputs-test-" + std::to_string(::getpid()));
  Scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

std::string hex_hash(const std::string& bytes) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(gpulab::fnv1a64(bytes)));
  return hex;
}

/// An output record as the grader reads it from a frame: @p parts, each a block of bytes in @p file.
nlohmann::json output(const fs::path& file, const std::string& check, const std::string& compare, const std::string& type, std::size_t count,
                      const std::vector<std::pair<std::string, std::string>>& parts, int rank = 0) {
  std::ofstream out(file, std::ios::binary | std::ios::app);  // appended, as the launcher does: one file, one inode
  std::size_t at = fs::exists(file) ? fs::file_size(file) : 0;
  struct stat st {};
  ::stat(file.c_str(), &st);
  nlohmann::json rec = {{"kind", "output"}, {"check", check}, {"compare", compare}, {"type", type}, {"count", count}, {"rank", rank},
                        {"parts", nlohmann::json::array()}, {"blobs", nlohmann::json::array()}};
  for (const auto& [name, bytes] : parts) {
    rec["parts"].push_back(name);
    rec["blobs"].push_back({{"file", file.string()}, {"offset", at}, {"bytes", bytes.size()}, {"hash", hex_hash(bytes)},
                            {"id", std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)}});
    out << bytes;
    at += bytes.size();
  }
  return rec;
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

}  // namespace

TEST_CASE("gpulab-launch takes a check's values out of the records into its file", "[cpu]") {
  Scratch s;
  // A program that writes two records with a block of 4 bytes between them on descriptor 3.
  const gpulab::cli::ProcessResult r = gpulab::cli::run_process(
      {std::string(GPULAB_BIN_DIR) + "/gpulab-launch", "--no-seccomp", "--outputs", s.dir.string(), "--", "sh", "-c",
       "printf '{\"kind\":\"output\"}\\n@blob 4\\nABCD{\"kind\":\"end\"}\\n' >&3"});
  REQUIRE(r.exited(0));
  const nlohmann::json frame = launch_frame(r.output);
  CHECK(frame.value("records", "") == "{\"kind\":\"output\"}\n{\"kind\":\"end\"}\n");  // the block is not a record
  REQUIRE(frame["blobs"].size() == 1);
  CHECK(frame["blobs"][0].value("record", 0) == 1);  // it belongs to the first record
  CHECK(frame["blobs"][0].value("bytes", 0) == 4);
  CHECK(frame["blobs"][0].value("hash", "") == hex_hash("ABCD"));
  CHECK(gpulab::cli::read_text(frame.value("outputs", "")) == "ABCD");
}

TEST_CASE("a submission's values are held to the reference's expected values and bounds", "[cpu]") {
  Scratch s;
  const std::vector<double> want = {1.0, 2.0, 3.0}, bound = {0.01, 0.01, 0.01};
  const nlohmann::json reference = nlohmann::json::array(
      {output(s.dir / "ref.bin", "sum", "within", "f32", 3, {{"got", bytes_of(std::vector<float>{1, 2, 3})}, {"want", bytes_of(want)}, {"bound", bytes_of(bound)}}),
       output(s.dir / "ref.bin", "ids", "bitwise", "i32", 2, {{"got", bytes_of(std::vector<int>{7, 8})}, {"want", bytes_of(std::vector<int>{7, 8})}})});

  SECTION("right values pass") {
    const nlohmann::json mine = nlohmann::json::array({output(s.dir / "mine.bin", "sum", "within", "f32", 3, {{"got", bytes_of(std::vector<float>{1.001f, 2, 3})}}),
                                                       output(s.dir / "mine.bin", "ids", "bitwise", "i32", 2, {{"got", bytes_of(std::vector<int>{7, 8})}})});
    const auto v = judge_outputs(mine, reference);
    CHECK(v.compared == 2);
    CHECK(v.problems.empty());
  }
  SECTION("a value outside the reference's bound fails, whatever the process said") {
    const nlohmann::json mine = nlohmann::json::array({output(s.dir / "mine.bin", "sum", "within", "f32", 3, {{"got", bytes_of(std::vector<float>{1, 2.5f, 3})}}),
                                                       output(s.dir / "mine.bin", "ids", "bitwise", "i32", 2, {{"got", bytes_of(std::vector<int>{7, 9})}})});
    const auto v = judge_outputs(mine, reference);
    REQUIRE(!v.problems.empty());
    CHECK(v.problems[0].find("judged outside the process") == 0);
    CHECK(v.problems[0].find("2 of 2 checks do not hold") != std::string::npos);
    CHECK(v.problems[1].find("sum: 1 of 3 elements wrong") != std::string::npos);
  }
  SECTION("a check that looked at fewer values than the reference's fails, and is not called tampering") {
    // The learner's chunk_of chose what its process checked (an unfinished one: nothing).
    const nlohmann::json mine = nlohmann::json::array({output(s.dir / "mine.bin", "sum", "within", "f32", 0, {{"got", ""}}),
                                                       output(s.dir / "mine.bin", "ids", "bitwise", "i32", 2, {{"got", bytes_of(std::vector<int>{7, 8})}})});
    const auto v = judge_outputs(mine, reference);
    REQUIRE(v.problems.size() == 2);
    CHECK(v.problems[0].find("1 of 2 checks looked at another number of values than the reference's") != std::string::npos);
    CHECK(v.problems[0].find("tampering") == std::string::npos);
    CHECK(v.problems[1].find("sum: 0 values, the reference's run 3") != std::string::npos);
  }
  SECTION("values never sent fail") {
    const auto v = judge_outputs(nlohmann::json::array(), reference);
    REQUIRE(v.problems.size() == 1);
    CHECK(v.problems[0].find("sent the values of 0 of the reference's 2 checks") != std::string::npos);
  }
  SECTION("checks in another order fail") {
    const nlohmann::json mine = nlohmann::json::array({output(s.dir / "mine.bin", "ids", "bitwise", "i32", 2, {{"got", bytes_of(std::vector<int>{7, 8})}}),
                                                       output(s.dir / "mine.bin", "sum", "within", "f32", 3, {{"got", bytes_of(std::vector<float>{1, 2, 3})}})});
    const auto v = judge_outputs(mine, reference);
    REQUIRE(!v.problems.empty());
    CHECK(v.problems[0].find("the checks ran in another order") != std::string::npos);
  }
  SECTION("values changed after the launcher wrote them fail") {
    const nlohmann::json mine = nlohmann::json::array({output(s.dir / "mine.bin", "sum", "within", "f32", 3, {{"got", bytes_of(std::vector<float>{1, 2, 3})}}),
                                                       output(s.dir / "mine.bin", "ids", "bitwise", "i32", 2, {{"got", bytes_of(std::vector<int>{7, 8})}})});
    SECTION("in place") {
      std::fstream file(s.dir / "mine.bin", std::ios::binary | std::ios::in | std::ios::out);
      file.seekp(0);
      file.put('\x7f');
    }
    SECTION("by another file in its place") {
      std::string file = gpulab::cli::read_text(s.dir / "mine.bin");
      gpulab::cli::write_text(s.dir / "mine.bin", file);  // the same bytes, a new file
    }
    const auto v = judge_outputs(mine, reference);
    REQUIRE(!v.problems.empty());
    CHECK((v.problems[0].find("changed after gpulab-launch wrote them") != std::string::npos ||
           v.problems[0].find("replaced or cut after it wrote it") != std::string::npos));
  }
  SECTION("records of the wrong shape fail, and never stop the grader") {
    nlohmann::json mine = nlohmann::json::array({output(s.dir / "mine.bin", "sum", "within", "f32", 3, {{"got", bytes_of(std::vector<float>{1, 2, 3})}}),
                                                 output(s.dir / "mine.bin", "ids", "bitwise", "i32", 2, {{"got", bytes_of(std::vector<int>{7, 8})}})});
    mine[0]["parts"] = "got";
    mine[1]["count"] = "two";
    const auto v = judge_outputs(mine, reference);
    REQUIRE(!v.problems.empty());
    CHECK(v.problems[0].find("judged outside the process") == 0);
  }
  SECTION("the reference graded: its values are held to what it compared them with") {
    CHECK(judge_outputs(reference, reference).problems.empty());
  }
}
