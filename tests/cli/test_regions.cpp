/// @file test_regions.cpp
/// @brief SOLUTION regions: parsing, errors, skeleton and mutant rendering.
#include <catch2/catch.hpp>

#include "base/regions.hpp"

using gpulab::cli::parse_regions;
using gpulab::cli::RegionError;
using gpulab::cli::render;

namespace {
const char* kSource =
    "int f(int x) {\n"
    "  // BEGIN SOLUTION(05.1) Double it\n"
    "  const int secret_one = 2 * x;\n"
    "  return secret_one;\n"
    "  // STUB: return 0;\n"
    "  // END SOLUTION\n"
    "}\n"
    "// BEGIN SOLUTION(05.2) Write g\n"
    "int g() { return 7; /* secret_two */ }\n"
    "// STUB: int g() { return 0; }\n"
    "// END SOLUTION\n";
}  // namespace

TEST_CASE("regions are parsed with their ids and titles and stubs", "[cpu]") {
  const auto regions = parse_regions(kSource, "f.cu", "05");
  REQUIRE(regions.size() == 2);
  CHECK(regions[0].id == "05.1");
  CHECK(regions[0].title == "Double it");
  CHECK(regions[0].begin_line == 2);
  CHECK(regions[0].end_line == 6);
  CHECK(regions[0].stub == std::vector<std::string>{"return 0;"});
  CHECK(regions[1].stub == std::vector<std::string>{"int g() { return 0; }"});
}

TEST_CASE("the skeleton has titles and stubs but never the solution", "[cpu]") {
  const std::string skeleton = render(kSource, "f.cu", "05-x");
  CHECK(skeleton.find("secret") == std::string::npos);
  CHECK(skeleton.find("SOLUTION") == std::string::npos);
  CHECK(skeleton.find("  // TODO(05.1): Double it\n  // See lessons/05-x.md, section \"TODO(05.1)\".\n  return 0;\n") != std::string::npos);
  CHECK(skeleton.find("// TODO(05.2): Write g") != std::string::npos);
  CHECK(skeleton.find("int g() { return 0; }") != std::string::npos);
  CHECK(skeleton.find("int f(int x) {") == 0);
}

TEST_CASE("a mutant replaces exactly one region", "[cpu]") {
  const std::string m1 = render(kSource, "f.cu", "05-x", "05.1");
  CHECK(m1.find("secret_one") == std::string::npos);
  CHECK(m1.find("secret_two") != std::string::npos);
  CHECK(m1.find("STUB") == std::string::npos);  // the kept region's stub is not code
  CHECK(m1.find("int g() { return 0; }") == std::string::npos);
  const std::string m2 = render(kSource, "f.cu", "05-x", "05.2");
  CHECK(m2.find("secret_one") != std::string::npos);
  CHECK(m2.find("secret_two") == std::string::npos);
  CHECK_THROWS_AS(render(kSource, "f.cu", "05-x", "05.9"), RegionError);
}

TEST_CASE("malformed regions are errors with file and line", "[cpu]") {
  CHECK_THROWS_WITH(parse_regions("// BEGIN SOLUTION(01.1) a\nx\n", "f.cu"), Catch::Contains("f.cu:1") && Catch::Contains("never closed"));
  CHECK_THROWS_WITH(parse_regions("// END SOLUTION\n", "f.cu"), Catch::Contains("without BEGIN"));
  CHECK_THROWS_WITH(parse_regions("// STUB: x\n", "f.cu"), Catch::Contains("outside"));
  CHECK_THROWS_WITH(parse_regions("// BEGIN SOLUTION(01.1) a\n// BEGIN SOLUTION(01.2) b\n", "f.cu"), Catch::Contains("do not nest"));
  CHECK_THROWS_WITH(parse_regions("// BEGIN SOLUTION(01.1) a\n// END SOLUTION\n// BEGIN SOLUTION(01.1) b\n// END SOLUTION\n", "f.cu"),
                    Catch::Contains("appears twice"));
  CHECK_THROWS_WITH(parse_regions("// BEGIN SOLUTION(02.1) a\n// END SOLUTION\n", "f.cu", "01"), Catch::Contains("does not belong"));
  CHECK_THROWS_WITH(parse_regions("// BEGIN SOLUTION(01.1)\n// END SOLUTION\n", "f.cu"), Catch::Contains("no title"));
  CHECK_THROWS_WITH(parse_regions("x(); // END SOLUTION\n", "f.cu"), Catch::Contains("malformed"));
}
