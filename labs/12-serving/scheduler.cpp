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

// TODO(12.4): Continuous batching: budgets, chunked prefill, preemption, no starvation
// See lessons/12-serving.md, section "TODO(12.4)".
void Scheduler::submit(const Request& request) {
  (void)request;  // delete once you use it
}

Step Scheduler::schedule() { return {}; }

void Scheduler::complete(const Step& step, const std::map<std::size_t, int>& next) {
  (void)step; (void)next;  // delete once you use them
}

bool Scheduler::busy() const { return false; }

const std::vector<int>& Scheduler::generated(std::size_t id) const {
  (void)id;  // delete once you use it
  static const std::vector<int> none;
  return none;
}

bool Scheduler::finished(std::size_t id) const {
  (void)id;  // delete once you use it
  return false;
}

}  // namespace lab12
