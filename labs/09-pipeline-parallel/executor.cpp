/// @file executor.cpp
/// @brief Lab 09 — running a schedule over real ranks: sends that never wait, receives posted
/// ahead, activations kept from a micro-batch's forward to its backward and no longer. Read
/// lessons/09-pipeline-parallel.md.
///
/// Memory: stage s keeps what each micro-batch's forward saved until its backward. GPipe keeps
/// all m; 1F1B at most p − s. The messages are micro_batch × width floats each: an activation
/// forward, a gradient back, over each link once per micro-batch.
#include <deque>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeline.hpp"

namespace lab09 {

using gpulab::dist::Request;

std::vector<nn::Parameter*> StageModel::parameters() const {
  std::vector<nn::Parameter*> params;
  for (const Chunk& c : chunks) {
    for (std::size_t i = c.first; i < c.last; ++i) {
      for (nn::Parameter* p : model->layer(i).parameters()) params.push_back(p);
    }
  }
  return params;
}

double run_schedule(Communicator& comm, const Schedule& schedule, StageModel& stage, const std::vector<nn::Tensor>& inputs,
                    const std::vector<std::vector<int>>& labels, nn::Optimizer& optimizer) {
  // TODO(09.4): Walk the schedule: receives posted ahead, sends left to finish, activations freed after their backward
  // See lessons/09-pipeline-parallel.md, section "TODO(09.4)".
  return 0.0;
}

}  // namespace lab09
