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

// BEGIN SOLUTION(12.1) The contiguous cache: the whole context reserved per sequence
std::size_t kv_bytes_per_token(const nn::GPTConfig& config) { return 2 * config.layers * config.width * sizeof(float); }

std::size_t ContiguousCache::add(std::size_t sequence) {
  if (sequences_.count(sequence) != 0) throw std::invalid_argument("ContiguousCache::add: sequence " + std::to_string(sequence) + " exists");
  const std::size_t floats = config_.context * config_.width;  // heads × context × hd
  Sequence& s = sequences_[sequence];
  s.keys.assign(config_.layers, std::vector<float>(floats, 0.0f));
  s.values.assign(config_.layers, std::vector<float>(floats, 0.0f));
  s.filled.assign(config_.layers, 0);
  return config_.context * kv_bytes_per_token(config_);
}

void ContiguousCache::release(std::size_t sequence) {
  if (sequences_.erase(sequence) == 0) throw std::invalid_argument("ContiguousCache::release: unknown sequence " + std::to_string(sequence));
}

std::size_t ContiguousCache::length(std::size_t sequence) const {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) throw std::invalid_argument("ContiguousCache::length: unknown sequence " + std::to_string(sequence));
  return *std::min_element(it->second.filled.begin(), it->second.filled.end());
}

std::size_t ContiguousCache::bytes_reserved() const { return sequences_.size() * config_.context * kv_bytes_per_token(config_); }

void ContiguousCache::append(const nn::DecodeRow& row, std::size_t layer, const float* key, const float* value) {
  const auto it = sequences_.find(row.sequence);
  if (it == sequences_.end()) throw std::invalid_argument("ContiguousCache::append: unknown sequence " + std::to_string(row.sequence));
  Sequence& s = it->second;
  if (row.position != s.filled.at(layer)) {
    throw std::logic_error("ContiguousCache::append: position " + std::to_string(row.position) + " of sequence " + std::to_string(row.sequence) +
                           " in layer " + std::to_string(layer) + ", whose next position is " + std::to_string(s.filled[layer]));
  }
  const std::size_t H = config_.heads, hd = config_.width / H, ctx = config_.context;
  for (std::size_t h = 0; h < H; ++h) {
    std::copy(key + h * hd, key + (h + 1) * hd, s.keys[layer].begin() + static_cast<std::ptrdiff_t>((h * ctx + row.position) * hd));
    std::copy(value + h * hd, value + (h + 1) * hd, s.values[layer].begin() + static_cast<std::ptrdiff_t>((h * ctx + row.position) * hd));
  }
  ++s.filled[layer];
}

void ContiguousCache::attend(const nn::DecodeRow& row, std::size_t layer, const float* query, float* out) {
  const auto it = sequences_.find(row.sequence);
  if (it == sequences_.end()) throw std::invalid_argument("ContiguousCache::attend: unknown sequence " + std::to_string(row.sequence));
  const Sequence& s = it->second;
  if (row.position >= s.filled.at(layer)) {
    throw std::logic_error("ContiguousCache::attend: position " + std::to_string(row.position) + " of sequence " + std::to_string(row.sequence) +
                           " in layer " + std::to_string(layer) + ", which holds " + std::to_string(s.filled[layer]));
  }
  const std::size_t H = config_.heads, hd = config_.width / H, ctx = config_.context, n = row.position + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<const float*> keys(n), values(n);
  for (std::size_t h = 0; h < H; ++h) {
    for (std::size_t j = 0; j < n; ++j) {
      keys[j] = s.keys[layer].data() + (h * ctx + j) * hd;
      values[j] = s.values[layer].data() + (h * ctx + j) * hd;
    }
    nn::attend(query + h * hd, keys.data(), values.data(), n, hd, scale, out + h * hd);
  }
}
// STUB: std::size_t kv_bytes_per_token(const nn::GPTConfig& config) {
// STUB:   (void)config;  // delete once you use it
// STUB:   return 0;
// STUB: }
// STUB:
// STUB: std::size_t ContiguousCache::add(std::size_t sequence) {
// STUB:   (void)sequence;  // delete once you use it
// STUB:   return 0;
// STUB: }
// STUB:
// STUB: void ContiguousCache::release(std::size_t sequence) {
// STUB:   (void)sequence;  // delete once you use it
// STUB: }
// STUB:
// STUB: std::size_t ContiguousCache::length(std::size_t sequence) const {
// STUB:   (void)sequence;  // delete once you use it
// STUB:   return 0;
// STUB: }
// STUB:
// STUB: std::size_t ContiguousCache::bytes_reserved() const { return 0; }
// STUB:
// STUB: void ContiguousCache::append(const nn::DecodeRow& row, std::size_t layer, const float* key, const float* value) {
// STUB:   (void)row; (void)layer; (void)key; (void)value;  // delete once you use them
// STUB: }
// STUB:
// STUB: void ContiguousCache::attend(const nn::DecodeRow& row, std::size_t layer, const float* query, float* out) {
// STUB:   (void)row; (void)layer; (void)query; (void)out;  // delete once you use them
// STUB: }
// END SOLUTION

