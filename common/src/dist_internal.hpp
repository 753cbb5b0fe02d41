/// @file dist_internal.hpp
/// @brief Between the host part of the Communicator and its device backends (dist_cuda.cu, or
/// dist_nocuda.cpp in a build without CUDA).
#pragma once

#include <memory>

#include "gpulab/dist.hpp"

namespace gpulab::dist::detail {

/// kMpiStaging, kCudaIpc or kNccl; throws where the backend is not available.
std::unique_ptr<Communicator> create_device_communicator(Backend backend, MPI_Comm comm);
/// Availability of a device backend (see backend_available).
bool device_backend_available(Backend backend, std::string& why, MPI_Comm comm);
/// kNccl when every rank has a GPU of its own, kCudaIpc when ranks share one.
Backend choose_device_backend(MPI_Comm comm);

}  // namespace gpulab::dist::detail
