/// @file plot_timeline.cpp
/// @brief The timeline chart of a distributed step (see plot.hpp): one band per rank, compute
/// (forward, backward) above, communication (a bucket's all-reduce, a receive waited for, a unit's
/// all-gather or reduce-scatter) below,
/// on one time axis; a timeline of several panels (lab 09: GPipe and 1F1B) draws them one above
/// the other on the same axis, so that their bubbles compare at a glance.
#include <algorithm>
#include <sstream>
#include <string>

#include "plot/plot.hpp"
#include "plot/svg.hpp"

namespace gpulab::cli {
namespace {

/// The first check that carries a timeline: which side's ("learner" before "reference") and
/// whose code that was ("yours", or "the reference" when the reference itself was graded), as
/// panels [{"title", "ranks"}].
nlohmann::json find_timeline(const nlohmann::json& scorecard, std::string& side, std::string& whose) {
  if (!scorecard.is_object() || !scorecard.contains("checks") || !scorecard["checks"].is_array()) return nullptr;
  for (const char* s : {"learner", "reference"}) {
    for (const auto& c : scorecard["checks"]) {
      const nlohmann::json data = c.is_object() && c.contains("data") ? c["data"] : nlohmann::json();
      const std::string key = std::string(s) + "_timeline";
      if (!data.is_object() || !data.contains(key) || !data[key].is_object()) continue;
      const nlohmann::json& t = data[key];
      nlohmann::json panels = t.contains("panels") && t["panels"].is_array() ? t["panels"] : nlohmann::json::array();
      if (panels.empty() && t.contains("ranks")) panels.push_back({{"title", ""}, {"ranks", t["ranks"]}});
      if (panels.empty()) continue;
      side = s;
      whose = side == "learner" && data.value("variant", std::string()) != "ref" ? "yours" : "the reference";
      return panels;
    }
  }
  return nullptr;
}

const char* colour_of(const std::string& what) {
  if (what == "forward") return "#8fb8de";
  if (what == "backward") return "#1f6fb4";
  if (what == "recv wait") return "#b0b0b0";
  if (what.rfind("all-gather", 0) == 0) return "#59a14f";      // a unit's gather (lab 11)
  if (what.rfind("reduce-scatter", 0) == 0) return "#b07aa1";  // a unit's gradient leaving (lab 11)
  return "#f28e2b";  // a bucket's all-reduce
}

}  // namespace

std::string timeline_svg(const nlohmann::json& scorecard) {
  std::string side, whose;
  const nlohmann::json panels = find_timeline(scorecard, side, whose);
  if (!panels.is_array() || panels.empty()) return "";
  double end = 0.0;
  std::size_t lanes = 0;
  for (const auto& panel : panels) {
    if (!panel.contains("ranks") || !panel["ranks"].is_array()) return "";
    lanes += panel["ranks"].size();
    for (const auto& lane : panel["ranks"]) {
      for (const auto& i : lane) end = std::max(end, i.value("end_ms", 0.0));
    }
  }
  if (end <= 0.0 || lanes == 0) return "";
  // The legend names only what this timeline holds (lab 08 has all-reduces, lab 09 receives, lab 11
  // gathers and reduce-scatters).
  bool any_reduce = false, any_wait = false, any_micro = false, any_unit = false, any_gather = false, any_scatter = false;
  for (const auto& panel : panels) {
    for (const auto& lane : panel["ranks"]) {
      for (const auto& i : lane) {
        const std::string what = i.value("what", std::string());
        any_wait = any_wait || what == "recv wait";
        const bool gather = what.rfind("all-gather", 0) == 0, scatter = what.rfind("reduce-scatter", 0) == 0;
        any_gather = any_gather || gather;
        any_scatter = any_scatter || scatter;
        any_reduce = any_reduce || (what != "recv wait" && what != "forward" && what != "backward" && !gather && !scatter);
        any_micro = any_micro || i.contains("micro");
        any_unit = any_unit || i.contains("unit");
      }
    }
  }
  std::string communication;
  if (any_reduce) communication = "orange, an all-reduce";
  if (any_wait) communication += std::string(communication.empty() ? "" : "; ") + "grey, a receive waited for";
  if (any_gather) communication += std::string(communication.empty() ? "" : "; ") + "green, a unit's all-gather";
  if (any_scatter) communication += std::string(communication.empty() ? "" : "; ") + "purple, a unit's reduce-scatter";
  const double left = 70, width = 640, band = 46, top = communication.empty() ? 60 : 76, title = 22;
  const double height = top + band * static_cast<double>(lanes) + title * static_cast<double>(panels.size()) + 40;
  auto x_of = [&](double ms) { return left + width * ms / end; };
  std::ostringstream svg;
  svg << R"(<svg xmlns="http://www.w3.org/2000/svg" width=")" << num(left + width + 30, 0) << R"(" height=")" << num(height, 0)
      << R"(" font-family="sans-serif" font-size="12">)" << '\n'
      << R"(<rect width="100%" height="100%" fill="white"/>)" << '\n'
      << R"(<text x="16" y="22" font-size="16" font-weight="bold">)"
      << escape("gpulab — lab " + scorecard.value("lab", std::string("?")) + ": one step, " + whose) << "</text>\n"
      << R"(<text x="16" y="40" fill="#555">)"
      << escape(std::string("per rank: forward (light) and backward (dark) above") + (any_micro ? ", numbered by micro-batch" : any_unit ? ", numbered by unit" : "") + "; white: idle")
      << "</text>\n";
  if (!communication.empty()) svg << R"(<text x="16" y="56" fill="#555">)" << escape("communication below: " + communication) << "</text>\n";
  const double tick = std::max(0.1, end / 8);
  for (double ms = 0; ms <= end + 1e-9; ms += tick) {
    // The last label ends at the axis's end instead of running past the picture's edge.
    const bool last = ms + tick > end + 1e-9;
    svg << R"(<line x1=")" << num(x_of(ms)) << R"(" y1=")" << num(top - 6) << R"(" x2=")" << num(x_of(ms)) << R"(" y2=")" << num(height - 30)
        << R"(" stroke="#e5e5e5"/><text x=")" << num(x_of(ms)) << R"(" y=")" << num(height - 16) << R"(" text-anchor=")" << (last ? "end" : "middle")
        << R"(" fill="#777">)" << num(ms, 2) << " ms</text>\n";
  }
  double y = top;
  for (const auto& panel : panels) {
    const std::string name = panel.value("title", std::string());
    if (!name.empty()) {
      svg << R"(<text x="16" y=")" << num(y + 14) << R"(" font-weight="bold">)" << escape(name) << "</text>\n";
      y += title;
    }
    const nlohmann::json& ranks = panel["ranks"];
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      svg << R"(<text x="16" y=")" << num(y + band * 0.45) << R"(">rank )" << r << "</text>\n";
      for (const auto& i : ranks[r]) {
        const std::string what = i.value("what", std::string("?"));
        const bool compute = what == "forward" || what == "backward";
        const double x0 = x_of(i.value("start_ms", 0.0)), x1 = std::max(x0 + 1.0, x_of(i.value("end_ms", 0.0)));
        const double row = compute ? y : y + band * 0.45;
        svg << R"(<rect x=")" << num(x0) << R"(" y=")" << num(row) << R"(" width=")" << num(x1 - x0) << R"(" height=")" << num(band * 0.38)
            << R"(" fill=")" << colour_of(what) << R"(" stroke="white"><title>)" << escape(what + (i.contains("micro") ? " " + std::to_string(i.value("micro", 0)) : i.contains("unit") ? " " + std::to_string(i.value("unit", 0)) : std::string())) << "</title></rect>";
        if (!compute && x1 - x0 > 7.0 * static_cast<double>(what.size())) {
          svg << R"(<text x=")" << num(x0 + 3) << R"(" y=")" << num(row + band * 0.28) << R"(" fill="white">)" << escape(what) << "</text>";
        }
        if (compute && (i.contains("micro") || i.contains("unit"))) {
          const std::string label = std::to_string(i.contains("micro") ? i.value("micro", 0) : i.value("unit", 0));
          if (x1 - x0 > 7.0 * static_cast<double>(label.size()) + 2) {
            svg << R"(<text x=")" << num((x0 + x1) / 2) << R"(" y=")" << num(row + band * 0.28) << R"(" text-anchor="middle" fill=")"
                << (what == "forward" ? "#102a43" : "white") << R"(">)" << label << "</text>";
          }
        }
        svg << '\n';
      }
      y += band;
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace gpulab::cli
