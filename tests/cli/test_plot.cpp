/// @file test_plot.cpp
/// @brief SVG charts from recorded scorecards.
#include <catch2/catch.hpp>

#include "plot/plot.hpp"

namespace {
nlohmann::json scorecard() {
  return nlohmann::json::parse(R"({"lab": "01-hello-kernel", "checks": [
    {"name": "compile", "kind": "build", "status": "pass", "data": {}},
    {"name": "vector_add bandwidth", "kind": "performance", "status": "pass",
     "data": {"variant": "lab", "learner_fraction": 0.81, "reference_fraction": 0.97, "threshold": 0.6,
              "learner_value": 3460, "reference_value": 4140, "baseline_value": 4270, "baseline_name": "D2D <cudaMemcpy>",
              "flops_per_byte": 0.0833, "peak_gflops": 66900}},
    {"name": "transpose bandwidth", "kind": "performance", "status": "fail",
     "data": {"variant": "lab", "learner_fraction": 0.30, "reference_fraction": 0.83, "threshold": 0.6,
              "learner_value": 1280, "reference_value": 3540, "baseline_value": 4270, "baseline_name": "D2D cudaMemcpy",
              "learner_rungs": [["naive", 555], ["tiled", 1280], ["padded", 1280]]}},
    {"name": "saxpy bandwidth", "kind": "performance", "status": "not-run", "data": {}}]})");
}
}  // namespace

TEST_CASE("the ladder chart shows every measured check against its baseline", "[cpu]") {
  const std::string svg = gpulab::cli::ladder_svg(scorecard());
  REQUIRE(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("vector_add bandwidth (% of D2D &lt;cudaMemcpy&gt;)") != std::string::npos);  // escaped
  CHECK(svg.find(">81.0%<") != std::string::npos);   // yours
  CHECK(svg.find(">97.0%<") != std::string::npos);   // reference
  CHECK(svg.find("yours naive") != std::string::npos);  // rungs of a laddered check, in order
  CHECK(svg.find("yours naive") < svg.find("yours tiled"));
  CHECK(svg.find("yours tiled") < svg.find("yours padded"));
  CHECK(svg.find("— FAIL") != std::string::npos);
  CHECK(svg.find("saxpy") == std::string::npos);  // not run: not drawn
  CHECK(gpulab::cli::ladder_svg(nlohmann::json::parse(R"({"checks": []})")).empty());
}

TEST_CASE("the roofline places kernels under the bandwidth slope", "[cpu]") {
  const std::string svg = gpulab::cli::roofline_svg(scorecard());
  REQUIRE(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("<polyline") != std::string::npos);
  CHECK(svg.find("fp32 peak 66.9 TFLOP/s") != std::string::npos);
  CHECK(svg.find("vector_add bandwidth (yours): 288 GFLOP/s") != std::string::npos);  // 0.0833 × 3460
  CHECK(svg.find("transpose") == std::string::npos);  // no intensity recorded: not placed
  CHECK(gpulab::cli::roofline_svg(nlohmann::json::parse(R"({"checks": []})")).empty());
}

TEST_CASE("the roofline places a GEMM by its GFLOP/s under the measured peaks", "[cpu]") {
  // Lab 03 records GFLOP/s against cuBLAS: the point is the figure itself (not intensity times
  // it), the slope is the measured copy bandwidth, and the axis reaches its intensity (683).
  const auto card = nlohmann::json::parse(R"({"lab": "03-tiled-gemm", "checks": [
    {"name": "sgemm v5 2D registers speed", "kind": "performance", "status": "pass",
     "data": {"variant": "lab", "unit": "GFLOP/s", "learner_value": 30000, "reference_value": 35000,
              "baseline_value": 51000, "flops_per_byte": 682.7, "peak_gflops": 65000, "peak_gbs": 4270}}]})");
  const std::string svg = gpulab::cli::roofline_svg(card);
  REQUIRE(!svg.empty());
  CHECK(svg.find("sgemm v5 2D registers speed (yours): 30000 GFLOP/s") != std::string::npos);
  CHECK(svg.find("ridge 15.2 FLOP/B") != std::string::npos);  // 65000 / 4270
  CHECK(svg.find(">1000<") != std::string::npos);  // the axis reaches 10^3
}

TEST_CASE("a rung recorded as zero reads as wrong in the ladder", "[cpu]") {
  const auto card = nlohmann::json::parse(R"({"lab": "03-tiled-gemm", "checks": [
    {"name": "sgemm v5 2D registers speed", "kind": "performance", "status": "pass",
     "data": {"variant": "ref", "unit": "GFLOP/s", "learner_fraction": 0.69, "baseline_value": 51000,
              "baseline_name": "cuBLAS", "learner_rungs": [["v5 2D registers", 35000], ["v6 warp tile", 0]]}}]})");
  const std::string svg = gpulab::cli::ladder_svg(card);
  CHECK(svg.find(">68.6%<") != std::string::npos);
  CHECK(svg.find(">wrong or not measured<") != std::string::npos);
}

