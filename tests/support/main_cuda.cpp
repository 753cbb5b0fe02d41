/// @file main_cuda.cpp
/// @brief Test main for programs linked with CUDA: [gpu] cases run when a device is present.
#include "catch_runner.hpp"
#include "gpulab/device.hpp"

namespace {
std::string cuda_device_missing() {
  const gpulab::DeviceProbe probe = gpulab::probe_devices();
  return probe.available ? std::string() : probe.reason;
}
}  // namespace

int main(int argc, char** argv) {
  return gpulab::testing::run_tests(argc, argv, &cuda_device_missing);
}
