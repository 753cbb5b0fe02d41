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
  // BEGIN SOLUTION(09.4) Walk the schedule: receives posted ahead, sends left to finish, activations freed after their backward
  const int p = stage.ranks, rank = comm.rank(), m = static_cast<int>(labels.size());
  const int stages = p * static_cast<int>(stage.chunks.size());
  if (inputs.size() != labels.size() || m < 1) throw std::invalid_argument("run_schedule: need as many inputs as labels, at least one");
  const nn::Device device = inputs.front().device();
  for (nn::Parameter* param : stage.parameters()) {
    if (param->frozen) continue;
    if (param->grad.empty()) param->grad = nn::Tensor(param->value.rows(), param->value.cols(), device);
    param->grad.fill(0.0f);
  }
  using Key = std::pair<int, int>;  // (chunk, micro)
  std::map<Key, std::vector<nn::Saved>> saved;  // from a forward to its backward
  std::map<Key, nn::Tensor> inbox;     // a received input, until its forward
  std::map<Key, nn::Tensor> outbox;    // a forward's output or a backward's input gradient, until sent
  std::map<Key, nn::Tensor> gradient;  // the gradient of a chunk's output, until its backward
  struct Sending {
    Request request;
    nn::Tensor tensor;  // alive until the send completes
  };
  std::deque<Sending> sending;
  struct Posted {
    Request request;
    nn::Tensor buffer;
  };
  std::map<std::size_t, Posted> posted;  // schedule index of a receive → its irecv
  // Receives kept posted ahead of the one being waited for: 2 over MPI; on NCCL none, since it
  // sends a rank's queued operations as one group at the first wait, and a group that holds a
  // receive the peer sends only after its own next group would never finish.
  const int ahead = comm.backend() == gpulab::dist::Backend::kNccl ? 0 : 2;
  std::size_t next_to_post = 0;
  auto vstage = [&](const Action& a) { return a.chunk * p + rank; };
  auto post_ahead = [&] {
    // Post the next receives of the schedule (in order, so that they match the peers' sends in
    // order), at most ahead + 1 at a time.
    for (; next_to_post < schedule.size() && static_cast<int>(posted.size()) <= ahead; ++next_to_post) {
      const Action& a = schedule[next_to_post];
      if (a.op != Op::kRecvActivation && a.op != Op::kRecvGradient) continue;
      const Chunk& c = stage.chunks.at(static_cast<std::size_t>(a.chunk));
      const bool act = a.op == Op::kRecvActivation;
      nn::Tensor buffer = nn::Tensor::uninitialized(stage.micro_batch, act ? c.in_width : c.out_width, device);
      const int peer = ((act ? vstage(a) - 1 : vstage(a) + 1) % p + p) % p;
      Request request = comm.irecv(buffer.data(), buffer.size(), peer);
      posted.emplace(next_to_post, Posted{std::move(request), std::move(buffer)});
    }
  };
  auto reap = [&] {
    for (auto it = sending.begin(); it != sending.end();) it = comm.test(it->request) ? sending.erase(it) : it + 1;
  };
  double loss = 0.0;
  for (std::size_t k = 0; k < schedule.size(); ++k) {
    const Action& a = schedule[k];
    const Key key{a.chunk, a.micro};
    const Chunk& c = stage.chunks.at(static_cast<std::size_t>(a.chunk));
    const int vs = vstage(a);
    post_ahead();
    switch (a.op) {
      case Op::kRecvActivation:
      case Op::kRecvGradient: {
        auto it = posted.find(k);
        comm.wait(it->second.request);
        (a.op == Op::kRecvActivation ? inbox : gradient)[key] = std::move(it->second.buffer);
        posted.erase(it);
        break;
      }
      case Op::kForward: {
        std::vector<nn::Saved>& s = saved[key];
        nn::Tensor y;
        if (vs == 0) {
          y = stage.model->forward(inputs.at(static_cast<std::size_t>(a.micro)), s, c.first, c.last);
        } else {
          nn::Tensor x = std::move(inbox.at(key));  // the first layer keeps its own copy; this one goes now
          inbox.erase(key);
          y = stage.model->forward(x, s, c.first, c.last);
        }
        if (vs == stages - 1) {
          nn::Tensor dlogits;
          loss += nn::softmax_cross_entropy(y, labels.at(static_cast<std::size_t>(a.micro)), &dlogits);
          nn::scale(dlogits, 1.0f / static_cast<float>(m));
          gradient[key] = std::move(dlogits);
        } else {
          outbox[key] = std::move(y);
        }
        break;
      }
      case Op::kSendActivation: {
        nn::Tensor y = std::move(outbox.at(key));
        outbox.erase(key);
        Request request = comm.isend(y.data(), y.size(), (vs + 1) % p);
        sending.push_back({std::move(request), std::move(y)});
        break;
      }
      case Op::kBackward: {
        nn::Tensor dx = stage.model->backward(gradient.at(key), saved.at(key), {}, {}, c.first, c.last);
        saved.erase(key);  // this micro-batch's activations are not needed any more
        gradient.erase(key);
        if (vs > 0) outbox[key] = std::move(dx);
        break;
      }
      case Op::kSendGradient: {
        nn::Tensor dx = std::move(outbox.at(key));
        outbox.erase(key);
        Request request = comm.isend(dx.data(), dx.size(), (vs - 1 + p) % p);
        sending.push_back({std::move(request), std::move(dx)});
        break;
      }
    }
    reap();
  }
  for (Sending& s : sending) comm.wait(s.request);
  sending.clear();
  optimizer.step(stage.parameters());
  return rank == (stages - 1) % p ? loss / m : 0.0;
  // STUB: return 0.0;
  // END SOLUTION
}

}  // namespace lab09
