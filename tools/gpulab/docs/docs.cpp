/// @file docs.cpp
/// @brief Heading anchors for the Doxygen site (see docs.hpp).
#include "docs/docs.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace gpulab::cli {

std::string github_anchor(const std::string& heading) {
  std::string anchor;
  for (std::size_t i = 0; i < heading.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(heading[i]);
    if (c >= 0x80) {
      // A multi-byte UTF-8 character: GitHub keeps letters (α, β), drops symbols (→, ×, ²).
      // The Greek and Latin letters used in the lessons are 2-byte sequences (lead byte C2–CF);
      // arrows and maths symbols are 3-byte (lead E2).
      std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      if (len == 2 && c >= 0xCE) anchor += heading.substr(i, len);
      i += len - 1;
    } else if (std::isalnum(c) || c == '-' || c == '_') {
      anchor += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      anchor += '-';
    }
  }
  return anchor;
}

namespace {

/// @p code as Doxygen 1.9 shows it literally (within <code>, or as a link's text): the characters its markdown and
/// commands read each behind a backslash (its own escapes; numeric entities it shows raw; "\\_"
/// it reads as a command, and an underscore inside code never makes emphasis there), HTML's
/// as named entities, and an escaped pipe (a table cell's) kept escaped: the table reads it as
/// part of the cell, Doxygen then prints "|".
std::string literal_text(const std::string& code) {
  std::string out;
  for (std::size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '\\': out += i + 1 < code.size() && code[i + 1] == '|' ? "\\" : "\\\\"; break;
      case '*': case '[': case ']': case '#': case '@': case '$': case '%': case '-': case '"': case '`':
        out += '\\';
        out += c;
        break;
      default: out += c;
    }
  }
  return out;
}

std::string literal_code(const std::string& code) { return "<code>" + literal_text(code) + "</code>"; }

/// Where the code span opening at @p open (a backtick) closes, npos if it does not on this line.
std::size_t span_end(const std::string& line, std::size_t open) { return line.find('`', open + 1); }

/// True when @p line leaves a code span or bold open: an odd number of backticks, or of "**"
/// outside its code spans.
bool left_open(const std::string& line) {
  if (std::count(line.begin(), line.end(), '`') % 2 != 0) return true;
  int bold = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '`') {
      i = span_end(line, i);
      if (i == std::string::npos) break;
    } else if (line.compare(i, 2, "**") == 0) {
      ++bold, ++i;
    }
  }
  return bold % 2 != 0;
}

/// One line of text outside code blocks and headings (code or bold that crosses lines joined
/// into one), written so that Doxygen 1.9.4 renders what GitHub does. Seen on the site, each held
/// by docs_problems: Doxygen reads nothing inside ASCII double quotes (a code span there, or
/// after a quote that opened on an earlier line, shown with its backticks), so quotes outside code
/// become &quot;; bold closed before some punctuation ("**1.6 ms**;") or holding code shows its
/// "**", so bold is written as <b>; link text that is code shows raw (the link keeps plain text
/// or, when the site has no page for its target — a folder, a source file — becomes the code
/// alone); code with an escaped pipe in a table cell shows "\\|", and code holding an apostrophe
/// becomes a TeX quote (`--case "the ranks' ...` shown as ‘--case ...), so both are literal_code.
/// Other code spans stay as written: Doxygen reads them right.
std::string rewrite_line(const std::string& line) {
  if (std::count(line.begin(), line.end(), '`') % 2 != 0) return line;  // an unpaired backtick: as written
  std::string out;
  for (std::size_t i = 0; i < line.size();) {
    if (line[i] == '[') {
      const std::size_t text_end = line.find("](", i), stop = text_end == std::string::npos ? text_end : line.find(')', text_end);
      const std::size_t inner = line.find_first_of("[]`", i + 1);
      if (stop != std::string::npos && inner < text_end && line[inner] == '`' && line.find_first_of("[]", i + 1) == text_end) {
        const std::string text = line.substr(i + 1, text_end - i - 1), target = line.substr(text_end + 2, stop - text_end - 2);
        if (target.rfind("http", 0) == 0 || target.rfind("#", 0) == 0 || target.find(".md") != std::string::npos) {
          std::string plain = text;
          plain.erase(std::remove(plain.begin(), plain.end(), '`'), plain.end());
          out += "[" + literal_text(plain) + "](" + target + ")";
        } else {
          out += rewrite_line(text);
        }
        i = stop + 1;
        continue;
      }
    }
    if (line[i] == '`') {  // a code span passes whole (no bold, link or quote inside it)
      const std::size_t end = span_end(line, i);
      const std::string code = line.substr(i + 1, end - i - 1);
      const bool literal = (line[0] == '|' && code.find("\\|") != std::string::npos) || code.find('\'') != std::string::npos;
      out += literal ? literal_code(code) : line.substr(i, end - i + 1);
      i = end + 1;
      continue;
    }
    if (line[i] == '"') {
      out += "&quot;";
      ++i;
      continue;
    }
    if (line.compare(i, 2, "**") == 0) {
      std::size_t close = std::string::npos;
      for (std::size_t j = i + 2; j + 1 < line.size(); ++j) {
        if (line[j] == '`') {
          j = span_end(line, j);
          if (j == std::string::npos) break;
        } else if (line.compare(j, 2, "**") == 0) {
          close = j;
          break;
        }
      }
      if (close != std::string::npos) {
        out += "<b>" + rewrite_line(line.substr(i + 2, close - i - 2)) + "</b>";
        i = close + 2;
        continue;
      }
    }
    out += line[i++];
  }
  return out;
}