// BEGIN SOLUTION(12.3) Paged attention on the host: a pool of blocks read through the block table
PagedCache::PagedCache(const nn::GPTConfig& config, BlockManager& manager) : config_(config), manager_(manager) {
  config_.validate();
  if (config_.context % manager_.block_size() != 0) {
    throw std::invalid_argument("PagedCache: blocks of " + std::to_string(manager_.block_size()) + " positions do not divide the context of " +
                                std::to_string(config_.context));
  }
  pool_.assign(manager_.blocks() * block_floats(), 0.0f);
}

std::size_t PagedCache::block_floats() const { return config_.layers * 2 * config_.width * manager_.block_size(); }

namespace {
/// The first float of (block, layer, kv, head)'s B slots.
std::size_t base_of(const nn::GPTConfig& c, std::size_t B, std::size_t block, std::size_t layer, std::size_t kv, std::size_t head) {
  const std::size_t hd = c.width / c.heads;
  return (((block * c.layers + layer) * 2 + kv) * c.heads + head) * B * hd;
}
}  // namespace

void PagedCache::append(const nn::DecodeRow& row, std::size_t layer, const float* key, const float* value) {
  const std::size_t B = manager_.block_size(), H = config_.heads, hd = config_.width / H;
  if (layer == 0) {  // the row takes its slot once; later layers find it through the table
    if (row.position != manager_.length(row.sequence)) {
      throw std::logic_error("PagedCache::append: position " + std::to_string(row.position) + " of sequence " + std::to_string(row.sequence) +
                             ", whose next position is " + std::to_string(manager_.length(row.sequence)));
    }
    const Slot slot = manager_.append(row.sequence, row.token);
    if (slot.copy_from != kNone) {  // copy on write: the slots before this one, every layer
      for (std::size_t l = 0; l < config_.layers; ++l) {
        for (std::size_t kv = 0; kv < 2; ++kv) {
          for (std::size_t h = 0; h < H; ++h) {
            const float* from = pool_.data() + base_of(config_, B, slot.copy_from, l, kv, h);
            std::copy(from, from + slot.offset * hd, pool_.data() + base_of(config_, B, slot.block, l, kv, h));
          }
        }
      }
    }
  } else if (row.position >= manager_.length(row.sequence)) {  // layer 0 gave every row of the call its slot
    throw std::logic_error("PagedCache::append: layer " + std::to_string(layer) + " at position " + std::to_string(row.position) + " of sequence " +
                           std::to_string(row.sequence) + ", which has " + std::to_string(manager_.length(row.sequence)) + " slots");
  }
  const std::size_t block = manager_.table(row.sequence).at(row.position / B), slot = row.position % B;
  for (std::size_t h = 0; h < H; ++h) {
    std::copy(key + h * hd, key + (h + 1) * hd, pool_.data() + base_of(config_, B, block, layer, 0, h) + slot * hd);
    std::copy(value + h * hd, value + (h + 1) * hd, pool_.data() + base_of(config_, B, block, layer, 1, h) + slot * hd);
  }
}

void PagedCache::attend(const nn::DecodeRow& row, std::size_t layer, const float* query, float* out) {
  const std::size_t B = manager_.block_size(), H = config_.heads, hd = config_.width / H, n = row.position + 1;
  if (n > manager_.length(row.sequence)) {
    throw std::logic_error("PagedCache::attend: position " + std::to_string(row.position) + " of sequence " + std::to_string(row.sequence) +
                           ", which has " + std::to_string(manager_.length(row.sequence)) + " slots");
  }
  const std::vector<std::size_t>& table = manager_.table(row.sequence);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<const float*> keys(n), values(n);
  for (std::size_t h = 0; h < H; ++h) {
    for (std::size_t j = 0; j < n; ++j) {  // position j: block table[j / B], slot j % B
      keys[j] = pool_.data() + base_of(config_, B, table[j / B], layer, 0, h) + (j % B) * hd;
      values[j] = pool_.data() + base_of(config_, B, table[j / B], layer, 1, h) + (j % B) * hd;
    }
    nn::attend(query + h * hd, keys.data(), values.data(), n, hd, scale, out + h * hd);
  }
}
// STUB: PagedCache::PagedCache(const nn::GPTConfig& config, BlockManager& manager) : config_(config), manager_(manager) {}
// STUB:
// STUB: std::size_t PagedCache::block_floats() const { return 0; }
// STUB:
// STUB: void PagedCache::append(const nn::DecodeRow& row, std::size_t layer, const float* key, const float* value) {
// STUB:   (void)row; (void)layer; (void)key; (void)value;  // delete once you use them
// STUB: }
// STUB:
// STUB: void PagedCache::attend(const nn::DecodeRow& row, std::size_t layer, const float* query, float* out) {
// STUB:   (void)row; (void)layer; (void)query; (void)out;  // delete once you use them
// STUB: }
// END SOLUTION

}  // namespace lab12
