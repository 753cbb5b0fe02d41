/// @file allocator.cpp
/// @brief Lab 06 — a caching allocator: segments from the backend, cut into blocks, kept when
/// freed and handed out again (best fit, split, coalesce), per stream, with events for blocks
/// that other streams still use. Read lessons/06-memory-management.md.
///
/// Why: cudaMalloc and cudaFree take tens to hundreds of microseconds and cudaFree synchronizes
/// the device; a training step allocates thousands of tensors. Caching makes nearly every
/// allocation a lookup in an ordered set: O(log n) and no call to the driver.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "memory.hpp"

namespace lab06 {

std::string format_bytes(std::size_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (value >= 1024.0 && u < 3) value /= 1024.0, ++u;
  char s[64];
  std::snprintf(s, sizeof s, "%.2f %s", value, units[u]);
  return s;
}

/// One block: a piece of a segment, live or free (or waiting for events before it is free).
struct Block {
  std::uintptr_t segment = 0;  ///< the segment's base address
  std::size_t size = 0;
  Stream stream = 0;
  bool small = false;
  bool live = false;
  bool waiting = false;            ///< freed, but other streams' events have not completed yet
  std::set<Stream> other_streams;  ///< record_stream
};

/// A block freed while other streams may still use it, and the events it waits for.
struct Pending {
  std::uintptr_t address = 0;
  std::vector<Event> events;
};

struct CachingAllocator::State {
  DeviceBackend& backend;
  std::size_t max_split;
  std::map<std::uintptr_t, Block> blocks;          ///< every block of every segment, by address
  std::map<std::uintptr_t, std::size_t> segments;  ///< base address → size
  /// The free blocks as (small, stream, size, address): the best fit is a lower_bound.
  std::set<std::tuple<bool, Stream, std::size_t, std::uintptr_t>> free_set;
  std::vector<Pending> pending;
  AllocatorStats stats;
  State(DeviceBackend& b, std::size_t m) : backend(b), max_split(m) {}

  void insert_free(std::uintptr_t a) {
    const Block& b = blocks.at(a);
    free_set.insert({b.small, b.stream, b.size, a});
  }
  void erase_free(std::uintptr_t a) {
    const Block& b = blocks.at(a);
    free_set.erase({b.small, b.stream, b.size, a});
  }
  /// The size of the largest free block.
  std::size_t largest_free() const {
    std::size_t largest = 0;
    for (const auto& f : free_set) largest = std::max(largest, std::get<2>(f));
    return largest;
  }
};

namespace {

using State = CachingAllocator::State;

void* segment_from_backend(State& s, std::size_t segment, std::size_t size);
void process_events(State& s);
void release_free_segments(State& s);

// TODO(06.2): Round, best fit in the pool and the stream, else a new segment; split off what is left over
// See lessons/06-memory-management.md, section "TODO(06.2)".
void* allocate_block(State&, std::size_t, Stream) { throw std::logic_error("allocate: not written yet"); }

// TODO(06.3): Out of memory: empty the cache and ask once more, then say what is where
// See lessons/06-memory-management.md, section "TODO(06.3)".
void* segment_from_backend(State& s, std::size_t segment, std::size_t) {
  void* p = s.backend.malloc(segment);
  if (p == nullptr) throw OutOfMemory("out of memory");
  ++s.stats.backend_mallocs;
  return p;
}

// TODO(06.4): Free and coalesce; blocks other streams use wait for their events; whole free segments go back
// See lessons/06-memory-management.md, section "TODO(06.4)".
void free_block(State& s, std::uintptr_t a) {
  s.stats.allocated -= s.blocks.at(a).size;
  s.blocks.at(a).live = false;  // never reused, never coalesced
}
void use_on_stream(State&, std::uintptr_t, Stream) {}
void process_events(State&) {}
void release_free_segments(State&) {}

}  // namespace

CachingAllocator::CachingAllocator(DeviceBackend& backend, std::size_t max_split) : state_(std::make_unique<State>(backend, max_split)) {
  if (max_split <= kMidSegment) throw std::invalid_argument("CachingAllocator: max_split must be above 20 MiB (" + format_bytes(max_split) + ")");
}

CachingAllocator::~CachingAllocator() {
  for (const auto& seg : state_->segments) state_->backend.free(reinterpret_cast<void*>(seg.first));
}

void* CachingAllocator::allocate(std::size_t bytes, Stream stream) { return allocate_block(*state_, bytes, stream); }

void CachingAllocator::free(void* pointer) {
  auto it = state_->blocks.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == state_->blocks.end() || !it->second.live) throw std::invalid_argument("CachingAllocator::free: not a live block from this allocator");
  free_block(*state_, it->first);
}

void CachingAllocator::record_stream(void* pointer, Stream stream) {
  auto it = state_->blocks.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == state_->blocks.end() || !it->second.live) throw std::invalid_argument("CachingAllocator::record_stream: not a live block");
  use_on_stream(*state_, it->first, stream);
}

void CachingAllocator::empty_cache() {
  process_events(*state_);
  release_free_segments(*state_);
}

AllocatorStats CachingAllocator::stats() const { return state_->stats; }

std::size_t CachingAllocator::block_size(void* pointer) const {
  auto it = state_->blocks.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == state_->blocks.end() || !it->second.live) throw std::invalid_argument("CachingAllocator::block_size: not a live block");
  return it->second.size;
}

}  // namespace lab06
