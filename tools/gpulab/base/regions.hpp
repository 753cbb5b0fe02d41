/// @file regions.hpp
/// @brief SOLUTION regions in reference sources, and the two renderings made from them.
///
/// A reference marks what the learner writes:
///
///     // BEGIN SOLUTION(03.2) Load the A tile into shared memory
///     ...reference code...
///     // STUB: return 0.0f;          (optional, any number: what the skeleton has instead)
///     // END SOLUTION
///
/// The skeleton keeps everything outside regions and turns each region into
///     // TODO(03.2): Load the A tile into shared memory
///     // See lessons/<slug>.md, section "TODO(03.2)".
/// plus its STUB lines, at the BEGIN line's indentation; never the reference's text.
/// A mutant is the reference with exactly one region rendered that way.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace gpulab::cli {

/// A malformed region (unterminated, nested, bad id): file:line and what is wrong.
struct RegionError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Region {
  std::string id;          ///< "03.2"
  std::string title;       ///< "Load the A tile into shared memory"
  std::size_t begin_line;  ///< 1-based line of BEGIN
  std::size_t end_line;    ///< 1-based line of END
  std::vector<std::string> stub;  ///< STUB lines, without the marker
};

/// Finds the regions of @p text; @p where names the file in errors. When @p lab_number is
/// given ("03"), every id must start with it.
std::vector<Region> parse_regions(const std::string& text, const std::string& where,
                                  const std::string& lab_number = "");

/// Skeleton (@p only_region empty: every region) or mutant (only that region) of @p text.
/// @p slug names the lesson file in the TODO lines.
std::string render(const std::string& text, const std::string& where, const std::string& slug,
                   const std::string& only_region = "");

}  // namespace gpulab::cli
