/// @file schedule_check.hpp
/// @brief Lab 09's schedule checker (the tests' side, not yours): the rules a schedule must keep,
/// and a simulation with the executor's semantics — a send is buffered (it never waits for its
/// receiver), a receive blocks until its message has arrived, messages between two ranks arrive
/// in the order they were sent — with a cost per forward and per backward. It finds a schedule
/// that would deadlock before anything runs, says which rank waits for what, and gives the
/// schedule's makespan, bubble and peak live activations.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pipeline.hpp"

namespace lab09::check {

/// One compute action as the simulation placed it.
struct Interval {
  Action action;
  double start = 0.0, end = 0.0;
};

/// What the simulation found.
struct Report {
  std::string error;                        ///< "" when the schedules are valid and finish
  double makespan = 0.0;                    ///< when the last rank finishes
  std::vector<double> busy;                 ///< per rank: time spent computing
  std::vector<int> peak_alive;              ///< per rank: micro-batches (of any chunk) between forward and backward, at most
  std::vector<std::vector<Interval>> lanes;  ///< per rank: its forwards and backwards in time
  /// Idle share of all ranks' time: 1 − Σ busy / (p · makespan).
  double bubble() const {
    double sum = 0.0;
    for (double b : busy) sum += b;
    return makespan > 0 ? 1.0 - sum / (static_cast<double>(busy.size()) * makespan) : 0.0;
  }
};

namespace detail {

inline std::string rank_name(int r) { return "rank " + std::to_string(r); }

/// A message between virtual stages: an activation for @p to (from to − 1) or a gradient for
/// @p to (from to + 1).
struct Message {
  bool activation = true;
  int micro = 0;
  int to = 0;  ///< the receiving virtual stage
  bool operator==(const Message& o) const { return activation == o.activation && micro == o.micro && to == o.to; }
};

inline std::string describe(const Message& m, int ranks) {
  std::string s = std::string(m.activation ? "activation(" : "gradient(") + std::to_string(m.micro) + ")";
  if (m.to >= ranks) s += " for chunk " + std::to_string(m.to / ranks);
  return s;
}

/// The rules of one rank's schedule, on their own (no other rank involved).
inline std::string check_rules(const Schedule& s, int rank, int ranks, int chunks, int micro, int& peak) {
  const int stages = ranks * chunks;
  enum Flag { kIn = 1, kFwd = 2, kSentAct = 4, kGrad = 8, kBwd = 16, kSentGrad = 32 };
  std::map<std::pair<int, int>, int> state;  // (chunk, micro) → flags
  int alive = 0;
  peak = 0;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const Action& a = s[k];
    const std::string where = rank_name(rank) + ", action " + std::to_string(k) + " (" + to_string(a) + ")";
    if (a.micro < 0 || a.micro >= micro) return where + ": micro-batch " + std::to_string(a.micro) + " does not exist (m = " + std::to_string(micro) + ")";
    if (a.chunk < 0 || a.chunk >= chunks) return where + ": chunk " + std::to_string(a.chunk) + " does not exist (" + std::to_string(chunks) + " per rank)";
    const int vs = a.chunk * ranks + rank;
    const bool first = vs == 0, last = vs == stages - 1;
    int& f = state[{a.chunk, a.micro}];
    auto once = [&](int flag, const char* what) { return (f & flag) ? where + ": " + what + " twice" : std::string(); };
    std::string e;
    switch (a.op) {
      case Op::kRecvActivation:
        if (first) return where + ": the first stage has no one to receive an activation from (its input is the batch)";
        if (!(e = once(kIn, "received")).empty()) return e;
        f |= kIn;
        break;
      case Op::kForward:
        if (!(e = once(kFwd, "run")).empty()) return e;
        if (!first && !(f & kIn)) return where + ": comes before its recv activation(" + std::to_string(a.micro) + ")";
        f |= kFwd;
        peak = std::max(peak, ++alive);
        break;
      case Op::kSendActivation:
        if (last) return where + ": the last stage sends no activation (it computes the loss)";
        if (!(e = once(kSentAct, "sent")).empty()) return e;
        if (!(f & kFwd)) return where + ": sends an activation its forward has not made yet";
        f |= kSentAct;
        break;
      case Op::kRecvGradient:
        if (last) return where + ": the last stage receives no gradient (it starts from the loss)";
        if (!(e = once(kGrad, "received")).empty()) return e;
        f |= kGrad;
        break;
      case Op::kBackward:
        if (!(e = once(kBwd, "run")).empty()) return e;
        if (!(f & kFwd)) return where + ": comes before its forward";
        if (!last && !(f & kGrad)) return where + ": comes before its recv gradient(" + std::to_string(a.micro) + ")";
        f |= kBwd;
        --alive;
        break;
      case Op::kSendGradient:
        if (first) return where + ": the first stage sends no gradient (nothing comes before it)";
        if (!(e = once(kSentGrad, "sent")).empty()) return e;
        if (!(f & kBwd)) return where + ": sends a gradient its backward has not made yet";
        f |= kSentGrad;
        break;
    }
  }
  for (int c = 0; c < chunks; ++c) {
    const int vs = c * ranks + rank;
    for (int i = 0; i < micro; ++i) {
      const int f = state[{c, i}];
      const std::string what = "(" + std::to_string(i) + ")" + (chunks > 1 ? " chunk " + std::to_string(c) : "");
      if (!(f & kFwd)) return rank_name(rank) + ": forward" + what + " is missing";
      if (!(f & kBwd)) return rank_name(rank) + ": backward" + what + " is missing";
      if (vs < stages - 1 && !(f & kSentAct)) return rank_name(rank) + ": send activation" + what + " is missing (the next stage waits for it)";
      if (vs > 0 && !(f & kSentGrad)) return rank_name(rank) + ": send gradient" + what + " is missing (the previous stage waits for it)";
    }
  }
  return "";
}

}  // namespace detail

