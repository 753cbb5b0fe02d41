/// @file pipeline.hpp
/// @brief Lab 09 — pipeline parallel: the functions you implement in labs/09-pipeline-parallel/
/// (partition.cpp, schedule.cpp, executor.cpp). Read lessons/09-pipeline-parallel.md.
///
/// This header belongs to the tests: do not change it. A gpulab::nn MLP is cut into p stages of
/// contiguous layers, one per rank; a batch is cut into m micro-batches of equal size. A schedule
/// is a value: for each rank, the ordered list of what it does — compute a micro-batch's forward
/// or backward, send or receive an activation or a gradient. The tests check your schedules on
/// the CPU (tests/09-pipeline-parallel/schedule_check.hpp simulates them) before anything runs,
/// then your executor runs them over a gpulab::dist::Communicator (isend, irecv, wait, test).
///
/// The executor's semantics, which the checker simulates: a send never waits for its receiver
/// (the executor starts it and goes on), a receive blocks until its message is there.
///
/// Stages and chunks. With plain schedules (GPipe, 1F1B) rank r runs stage r. With the
/// interleaved schedule, each rank holds v model chunks: the model is cut into v·p virtual
/// stages, and virtual stage c·p + r is chunk c of rank r (Megatron-LM's layout), so that a
/// micro-batch goes round the ranks v times. An activation of virtual stage k goes to the rank of
/// k + 1, a gradient to the rank of k − 1.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gpulab/dist.hpp"
#include "gpulab/nn.hpp"

