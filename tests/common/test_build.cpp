/// @file test_build.cpp
/// @brief Compiler messages are kept, build-system noise is dropped, paths are rewritten.
#include <catch2/catch.hpp>

#include "build.hpp"

TEST_CASE("diagnostics keep nvcc and gcc messages only", "[cpu]") {
  const std::string log =
      "[1/3] Building CUDA object tests/x.cu.o\n"
      "FAILED: tests/x.cu.o\n"
      "/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -O3 -c /b/submission/01/hello.cu -o x.o\n"
      "/b/submission/01/hello.cu(42): error: identifier \"nn\" is undefined\n"
      "    if (i < nn) c[i] = a[i] + b[i];\n"
      "            ^\n"
      "\n"
      "1 error detected in the compilation of \"/b/submission/01/hello.cu\".\n"
      "ninja: build stopped: subcommand failed.\n";
  const std::string d = gpulab::cli::extract_diagnostics(log, {{"/b/submission/01", "/home/me/work"}});
  CHECK(d.find("/home/me/work/hello.cu(42): error: identifier \"nn\" is undefined") != std::string::npos);
  CHECK(d.find("            ^") != std::string::npos);
  CHECK(d.find("1 error detected") != std::string::npos);
  CHECK(d.find("ninja") == std::string::npos);
  CHECK(d.find("FAILED") == std::string::npos);
  CHECK(d.find("-forward-unknown") == std::string::npos);
}

TEST_CASE("diagnostics keep linker errors", "[cpu]") {
  const std::string log =
      "[2/2] Linking CXX executable bin/lab01_sub\n"
      "FAILED: bin/lab01_sub\n"
      "/usr/bin/c++ -O3 x.o -o bin/lab01_sub\n"
      "/usr/bin/ld: test_hello.cpp.o: in function `f':\n"
      "test_hello.cpp:(.text+0x1c): undefined reference to `lab01::saxpy(float, float const*)'\n"
      "collect2: error: ld returned 1 exit status\n";
  const std::string d = gpulab::cli::extract_diagnostics(log);
  CHECK(d.find("undefined reference to `lab01::saxpy") != std::string::npos);
  CHECK(d.find("collect2") != std::string::npos);
}