/// True for a line that cannot continue a paragraph (a code span never crosses it).
bool ends_paragraph(const std::string& line) {
  const std::size_t first = line.find_first_not_of(" \r");
  if (first == std::string::npos) return true;  // blank (a CRLF file's too)
  const char c = line[first];
  const std::size_t digits_end = line.find_first_not_of("0123456789", first);
  return line.compare(first, 3, "```") == 0 || line.compare(first, 3, "~~~") == 0 || c == '#' || c == '|' || c == '>' || c == '=' ||
         ((c == '-' || c == '*' || c == '+') && (line.size() == first + 1 || line[first + 1] == ' ' || line[first + 1] == c)) ||
         (digits_end > first && digits_end != std::string::npos && (line.compare(digits_end, 2, ". ") == 0 || line.compare(digits_end, 2, ") ") == 0));
}

}  // namespace

std::string doxygen_markdown(const std::string& text, const std::string& path) {
  if (path.size() < 3 || path.compare(path.size() - 3, 3, ".md") != 0) return text;
  // Doxygen's labels are global to the site: every file's anchors get its name as a prefix
  // ("07-collectives-the-lab"), and its own "(#anchor)" links are rewritten to match.
  std::string stem = path.substr(path.find_last_of('/') + 1);
  stem = "md-" + github_anchor(stem.substr(0, stem.size() - 3));  // labels must start with a letter
  std::istringstream in(text);
  std::ostringstream out;
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    const std::size_t first = line.find_first_not_of(' ');
    // A fence at any indentation (a list item's code block is indented).
    const bool fence = first != std::string::npos && (line.compare(first, 3, "```") == 0 || line.compare(first, 3, "~~~") == 0);
    if (fence) fenced = !fenced;
    // Code or bold that crosses lines: the lines joined (markdown reads the break as a space).
    const bool block_line = first != std::string::npos && (line[first] == '#' || line[first] == '|');  // a heading or a table row
    while (!fenced && !fence && !block_line && left_open(line) && in.peek() != EOF) {
      const std::streampos at = in.tellg();
      std::string next;
      std::getline(in, next);
      if (ends_paragraph(next)) {
        in.seekg(at);
        break;
      }
      line += " " + next.substr(next.find_first_not_of(' '));
    }
    if (fenced) {
      out << line << '\n';
      continue;
    }
    const std::size_t hashes = line.find_first_not_of('#');
    if (hashes >= 1 && hashes <= 6 && hashes != std::string::npos && line[hashes] == ' ' &&
        line.find("{#") == std::string::npos) {
      line += " {#" + stem + "-" + github_anchor(line.substr(hashes + 1)) + "}";
    }
    for (std::size_t at = line.find("](#"); at != std::string::npos; at = line.find("](#", at + 3)) {
      line.insert(at + 3, stem + "-");
    }
    if (hashes == 0 || hashes == std::string::npos || line[hashes] != ' ') line = rewrite_line(line);  // headings keep theirs (anchors)
    out << line << '\n';
  }
  return out.str();
}

