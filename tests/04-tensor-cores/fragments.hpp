/// @file fragments.hpp
/// @brief Lab 04, part 2 — which lane holds what (TODO 04.8): the fragment layouts of
/// `mma.sync.m16n8k16` and the row addresses `ldmatrix` needs, worked out on the host before a
/// kernel depends on them. You implement labs/04-tensor-cores/fragments.cpp; it needs no GPU.
///
/// The facts to start from are the PTX ISA's ("Matrix fragments for mma.m16n8k16 with floating
/// point type"; "Warp-level matrix load instruction: ldmatrix"), drawn in lesson 04 ("Fragments:
/// which lane holds what") and in tests/04-tensor-cores/tensor_core.cuh. Everything else here is
/// for you to derive from them.
///
/// This header belongs to the tests: do not change it.
#pragma once

namespace lab04 {

/// A matrix element. For B (k × n), row is k and col is n.
struct Element {
  int row = -1;
  int col = -1;
  bool operator==(const Element& o) const { return row == o.row && col == o.col; }
};

/// Where a warp holds a value: the lane (0 … 31) and the value's index among that lane's values of
/// the fragment, counted in elements: A's four 32-bit registers a[0] … a[3] hold 8 halves, index i
/// being register a[i / 2], its low half when i is even; B's b[0], b[1] hold indices 0 … 3 the same
/// way; C's four floats c[0] … c[3] are indices 0 … 3.
struct Slot {
  int lane = -1;
  int index = -1;
  bool operator==(const Slot& o) const { return lane == o.lane && index == o.index; }
};

/// TODO(04.8): the element of the 16 × 16 A operand (row-major) that @p lane holds as value
/// @p index (0 … 7). Throws std::invalid_argument for a lane or index out of range.
Element a_element(int lane, int index);

/// TODO(04.8): the element (row k, column n) of the 16 × 8 B operand ("col") that @p lane holds as
/// value @p index (0 … 3). Throws std::invalid_argument out of range.
Element b_element(int lane, int index);

/// TODO(04.8): the inverse for the 16 × 8 fp32 accumulator: which lane holds C[row][col], as which
/// of c[0] … c[3]. Throws std::invalid_argument outside 16 × 8.
Slot c_slot(int row, int col);

/// TODO(04.8): `ldmatrix.x4` from a row-major 16 × 16 tile of A in shared memory whose rows are
/// @p ld halves apart: the offset, in halves from the tile's first element, of the row address
/// @p lane must give so that the four registers it receives are exactly its mma fragment a[0],
/// a[1], a[2], a[3]. Throws std::invalid_argument unless ld ≥ 16 and ld is a multiple of 8 (every
/// row address must stay 16-byte aligned).
int ldmatrix_a_offset(int lane, int ld);

/// TODO(04.8): `ldmatrix.x4.trans` from a row-major 16 × 16 tile of B (16 rows of k, 16 columns of
/// n), rows @p ld halves apart: the offset for @p lane so that r[0], r[1] are b[0], b[1] of the
/// 16 × 8 fragment of columns 0 … 7 and r[2], r[3] those of columns 8 … 15. The same errors.
int ldmatrix_b_offset(int lane, int ld);

/// TODO(04.8): one `ldmatrix` phase reads one 8 × 8 matrix: 8 rows of 16 bytes whose starts are
/// @p ld halves apart, from shared memory's 32 banks of 4 bytes (the first row at bank 0). How
/// many of the 8 rows touch the busiest bank: 1 is conflict-free, 8 serialises the phase. Throws
/// std::invalid_argument unless ld ≥ 8 and ld is a multiple of 8.
int ldmatrix_conflict_ways(int ld);

}  // namespace lab04