namespace lab09 {

namespace nn = gpulab::nn;
using gpulab::dist::Communicator;

/// What one action does.
enum class Op {
  kForward,         ///< run the chunk's layers forward on the micro-batch (the last virtual stage also computes the loss)
  kBackward,        ///< run them backward from the gradient of their output
  kSendActivation,  ///< send the chunk's output to the next virtual stage
  kRecvActivation,  ///< receive the chunk's input from the previous virtual stage
  kSendGradient,    ///< send the gradient of the chunk's input to the previous virtual stage
  kRecvGradient,    ///< receive the gradient of the chunk's output from the next virtual stage
};
/// "forward", "backward", "send activation", "recv activation", "send gradient", "recv gradient".
const char* to_string(Op op);

/// One step of one rank's schedule: @p op for micro-batch @p micro (0 … m − 1) of model chunk
/// @p chunk (0 for plain schedules).
struct Action {
  Op op = Op::kForward;
  int micro = 0;
  int chunk = 0;
  bool operator==(const Action& o) const { return op == o.op && micro == o.micro && chunk == o.chunk; }
  bool operator!=(const Action& o) const { return !(*this == o); }
};
/// One rank's actions, in order.
using Schedule = std::vector<Action>;
/// "forward(3)", "recv gradient(0) chunk 1".
std::string to_string(const Action& action);

/// TODO(09.1): cut @p layer_flops.size() layers into @p stages contiguous, non-empty stages so
/// that the largest stage's FLOPs is as small as it can be; among the cuts that achieve it, the
/// one whose boundaries are earliest (compare boundary lists lexicographically). Returns the
/// stages + 1 boundaries: stage s is layers [b[s], b[s + 1]), b[0] = 0, b[stages] = layers.
/// Throws std::invalid_argument unless 1 ≤ stages ≤ layers.
std::vector<std::size_t> partition(const std::vector<double>& layer_flops, int stages);

/// TODO(09.2): GPipe (Huang et al., 2019) for @p stage of @p stages with @p micro micro-batches:
/// every forward (0, 1, …, m − 1), then every backward (0, 1, …, m − 1). A forward's input is
/// received just before it (not on stage 0) and its output sent just after it (not on the last
/// stage); a backward's output gradient is received just before it (not on the last stage) and
/// its input gradient sent just after it (not on stage 0). Throws std::invalid_argument unless
/// 0 ≤ stage < stages and micro ≥ 1.
Schedule gpipe(int stage, int stages, int micro);

/// TODO(09.3): 1F1B (PipeDream-Flush; Narayanan et al., 2021): warm-up forwards, then pairs of
/// one forward and one backward while forwards remain, then the remaining backwards; forwards and
/// backwards each in micro-batch order. The warm-up on stage s is as many forwards as it can run
/// while micro-batch 0 goes on to the last stage and its gradient comes back to s (a stage never
/// waits idle when it has a forward to run), and never more than there are micro-batches; the
/// count is yours to derive (lesson 09, TODO(09.3)) and the tests check it. At most p − s
/// micro-batches' activations are alive on stage s at any time. Receives and sends placed as in
/// gpipe(). Same arguments and errors as gpipe().
Schedule one_f_one_b(int stage, int stages, int micro);

/// TODO(09.5) stretch: interleaved 1F1B (Narayanan et al., 2021, §2.2) for @p rank of @p ranks
/// with @p chunks model chunks per rank. Forwards go through the chunks in groups of p
/// micro-batches: the k-th forward is chunk (k / p) mod v of micro-batch (k / (p·v))·p + k mod
/// p; the k-th backward likewise but chunk v − 1 − (k / p) mod v. Warm-up: min((p − r − 1)·2 +
/// (v − 1)·p, v·m) forwards, then one forward and one backward while forwards remain, then the
/// rest of the backwards. Throws std::invalid_argument unless m is a multiple of p (as
/// Megatron-LM requires) and chunks ≥ 1. (Two differences from Megatron-LM: it runs every
/// forward first when m = p, and with v = 1 it takes its plain 1F1B path; this formula gives a
/// warm-up twice as long there. Both are valid with buffered sends.)
Schedule interleaved(int rank, int ranks, int chunks, int micro);

/// Layers [first, last) of the model: one model chunk, with the widths of its input and output
/// (an activation received for it is micro_batch × in_width, a gradient micro_batch × out_width).
struct Chunk {
  std::size_t first = 0, last = 0;
  std::size_t in_width = 0, out_width = 0;
};

/// What one rank runs. Every rank builds the whole model from the same seed; it runs, and its
/// optimizer updates, only its chunks' layers.
struct StageModel {
  nn::Sequential* model = nullptr;  ///< the whole model
  std::vector<Chunk> chunks;        ///< this rank's chunks (one for plain schedules), chunk c as the schedule numbers them
  int ranks = 1;                    ///< p
  std::size_t micro_batch = 0;      ///< samples per micro-batch
  /// The parameters of this rank's chunks, in model order.
  std::vector<nn::Parameter*> parameters() const;
};

/// TODO(09.4): run @p schedule for one training step and update this rank's parameters once.
///   - gradients start from zero and accumulate over the micro-batches: they exist before the
///     step (the tests allocate them), so zero them in place (grad.fill(0.0f));
///   - virtual stage 0 takes micro-batch i's input from inputs[i]; the last one computes
///     nn::softmax_cross_entropy against labels[i] and starts backward from its dlogits scaled
///     by 1/m (nn::scale(dlogits, 1.0f / m)), so that the gradients are the whole batch's;
///   - a send starts an isend of the tensor and goes on (never waits for it there); keep the
///     tensor alive until the request completes and let it go then: Communicator::test tells
///     without blocking, and calling it on your pending sends after every action also moves
///     their data (MPI progresses only inside MPI calls); wait for every request before returning;
///   - a receive waits until its message is there; post it earlier (irecv), in schedule order,
///     so that the message has somewhere to land (a backend that cannot buffer needs that) — but
///     at most 2 ahead of the one being waited for: the memory check allows a few, not all m;
///   - keep a micro-batch's activations (nn::Saved) from its forward to its backward, and free
///     them right after the backward: at most what the schedule keeps alive is alive;
///   - finally one @p optimizer step over parameters() (this rank's, not the whole model's).
/// On CUDA IPC and NCCL, test() answers false until wait(), so there a sent tensor lives until
/// the end of the step; and NCCL sends a rank's queued operations as one group at its first
/// wait, so post only the next receive ahead there.
/// Returns the mean loss over the micro-batches on the rank of the last virtual stage, 0 on the
/// others.
double run_schedule(Communicator& comm, const Schedule& schedule, StageModel& stage, const std::vector<nn::Tensor>& inputs,
                    const std::vector<std::vector<int>>& labels, nn::Optimizer& optimizer);

}  // namespace lab09
