/// @file plot.cpp
/// @brief SVG ladder and roofline charts (see plot.hpp).
#include "plot/plot.hpp"

#include "plot/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

namespace gpulab::cli {
namespace {

/// A scorecard from a machine without a GPU has checks whose fields are null: read what is there.
nlohmann::json object_of(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_object() ? j[key] : nlohmann::json::object();
}
double number(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}
nlohmann::json checks_of(const nlohmann::json& scorecard) {
  return scorecard.is_object() && scorecard.contains("checks") && scorecard["checks"].is_array() ? scorecard["checks"] : nlohmann::json::array();
}
std::string text(const nlohmann::json& j, const char* key, const std::string& fallback) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}


const char* kLearner = "#1f6fb4";
const char* kReference = "#9a9a9a";
const char* kThreshold = "#d62728";

struct Bar {
  std::string label;
  double percent;
  const char* colour;
};

struct Group {
  std::string title;
  std::vector<Bar> bars;
  double threshold_percent = -1.0;
  bool passed = true;
};

std::vector<Group> groups_of(const nlohmann::json& scorecard) {
  std::vector<Group> groups;
  for (const auto& c : checks_of(scorecard)) {
    if (text(c, "kind", "") != "performance" || text(c, "status", "") == "not-run") continue;
    const nlohmann::json d = object_of(c, "data");
    if (!d.contains("learner_fraction")) continue;
    const bool reference_run = text(d, "variant", "") == "ref";
    const double base = number(d, "baseline_value");
    Group g;
    g.title = text(c, "name", "?") + " (% of " + text(d, "baseline_name", "baseline") + ")";
    g.passed = text(c, "status", "") == "pass";
    auto add_rungs = [&](const char* key, const char* who, const char* colour) {
      if (!d.contains(key) || base <= 0) return false;
      // Rungs in ladder order: a list of [name, value] pairs (an object would come back sorted).
      for (const auto& rung : d[key]) {
        if (rung.is_array() && rung.size() == 2) {
          g.bars.push_back({std::string(who) + " " + rung[0].get<std::string>(), 100.0 * rung[1].get<double>() / base, colour});
        }
      }
      return true;
    };
    if (!add_rungs("learner_rungs", reference_run ? "reference" : "yours", reference_run ? kReference : kLearner)) {
      g.bars.push_back({reference_run ? "reference" : "yours", 100.0 * number(d, "learner_fraction"),
                        reference_run ? kReference : kLearner});
    }
    if (!reference_run && !add_rungs("reference_rungs", "reference", kReference)) {
      g.bars.push_back({"reference", 100.0 * number(d, "reference_fraction"), kReference});
    }
    const double t = number(d, "threshold");
    if (t > 0) g.threshold_percent = 100.0 * (reference_run ? t : t * number(d, "reference_fraction"));
    groups.push_back(g);
  }
  return groups;
}

}  // namespace

