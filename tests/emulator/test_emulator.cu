/// @file test_emulator.cu
/// @brief The CPU block emulator (tools/emulator/emu.hpp) catches what it promises to, each with a
/// kernel that breaks the rule: a read one past the end of an allocation, shuffle masks that
/// leave out a calling lane or that a read leaves, launch limits (gridDim.y, shared memory per
/// block). Built only for the emulator (`gpulab-cli emu-transform`); the cases run on the CPU.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

#include "gpulab/check.hpp"

// Kernels with external linkage: the fault handler names them through dladdr (as it names a lab's).
namespace emu_test {

__global__ void read_ahead_kernel(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] + 0.0f * in[i + 1];  // in[n] for the last thread
}

__global__ void warp_sum_kernel(const float* in, float* out, unsigned mask, unsigned delta_limit) {
  float v = in[threadIdx.x];
  for (unsigned d = 16; d > 0; d >>= 1) {
    if (d <= delta_limit) v += __shfl_down_sync(mask, v, d);
  }
  if (threadIdx.x == 0) *out = v;
}

__global__ void big_shared_kernel(float* out) {
  __shared__ float big[12289];  // 49 156 bytes: 4 more than 48 KB
  big[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = big[threadIdx.x];
}

__global__ void nothing_kernel() {}

}  // namespace emu_test

using namespace emu_test;

namespace {

float* device_floats(int n) {
  float* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
  return p;
}

std::string launch_error(const std::function<void()>& launch) {
  try {
    launch();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the emulator faults a read one past the end of an allocation and names the kernel and thread", "[cpu]") {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  if (child == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    emu::set_tight_allocations(true);
    float* in = device_floats(100);
    float* out = device_floats(100);
    read_ahead_kernel<<<1, 128>>>(in, out, 100);
    _exit(0);  // not reached: the read of in[100] faults
  }
  close(pipe_fds[1]);
  int status = 0;
  waitpid(child, &status, 0);
  char text[1024] = {};
  const ssize_t got = read(pipe_fds[0], text, sizeof text - 1);
  close(pipe_fds[0]);
  const std::string said(text, got > 0 ? static_cast<std::size_t>(got) : 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(said.find("outside the buffers it was given, in kernel") != std::string::npos);
  CHECK(said.find("read_ahead_kernel") != std::string::npos);
  CHECK(said.find("thread (99, 0, 0)") != std::string::npos);
  // Without the tight placement (the first run) the same read lands in the allocation's slack.
  emu::set_tight_allocations(false);
  float* in = device_floats(100);
  float* out = device_floats(100);
  CHECK(launch_error([&] { read_ahead_kernel<<<1, 128>>>(in, out, 100); }).empty());
  cudaFree(in);
  cudaFree(out);
}

TEST_CASE("a shuffle whose mask leaves out the calling lane or the lane it reads is an error", "[cpu]") {
  float* in = device_floats(32);
  float* out = device_floats(1);
  CUDA_CHECK(cudaMemset(in, 0, 32 * sizeof(float)));
  CHECK(launch_error([&] { warp_sum_kernel<<<1, 32>>>(in, out, 0xffffffffu, 16); }).empty());  // right
  CHECK(launch_error([&] { warp_sum_kernel<<<1, 32>>>(in, out, 0x0000ffffu, 16); }).find("lane 16 calls __shfl_down_sync with mask 0x0000ffff, which leaves it out") !=
        std::string::npos);
  CHECK(launch_error([&] { warp_sum_kernel<<<1, 16>>>(in, out, 0x0000ffffu, 8); }).find("reads lane 16") != std::string::npos);
  cudaFree(in);
  cudaFree(out);
}

TEST_CASE("launches a GPU refuses are refused with the limit they break", "[cpu]") {
  CHECK(launch_error([] { nothing_kernel<<<dim3(1, 65536), 32>>>(); }).find("gridDim.y or gridDim.z above 65535") != std::string::npos);
  CHECK(launch_error([] { nothing_kernel<<<dim3(1, 65535), 32>>>(); }).empty());
  CHECK(launch_error([] { nothing_kernel<<<1, dim3(32, 32, 2)>>>(); }).find("2048 threads") != std::string::npos);
  float* out = device_floats(64);
  CHECK(launch_error([&] { big_shared_kernel<<<1, 64>>>(out); }).find("49156 bytes of shared memory per block") != std::string::npos);
  cudaFree(out);
}
