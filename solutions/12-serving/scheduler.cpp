/// @file scheduler.cpp
/// @brief Lab 12 — the scheduler: continuous (iteration-level) batching under a token budget and
/// a block budget, chunked prefill, preemption by recomputation. Read lessons/12-serving.md,
/// section "TODO(12.4)".
///
/// Why per step: a batch that starts and ends together (static batching) holds every finished
/// request's slot until the longest one ends, and keeps new arrivals waiting for the whole batch.
/// Deciding again at every step lets a request leave the moment it is done and another take its
/// place (Orca, OSDI 2022).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "serving.hpp"

namespace lab12 {

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager& manager) : config_(config), manager_(manager) {
  if (config_.context == 0 || config_.token_budget == 0 || config_.max_running == 0) {
    throw std::invalid_argument("Scheduler: the context, the token budget and max_running must be at least 1");
  }
  if (config_.context % manager_.block_size() != 0) {
    throw std::invalid_argument("Scheduler: blocks of " + std::to_string(manager_.block_size()) + " positions do not divide the context of " +
                                std::to_string(config_.context));
  }
}

// BEGIN SOLUTION(12.4) Continuous batching: budgets, chunked prefill, preemption, no starvation
namespace {
std::string id_of(std::size_t id) { return "request " + std::to_string(id); }
}  // namespace

void Scheduler::submit(const Request& r) {
  const std::size_t B = manager_.block_size(), total = r.prompt.size() + r.max_new;
  const std::size_t slots = total - 1, blocks = (slots + B - 1) / B;  // the last token generated never takes a slot
  std::string why;
  if (r.prompt.empty()) why = "an empty prompt";
  else if (r.max_new == 0) why = "max_new is 0: nothing to generate";
  else if (requests_.count(r.id) != 0) why = "the id is taken";
  else if (total > config_.context) why = std::to_string(r.prompt.size()) + " + " + std::to_string(r.max_new) + " tokens, past the context of " + std::to_string(config_.context);
  else if (blocks > manager_.blocks()) {
    why = "its " + std::to_string(slots) + " positions need " + std::to_string(blocks) + " blocks and the cache has " + std::to_string(manager_.blocks()) +
          ": it could never finish";
  }
  if (!why.empty()) throw std::invalid_argument("Scheduler::submit: " + id_of(r.id) + ": " + why);
  for (const int t : r.prompt) {
    if (t < 0) throw std::invalid_argument("Scheduler::submit: " + id_of(r.id) + ": a negative token");
  }
  State s;
  s.request = r;
  s.tokens = r.prompt;
  s.order = requests_.size();
  requests_.emplace(r.id, std::move(s));
  waiting_.push_back(r.id);
  std::stable_sort(waiting_.begin(), waiting_.end(), [&](std::size_t a, std::size_t b) {  // arrival order, then submission order
    const State &x = requests_.at(a), &y = requests_.at(b);
    return x.request.arrival != y.request.arrival ? x.request.arrival < y.request.arrival : x.order < y.order;
  });
}

