/// @file test_fragments.cpp
/// @brief Lab 04 tests on the CPU, part 2's drill (04.8): each lane's share of mma.m16n8k16's A, B
/// and C against the PTX ISA's fragment figures, every element owned exactly once; ldmatrix row
/// addresses checked by running ldmatrix's own rule on a tile of distinct values at four row
/// pitches; the bank conflicts of an ldmatrix phase against a count of the banks each row touches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "fragments.hpp"
#include "gpulab_test.hpp"

using gpulab::testing::check_fact;
using lab04::Element;
using lab04::Slot;

namespace {

/// The PTX ISA's figures, as tables built quarter by quarter: owner[row][col] = (lane, index).
/// A (16 × 16): register a[q] is the 8 × 8 quarter at rows 8·(q % 2), columns 8·(q / 2); in a
/// quarter, lane 4g + t holds row g, columns 2t (low half) and 2t + 1 (high half).
/// B (16 × 8, k × n): b[q] is rows (k) 8q … 8q + 7; lane 4g + t holds column g, rows 2t, 2t + 1.
/// C (16 × 8): c[0], c[1] are row g, columns 2t, 2t + 1; c[2], c[3] the same 8 rows below.
struct Figures {
  Slot a[16][16], b[16][8], c[16][8];
  Figures() {
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int q = 0; q < 4; ++q) {
        for (int half = 0; half < 2; ++half) a[8 * (q % 2) + g][8 * (q / 2) + 2 * t + half] = {lane, 2 * q + half};
      }
      for (int q = 0; q < 2; ++q) {
        for (int half = 0; half < 2; ++half) b[8 * q + 2 * t + half][g] = {lane, 2 * q + half};
      }
      for (int below = 0; below < 2; ++below) {
        for (int half = 0; half < 2; ++half) c[8 * below + g][2 * t + half] = {lane, 2 * below + half};
      }
    }
  }
};

const Figures& figures() {
  static const Figures f;
  return f;
}

std::string where(const Element& e) { return "[" + std::to_string(e.row) + "][" + std::to_string(e.col) + "]"; }

/// "lane 5, value 2 (a[1], low half)".
std::string slot_name(char operand, const Slot& s) {
  const bool floats = operand == 'c';
  return "lane " + std::to_string(s.lane) + ", value " + std::to_string(s.index) + " (" + operand + "[" +
         std::to_string(floats ? s.index : s.index / 2) + "]" + (floats ? std::string() : s.index % 2 == 0 ? ", low half" : ", high half") + ")";
}

template <class F>
bool throws_invalid(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

}  // namespace

TEST_CASE("fragments: each lane holds the A and B elements the PTX ISA gives it and every element once", "[cpu][04.8]") {
  const Figures& f = figures();
  std::string wrong_a, wrong_b, twice_a, twice_b;
  int seen_a[16][16] = {}, seen_b[16][8] = {};
  try {
    for (int lane = 0; lane < 32; ++lane) {
      for (int index = 0; index < 8; ++index) {
        const Element e = lab04::a_element(lane, index);
        const bool inside = e.row >= 0 && e.row < 16 && e.col >= 0 && e.col < 16;
        if (inside && ++seen_a[e.row][e.col] == 2 && twice_a.empty()) twice_a = "A" + where(e) + " is held twice";
        if (!inside || !(f.a[e.row][e.col] == Slot{lane, index})) {
          if (wrong_a.empty()) {
            Element want;
            for (int r = 0; r < 16; ++r) {
              for (int c = 0; c < 16; ++c) {
                if (f.a[r][c] == Slot{lane, index}) want = {r, c};
              }
            }
            wrong_a = slot_name('a', {lane, index}) + ": yours A" + where(e) + ", the PTX ISA's A" + where(want);
          }
        }
      }
      for (int index = 0; index < 4; ++index) {
        const Element e = lab04::b_element(lane, index);
        const bool inside = e.row >= 0 && e.row < 16 && e.col >= 0 && e.col < 8;
        if (inside && ++seen_b[e.row][e.col] == 2 && twice_b.empty()) twice_b = "B" + where(e) + " is held twice";
        if ((!inside || !(f.b[e.row][e.col] == Slot{lane, index})) && wrong_b.empty()) {
          Element want;
          for (int r = 0; r < 16; ++r) {
            for (int c = 0; c < 8; ++c) {
              if (f.b[r][c] == Slot{lane, index}) want = {r, c};
            }
          }
          wrong_b = slot_name('b', {lane, index}) + ": yours B" + where(e) + ", the PTX ISA's B" + where(want);
        }
      }
    }
  } catch (const std::exception& e) {
    wrong_a = wrong_b = std::string("threw: ") + e.what();
  }
  check_fact(wrong_a.empty() && twice_a.empty(), "a_element: all 32 × 8 values of A", wrong_a.empty() ? (twice_a.empty() ? "every one right" : twice_a) : wrong_a,
             "a[q] is one 8 × 8 quarter of A: which quarter is a[1], the one below a[0] or the one beside it?");
  check_fact(wrong_b.empty() && twice_b.empty(), "b_element: all 32 × 4 values of B", wrong_b.empty() ? (twice_b.empty() ? "every one right" : twice_b) : wrong_b,
             "B is held by columns: a lane's two halves of b[0] are two consecutive k of one n");
  const bool rejects = throws_invalid([] { lab04::a_element(32, 0); }) && throws_invalid([] { lab04::a_element(0, 8); }) &&
                       throws_invalid([] { lab04::b_element(-1, 0); }) && throws_invalid([] { lab04::b_element(0, 4); });
  check_fact(rejects, "a_element and b_element reject a lane or index out of range", rejects ? "std::invalid_argument each time" : "returned an element",
             "throw std::invalid_argument for lane outside 0 … 31 or an index past the fragment");
}

