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

// BEGIN SOLUTION(12.2) Block tables, reference counts, prefix sharing, copy on write
std::size_t BlockManager::free_blocks() const { return free_.size(); }

std::size_t BlockManager::shared_prefix(const std::vector<int>& prompt) const {
  if (prompt.empty()) return 0;
  const std::size_t B = block_size_, most = (prompt.size() - 1) / B;  // the last prompt token is always computed
  std::size_t shared = 0;
  while (shared < most && registered_.count(std::vector<int>(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>((shared + 1) * B))) != 0) ++shared;
  return shared * B;
}

std::size_t BlockManager::add(std::size_t sequence, const std::vector<int>& prompt) {
  if (prompt.empty()) throw std::invalid_argument("BlockManager::add: sequence " + std::to_string(sequence) + " has an empty prompt");
  if (sequences_.count(sequence) != 0) throw std::invalid_argument("BlockManager::add: sequence " + std::to_string(sequence) + " exists");
  const std::size_t B = block_size_, shared = shared_prefix(prompt);
  Sequence& s = sequences_[sequence];
  for (std::size_t i = 1; i <= shared / B; ++i) {  // the prefixes shared_prefix found, each block taken
    const std::size_t block = registered_.at(std::vector<int>(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(i * B)));
    ++refcount_[block];
    s.table.push_back(block);
  }
  s.tokens.assign(prompt.begin(), prompt.begin() + shared);
  return shared;
}

std::size_t BlockManager::blocks_needed(std::size_t sequence, std::size_t count) const {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) throw std::invalid_argument("BlockManager::blocks_needed: unknown sequence " + std::to_string(sequence));
  if (count == 0) return 0;
  const std::size_t B = block_size_, length = it->second.tokens.size();
  const std::size_t fresh = (length + count + B - 1) / B - (length + B - 1) / B;  // blocks started by the new positions
  const bool cow = length % B != 0 && refcount_[it->second.table.back()] > 1;     // the shared partial block is written
  return fresh + (cow ? 1 : 0);
}

Slot BlockManager::append(std::size_t sequence, int token) {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) throw std::invalid_argument("BlockManager::append: unknown sequence " + std::to_string(sequence));
  Sequence& s = it->second;
  const std::size_t B = block_size_, position = s.tokens.size();
  Slot slot;
  slot.offset = position % B;
  const bool starts = slot.offset == 0, cow = !starts && refcount_[s.table.back()] > 1;
  if (starts || cow) {
    if (free_.empty()) {
      throw OutOfBlocks("BlockManager::append: no free block for position " + std::to_string(position) + " of sequence " + std::to_string(sequence) +
                        " (" + std::to_string(blocks()) + " blocks, all held)");
    }
    const std::size_t fresh = *free_.begin();
    free_.erase(free_.begin());
    refcount_[fresh] = 1;
    if (cow) {
      slot.copy_from = s.table.back();
      --refcount_[slot.copy_from];  // still ≥ 1: another table holds it
      s.table.back() = fresh;
    } else {
      s.table.push_back(fresh);
    }
  }
  slot.block = s.table.back();
  s.tokens.push_back(token);
  if (slot.offset == B - 1 && registered_.count(s.tokens) == 0) {  // just filled: register it unless its prefix already is
    registered_.emplace(s.tokens, slot.block);
    key_of_.emplace(slot.block, s.tokens);
  }
  return slot;
}

void BlockManager::fork(std::size_t parent, std::size_t child) {
  const auto it = sequences_.find(parent);
  if (it == sequences_.end()) throw std::invalid_argument("BlockManager::fork: unknown parent " + std::to_string(parent));
  if (sequences_.count(child) != 0) throw std::invalid_argument("BlockManager::fork: child " + std::to_string(child) + " exists");
  for (const std::size_t b : it->second.table) ++refcount_[b];
  const Sequence copy = it->second;  // before the insertion below can move the map's nodes' contents
  sequences_.emplace(child, copy);
}

void BlockManager::release(std::size_t sequence) {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) throw std::invalid_argument("BlockManager::release: unknown sequence " + std::to_string(sequence));
  for (const std::size_t b : it->second.table) {
    if (--refcount_[b] != 0) continue;
    free_.insert(b);
    const auto key = key_of_.find(b);
    if (key != key_of_.end()) {
      registered_.erase(key->second);
      key_of_.erase(key);
    }
  }
  sequences_.erase(it);
}

const std::vector<std::size_t>& BlockManager::table(std::size_t sequence) const {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) throw std::invalid_argument("BlockManager::table: unknown sequence " + std::to_string(sequence));
  return it->second.table;
}

std::size_t BlockManager::length(std::size_t sequence) const {
  const auto it = sequences_.find(sequence);
  if (it == sequences_.end()) throw std::invalid_argument("BlockManager::length: unknown sequence " + std::to_string(sequence));
  return it->second.tokens.size();
}
// STUB: std::size_t BlockManager::free_blocks() const { return 0; }
// STUB:
// STUB: std::size_t BlockManager::shared_prefix(const std::vector<int>& prompt) const {
// STUB:   (void)prompt;  // delete once you use it
// STUB:   return 0;
// STUB: }
// STUB:
// STUB: std::size_t BlockManager::add(std::size_t sequence, const std::vector<int>& prompt) {
// STUB:   (void)sequence; (void)prompt;  // delete once you use them
// STUB:   return 0;
// STUB: }
// STUB:
// STUB: std::size_t BlockManager::blocks_needed(std::size_t sequence, std::size_t count) const {
// STUB:   (void)sequence; (void)count;  // delete once you use them
// STUB:   return 0;
// STUB: }
// STUB:
// STUB: Slot BlockManager::append(std::size_t sequence, int token) {
// STUB:   (void)sequence; (void)token;  // delete once you use them
// STUB:   return {};
// STUB: }
// STUB:
// STUB: void BlockManager::fork(std::size_t parent, std::size_t child) {
// STUB:   (void)parent; (void)child;  // delete once you use them
// STUB: }
// STUB:
// STUB: void BlockManager::release(std::size_t sequence) {
// STUB:   (void)sequence;  // delete once you use it
// STUB: }
// STUB:
// STUB: const std::vector<std::size_t>& BlockManager::table(std::size_t sequence) const {
// STUB:   (void)sequence;  // delete once you use it
// STUB:   static const std::vector<std::size_t> none;
// STUB:   return none;
// STUB: }
// STUB:
// STUB: std::size_t BlockManager::length(std::size_t sequence) const {
// STUB:   (void)sequence;  // delete once you use it
// STUB:   return 0;
// STUB: }
// END SOLUTION

}  // namespace lab12
