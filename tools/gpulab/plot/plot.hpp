/// @file plot.hpp
/// @brief SVG charts from a scorecard (the JSON of `gpulab grade --json`): no plotting library,
/// no runtime dependency; open them in any browser.
///
/// - ladder: every performance check as a percentage of its baseline (cudaMemcpy, the library),
///   yours beside the reference's, the threshold marked; laddered checks show every rung.
/// - roofline: the checks whose arithmetic intensity is known, under the measured bandwidth slope
///   and the device's fp32 peak (log-log).
/// - timeline: a distributed step's compute and communication per rank (plot_timeline.cpp).
/// - serving: a scheduler's steps on lab 12's cost model, rows and blocks in use (plot_serving.cpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gpulab::cli {

/// The ladder chart; "" when the scorecard has no measured performance check.
std::string ladder_svg(const nlohmann::json& scorecard);
/// The roofline; "" when no check records its arithmetic intensity and the device's peak.
std::string roofline_svg(const nlohmann::json& scorecard);
/// The timeline of one distributed step; "" when no check carries one (a performance record's
/// "timeline": {"ranks": [[{"what", "start_ms", "end_ms"}, ...], ...]}).
std::string timeline_svg(const nlohmann::json& scorecard);
/// The serving chart; "" when no check's records carry one (a record's "serving": {"title",
/// "token_budget", "blocks", "series": [{"name", "time_s", "rows", "requests", "blocks"}, ...]}).
std::string serving_svg(const nlohmann::json& scorecard);

}  // namespace gpulab::cli
