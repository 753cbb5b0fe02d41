/// @file ipc_probe.cu
/// @brief Lab 07's device ring on one shared GPU, taken apart: the microseconds per operation of
/// the cuda-ipc backend's pattern, with one process on the GPU and with two. The first H200 run
/// (2026-12-04) measured the ring at 0.38 GB/s busbw on cuda-ipc at W = 2: 64 MiB in about 177 ms,
/// about 641 operations per rank each waited for (common/src/dist_cuda.cu: the copy into the
/// peer's landing buffer and its cudaStreamSynchronize in IpcCommunicator::progress, the local
/// copy in IpcCommunicator::landed, DeviceCommunicator::add), so about 138 µs each, where one alone
/// should cost 5-10 µs. The suspect: two CUDA contexts time-sliced on one GPU, switched on every
/// waited-for operation. This probe times each kind of operation waited for one at a time, and
/// then 384 of them with one wait: if the pair's waited-for operations cost far more than the solo
/// ones and the batch does not, the suspect is confirmed (and the fix is fewer waits).
///
///     ipc_probe RANK NPROCS DIR START_EPOCH_S
///
/// scripts/gpu-check (step diag07) builds it with nvcc and runs it alone, then as a pair that starts
/// its timed loops at the same second (the handles are exchanged through files in DIR).
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

#define CK(x)                                                                       \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s failed: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(2);                                                                 \
    }                                                                               \
  } while (0)

__global__ void add_kernel(float* __restrict__ dst, const float* __restrict__ src, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] += src[i];
}

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: ipc_probe RANK NPROCS DIR START_EPOCH_S\n");
    return 1;
  }
  const int rank = std::atoi(argv[1]), nprocs = std::atoi(argv[2]);
  const std::string dir = argv[3];
  const long start_epoch = std::atol(argv[4]);
  const size_t seg = 65536;             // lab07 kSegment (tests/07-collectives/ring.hpp:27)
  const size_t segs = 128;              // one ring step of 64 MiB at W = 2
  const size_t n = seg * segs;          // 8 Mi floats = 32 MiB
  const int iters = 1024;               // timed synchronous ops per kind

  CK(cudaSetDevice(0));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));             // blocking stream, as DeviceCommunicator (dist_cuda.cu:56)
  float *src, *dst, *landing;
  CK(cudaMalloc(&src, n * sizeof(float)));
  CK(cudaMalloc(&dst, n * sizeof(float)));
  CK(cudaMalloc(&landing, n * sizeof(float)));
  CK(cudaMemset(src, 0, n * sizeof(float)));
  CK(cudaMemset(dst, 0, n * sizeof(float)));
  CK(cudaMemset(landing, 0, n * sizeof(float)));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const unsigned blocks = unsigned(std::min<size_t>((seg + 255) / 256, size_t(sms) * 8));

  // The peer's landing buffer (solo: our own).
  float* peer = landing;
  if (nprocs == 2) {
    cudaIpcMemHandle_t h;
    CK(cudaIpcGetMemHandle(&h, landing));
    const std::string mine = dir + "/h" + std::to_string(rank), theirs = dir + "/h" + std::to_string(1 - rank);
    {
      std::ofstream(mine + ".tmp", std::ios::binary).write(reinterpret_cast<const char*>(&h), sizeof h);
      std::rename((mine + ".tmp").c_str(), mine.c_str());
    }
    cudaIpcMemHandle_t ph;
    for (;;) {
      std::ifstream in(theirs, std::ios::binary);
      if (in && in.read(reinterpret_cast<char*>(&ph), sizeof ph)) break;
      usleep(1000);
    }
    void* p = nullptr;
    CK(cudaIpcOpenMemHandle(&p, ph, cudaIpcMemLazyEnablePeerAccess));
    peer = static_cast<float*>(p);
  }
  // Warm-up, then wait for the common start second so that both processes' loops overlap.
  for (int i = 0; i < 32; ++i) {
    CK(cudaMemcpyAsync(peer, src, seg * sizeof(float), cudaMemcpyDeviceToDevice, s));
    add_kernel<<<blocks, 256, 0, s>>>(dst, landing, seg);
  }
  CK(cudaStreamSynchronize(s));
  while (std::time(nullptr) < start_epoch) usleep(200);

  auto timed = [&](const char* name, auto&& op) {
    const double t0 = now_s();
    for (int i = 0; i < iters; ++i) {
      op(size_t(i) % segs);
      CK(cudaStreamSynchronize(s));
    }
    const double us = (now_s() - t0) / iters * 1e6;
    std::printf("rank %d of %d: %-16s %8.1f us/op\n", rank, nprocs, name, us);
  };
  timed("ipc_copy_sync", [&](size_t k) {
    CK(cudaMemcpyAsync(peer + k * seg, src + k * seg, seg * sizeof(float), cudaMemcpyDeviceToDevice, s));
  });
  timed("local_copy_sync", [&](size_t k) {
    CK(cudaMemcpyAsync(dst + k * seg, landing + k * seg, seg * sizeof(float), cudaMemcpyDeviceToDevice, s));
  });
  timed("add_sync", [&](size_t k) { add_kernel<<<blocks, 256, 0, s>>>(dst + k * seg, landing + k * seg, seg); });
  {
    const int rounds = 8;
    const double t0 = now_s();
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < segs; ++k) {
        CK(cudaMemcpyAsync(peer + k * seg, src + k * seg, seg * sizeof(float), cudaMemcpyDeviceToDevice, s));
        CK(cudaMemcpyAsync(dst + k * seg, landing + k * seg, seg * sizeof(float), cudaMemcpyDeviceToDevice, s));
        add_kernel<<<blocks, 256, 0, s>>>(dst + k * seg, landing + k * seg, seg);
      }
      CK(cudaStreamSynchronize(s));
    }
    const double us = (now_s() - t0) / (rounds * segs * 3.0) * 1e6;
    std::printf("rank %d of %d: %-16s %8.1f us/op (one sync per 384 ops)\n", rank, nprocs, "batch_async", us);
  }
  CK(cudaGetLastError());
  // Both close before either frees (the exporter must outlive the importer's mapping).
  if (nprocs == 2) {
    CK(cudaIpcCloseMemHandle(peer));
    const std::string done = dir + "/done" + std::to_string(rank), other = dir + "/done" + std::to_string(1 - rank);
    std::ofstream(done).put('1');
    while (access(other.c_str(), F_OK) != 0) usleep(1000);
  }
  cudaFree(landing);
  cudaFree(dst);
  cudaFree(src);
  return 0;
}
