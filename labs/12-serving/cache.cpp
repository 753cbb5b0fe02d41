/// @file cache.cpp
/// @brief Lab 12 — the KV caches: one contiguous buffer per sequence (what GPT::generate keeps),
/// then a pool of blocks read through block tables (paged attention, on the host). Read
/// lessons/12-serving.md, sections "TODO(12.1)" and "TODO(12.3)".
///
/// Both give nn::attend each position's key and value rows in position order: attention's
/// arithmetic is the same, only where the rows live differs, so the two caches agree bit for bit.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "serving.hpp"

namespace lab12 {

// TODO(12.1): The contiguous cache: the whole context reserved per sequence
// See lessons/12-serving.md, section "TODO(12.1)".
std::size_t kv_bytes_per_token(const nn::GPTConfig& config) {
  (void)config;  // delete once you use it
  return 0;
}

std::size_t ContiguousCache::add(std::size_t sequence) {
  (void)sequence;  // delete once you use it
  return 0;
}

void ContiguousCache::release(std::size_t sequence) {
  (void)sequence;  // delete once you use it
}

std::size_t ContiguousCache::length(std::size_t sequence) const {
  (void)sequence;  // delete once you use it
  return 0;
}

std::size_t ContiguousCache::bytes_reserved() const { return 0; }

void ContiguousCache::append(const nn::DecodeRow& row, std::size_t layer, const float* key, const float* value) {
  (void)row; (void)layer; (void)key; (void)value;  // delete once you use them
}

void ContiguousCache::attend(const nn::DecodeRow& row, std::size_t layer, const float* query, float* out) {
  (void)row; (void)layer; (void)query; (void)out;  // delete once you use them
}

// TODO(12.3): Paged attention on the host: a pool of blocks read through the block table
// See lessons/12-serving.md, section "TODO(12.3)".
PagedCache::PagedCache(const nn::GPTConfig& config, BlockManager& manager) : config_(config), manager_(manager) {}

std::size_t PagedCache::block_floats() const { return 0; }

void PagedCache::append(const nn::DecodeRow& row, std::size_t layer, const float* key, const float* value) {
  (void)row; (void)layer; (void)key; (void)value;  // delete once you use them
}

void PagedCache::attend(const nn::DecodeRow& row, std::size_t layer, const float* query, float* out) {
  (void)row; (void)layer; (void)query; (void)out;  // delete once you use them
}

}  // namespace lab12
