/// @file fragments.cpp
/// @brief Lab 04: which lane holds what in mma.sync.m16n8k16's fragments, and the row addresses
/// ldmatrix needs to deliver them (fragments.hpp).
#include "fragments.hpp"

#include <stdexcept>
#include <string>

namespace lab04 {
namespace {

[[maybe_unused]] void require(bool ok, const char* what, int value) {
  if (!ok) throw std::invalid_argument(std::string(what) + " " + std::to_string(value) + " is out of range");
}

}  // namespace

// BEGIN SOLUTION(04.8) Fragments on paper: which lane holds which element, and the ldmatrix addresses that deliver them
Element a_element(int lane, int index) {
  require(lane >= 0 && lane < 32, "lane", lane);
  require(index >= 0 && index < 8, "A index", index);
  // Lane l = 4g + t holds, in each 8 × 8 quarter of A, row g and columns 2t, 2t + 1; register
  // a[r] is the quarter at rows 8·(r % 2), columns 8·(r / 2): a[1] is below a[0], a[2] beside it.
  const int g = lane / 4, t = lane % 4, r = index / 2, half = index % 2;
  return {g + 8 * (r % 2), 2 * t + half + 8 * (r / 2)};
}

Element b_element(int lane, int index) {
  require(lane >= 0 && lane < 32, "lane", lane);
  require(index >= 0 && index < 4, "B index", index);
  // B is held by columns: lane 4g + t has column g, rows (k) 2t and 2t + 1 of each 8-row half.
  const int g = lane / 4, t = lane % 4, r = index / 2, half = index % 2;
  return {2 * t + half + 8 * r, g};
}

Slot c_slot(int row, int col) {
  require(row >= 0 && row < 16, "C row", row);
  require(col >= 0 && col < 8, "C column", col);
  // C is laid out as A's left half: row g (+8 for c[2], c[3]), columns 2t, 2t + 1.
  return {4 * (row % 8) + col / 2, 2 * (row / 8) + col % 2};
}

int ldmatrix_a_offset(int lane, int ld) {
  require(lane >= 0 && lane < 32, "lane", lane);
  require(ld >= 16 && ld % 8 == 0, "leading dimension", ld);
  // Lanes 8j … 8j + 7 give the rows of matrix j, which lands in register j. a[j] is the quarter
  // at rows 8·(j % 2), columns 8·(j / 2), so lane l gives row l % 8 of quarter l / 8: tile row
  // l % 16, column 8·(l / 16).
  return (lane % 16) * ld + (lane / 16) * 8;
}

int ldmatrix_b_offset(int lane, int ld) {
  // With .trans lane 4g + t receives rows 2t, 2t + 1 of column g of each matrix: B's fragment,
  // read from a k-major tile. r[0], r[1] are k 0–7 and 8–15 of columns 0–7, r[2], r[3] of 8–15:
  // the quarters in the same order as A's, so the same addresses.
  return ldmatrix_a_offset(lane, ld);
}

int ldmatrix_conflict_ways(int ld) {
  require(ld >= 8 && ld % 8 == 0, "leading dimension", ld);
  // Row r starts at byte 2·ld·r, bank (ld·r / 2) mod 32, and covers 4 banks.
  int hits[32] = {};
  int worst = 0;
  for (int r = 0; r < 8; ++r) {
    for (int b = 0; b < 4; ++b) {
      const int bank = (ld * r / 2 + b) % 32;
      if (++hits[bank] > worst) worst = hits[bank];
    }
  }
  return worst;
}
// STUB: Element a_element(int, int) { return {}; }
// STUB: Element b_element(int, int) { return {}; }
// STUB: Slot c_slot(int, int) { return {}; }
// STUB: int ldmatrix_a_offset(int, int) { return 0; }
// STUB: int ldmatrix_b_offset(int, int) { return 0; }
// STUB: int ldmatrix_conflict_ways(int) { return 0; }
// END SOLUTION

}  // namespace lab04
