/// @file plot_serving.cpp
/// @brief The serving chart (see plot.hpp): a scheduler's steps on lab 12's cost model — rows
/// and requests per step above, blocks in use below — yours and the rules' on one clock, so that
/// continuous batching's filling of the budget and the cache, and a policy's preemptions, show.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "plot/plot.hpp"
#include "plot/svg.hpp"

namespace gpulab::cli {
namespace {

/// The first record that carries a "serving" object, in any check's records.
nlohmann::json find_serving(const nlohmann::json& scorecard) {
  if (!scorecard.is_object() || !scorecard.contains("checks") || !scorecard["checks"].is_array()) return nullptr;
  for (const auto& c : scorecard["checks"]) {
    if (!c.is_object() || !c.contains("data") || !c["data"].is_object() || !c["data"].contains("records")) continue;
    for (const auto& r : c["data"]["records"]) {
      if (r.is_object() && r.contains("serving") && r["serving"].is_object()) return r["serving"];
    }
  }
  return nullptr;
}

std::vector<double> numbers(const nlohmann::json& j, const char* key) {
  std::vector<double> v;
  if (!j.is_object() || !j.contains(key) || !j[key].is_array()) return v;
  for (const auto& x : j[key]) v.push_back(x.is_number() ? x.get<double>() : 0.0);
  return v;
}

}  // namespace

std::string serving_svg(const nlohmann::json& scorecard) {
  const nlohmann::json s = find_serving(scorecard);
  if (!s.is_object() || !s.contains("series") || !s["series"].is_array() || s["series"].empty()) return "";
  const double budget = s.value("token_budget", 0.0), blocks = s.value("blocks", 0.0);
  double t_max = 0.0, rows_max = std::max(1.0, budget);
  for (const auto& line : s["series"]) {
    for (const double t : numbers(line, "time_s")) t_max = std::max(t_max, t);
    for (const double r : numbers(line, "rows")) rows_max = std::max(rows_max, r);
  }
  if (t_max <= 0.0) return "";
  const double width = 760, left = 70, right = 20, panel = 170, gap = 60, top = 92;
  const double height = top + 2 * panel + gap + 50;
  const char* colours[] = {"#1f6fb4", "#9a9a9a", "#2ca02c", "#d62728"};
  auto X = [&](double t) { return left + t / t_max * (width - left - right); };
  std::ostringstream svg;
  svg << R"(<svg xmlns="http://www.w3.org/2000/svg" width=")" << width << R"(" height=")" << height
      << R"(" font-family="sans-serif" font-size="12">)" << '\n'
      << R"(<rect width="100%" height="100%" fill="white"/>)" << '\n'
      << R"(<text x=")" << left << R"(" y="22" font-size="16" font-weight="bold">)"
      << escape("gpulab — lab " + s.value("lab", std::string("12")) + ": continuous batching, step by step") << "</text>\n"
      << R"(<text x=")" << left << R"(" y="40" fill="#555">)" << escape(s.value("title", std::string())) << "</text>\n";
  double legend_x = left;
  std::size_t k = 0;
  for (const auto& line : s["series"]) {
    const std::string name = line.value("name", std::string("?"));
    svg << R"(<rect x=")" << num(legend_x) << R"(" y="56" width="14" height="4" fill=")" << colours[k % 4] << R"("/>)"
        << R"(<text x=")" << num(legend_x + 18) << R"(" y="62">)" << escape(name) << "</text>\n";
    legend_x += 30 + 7.0 * static_cast<double>(name.size());
    ++k;
  }
  // Two panels: rows per step (the budget dashed; requests per step thin), then blocks in use.
  struct Panel {
    const char* key;
    const char* title;
    double y_max, limit;
    const char* limit_label;
  };
  const Panel panels[] = {{"rows", "rows per step (thin: requests in the step)", rows_max * 1.05, budget, "token budget"},
                          {"blocks", "blocks in use after each step", std::max(1.0, blocks) * 1.05, blocks, "the cache"}};
  for (int p = 0; p < 2; ++p) {
    const Panel& pn = panels[p];
    const double y0 = top + p * (panel + gap), y1 = y0 + panel;
    auto Y = [&](double v) { return y1 - v / pn.y_max * panel; };
    svg << R"(<text x=")" << left << R"(" y=")" << num(y0 - 6) << R"(" font-weight="bold">)" << escape(pn.title) << "</text>\n"
        << R"(<rect x=")" << left << R"(" y=")" << num(y0) << R"(" width=")" << num(width - left - right) << R"(" height=")" << panel
        << R"(" fill="none" stroke="#ccc"/>)" << '\n';
    for (int g = 0; g <= 4; ++g) {
      const double v = pn.y_max / 1.05 * g / 4;
      svg << R"(<text x=")" << left - 6 << R"(" y=")" << num(Y(v) + 4) << R"(" text-anchor="end" fill="#666">)" << num(v, 0) << "</text>\n";
    }
    if (pn.limit > 0) {
      svg << R"(<line x1=")" << left << R"(" y1=")" << num(Y(pn.limit)) << R"(" x2=")" << num(width - right) << R"(" y2=")" << num(Y(pn.limit))
          << R"(" stroke="#d62728" stroke-dasharray="4,3"/>)" << R"(<text x=")" << num(width - right - 4) << R"(" y=")" << num(Y(pn.limit) - 4)
          << R"(" text-anchor="end" fill="#d62728">)" << escape(pn.limit_label) << "</text>\n";
    }
    // The last series first, so that the first (yours) is drawn on top where the lines coincide.
    for (std::size_t idx = s["series"].size(); idx-- > 0;) {
      const nlohmann::json& line = s["series"][idx];
      k = idx;
      const std::vector<double> t = numbers(line, "time_s"), v = numbers(line, pn.key), req = numbers(line, "requests");
      std::ostringstream pts, thin;
      for (std::size_t i = 0; i < std::min(t.size(), v.size()); ++i) pts << num(X(t[i])) << ',' << num(Y(v[i])) << ' ';
      for (std::size_t i = 0; p == 0 && i < std::min(t.size(), req.size()); ++i) thin << num(X(t[i])) << ',' << num(Y(req[i])) << ' ';
      svg << R"(<polyline fill="none" stroke=")" << colours[k % 4] << R"(" stroke-width="1.5" points=")" << pts.str() << R"("/>)" << '\n';
      if (p == 0) svg << R"(<polyline fill="none" stroke=")" << colours[k % 4] << R"(" stroke-width="0.7" opacity="0.7" points=")" << thin.str() << R"("/>)" << '\n';
    }
  }
  for (int g = 0; g <= 5; ++g) {
    const double t = t_max * g / 5;
    svg << R"(<text x=")" << num(X(t)) << R"(" y=")" << num(height - 26) << R"(" text-anchor="middle" fill="#666">)" << num(t, 1) << "</text>\n";
  }
  svg << R"(<text x=")" << num((left + width - right) / 2) << R"(" y=")" << num(height - 8)
      << R"(" text-anchor="middle">seconds on the cost model's clock</text>)" << '\n'
      << "</svg>\n";
  return svg.str();
}

}  // namespace gpulab::cli
