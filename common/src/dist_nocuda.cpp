/// @file dist_nocuda.cpp
/// @brief Device backends in a build without CUDA: not available, said plainly.
#include <stdexcept>

#include "dist_internal.hpp"

namespace gpulab::dist::detail {

std::unique_ptr<Communicator> create_device_communicator(Backend backend, MPI_Comm) {
  throw std::runtime_error(std::string("the ") + to_string(backend) +
                           " backend needs device memory: this build has no CUDA");
}

bool device_backend_available(Backend, std::string& why, MPI_Comm) {
  why = "this build has no CUDA";
  return false;
}

Backend choose_device_backend(MPI_Comm) {
  throw std::runtime_error("device buffers need a build with CUDA");
}

}  // namespace gpulab::dist::detail
