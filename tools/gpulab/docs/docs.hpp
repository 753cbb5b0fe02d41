/// @file docs.hpp
/// @brief Markdown as GitHub shows it, made readable by Doxygen 1.9 (the docs site).
#pragma once

#include <string>
#include <vector>

namespace gpulab::cli {

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
std::string github_anchor(const std::string& heading);

/// For a .md file: every heading gets an explicit `{#anchor}` (GitHub's), so that the lessons'
/// `[text](#anchor)` links resolve in Doxygen as they do on GitHub. Other files pass unchanged.
std::string doxygen_markdown(const std::string& text, const std::string& path);

/// What a page of the built site shows that its markdown did not mean, one line each with an
/// excerpt: markdown left raw in the text (a backtick, "**", "]("), a numeric entity or a
/// typographic dash inside code, a block quote other than the lesson's "Key concepts" box (a
/// line that began with ">" by accident). @p html is a Doxygen page; only its contents are read,
/// code blocks skipped.
std::vector<std::string> docs_problems(const std::string& html);

}  // namespace gpulab::cli
