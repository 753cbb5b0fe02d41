/// @file sampler.cpp
/// @brief Lab 08 — which samples each rank trains on: PyTorch's DistributedSampler with our
/// generator. Read lessons/08-data-parallel.md, "TODO(08.1)".
#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "ddp.hpp"
#include "gpulab/random.hpp"

namespace lab08 {

std::vector<std::size_t> distributed_sampler(std::size_t n, int world, int rank, std::uint64_t seed, int epoch, bool drop_last) {
  // TODO(08.1): Shuffle with the epoch's seed, pad or cut to a multiple of W, take every W-th
  // See lessons/08-data-parallel.md, section "TODO(08.1)".
  return {};
}

}  // namespace lab08
