/// @file overlap.cu
/// @brief Lab 06 — copy/compute overlap: a chunked H2D → kernel → D2H pipeline over several
/// streams from pinned host memory. Read lessons/06-memory-management.md.
///
/// Napkin math: PCIe 5.0 ×16 moves 64 GB/s each way on paper (less in practice: exercise 3 of the
/// lesson measures it); H200's HBM ≈ 4.8 TB/s, 75× more. A kernel that reads and writes each
/// float once is far faster than the copies that feed it: only the copies can be hidden
/// behind each other (two copy engines) and behind a heavier kernel. With k chunks the pipeline
/// takes h + c + d + (k − 1)·max(h, c, d) instead of h + c + d each time.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpulab/check.hpp"
#include "memory.hpp"

namespace lab06 {

namespace {

__global__ void transform_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float xi = x[i];
    float v = xi;
    for (int r = 0; r < kTransformRounds; ++r) v = sinf(v) * 0.999f + xi;
    y[i] = v;
  }
}

}  // namespace

float transform_host(float x) {
  float v = x;
  for (int r = 0; r < kTransformRounds; ++r) v = std::sin(v) * 0.999f + x;
  return v;
}

void launch_transform(const float* x, float* y, std::size_t n, void* stream) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 65535));
  transform_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(x, y, n);
  CUDA_CHECK(cudaGetLastError());
}

double serial_transform(const float* x, float* y, std::size_t n) {
  float *dx = nullptr, *dy = nullptr;
  CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start, nullptr));
  CUDA_CHECK(cudaMemcpyAsync(dx, x, n * sizeof(float), cudaMemcpyHostToDevice, nullptr));
  launch_transform(dx, dy, n, nullptr);
  CUDA_CHECK(cudaMemcpyAsync(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost, nullptr));
  CUDA_CHECK(cudaEventRecord(stop, nullptr));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  CUDA_CHECK(cudaFree(dx));
  CUDA_CHECK(cudaFree(dy));
  return ms * 1e-3;
}

// BEGIN SOLUTION(06.5) The pipeline's time on paper, and on the GPU: chunks round-robin over streams, each copy in, kernel, copy out
double overlap_model_seconds(double h, double c, double d, int chunks, int copy_engines) {
  if (chunks < 1) throw std::invalid_argument("overlap_model_seconds: need chunks >= 1");
  const double slowest = copy_engines >= 2 ? std::max({h, c, d}) : std::max(h + d, c);
  return h + c + d + (chunks - 1) * slowest;
}

double overlapped_transform(const float* x, float* y, std::size_t n, int chunks, int streams) {
  if (chunks < 1 || streams < 1) throw std::invalid_argument("overlapped_transform: need chunks >= 1 and streams >= 1");
  // Pageable memory makes every cudaMemcpyAsync a staged, synchronous copy: the pipeline would
  // run serially without a word. Say so instead.
  for (const auto& [p, name] : {std::pair<const void*, const char*>{x, "x"}, {y, "y"}}) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess || a.type != cudaMemoryTypeHost) {
      (void)cudaGetLastError();
      throw std::invalid_argument(std::string("overlapped_transform: ") + name + " is not pinned host memory (cudaMallocHost): "
                                  "copies from pageable memory cannot overlap");
    }
  }
  float *dx = nullptr, *dy = nullptr;
  CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
  std::vector<cudaStream_t> s(static_cast<std::size_t>(streams));
  for (cudaStream_t& st : s) CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  // The GPU has several copy engines (3 on an H200): without a chain every stream's copy in may
  // start at once and share the link, and chunk 0 arrives after about `streams` chunks' time
  // instead of one, late for its kernel. The model's schedule is the chained one.
  std::vector<cudaEvent_t> in(static_cast<std::size_t>(chunks)), out(static_cast<std::size_t>(chunks));
  for (std::vector<cudaEvent_t>* list : {&in, &out}) {
    for (cudaEvent_t& e : *list) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  // Every stream starts after `start` and `stop` comes after every stream: one interval.
  CUDA_CHECK(cudaEventRecord(start, s[0]));
  for (std::size_t k = 1; k < s.size(); ++k) CUDA_CHECK(cudaStreamWaitEvent(s[k], start, 0));
  const std::size_t per = (n + static_cast<std::size_t>(chunks) - 1) / static_cast<std::size_t>(chunks);
  // The copies of one direction in chunk order, each after the one before (the event chain in,
  // out, made above, before the interval):
  int issued = 0;  // chunks issued so far (the chain links the last one)
  for (int i = 0; i < chunks; ++i) {
    const std::size_t begin = std::min(n, static_cast<std::size_t>(i) * per), count = std::min(n, begin + per) - begin;
    if (count == 0) continue;
    cudaStream_t st = s[static_cast<std::size_t>(i % streams)];
    const std::size_t k = static_cast<std::size_t>(issued);
    if (k > 0) CUDA_CHECK(cudaStreamWaitEvent(st, in[k - 1], 0));
    CUDA_CHECK(cudaMemcpyAsync(dx + begin, x + begin, count * sizeof(float), cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaEventRecord(in[k], st));
    launch_transform(dx + begin, dy + begin, count, st);
    if (k > 0) CUDA_CHECK(cudaStreamWaitEvent(st, out[k - 1], 0));
    CUDA_CHECK(cudaMemcpyAsync(y + begin, dy + begin, count * sizeof(float), cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaEventRecord(out[k], st));
    ++issued;
  }
  std::vector<cudaEvent_t> done(s.size());
  for (std::size_t k = 0; k < s.size(); ++k) {
    CUDA_CHECK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(done[k], s[k]));
    CUDA_CHECK(cudaStreamWaitEvent(s[0], done[k], 0));
  }
  CUDA_CHECK(cudaEventRecord(stop, s[0]));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  for (const std::vector<cudaEvent_t>* list : {&done, &in, &out}) {
    for (cudaEvent_t e : *list) CUDA_CHECK(cudaEventDestroy(e));
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  for (cudaStream_t st : s) CUDA_CHECK(cudaStreamDestroy(st));
  CUDA_CHECK(cudaFree(dx));
  CUDA_CHECK(cudaFree(dy));
  return ms * 1e-3;
}
// STUB: double overlap_model_seconds(double, double, double, int, int) { return 0; }
// STUB: double overlapped_transform(const float* x, float* y, std::size_t n, int, int) { return serial_transform(x, y, n); }
// END SOLUTION

}  // namespace lab06