std::string ladder_svg(const nlohmann::json& scorecard) {
  const std::vector<Group> groups = groups_of(scorecard);
  if (groups.empty()) return "";
  const double label_w = 170, bar_w = 460, row_h = 20, gap = 34, left = 16, top = 56;
  double max_percent = 120;
  int rows = 0;
  for (const auto& g : groups) {
    rows += static_cast<int>(g.bars.size());
    for (const auto& b : g.bars) max_percent = std::max(max_percent, b.percent * 1.05);
  }
  const double height = top + rows * row_h + groups.size() * gap + 30;
  const double width = left + label_w + bar_w + 90;
  auto x_of = [&](double percent) { return left + label_w + bar_w * percent / max_percent; };
  std::ostringstream svg;
  svg << R"(<svg xmlns="http://www.w3.org/2000/svg" width=")" << num(width, 0) << R"(" height=")" << num(height, 0)
      << R"(" font-family="sans-serif" font-size="12">)" << '\n'
      << R"(<rect width="100%" height="100%" fill="white"/>)" << '\n'
      << R"(<text x=")" << left << R"(" y="22" font-size="16" font-weight="bold">)"
      << escape("gpulab — lab " + text(scorecard, "lab", "?") + ": performance") << "</text>\n"
      << R"(<text x=")" << left << R"(" y="40" fill="#555">)"
      << escape("each bar: bandwidth or throughput as a % of the baseline measured in the same run; red: the threshold")
      << "</text>\n";
  // Gridlines every 20 %.
  for (double p = 0; p <= max_percent; p += 20) {
    svg << R"(<line x1=")" << num(x_of(p)) << R"(" y1=")" << top - 6 << R"(" x2=")" << num(x_of(p)) << R"(" y2=")"
        << num(height - 24) << R"(" stroke="#e5e5e5"/>)" << R"(<text x=")" << num(x_of(p)) << R"(" y=")" << num(height - 10)
        << R"(" text-anchor="middle" fill="#777">)" << num(p, 0) << "%</text>\n";
  }
  double y = top;
  for (const auto& g : groups) {
    svg << R"(<text x=")" << left << R"(" y=")" << num(y + 4) << R"(" font-weight="bold" fill=")"
        << (g.passed ? "#222" : kThreshold) << R"(">)" << escape(g.title + (g.passed ? "" : "  — FAIL")) << "</text>\n";
    y += 10;
    const double group_top = y;
    for (const auto& b : g.bars) {
      svg << R"(<text x=")" << left + label_w - 6 << R"(" y=")" << num(y + row_h * 0.7) << R"(" text-anchor="end">)"
          << escape(b.label) << "</text>"
          << R"(<rect x=")" << num(x_of(0)) << R"(" y=")" << num(y + 2) << R"(" width=")" << num(x_of(b.percent) - x_of(0))
          << R"(" height=")" << num(row_h - 4) << R"(" fill=")" << b.colour << R"("/>)"
          << R"(<text x=")" << num(x_of(b.percent) + 4) << R"(" y=")" << num(y + row_h * 0.7) << R"(">)"
          // A rung recorded as 0 was wrong (or not measured): say so rather than draw "0.0%".
          << (b.percent > 0 ? num(b.percent) + "%" : std::string("wrong or not measured")) << "</text>\n";
      y += row_h;
    }
    if (g.threshold_percent >= 0) {
      svg << R"(<line x1=")" << num(x_of(g.threshold_percent)) << R"(" y1=")" << num(group_top) << R"(" x2=")"
          << num(x_of(g.threshold_percent)) << R"(" y2=")" << num(y) << R"(" stroke=")" << kThreshold
          << R"(" stroke-width="2" stroke-dasharray="4,2"/>)" << '\n';
    }
    y += gap - 10;
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string roofline_svg(const nlohmann::json& scorecard) {
  struct Point {
    std::string label;
    double intensity, gflops;
    const char* colour;
  };
  std::vector<Point> points;
  double bandwidth = 0, peak = 0, max_intensity = 0;
  for (const auto& c : checks_of(scorecard)) {
    if (text(c, "kind", "") != "performance") continue;
    const nlohmann::json d = object_of(c, "data");
    const double ai = number(d, "flops_per_byte");
    if (ai <= 0 || number(d, "peak_gflops") <= 0 || !d.contains("learner_value")) continue;
    peak = std::max(peak, number(d, "peak_gflops"));
    // A figure in GFLOP/s is placed as it is; one in GB/s is turned into GFLOP/s by the intensity.
    // The slope: the measured copy bandwidth if recorded, else a bandwidth baseline.
    const bool in_flops = text(d, "unit", "").find("FLOP/s") != std::string::npos;
    const double flops_per_value = in_flops ? 1.0 : ai;
    if (number(d, "peak_gbs") > 0) {
      bandwidth = std::max(bandwidth, number(d, "peak_gbs"));
    } else if (!in_flops) {
      bandwidth = std::max(bandwidth, number(d, "baseline_value"));
    }
    max_intensity = std::max(max_intensity, ai);
    const bool reference_run = text(d, "variant", "") == "ref";
    const std::string name = text(c, "name", "?");
    points.push_back({name + (reference_run ? " (reference)" : " (yours)"), ai, flops_per_value * number(d, "learner_value"),
                      reference_run ? kReference : kLearner});
    if (!reference_run && d.contains("reference_value")) {
      points.push_back({name + " (reference)", ai, flops_per_value * number(d, "reference_value"), kReference});
    }
  }
  if (points.empty() || bandwidth <= 0) return "";
  const double width = 720, height = 460, left = 70, right = 20, top = 50, bottom = 50;
  const double x_min = std::log10(1.0 / 64), x_max = std::ceil(std::log10(std::max(256.0, 2 * max_intensity)));
  const double y_max = std::ceil(std::log10(peak * 2));
  const double y_min = std::floor(std::log10(std::min(bandwidth * std::pow(10, x_min), points.front().gflops) / 2));
  auto X = [&](double ai) { return left + (std::log10(ai) - x_min) / (x_max - x_min) * (width - left - right); };
  auto Y = [&](double g) { return height - bottom - (std::log10(g) - y_min) / (y_max - y_min) * (height - top - bottom); };
  const double ridge = peak / bandwidth;
  std::ostringstream svg;
  svg << R"(<svg xmlns="http://www.w3.org/2000/svg" width=")" << width << R"(" height=")" << height
      << R"(" font-family="sans-serif" font-size="12">)" << '\n'
      << R"(<rect width="100%" height="100%" fill="white"/>)" << '\n'
      << R"(<text x=")" << left << R"(" y="24" font-size="16" font-weight="bold">)"
      << escape("Roofline — lab " + text(scorecard, "lab", "?") + " (fp32, no tensor cores)") << "</text>\n";
  for (double e = std::ceil(x_min); e <= x_max; e += 1) {
    svg << R"(<line x1=")" << num(X(std::pow(10, e))) << R"(" y1=")" << top << R"(" x2=")" << num(X(std::pow(10, e)))
        << R"(" y2=")" << height - bottom << R"(" stroke="#eee"/>)" << R"(<text x=")" << num(X(std::pow(10, e))) << R"(" y=")"
        << height - bottom + 16 << R"(" text-anchor="middle" fill="#666">)" << escape(num(std::pow(10, e), e < 0 ? 2 : 0))
        << "</text>\n";
  }
  for (double e = y_min; e <= y_max; e += 1) {
    svg << R"(<line x1=")" << left << R"(" y1=")" << num(Y(std::pow(10, e))) << R"(" x2=")" << width - right << R"(" y2=")"
        << num(Y(std::pow(10, e))) << R"(" stroke="#eee"/>)" << R"(<text x=")" << left - 6 << R"(" y=")"
        << num(Y(std::pow(10, e)) + 4) << R"(" text-anchor="end" fill="#666">1e)" << num(e, 0) << "</text>\n";
  }
  svg << R"(<text x=")" << num((left + width - right) / 2) << R"(" y=")" << height - 12
      << R"(" text-anchor="middle">arithmetic intensity (FLOP per byte)</text>)" << '\n'
      << R"(<text x="16" y=")" << num((top + height - bottom) / 2) << R"(" transform="rotate(-90 16 )"
      << num((top + height - bottom) / 2) << R"svg()" text-anchor="middle">GFLOP/s</text>)svg" << '\n';
  // Ceilings: bandwidth slope up to the ridge point, then the compute peak.
  const double x0 = std::pow(10, x_min), x1 = std::pow(10, x_max);
  svg << R"(<polyline fill="none" stroke="#222" stroke-width="2" points=")" << num(X(x0)) << ',' << num(Y(x0 * bandwidth)) << ' '
      << num(X(ridge)) << ',' << num(Y(peak)) << ' ' << num(X(x1)) << ',' << num(Y(peak)) << R"("/>)" << '\n'
      << R"(<text x=")" << num(width - right) << R"(" y=")" << num(Y(peak) - 6) << R"(" text-anchor="end">)"
      << escape("fp32 peak " + num(peak / 1000, 1) + " TFLOP/s · ridge " + num(ridge, 1) + " FLOP/B") << "</text>\n"
      << R"(<text x=")" << num(X(x0) + 6) << R"(" y=")" << num(Y(x0 * bandwidth) - 8) << R"(" transform="rotate(-33 )"
      << num(X(x0) + 6) << ' ' << num(Y(x0 * bandwidth) - 8) << R"svg()">)svg" << escape("memcpy " + num(bandwidth, 0) + " GB/s")
      << "</text>\n";
  double label_y = top + 16;
  for (const auto& p : points) {
    svg << R"(<circle cx=")" << num(X(p.intensity)) << R"(" cy=")" << num(Y(p.gflops)) << R"(" r="5" fill=")" << p.colour
        << R"("/>)" << R"(<text x=")" << left + 10 << R"(" y=")" << num(label_y) << R"(" fill=")" << p.colour << R"(">● )"
        << escape(p.label + ": " + num(p.gflops, 0) + " GFLOP/s at " + num(p.intensity, 3) + " FLOP/B") << "</text>\n";
    label_y += 16;
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace gpulab::cli
