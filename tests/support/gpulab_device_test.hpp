/// @file gpulab_device_test.hpp
/// @brief Checks on device buffers shared by the kernel labs' tests: guard bands intact, inputs
/// unmodified. Each records its finding (see gpulab_test.hpp) and CHECKs it.
#pragma once

#include <string>
#include <vector>

#include "gpulab/compare.hpp"
#include "gpulab/device.hpp"
#include "gpulab/device_buffer.hpp"
#include "gpulab_test.hpp"

namespace gpulab::testing {

/// Checks a buffer's guard bands: a write outside [0, size) fails even if every value is right.
template <class T>
void check_guards(const DeviceBuffer<T>& buffer, const std::string& name) {
  const GuardReport g = buffer.check_guards();
  check_fact(g.intact, name + " guard bands", g.describe(name),
             "a thread wrote outside the array: test the index against the size before writing");
}

/// Checks that a kernel left an input exactly as it was (and inside its guards).
template <class T>
void check_unmodified(const DeviceBuffer<T>& buffer, const std::vector<T>& original, const std::string& name) {
  check_result(compare_bitwise(buffer.download(), original), name + " unmodified",
               "an input array was written to; only the output may change");
  check_guards(buffer, name);
}

/// The GPU's clock, temperature and slowdowns right now, as record fields (empty without NVML).
/// Performance tests add them to their records; the grader warns when the GPU was slowing down.
inline nlohmann::json gpu_state_fields() {
  const GpuState s = read_gpu_state();
  if (!s.available) return nlohmann::json::object();
  return {{"sm_clock_mhz", s.sm_clock_mhz}, {"temperature_c", s.temperature_c}, {"slowdowns", s.slowdowns}};
}

}  // namespace gpulab::testing
