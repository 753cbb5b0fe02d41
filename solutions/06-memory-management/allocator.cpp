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

// BEGIN SOLUTION(06.2) Round, best fit in the pool and the stream, else a new segment; split off what is left over
void* allocate_block(State& s, std::size_t bytes, Stream stream) {
  process_events(s);
  const std::size_t size = bytes == 0 ? kMinBlock : (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
  const bool small = size <= kSmallSize;
  std::uintptr_t address = 0;
  auto fit = s.free_set.lower_bound({small, stream, size, 0});
  if (fit != s.free_set.end() && std::get<0>(*fit) == small && std::get<1>(*fit) == stream &&
      !(size < s.max_split && std::get<2>(*fit) >= s.max_split)) {
    address = std::get<3>(*fit);
    s.free_set.erase(fit);
  } else {
    const std::size_t segment = small ? kSmallSegment : size <= kMidSize ? kMidSegment : (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    address = reinterpret_cast<std::uintptr_t>(segment_from_backend(s, segment, size));
    s.segments[address] = segment;
    s.stats.reserved += segment;
    s.stats.peak_reserved = std::max(s.stats.peak_reserved, s.stats.reserved);
    Block b;
    b.segment = address;
    b.size = segment;
    b.stream = stream;
    b.small = small;
    s.blocks[address] = b;
  }
  Block& b = s.blocks.at(address);
  const std::size_t rest = b.size - size;
  if (b.size < s.max_split && (small ? rest >= kMinBlock : rest > kSmallSize)) {
    Block remainder = b;
    remainder.size = rest;
    b.size = size;
    s.blocks[address + size] = remainder;
    s.insert_free(address + size);
  }
  Block& live = s.blocks.at(address);
  live.live = true;
  s.stats.allocated += live.size;
  s.stats.peak_allocated = std::max(s.stats.peak_allocated, s.stats.allocated);
  return reinterpret_cast<void*>(address);
}
// STUB: void* allocate_block(State&, std::size_t, Stream) { throw std::logic_error("allocate: not written yet"); }
// END SOLUTION

// BEGIN SOLUTION(06.3) Out of memory: empty the cache and ask once more, then say what is where
void* segment_from_backend(State& s, std::size_t segment, std::size_t size) {
  void* p = s.backend.malloc(segment);
  if (p == nullptr) {
    ++s.stats.failed_mallocs;
    process_events(s);  // what empty_cache does
    release_free_segments(s);
    p = s.backend.malloc(segment);
  }
  if (p == nullptr) {
    ++s.stats.failed_mallocs;
    throw OutOfMemory("out of memory: tried to allocate " + format_bytes(size) + "; " + format_bytes(s.stats.allocated) + " allocated, " +
                      format_bytes(s.stats.reserved) + " reserved, the largest free block " + format_bytes(s.largest_free()));
  }
  ++s.stats.backend_mallocs;
  return p;
}
// STUB: void* segment_from_backend(State& s, std::size_t segment, std::size_t) {
// STUB:   void* p = s.backend.malloc(segment);
// STUB:   if (p == nullptr) throw OutOfMemory("out of memory");
// STUB:   ++s.stats.backend_mallocs;
// STUB:   return p;
// STUB: }
// END SOLUTION

// BEGIN SOLUTION(06.4) Free and coalesce; blocks other streams use wait for their events; whole free segments go back
/// The block at @p a becomes free and merges with the free blocks next to it in its segment.
void make_free(State& s, std::uintptr_t a) {
  Block& b = s.blocks.at(a);
  b.live = b.waiting = false;
  auto it = s.blocks.find(a);
  auto next = std::next(it);
  if (next != s.blocks.end() && next->second.segment == b.segment && !next->second.live && !next->second.waiting) {
    s.erase_free(next->first);
    b.size += next->second.size;
    s.blocks.erase(next);
  }
  if (it != s.blocks.begin()) {
    auto prev = std::prev(it);
    if (prev->second.segment == b.segment && !prev->second.live && !prev->second.waiting) {
      s.erase_free(prev->first);
      prev->second.size += b.size;
      s.blocks.erase(it);
      s.insert_free(prev->first);
      return;
    }
  }
  s.insert_free(a);
}

void free_block(State& s, std::uintptr_t a) {
  Block& b = s.blocks.at(a);
  s.stats.allocated -= b.size;
  if (b.other_streams.empty()) {
    make_free(s, a);
    return;
  }
  Pending p{a, {}};
  for (Stream other : b.other_streams) p.events.push_back(s.backend.record_event(other));
  b.other_streams.clear();
  b.live = false;
  b.waiting = true;
  s.pending.push_back(p);
}

void use_on_stream(State& s, std::uintptr_t a, Stream stream) {
  Block& b = s.blocks.at(a);
  if (stream != b.stream) b.other_streams.insert(stream);  // its own stream needs no event
}

void process_events(State& s) {
  for (auto p = s.pending.begin(); p != s.pending.end();) {
    bool done = true;
    for (Event e : p->events) done = s.backend.query(e) && done;
    if (done) {
      make_free(s, p->address);
      p = s.pending.erase(p);
    } else {
      ++p;
    }
  }
}

void release_free_segments(State& s) {
  for (auto seg = s.segments.begin(); seg != s.segments.end();) {
    const Block& b = s.blocks.at(seg->first);
    if (!b.live && !b.waiting && b.size == seg->second) {
      s.erase_free(seg->first);
      s.blocks.erase(seg->first);
      s.backend.free(reinterpret_cast<void*>(seg->first));
      ++s.stats.backend_frees;
      s.stats.reserved -= seg->second;
      seg = s.segments.erase(seg);
    } else {
      ++seg;
    }
  }
}
// STUB: void free_block(State& s, std::uintptr_t a) {
// STUB:   s.stats.allocated -= s.blocks.at(a).size;
// STUB:   s.blocks.at(a).live = false;  // never reused, never coalesced
// STUB: }
// STUB: void use_on_stream(State&, std::uintptr_t, Stream) {}
// STUB: void process_events(State&) {}
// STUB: void release_free_segments(State&) {}
// END SOLUTION

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
