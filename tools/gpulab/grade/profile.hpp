/// @file profile.hpp
/// @brief `gpulab grade NN --profile`: Nsight Compute's counters in the scorecard. For each range a
/// lab names in lab.json ("profile"), the case that exercises it runs once under `ncu` with only
/// the kernels inside that NVTX range profiled; the scorecard then says how many kernels the range
/// held and how many bytes they moved against the minimum the case states ("you moved 1.9× the
/// bytes softmax needs"). Bytes read are DRAM's (dram__bytes_read.sum); bytes written are counted
/// where they leave the SMs, at L2 (lts__t_sectors_op_write.sum × 32 bytes), because lines still
/// in L2 when a kernel ends never reach the DRAM counters.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpulab::cli {

/// The metrics `ncu` is asked for, in this order.
inline const char* const kProfileMetrics = "dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum";

/// One profiled kernel launch: its name and metric values (in base units: bytes, sectors).
struct NcuKernel {
  std::string name;
  std::map<std::string, double> metrics;
};

/// Parses what `ncu --csv --page raw --print-units base --metrics ...` writes (to --log-file):
/// lines that are not CSV ("==PROF==" notes) are skipped; the first CSV row names the columns,
/// a row whose "ID" is empty holds the units, every other row is one kernel. Numbers may carry
/// thousands separators. Throws std::runtime_error when there is no header with "Kernel Name".
std::vector<NcuKernel> parse_ncu_csv(const std::string& text);

/// What the profile of one range shows, and what it should.
struct ProfileVerdict {
  bool ok = false;
  std::string summary;  ///< "1 kernel; read 268 MB, wrote 268 MB: 1.00× the minimum 537 MB"
  std::string problem;  ///< why not ok ("3 kernels in a range that should hold 1", "1.9× the bytes ...")
};

/// Judges @p kernels (the range's) against @p min_bytes (read + written, from the case) and the
/// lab's limits: at most @p max_kernels kernels and @p max_factor × the minimum bytes.
ProfileVerdict judge_profile(const std::vector<NcuKernel>& kernels, const std::string& range, double min_bytes, int max_kernels,
                             double max_factor);

/// Whether ncu's output says it could not read the GPU's counters (ERR_NVGPUCTRPERM: a driver
/// setting for non-root users), and so the profile says nothing.
bool ncu_lacks_permission(const std::string& output);

}  // namespace gpulab::cli