Step Scheduler::schedule() {
  Step step;
  const std::size_t B = manager_.block_size();
  const auto older = [&](std::size_t a, std::size_t b) {
    const State &x = requests_.at(a), &y = requests_.at(b);
    return x.request.arrival != y.request.arrival ? x.request.arrival < y.request.arrival : x.order < y.order;
  };
  std::size_t budget = config_.token_budget, planned = 0;  // rows left; blocks the planned chunks will take

  // The running requests, oldest first, each its next chunk of what it knows.
  for (std::size_t i = 0; i < running_.size() && budget > 0;) {
    const std::size_t id = running_[i];
    State& s = requests_.at(id);
    const std::size_t want = std::min(s.tokens.size() - s.computed, budget);
    std::size_t count = want;
    while (count > 0 && manager_.blocks_needed(id, count) + planned > manager_.free_blocks()) --count;  // what the free blocks hold
    bool self = false;
    while (count == 0) {  // not one row fits: make room
      const std::size_t victim = running_.back();  // the youngest; every request scheduled so far is older
      step.log.push_back("preempt " + id_of(victim) + " (the youngest running, " + std::to_string(manager_.table(victim).size()) + " blocks): " +
                         id_of(id) + " needs a block for its next row and none is free");
      manager_.release(victim);
      State& v = requests_.at(victim);
      v.computed = 0;
      v.running = false;
      running_.pop_back();
      waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), victim, older), victim);
      step.preempted.push_back(victim);
      if (victim == id) {
        self = true;
        break;
      }
      if (manager_.blocks_needed(id, 1) + planned <= manager_.free_blocks()) {
        count = want;
        while (manager_.blocks_needed(id, count) + planned > manager_.free_blocks()) --count;
      }
    }
    if (self) break;  // it and everyone younger went back to waiting
    if (count < want) step.log.push_back(id_of(id) + ": " + std::to_string(count) + " of " + std::to_string(want) + " rows fit in the free blocks");
    planned += manager_.blocks_needed(id, count);
    budget -= count;
    step.chunks.push_back({id, s.computed, count});
    ++i;
  }
  if (budget == 0) step.log.push_back("token budget spent: " + std::to_string(config_.token_budget) + " rows");

  // Then the waiting ones, in arrival order, none overtaking another: admitted when the free
  // blocks hold everything they know (so that they do not stall at once), a chunk of it now.
  while (!waiting_.empty() && budget > 0) {
    const std::size_t id = waiting_.front();
    State& s = requests_.at(id);
    if (running_.size() >= config_.max_running) {
      step.log.push_back("wait " + id_of(id) + ": " + std::to_string(config_.max_running) + " requests running, the most allowed");
      break;
    }
    const std::size_t shared = manager_.shared_prefix(s.tokens), known = s.tokens.size();
    const std::size_t need = (known + B - 1) / B - shared / B, count = std::min(known - shared, budget);
    if (need + planned > manager_.free_blocks()) {
      step.log.push_back("wait " + id_of(id) + ": its " + std::to_string(known - shared) + " unshared positions need " + std::to_string(need) + " blocks, " +
                         std::to_string(manager_.free_blocks() - std::min(planned, manager_.free_blocks())) + " free after this step's chunks");
      break;
    }
    manager_.add(id, s.tokens);
    s.computed = shared;
    s.running = true;
    waiting_.pop_front();
    running_.insert(std::upper_bound(running_.begin(), running_.end(), id, older), id);
    step.admitted.push_back(id);
    step.chunks.push_back({id, shared, count});
    step.log.push_back("admit " + id_of(id) + ": " + std::to_string(shared) + " of " + std::to_string(known) + " known positions shared, rows " +
                       std::to_string(shared) + " … " + std::to_string(shared + count - 1) + (shared + count < known ? " (a chunk)" : ""));
    planned += manager_.blocks_needed(id, count);
    budget -= count;
  }
  return step;
}

void Scheduler::complete(const Step& step, const std::map<std::size_t, int>& next) {
  for (const Chunk& c : step.chunks) {
    State& s = requests_.at(c.id);
    if (!s.running || c.first != s.computed || c.first + c.count > s.tokens.size()) {
      throw std::logic_error("Scheduler::complete: a chunk of " + id_of(c.id) + " from " + std::to_string(c.first) + " that this scheduler did not plan");
    }
    s.computed += c.count;
    if (s.computed < s.tokens.size()) continue;  // a chunk of a longer prefill: no token yet
    const auto it = next.find(c.id);
    if (it == next.end()) throw std::logic_error("Scheduler::complete: no token for " + id_of(c.id) + ", whose chunk reached its last known token");
    s.generated.push_back(it->second);
    s.tokens.push_back(it->second);
    if (s.generated.size() < s.request.max_new) continue;
    s.done = true;
    s.running = false;
    manager_.release(c.id);
    running_.erase(std::find(running_.begin(), running_.end(), c.id));
  }
}

bool Scheduler::busy() const { return !waiting_.empty() || !running_.empty(); }

const std::vector<int>& Scheduler::generated(std::size_t id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) throw std::invalid_argument("Scheduler::generated: unknown " + id_of(id));
  return it->second.generated;
}

bool Scheduler::finished(std::size_t id) const {
  const auto it = requests_.find(id);
  return it != requests_.end() && it->second.done;
}
// STUB: void Scheduler::submit(const Request& request) {
// STUB:   (void)request;  // delete once you use it
// STUB: }
// STUB:
// STUB: Step Scheduler::schedule() { return {}; }
// STUB:
// STUB: void Scheduler::complete(const Step& step, const std::map<std::size_t, int>& next) {
// STUB:   (void)step; (void)next;  // delete once you use them
// STUB: }
// STUB:
// STUB: bool Scheduler::busy() const { return false; }
// STUB:
// STUB: const std::vector<int>& Scheduler::generated(std::size_t id) const {
// STUB:   (void)id;  // delete once you use it
// STUB:   static const std::vector<int> none;
// STUB:   return none;
// STUB: }
// STUB:
// STUB: bool Scheduler::finished(std::size_t id) const {
// STUB:   (void)id;  // delete once you use it
// STUB:   return false;
// STUB: }
// END SOLUTION

}  // namespace lab12
