/// @file selftest_class.hpp
/// @brief selftest's class: a folder of submissions of lab 06 — the reference as a folder and as
/// archives, the skeleton, the lab's plants, and hostile ones (a fork through a libc back door, a
/// memory hog, a connection out, a reader of the other students' folder and of the reference, a
/// writer outside its sandbox, an output flood, a call of kill, a crash, code that does not
/// compile, archives with `../../x` and with a link) — graded by `grade-class` with a memory limit.
/// Each verdict must be what that submission earns (full points, a failure, or its attack named);
/// two are graded alone too and must read the same; the gradebook's sums must equal the
/// scorecards'; and nothing outside the class's results may change (the course's git status, the
/// files the writer aimed at).
///
/// Lab 06 because its allocator is host code that the CPU cases call: every attack runs on any
/// machine. The attacks are C++ inserted into the reference's CachingAllocator::allocate.
#pragma once

#include "author/selftest_table.hpp"
#include "base/paths.hpp"

namespace gpulab::cli {

/// Builds the class under build/selftest/class/, grades it, and adds a row per submission and per
/// class-wide check to @p table. @p full: every submission (21 with lab 06's 6 plants); otherwise
/// the quick class CI grades (the reference, the archives refused, and the attacks that only the
/// sandbox's runtime stops: the memory hog, the connection out, the reader, the writer).
void check_class(const Paths& paths, bool full, Table& table);

}  // namespace gpulab::cli
