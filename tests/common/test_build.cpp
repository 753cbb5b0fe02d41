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

#include "mpi.hpp"

TEST_CASE("mpirun's complaints name the rank and what happened", "[cpu]") {
  using gpulab::cli::launcher_problems;
  CHECK(launcher_problems("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).") ==
        std::vector<std::string>{"rank 1 was killed by signal 9 (Killed)"});
  CHECK(launcher_problems("MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 1.") ==
        std::vector<std::string>{"rank 2 called MPI_Abort"});
  CHECK(launcher_problems("mpirun has exited due to process rank 2 with PID 0 on\nnode vm exiting improperly. There are three reasons") ==
        std::vector<std::string>{"rank 2 exited without calling MPI_Finalize (it returned early or called exit)"});
  // A rank that merely returned a failing exit code is a test failure, not a launcher problem.
  CHECK(launcher_problems("Primary job  terminated normally, but 1 process returned\na non-zero exit code.").empty());
}
