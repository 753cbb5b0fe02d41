/// @file test_verdict.cpp
/// @brief Performance verdicts from recorded timings: when to decide, when to measure again.
#include <catch2/catch.hpp>

#include "grade/verdict.hpp"

using gpulab::cli::decide;

TEST_CASE("a clean measurement is decided after the minimum rounds", "[cpu]") {
  CHECK_FALSE(decide({0.80, 0.81}, {0.95, 0.95}, 0.6, 1.0).decided);
  const auto v = decide({0.80, 0.81, 0.80}, {0.95, 0.95, 0.96}, 0.6, 2.0);
  CHECK(v.decided);
  CHECK(v.pass);
  CHECK(v.ratio == Approx(0.80 / 0.95));
}

TEST_CASE("a slow submission fails cleanly", "[cpu]") {
  const auto v = decide({0.30, 0.31, 0.30}, {0.95, 0.94, 0.95}, 0.6, 2.0);
  CHECK(v.decided);
  CHECK_FALSE(v.pass);
}

TEST_CASE("noise means another round until the cap", "[cpu]") {
  // Learner figures spread by ~20 %: undecided while rounds remain...
  const std::vector<double> noisy = {0.9, 0.6, 0.75, 0.95, 0.7};
  CHECK_FALSE(decide(noisy, {0.9, 0.9, 0.9, 0.9, 0.9}, 0.6, 10.0).decided);
  // ...decided at the round cap, and the note says so.
  const std::vector<double> ten = {0.9, 0.6, 0.75, 0.95, 0.7, 0.9, 0.6, 0.75, 0.95, 0.7};
  const auto v = decide(ten, std::vector<double>(10, 0.9), 0.6, 10.0);
  CHECK(v.decided);
  CHECK(v.note.find("cap") != std::string::npos);
  // ...or at the time cap.
  CHECK(decide(noisy, {0.9, 0.9, 0.9, 0.9, 0.9}, 0.6, 500.0).decided);
}

TEST_CASE("a ratio within 5 percent of the threshold is measured again", "[cpu]") {
  // 0.58 / 0.95 = 0.61: within 5 % of 0.6.
  CHECK_FALSE(decide({0.58, 0.58, 0.58}, {0.95, 0.95, 0.95}, 0.6, 5.0).decided);
  const auto v = decide(std::vector<double>(10, 0.58), std::vector<double>(10, 0.95), 0.6, 5.0);
  CHECK(v.decided);
  CHECK(v.pass);
  CHECK(v.note.find("threshold") != std::string::npos);
}

TEST_CASE("without a reference the learner is compared with the threshold itself", "[cpu]") {
  const auto v = decide({0.97, 0.97, 0.96}, {}, 0.85, 1.0);
  CHECK(v.decided);
  CHECK(v.pass);
  CHECK(v.ratio == Approx(0.97));
  CHECK_FALSE(decide({0.80, 0.80, 0.80}, {}, 0.85, 1.0).pass);
}

TEST_CASE("with no threshold the figures are recorded after the minimum rounds", "[cpu]") {
  const auto v = decide({0.9, 0.6, 0.75}, {}, 0.0, 1.0);
  CHECK(v.decided);
  CHECK(v.pass);
}
