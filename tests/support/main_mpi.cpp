/// @file main_mpi.cpp
/// @brief Test main for distributed labs, run as `mpirun -np W <program> <case>`: every rank runs
/// the same cases; the exit code, the same on every rank, is 1 if any rank failed, 77 if the
/// cases need a GPU and none is there, else 0. A case that cannot go on (a failed REQUIRE, an
/// exception) on one rank aborts all ranks, so that none waits forever.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "catch_runner.hpp"
#include "gpulab/random.hpp"
#include "gpulab/report.hpp"
#ifdef GPULAB_WITH_CUDA
#include "gpulab/device.hpp"
#endif

namespace {

std::string device_missing() {
#ifdef GPULAB_WITH_CUDA
  const gpulab::DeviceProbe probe = gpulab::probe_devices();
  return probe.available ? std::string() : probe.reason;
#else
  return "built without CUDA";
#endif
}

void abort_all_ranks(const std::string& message) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "gpulab: rank %d cannot go on, aborting every rank:\n  %s\n", rank, message.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace

int main(int argc, char** argv) {
  // Listing and the device probe need no communication; they run outside mpirun.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gpulab-list") == 0) return gpulab::testing::run_tests(argc, argv, nullptr);
    if (std::strcmp(argv[i], "--gpulab-probe") == 0) return gpulab::testing::run_tests(argc, argv, &device_missing);
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  gpulab::report::set_rank(rank);
  gpulab::testing::set_fatal_failure_hook(&abort_all_ranks);
  // One seed for the whole job (rank 0's), so every rank can regenerate every rank's input.
  unsigned long long seed = gpulab::test_seed();
  PMPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  gpulab::set_test_seed(seed);
  // mpirun gives each rank a terminal-like stdout; colour codes would litter the rank files.
  std::vector<char*> args(argv, argv + argc);
  char colour_flag[] = "--use-colour", colour_off[] = "no";
  args.push_back(colour_flag);
  args.push_back(colour_off);
  const int rc = gpulab::testing::run_tests(static_cast<int>(args.size()), args.data(), &device_missing);
  // Agree on one verdict: failure anywhere beats a skip, a skip beats a pass.
  const int mine = rc == 0 ? 0 : (rc == 77 ? 1 : 2);
  int worst = 0;
  PMPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst == 0 ? 0 : (worst == 1 ? 77 : 1);
}
