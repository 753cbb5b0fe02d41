/// @file bench_mpi.hpp
/// @brief The main of a bench program on MPI ranks: MPI around @p run, an exception on any rank
/// reported with the program's name and ends every rank (MPI_Abort), never a hang.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>

namespace gpulab::bench {

template <class Run>
int mpi_main(int argc, char** argv, const char* program, Run run) {
  MPI_Init(&argc, &argv);
  int rc = 2;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}

}  // namespace gpulab::bench