/// Checks and simulates @p schedules (one per rank) for @p chunks chunks per rank and @p micro
/// micro-batches, with @p forward and @p backward the cost of one chunk's forward and backward.
inline Report simulate(const std::vector<Schedule>& schedules, int chunks, int micro, double forward = 1.0, double backward = 2.0) {
  using detail::Message;
  const int ranks = static_cast<int>(schedules.size());
  Report rep;
  rep.busy.assign(static_cast<std::size_t>(ranks), 0.0);
  rep.peak_alive.assign(static_cast<std::size_t>(ranks), 0);
  rep.lanes.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    rep.error = detail::check_rules(schedules[static_cast<std::size_t>(r)], r, ranks, chunks, micro, rep.peak_alive[static_cast<std::size_t>(r)]);
    if (!rep.error.empty()) return rep;
  }
  std::map<std::pair<int, int>, std::deque<std::pair<Message, double>>> channel;  // (from, to) → messages in flight, with their send time
  std::vector<std::size_t> pc(static_cast<std::size_t>(ranks), 0);
  std::vector<double> clock(static_cast<std::size_t>(ranks), 0.0);
  auto rank_of = [&](int vs) { return vs % ranks; };
  // The message an action sends or waits for, and the rank at the other end.
  auto message_of = [&](const Action& a, int r, int& peer) {
    const int vs = a.chunk * ranks + r;
    Message m;
    m.micro = a.micro;
    switch (a.op) {
      case Op::kSendActivation: m.activation = true; m.to = vs + 1; peer = rank_of(vs + 1); break;
      case Op::kRecvActivation: m.activation = true; m.to = vs; peer = rank_of(vs - 1); break;
      case Op::kSendGradient: m.activation = false; m.to = vs - 1; peer = rank_of(vs - 1); break;
      default: m.activation = false; m.to = vs; peer = rank_of(vs + 1); break;
    }
    return m;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < ranks; ++r) {
      const Schedule& s = schedules[static_cast<std::size_t>(r)];
      std::size_t& k = pc[static_cast<std::size_t>(r)];
      double& t = clock[static_cast<std::size_t>(r)];
      while (k < s.size()) {
        const Action& a = s[k];
        if (a.op == Op::kForward || a.op == Op::kBackward) {
          const double cost = a.op == Op::kForward ? forward : backward;
          rep.lanes[static_cast<std::size_t>(r)].push_back({a, t, t + cost});
          t += cost;
          rep.busy[static_cast<std::size_t>(r)] += cost;
        } else if (a.op == Op::kSendActivation || a.op == Op::kSendGradient) {
          int peer = 0;
          const Message m = message_of(a, r, peer);
          channel[{r, peer}].push_back({m, t});
        } else {
          int peer = 0;
          const Message want = message_of(a, r, peer);
          auto& q = channel[{peer, r}];
          if (q.empty()) break;  // blocked, for now
          if (!(q.front().first == want)) {
            rep.error = detail::rank_name(r) + " waits at action " + std::to_string(k) + " for " + to_string(a) + " from " + detail::rank_name(peer) +
                        ", but the next message from " + detail::rank_name(peer) + " is " + detail::describe(q.front().first, ranks) +
                        " (messages between two ranks arrive in the order they were sent)";
            return rep;
          }
          t = std::max(t, q.front().second);
          q.pop_front();
        }
        ++k;
        moved = true;
      }
    }
  }
  for (int r = 0; r < ranks; ++r) {
    const Schedule& s = schedules[static_cast<std::size_t>(r)];
    const std::size_t k = pc[static_cast<std::size_t>(r)];
    if (k == s.size()) continue;
    int peer = 0;
    const Message want = message_of(s[k], r, peer);
    const Schedule& other = schedules[static_cast<std::size_t>(peer)];
    std::size_t at = other.size();
    for (std::size_t j = 0; j < other.size(); ++j) {
      int back = 0;
      if ((other[j].op == Op::kSendActivation || other[j].op == Op::kSendGradient) && message_of(other[j], peer, back) == want && back == r) at = j;
    }
    rep.error = "deadlock: " + detail::rank_name(r) + " waits for " + to_string(s[k]) + " from " + detail::rank_name(peer) + " at action " + std::to_string(k) + ", which " +
                detail::rank_name(peer);
    const std::size_t stuck = pc[static_cast<std::size_t>(peer)];
    if (at == other.size()) {
      rep.error += " never sends";
    } else {
      rep.error += " sends only at its action " + std::to_string(at) + ", after its action " + std::to_string(stuck) + " (" +
                   (stuck < other.size() ? to_string(other[stuck]) : std::string("the end")) + ") that waits in turn";
    }
    return rep;
  }
  for (double t : clock) rep.makespan = std::max(rep.makespan, t);
  return rep;
}

/// Forwards before the first backward in @p schedule (all of them if it has no backward).
inline int forwards_before_first_backward(const Schedule& schedule) {
  int n = 0;
  for (const Action& a : schedule) {
    if (a.op == Op::kBackward) break;
    if (a.op == Op::kForward) ++n;
  }
  return n;
}

/// Only the forwards and backwards of @p schedule, in order.
inline Schedule compute_order(const Schedule& schedule) {
  Schedule out;
  for (const Action& a : schedule) {
    if (a.op == Op::kForward || a.op == Op::kBackward) out.push_back(a);
  }
  return out;
}

}  // namespace lab09::check
