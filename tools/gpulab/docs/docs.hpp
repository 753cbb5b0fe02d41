/// @file docs.hpp
/// @brief Markdown as GitHub shows it, made readable by Doxygen 1.9 (the docs site).
#pragma once

#include <string>

namespace gpulab::cli {

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
std::string github_anchor(const std::string& heading);

/// For a .md file: every heading gets an explicit `{#anchor}` (GitHub's), so that the lessons'
/// `[text](#anchor)` links resolve in Doxygen as they do on GitHub. Other files pass unchanged.
std::string doxygen_markdown(const std::string& text, const std::string& path);

}  // namespace gpulab::cli
