/// @file schedule.cpp
/// @brief Lab 09 — schedules as data: GPipe, 1F1B and interleaved 1F1B, each rank's ordered list
/// of computes, sends and receives. Read lessons/09-pipeline-parallel.md.
///
/// Napkin math: with forward f and backward b per micro-batch and stage, a step of m
/// micro-batches over p stages takes (m + p − 1)(f + b) in GPipe and in 1F1B, of which each
/// stage computes m(f + b): the bubble is (p − 1)/(m + p − 1). 1F1B does not shrink it; it
/// shrinks the activations kept alive from m to at most p − s on stage s. Interleaving v chunks
/// per rank makes each fill and drain step 1/v as long: (p − 1)/(v·m + p − 1).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "pipeline.hpp"

namespace lab09 {

const char* to_string(Op op) {
  switch (op) {
    case Op::kForward: return "forward";
    case Op::kBackward: return "backward";
    case Op::kSendActivation: return "send activation";
    case Op::kRecvActivation: return "recv activation";
    case Op::kSendGradient: return "send gradient";
    case Op::kRecvGradient: return "recv gradient";
  }
  return "?";
}

std::string to_string(const Action& action) {
  std::string s = std::string(to_string(action.op)) + "(" + std::to_string(action.micro) + ")";
  if (action.chunk != 0) s += " chunk " + std::to_string(action.chunk);
  return s;
}

namespace {

void check_arguments(const char* what, int stage, int stages, int micro) {
  if (stages < 1 || stage < 0 || stage >= stages || micro < 1) {
    throw std::invalid_argument(std::string(what) + ": need 0 <= stage < stages and micro >= 1 (stage " + std::to_string(stage) + " of " +
                                std::to_string(stages) + ", " + std::to_string(micro) + " micro-batches)");
  }
}

/// A forward of virtual stage @p vs of @p total, with its receive before and its send after.
void add_forward(Schedule& s, int micro, int chunk, int vs, int total) {
  if (vs > 0) s.push_back({Op::kRecvActivation, micro, chunk});
  s.push_back({Op::kForward, micro, chunk});
  if (vs < total - 1) s.push_back({Op::kSendActivation, micro, chunk});
}

/// A backward likewise: the output's gradient received before, the input's sent after.
void add_backward(Schedule& s, int micro, int chunk, int vs, int total) {
  if (vs < total - 1) s.push_back({Op::kRecvGradient, micro, chunk});
  s.push_back({Op::kBackward, micro, chunk});
  if (vs > 0) s.push_back({Op::kSendGradient, micro, chunk});
}

}  // namespace

Schedule gpipe(int stage, int stages, int micro) {
  check_arguments("gpipe", stage, stages, micro);
  Schedule s;
  // BEGIN SOLUTION(09.2) Every forward, then every backward
  for (int i = 0; i < micro; ++i) add_forward(s, i, 0, stage, stages);
  for (int i = 0; i < micro; ++i) add_backward(s, i, 0, stage, stages);
  // END SOLUTION
  return s;
}

Schedule one_f_one_b(int stage, int stages, int micro) {
  check_arguments("one_f_one_b", stage, stages, micro);
  Schedule s;
  // BEGIN SOLUTION(09.3) Warm-up forwards, then one forward and one backward, then the cool-down
  const int warmup = std::min(stages - stage - 1, micro);
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) add_forward(s, forwards, 0, stage, stages);
  for (; forwards < micro; ++forwards, ++backwards) {
    add_forward(s, forwards, 0, stage, stages);
    add_backward(s, backwards, 0, stage, stages);
  }
  for (; backwards < micro; ++backwards) add_backward(s, backwards, 0, stage, stages);
  // END SOLUTION
  return s;
}

Schedule interleaved(int rank, int ranks, int chunks, int micro) {
  check_arguments("interleaved", rank, ranks, micro);
  if (chunks < 1 || micro % ranks != 0) {
    throw std::invalid_argument("interleaved: need chunks >= 1 and the micro-batches a multiple of the ranks (" + std::to_string(micro) + " micro-batches, " +
                                std::to_string(ranks) + " ranks), as Megatron-LM requires");
  }
  Schedule s;
  // BEGIN SOLUTION(09.5) Chunks in groups of p micro-batches, Megatron-LM's warm-up, then 1F1B over virtual micro-batches
  const int total = chunks * micro, stages = chunks * ranks;
  // The k-th virtual micro-batch: its micro-batch and its chunk (backwards go through the chunks in reverse).
  auto micro_of = [&](int k) { return k / (ranks * chunks) * ranks + k % ranks; };
  auto chunk_of = [&](int k, bool forward) {
    const int c = k / ranks % chunks;
    return forward ? c : chunks - 1 - c;
  };
  const int warmup = std::min((ranks - rank - 1) * 2 + (chunks - 1) * ranks, total);
  auto forward = [&](int k) {
    const int c = chunk_of(k, true);
    add_forward(s, micro_of(k), c, c * ranks + rank, stages);
  };
  auto backward = [&](int k) {
    const int c = chunk_of(k, false);
    add_backward(s, micro_of(k), c, c * ranks + rank, stages);
  };
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) forward(forwards);
  for (; forwards < total; ++forwards, ++backwards) {
    forward(forwards);
    backward(backwards);
  }
  for (; backwards < total; ++backwards) backward(backwards);
  // END SOLUTION
  return s;
}

}  // namespace lab09
