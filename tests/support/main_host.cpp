/// @file main_host.cpp
/// @brief Test main for host-only test programs: [gpu] cases cannot run in them.
#include "catch_runner.hpp"

int main(int argc, char** argv) { return gpulab::testing::run_tests(argc, argv, nullptr); }