TEST_CASE("fragments: c_slot finds the lane and register of every accumulator element", "[cpu][04.8]") {
  const Figures& f = figures();
  std::string wrong;
  int seen[32][4] = {};
  try {
    for (int row = 0; row < 16 && wrong.empty(); ++row) {
      for (int col = 0; col < 8 && wrong.empty(); ++col) {
        const Slot s = lab04::c_slot(row, col);
        if (!(s == f.c[row][col])) {
          wrong = "C" + where({row, col}) + ": yours " + (s.lane < 0 ? std::string("nothing") : slot_name('c', s)) + ", the PTX ISA's " + slot_name('c', f.c[row][col]);
        } else if (++seen[s.lane][s.index] == 2) {
          wrong = slot_name('c', s) + " holds two elements";
        }
      }
    }
  } catch (const std::exception& e) {
    wrong = std::string("threw: ") + e.what();
  }
  check_fact(wrong.empty(), "c_slot: all 16 × 8 accumulator elements", wrong.empty() ? "every one right" : wrong,
             "C is laid out like A's left half: which row does lane 4g + t hold in c[0] and in c[2]?");
  const bool rejects = throws_invalid([] { lab04::c_slot(16, 0); }) && throws_invalid([] { lab04::c_slot(0, 8); }) && throws_invalid([] { lab04::c_slot(-1, 0); });
  check_fact(rejects, "c_slot rejects an element outside 16 × 8", rejects ? "std::invalid_argument each time" : "returned a slot");
}

namespace {

/// ldmatrix.x4 (with @p trans) run by its own rule on a 16 × 16 tile of halves whose element at
/// offset o has the value o: lanes 8j … 8j + 7 give the offsets of matrix j's 8 rows; lane l
/// receives in r[j] elements (l / 4, 2(l % 4)) and (l / 4, 2(l % 4) + 1) of matrix j, or with
/// .trans (2(l % 4), l / 4) and (2(l % 4) + 1, l / 4). Returns r[lane][j][half] as offsets.
std::vector<std::vector<std::vector<int>>> run_ldmatrix(const std::vector<int>& row_offset, bool trans) {
  std::vector<std::vector<std::vector<int>>> got(32, std::vector<std::vector<int>>(4, std::vector<int>(2)));
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const int row = trans ? 2 * (lane % 4) + half : lane / 4, col = trans ? lane / 4 : 2 * (lane % 4) + half;
        got[static_cast<std::size_t>(lane)][static_cast<std::size_t>(j)][static_cast<std::size_t>(half)] = row_offset[static_cast<std::size_t>(8 * j + row)] + col;
      }
    }
  }
  return got;
}

