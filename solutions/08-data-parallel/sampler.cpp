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
  // BEGIN SOLUTION(08.1) Shuffle with the epoch's seed, pad or cut to a multiple of W, take every W-th
  if (world < 1 || rank < 0 || rank >= world) throw std::invalid_argument("distributed_sampler: need world >= 1 and 0 <= rank < world");
  std::vector<std::size_t> indices(n);
  for (std::size_t i = 0; i < n; ++i) indices[i] = i;
  // The same permutation on every rank (the seed is shared; only the epoch changes it).
  gpulab::Rng rng(seed + static_cast<std::uint64_t>(epoch));
  for (std::size_t i = n; i-- > 1;) {
    const auto j = static_cast<std::size_t>(rng.integer(0, static_cast<std::int64_t>(i)));
    std::swap(indices[i], indices[j]);
  }
  const std::size_t w = static_cast<std::size_t>(world);
  const std::size_t total = drop_last ? n / w * w : (n + w - 1) / w * w;
  if (total < n) {
    indices.resize(total);
  } else {
    // Padding repeats the list from its start, as often as needed when n < the padding.
    for (std::size_t i = n; i < total; ++i) indices.push_back(indices[(i - n) % n]);
  }
  std::vector<std::size_t> mine;
  mine.reserve(total / w);
  for (std::size_t i = static_cast<std::size_t>(rank); i < total; i += w) mine.push_back(indices[i]);
  return mine;
  // STUB: return {};
  // END SOLUTION
}

}  // namespace lab08
