/// @file gpu_state.cpp
/// @brief Clocks, temperature and slowdown reasons through NVML, opened with dlopen.
///
/// The few entry points used are declared here (NVML's C ABI, stable since its first releases)
/// so that neither nvml.h nor libnvidia-ml is needed to build. The device is matched by PCI bus
/// id, which is right whatever CUDA_VISIBLE_DEVICES reorders.
#include <dlfcn.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gpulab/device.hpp"

namespace gpulab {
namespace {

using NvmlDevice = void*;
using NvmlInit = int (*)();
using NvmlByPci = int (*)(const char*, NvmlDevice*);
using NvmlClock = int (*)(NvmlDevice, int, unsigned*);
using NvmlTemperature = int (*)(NvmlDevice, int, unsigned*);
using NvmlReasons = int (*)(NvmlDevice, unsigned long long*);
struct NvmlViolationTime {
  unsigned long long reference_time, violation_time;  // nvmlViolationTime_t, in ns
};
using NvmlViolation = int (*)(NvmlDevice, int, NvmlViolationTime*);
constexpr int kNvmlPerfPolicyPower = 0, kNvmlPerfPolicyThermal = 1;  // nvmlPerfPolicyType_t

constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;         // NVML_CLOCK_SM
constexpr int kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
// nvmlClocksThrottleReason* bits that mean "slower than it could be" (idle and application
// clock settings are not slowdowns).
constexpr unsigned long long kSwPowerCap = 0x4, kHwSlowdown = 0x8, kSwThermal = 0x20, kHwThermal = 0x40,
                             kHwPowerBrake = 0x80;

struct Nvml {
  NvmlByPci by_pci = nullptr;
  NvmlClock clock = nullptr;
  NvmlTemperature temperature = nullptr;
  NvmlReasons reasons = nullptr;
  NvmlViolation violation = nullptr;
  bool ok = false;
  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
    by_pci = reinterpret_cast<NvmlByPci>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock = reinterpret_cast<NvmlClock>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    temperature = reinterpret_cast<NvmlTemperature>(dlsym(lib, "nvmlDeviceGetTemperature"));
    reasons = reinterpret_cast<NvmlReasons>(dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    violation = reinterpret_cast<NvmlViolation>(dlsym(lib, "nvmlDeviceGetViolationStatus"));
    ok = init != nullptr && by_pci != nullptr && clock != nullptr && temperature != nullptr && init() == kNvmlSuccess;
  }
};

}  // namespace

GpuState read_gpu_state() noexcept {
  GpuState state;
  static const Nvml nvml;
  if (!nvml.ok) return state;
  int device = 0;
  char pci[32] = {};
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetPCIBusId(pci, sizeof pci, device) != cudaSuccess) {
    cudaGetLastError();
    return state;
  }
  NvmlDevice handle = nullptr;
  if (nvml.by_pci(pci, &handle) != kNvmlSuccess) return state;
  state.available = nvml.clock(handle, kNvmlClockSm, &state.sm_clock_mhz) == kNvmlSuccess &&
                    nvml.temperature(handle, kNvmlTemperatureGpu, &state.temperature_c) == kNvmlSuccess;
  unsigned long long bits = 0;
  if (nvml.reasons != nullptr && nvml.reasons(handle, &bits) == kNvmlSuccess) {
    auto add = [&](const char* what) { state.slowdowns += (state.slowdowns.empty() ? "" : ", ") + std::string(what); };
    if (bits & (kSwThermal | kHwThermal)) add("thermal");
    if (bits & kSwPowerCap) add("power cap");
    if (bits & (kHwSlowdown | kHwPowerBrake)) add("hardware slowdown");
  }
  NvmlViolationTime t{};
  if (nvml.violation != nullptr && nvml.violation(handle, kNvmlPerfPolicyPower, &t) == kNvmlSuccess) state.power_violation_ns = t.violation_time;
  if (nvml.violation != nullptr && nvml.violation(handle, kNvmlPerfPolicyThermal, &t) == kNvmlSuccess) state.thermal_violation_ns = t.violation_time;
  return state;
}

GpuState gpu_state_between(const GpuState& before, const GpuState& after) {
  GpuState s;
  s.available = before.available && after.available;
  if (!s.available) return s;
  s.sm_clock_mhz = std::min(before.sm_clock_mhz, after.sm_clock_mhz);
  s.temperature_c = after.temperature_c;
  s.power_violation_ns = after.power_violation_ns - std::min(after.power_violation_ns, before.power_violation_ns);
  s.thermal_violation_ns = after.thermal_violation_ns - std::min(after.thermal_violation_ns, before.thermal_violation_ns);
  std::vector<std::string> seen;
  for (const std::string* list : {&before.slowdowns, &after.slowdowns}) {
    std::size_t start = 0;
    while (start < list->size()) {
      const std::size_t comma = list->find(", ", start);
      const std::string item = list->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (std::find(seen.begin(), seen.end(), item) == seen.end()) seen.push_back(item);
      start = comma == std::string::npos ? list->size() : comma + 2;
    }
  }
  char limited[96];
  if (s.power_violation_ns > 0 || s.thermal_violation_ns > 0) {
    std::snprintf(limited, sizeof limited, "limited %.1f ms by power and %.1f ms by temperature while timed", s.power_violation_ns / 1e6,
                  s.thermal_violation_ns / 1e6);
    seen.emplace_back(limited);
  }
  for (const std::string& item : seen) s.slowdowns += (s.slowdowns.empty() ? "" : ", ") + item;
  return s;
}

}  // namespace gpulab