/// The first lane whose registers are not its fragment, at row pitch @p ld; "" if none.
std::string check_offsets(bool b_operand, int ld) {
  const Figures& f = figures();
  std::vector<int> offsets(32);
  for (int lane = 0; lane < 32; ++lane) {
    const int o = b_operand ? lab04::ldmatrix_b_offset(lane, ld) : lab04::ldmatrix_a_offset(lane, ld);
    if (o % 8 != 0) return "lane " + std::to_string(lane) + " gives offset " + std::to_string(o) + ": not 16-byte aligned (a multiple of 8 halves)";
    if (o < 0 || o / ld > 15 || o % ld > 8) return "lane " + std::to_string(lane) + " gives offset " + std::to_string(o) + ": its 8 halves are not inside the 16 × 16 tile";
    offsets[static_cast<std::size_t>(lane)] = o;
  }
  const auto got = run_ldmatrix(offsets, b_operand);
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        // What mma wants in register j of this lane: A's a[j]; for B, b[j % 2] of the fragment of columns 8·(j / 2) ….
        Element want;
        for (int r = 0; r < 16; ++r) {
          for (int c = 0; c < 16; ++c) {
            const Slot s = b_operand ? (c < 8 ? f.b[r][c] : Slot{}) : f.a[r][c];
            if (s == Slot{lane, 2 * (b_operand ? j % 2 : j) + half}) want = {r, b_operand ? c + 8 * (j / 2) : c};
          }
        }
        const int o = got[static_cast<std::size_t>(lane)][static_cast<std::size_t>(j)][static_cast<std::size_t>(half)];
        const Element e{o / ld, o % ld};
        if (!(e == want)) {
          return "ld = " + std::to_string(ld) + ": lane " + std::to_string(lane) + " receives " + (b_operand ? "B" : "A") + where(e) + " in r[" + std::to_string(j) +
                 "]'s " + (half == 0 ? "low" : "high") + " half where mma wants " + (b_operand ? "B" : "A") + where(want);
        }
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("fragments: ldmatrix row addresses deliver every lane's A and B fragment at any row pitch", "[cpu][04.8]") {
  for (const bool b_operand : {false, true}) {
    std::string wrong;
    try {
      for (int ld : {16, 24, 40, 136}) {
        if (wrong.empty()) wrong = check_offsets(b_operand, ld);
      }
    } catch (const std::exception& e) {
      wrong = std::string("threw: ") + e.what();
    }
    check_fact(wrong.empty(), b_operand ? "ldmatrix_b_offset (.trans) at row pitches 16, 24, 40 and 136 halves" : "ldmatrix_a_offset at row pitches 16, 24, 40 and 136 halves",
               wrong.empty() ? "every lane receives exactly its fragment" : wrong,
               "lanes 8j … 8j + 7 give the 8 rows of matrix j, which arrives in register j: which quarter of the tile must matrix j be?");
  }
  const bool rejects = throws_invalid([] { lab04::ldmatrix_a_offset(0, 12); }) && throws_invalid([] { lab04::ldmatrix_a_offset(0, 8); }) &&
                       throws_invalid([] { lab04::ldmatrix_b_offset(0, 20); }) && throws_invalid([] { lab04::ldmatrix_a_offset(32, 16); });
  check_fact(rejects, "the ldmatrix offsets reject a pitch that breaks 16-byte rows or cannot hold the tile, and a lane out of range",
             rejects ? "std::invalid_argument each time" : "returned an offset", "ld must be ≥ 16 and a multiple of 8 halves; lanes are 0 … 31");
}

TEST_CASE("fragments: the bank conflicts of an ldmatrix phase at each row pitch", "[cpu][04.8]") {
  // The test's count: row r's 16 bytes start at byte 2·ld·r and each 4-byte word w is in bank
  // (w mod 32); the busiest bank's number of rows.
  auto ways = [](int ld) {
    std::vector<int> rows_on(32, 0);
    for (int r = 0; r < 8; ++r) {
      std::vector<bool> touched(32, false);
      for (int byte = 2 * ld * r; byte < 2 * ld * r + 16; byte += 4) touched[static_cast<std::size_t>((byte / 4) % 32)] = true;
      for (int b = 0; b < 32; ++b) rows_on[static_cast<std::size_t>(b)] += touched[static_cast<std::size_t>(b)] ? 1 : 0;
    }
    int worst = 0;
    for (int n : rows_on) worst = std::max(worst, n);
    return worst;
  };
  std::string table, wrong;
  try {
    for (int ld : {8, 16, 24, 32, 40, 48, 64, 72, 128, 136}) {
      const int mine = lab04::ldmatrix_conflict_ways(ld), want = ways(ld);
      table += (table.empty() ? "" : ", ") + std::to_string(ld) + " → " + std::to_string(mine);
      if (mine != want && wrong.empty()) wrong = "ld = " + std::to_string(ld) + " halves: yours " + std::to_string(mine) + "-way, the banks say " + std::to_string(want) + "-way";
    }
  } catch (const std::exception& e) {
    wrong = std::string("threw: ") + e.what();
  }
  check_fact(wrong.empty(), "ldmatrix_conflict_ways at ten row pitches (the lab pads A's rows to 40 halves and B's to 136)",
             wrong.empty() ? "ld → ways: " + table : wrong, "row r starts at byte 2·ld·r and covers 4 banks: on which bank does each row start?");
  const bool rejects = throws_invalid([] { lab04::ldmatrix_conflict_ways(12); }) && throws_invalid([] { lab04::ldmatrix_conflict_ways(0); });
  check_fact(rejects, "ldmatrix_conflict_ways rejects a pitch that is not a multiple of 8 halves", rejects ? "std::invalid_argument each time" : "returned a count");
}
