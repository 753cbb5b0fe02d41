/// @file dist_internal.hpp
/// @brief Between the host part of the Communicator and its device backends (dist_cuda.cu, or
/// dist_nocuda.cpp in a build without CUDA).
#pragma once

#include <memory>
#include <vector>

#include <mpi.h>

#include "gpulab/dist.hpp"

namespace gpulab::dist {

/// A library collective in flight (dist_collectives.cpp): up to two MPI phases on host memory,
/// the user's buffers or host copies of device ones.
struct Communicator::Op {
  long id = 0;
  Collective kind = Collective::kAllReduce;
  std::size_t timeline_index = 0;
  const float* send = nullptr;   ///< the caller's input (its memory)
  float* recv = nullptr;         ///< the caller's output (its memory)
  std::size_t count = 0;         ///< floats of the whole buffer
  float* host = nullptr;         ///< the buffer MPI works on (the caller's, or staging)
  float* host_out = nullptr;     ///< where a reduce-scatter or all-gather lands (host)
  std::vector<float> staging, staging_out;  ///< host copies of device buffers
  std::vector<float> pieces;     ///< the W contributions to this rank's shard
  std::vector<int> counts, offsets, piece_counts, piece_offsets;
  int phase = 0;                 ///< 0: first phase in flight, 1: first done, second not started, 2: second in flight
  MPI_Request request = MPI_REQUEST_NULL;
};

}  // namespace gpulab::dist

namespace gpulab::dist::detail {

/// How the host backend's blocking waits and every library collective's wait (the device
/// backends' transfers still use MPI_Wait) wait (GPULAB_DIST_WAIT): kBackoff (the default) polls the request,
/// spinning for its first 300 µs (GPULAB_DIST_SPIN_US), then sleeping between polls (about 60 µs each: nanosleep's
/// timer slack); kSpin is MPI_Wait's busy polling. OpenMPI's shared-memory transport makes no
/// progress unless a rank calls into MPI, so MPI_Wait spins; on a machine with more runnable
/// processes than cores, the spinning rank burns the time slices its peer needs to send what it
/// waits for, while a rank asleep in a socket (gloo) wakes first when its data arrives.
enum class WaitMode { kBackoff, kSpin };
WaitMode wait_mode();
/// How long kBackoff polls before it sleeps, in µs (GPULAB_DIST_SPIN_US, default 300).
long wait_spin_us();
/// Waits for @p request through @p test (MPI_Test or PMPI_Test), as wait_mode() says.
void wait_request(MPI_Request& request, MPI_Status* status, int (*test)(MPI_Request*, int*, MPI_Status*),
                  int (*wait)(MPI_Request*, MPI_Status*));

/// kMpiStaging, kCudaIpc or kNccl; throws where the backend is not available.
std::unique_ptr<Communicator> create_device_communicator(Backend backend, MPI_Comm comm);
/// Availability of a device backend (see backend_available).
bool device_backend_available(Backend backend, std::string& why, MPI_Comm comm);
/// kNccl when every rank has a GPU of its own, kCudaIpc when ranks share one.
Backend choose_device_backend(MPI_Comm comm);

}  // namespace gpulab::dist::detail