namespace {

/// @p html without the elements from @p open up to the next @p close (both included).
std::string without(std::string html, const std::string& open, const std::string& close) {
  for (std::size_t at = html.find(open); at != std::string::npos; at = html.find(open, at)) {
    const std::size_t end = html.find(close, at);
    html.erase(at, end == std::string::npos ? std::string::npos : end + close.size() - at);
  }
  return html;
}

/// @p html's text: tags dropped, newlines as spaces.
std::string text_of(const std::string& html) {
  std::string text;
  bool tag = false;
  for (const char c : html) {
    if (c == '<') tag = true;
    else if (c == '>') tag = false;
    else if (!tag) text += c == '\n' ? ' ' : c;
  }
  return text;
}

std::string excerpt(const std::string& text, std::size_t at) {
  const std::size_t from = at > 40 ? at - 40 : 0;
  std::string e = text.substr(from, 80);
  e.erase(std::unique(e.begin(), e.end(), [](char a, char b) { return a == ' ' && b == ' '; }), e.end());
  return "\"" + e + "\"";
}

}  // namespace

std::vector<std::string> docs_problems(const std::string& page) {
  std::vector<std::string> problems;
  const std::size_t contents = page.find("<div class=\"contents\">");
  std::string html = contents == std::string::npos ? page : page.substr(contents);
  for (std::size_t at = html.find("<div class=\"fragment\">"); at != std::string::npos; at = html.find("<div class=\"fragment\">", at + 1)) {
    const std::string block = html.substr(at, html.find("<!-- fragment -->", at) - at);
    if (block.find("class=\"line\"") == std::string::npos) problems.push_back("a code block rendered empty (its lines joined onto the fence?)");
  }
  if (html.find("&amp;quot;") != std::string::npos || html.find("&amp;lt;") != std::string::npos) {
    problems.push_back("an entity shown raw: " + excerpt(text_of(html), text_of(html).find("&amp;")));
  }
  html = without(html, "<div class=\"fragment\">", "<!-- fragment -->");
  html = without(html, "<pre", "</pre>");
  html = without(html, "<script", "</script>");
  for (std::size_t at = html.find("<blockquote"); at != std::string::npos; at = html.find("<blockquote", at + 1)) {
    const std::string quote = text_of(html.substr(at, html.find("</blockquote>", at) - at));
    if (quote.find("Key concepts") == std::string::npos) problems.push_back("a block quote (a line began with \">\"): " + excerpt(quote, 0));
  }
  for (std::size_t at = html.find("<code>"); at != std::string::npos; at = html.find("<code>", at)) {
    const std::size_t end = html.find("</code>", at);
    const std::string code = html.substr(at, end == std::string::npos ? std::string::npos : end + 7 - at);
    if (code.find("&amp;#") != std::string::npos) problems.push_back("an entity shown raw in code: " + excerpt(text_of(code), 0));
    if (code.find("<em>") != std::string::npos || code.find("<b>") != std::string::npos || code.find("<strong>") != std::string::npos) {
      problems.push_back("emphasis made of code's characters: " + excerpt(text_of(code), 0));
    }
    if (code.find("&ndash;") != std::string::npos || code.find("&mdash;") != std::string::npos) {
      problems.push_back("a dash made typographic in code (-- shown as a dash): " + excerpt(text_of(code), 0));
    }
    html.replace(at, code.size(), "‹code›");  // so that an excerpt still reads
  }
  const std::string text = text_of(html);
  for (const char* raw : {"`", "**", "]("}) {
    const std::size_t size = std::char_traits<char>::length(raw);
    for (std::size_t at = text.find(raw); at != std::string::npos; at = text.find(raw, at + size)) {
      problems.push_back(std::string("markdown shown raw (") + raw + "): " + excerpt(text, at));
    }
  }
  return problems;
}

}  // namespace gpulab::cli