TEST_CASE("a scorecard from a machine without a GPU plots what there is and never throws", "[cpu]") {
  // As grade --json writes it without a GPU: performance checks not run, data null or partial.
  const nlohmann::json card = nlohmann::json::parse(R"({"lab": null, "checks": [
      {"name": "vector_add bandwidth", "kind": "performance", "status": "not-run", "data": null},
      {"name": "saxpy bandwidth", "kind": "performance", "status": "fail", "data": {"learner_fraction": null, "unit": null}},
      {"name": "vector_add at awkward sizes", "kind": "correctness", "status": "emu-pass", "data": null}]})");
  std::string ladder, roofline;
  CHECK_NOTHROW(ladder = gpulab::cli::ladder_svg(card));
  CHECK_NOTHROW(roofline = gpulab::cli::roofline_svg(card));
  CHECK(roofline.empty());
  CHECK_NOTHROW(gpulab::cli::ladder_svg(nlohmann::json::parse(R"({"checks": null})")));
}

TEST_CASE("a timeline names in its legend only what it holds numbers micro-batches and units and keeps its last label inside", "[cpu]") {
  // As lab 09's [perf] case records it: a forward and a backward with their micro-batch and a receive waited for.
  const auto pipeline = nlohmann::json::parse(R"({"lab": "09-pipeline-parallel", "checks": [{"name": "pipeline step", "kind": "performance",
     "data": {"variant": "learner", "learner_timeline": {"panels": [{"title": "1F1B, m = 8", "ranks": [
       [{"what": "forward", "start_ms": 0, "end_ms": 40, "micro": 0}, {"what": "backward", "start_ms": 40, "end_ms": 120, "micro": 0}],
       [{"what": "recv wait", "start_ms": 0, "end_ms": 40}, {"what": "forward", "start_ms": 40, "end_ms": 80, "micro": 7}]]}]}}}]})");
  const std::string svg = gpulab::cli::timeline_svg(pipeline);
  CHECK(svg.find("grey, a receive waited for") != std::string::npos);
  CHECK(svg.find("an all-reduce") == std::string::npos);  // lab 09 has none
  CHECK(svg.find("numbered by micro-batch") != std::string::npos);
  CHECK(svg.find(">7</text>") != std::string::npos);
  CHECK(svg.find(R"(text-anchor="end" fill="#777">120.00 ms)") != std::string::npos);  // the axis's last label, inside the picture
  // As lab 08's: forward, backward and a bucket's all-reduce; no receives, no micro-batches.
  const auto ddp = nlohmann::json::parse(R"({"lab": "08-data-parallel", "checks": [{"name": "DDP step", "kind": "performance",
     "data": {"variant": "learner", "learner_timeline": {"panels": [{"title": "measured step 3 of 20", "ranks": [
       [{"what": "forward", "start_ms": 0, "end_ms": 1}, {"what": "bucket 0", "start_ms": 1.5, "end_ms": 2.5}]]}]}}}]})");
  const std::string bars = gpulab::cli::timeline_svg(ddp);
  CHECK(bars.find("orange, an all-reduce") != std::string::npos);
  CHECK(bars.find("receive waited for") == std::string::npos);
  CHECK(bars.find("numbered by micro-batch") == std::string::npos);
  CHECK(bars.find("measured step 3 of 20") != std::string::npos);
  // As lab 11's: compute numbered by unit, a unit's all-gather and reduce-scatter, no all-reduce.
  const auto fsdp = nlohmann::json::parse(R"({"lab": "11-fsdp", "checks": [{"name": "FSDP step", "kind": "performance",
     "data": {"variant": "learner", "learner_timeline": {"panels": [{"title": "a ZeRO-3 step", "ranks": [
       [{"what": "all-gather h.0", "start_ms": 0, "end_ms": 1}, {"what": "forward", "start_ms": 1, "end_ms": 3, "unit": 1},
        {"what": "reduce-scatter h.0", "start_ms": 3, "end_ms": 4}]]}]}}}]})");
  const std::string sharded = gpulab::cli::timeline_svg(fsdp);
  CHECK(sharded.find("green, a unit's all-gather") != std::string::npos);
  CHECK(sharded.find("purple, a unit's reduce-scatter") != std::string::npos);
  CHECK(sharded.find("an all-reduce") == std::string::npos);
  CHECK(sharded.find("numbered by unit") != std::string::npos);
  CHECK(sharded.find(">1</text>") != std::string::npos);
}

TEST_CASE("the serving chart draws rows and blocks per step for each scheduler", "[cpu]") {
  const auto card = nlohmann::json::parse(R"({"lab": "12-serving", "checks": [{"name": "a case", "kind": "correctness",
     "data": {"records": [{"kind": "info", "summary": "x"}, {"kind": "info", "serving": {"title": "a trace <small>", "token_budget": 8,
       "blocks": 10, "series": [{"name": "yours", "time_s": [0.5, 1.0, 2.0], "rows": [8, 6, 2], "requests": [2, 3, 2], "blocks": [4, 9, 3]},
                                {"name": "the rules", "time_s": [0.5, 1.5], "rows": [8, 4], "requests": [1, 2], "blocks": [4, 6]}]}}]}}]})");
  const std::string svg = gpulab::cli::serving_svg(card);
  REQUIRE(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("a trace &lt;small&gt;") != std::string::npos);
  CHECK(svg.find(">yours<") != std::string::npos);
  CHECK(svg.find(">the rules<") != std::string::npos);
  CHECK(svg.find("token budget") != std::string::npos);
  CHECK(svg.find("blocks in use") != std::string::npos);
  CHECK(gpulab::cli::serving_svg(nlohmann::json::parse(R"({"checks": []})")).empty());
}
