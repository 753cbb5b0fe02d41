/// @file blocks.cpp
/// @brief Lab 12 — the block manager: block tables, reference counts, prefix sharing and copy on
/// write, the bookkeeping of a paged KV cache. Read lessons/12-serving.md, section "TODO(12.2)".
///
/// Why blocks: a contiguous cache reserves the whole context per sequence, and most of it stays
/// empty (a 40-token answer in a 128-token reservation wastes two thirds). Blocks of B positions
/// are taken as a sequence grows, so at most B − 1 slots per sequence sit unused; and a block is
/// just an id, so two sequences can hold the same one.
#include <stdexcept>
#include <string>
#include <vector>

#include "serving.hpp"

namespace lab12 {

BlockManager::BlockManager(std::size_t blocks, std::size_t block_size) : block_size_(block_size), refcount_(blocks, 0) {
  if (blocks == 0 || block_size == 0) {
    throw std::invalid_argument("BlockManager: " + std::to_string(blocks) + " blocks of " + std::to_string(block_size) + " positions");
  }
  for (std::size_t b = 0; b < blocks; ++b) free_.insert(free_.end(), b);
}

// TODO(12.2): Block tables, reference counts, prefix sharing, copy on write
// See lessons/12-serving.md, section "TODO(12.2)".
std::size_t BlockManager::free_blocks() const { return 0; }

std::size_t BlockManager::shared_prefix(const std::vector<int>& prompt) const {
  (void)prompt;  // delete once you use it
  return 0;
}

std::size_t BlockManager::add(std::size_t sequence, const std::vector<int>& prompt) {
  (void)sequence; (void)prompt;  // delete once you use them
  return 0;
}

std::size_t BlockManager::blocks_needed(std::size_t sequence, std::size_t count) const {
  (void)sequence; (void)count;  // delete once you use them
  return 0;
}

Slot BlockManager::append(std::size_t sequence, int token) {
  (void)sequence; (void)token;  // delete once you use them
  return {};
}

void BlockManager::fork(std::size_t parent, std::size_t child) {
  (void)parent; (void)child;  // delete once you use them
}

void BlockManager::release(std::size_t sequence) {
  (void)sequence;  // delete once you use it
}

const std::vector<std::size_t>& BlockManager::table(std::size_t sequence) const {
  (void)sequence;  // delete once you use it
  static const std::vector<std::size_t> none;
  return none;
}

std::size_t BlockManager::length(std::size_t sequence) const {
  (void)sequence;  // delete once you use it
  return 0;
}

}  // namespace lab12
