/// @file test_dist.cpp
/// @brief The Communicator on host memory (run on W ranks by mpirun): messages arrive in order
/// and intact, traffic is counted per destination, library collectives are counted inside a
/// LearnerScope only (through the Communicator or MPI directly), bad peers are errors; test()
/// completes requests without blocking and the message log records them.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <numeric>
#include <string>
#include <vector>

#include "gpulab/dist.hpp"

using gpulab::dist::Backend;
using gpulab::dist::Communicator;

TEST_CASE("point-to-point messages arrive intact and in order", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  const int w = comm->size(), r = comm->rank(), next = (r + 1) % w, prev = (r + w - 1) % w;
  // Three messages of different sizes to the next rank; they must match the receives in order.
  std::vector<std::vector<float>> out = {std::vector<float>(1), std::vector<float>(1000), std::vector<float>(70000)};
  std::vector<std::vector<float>> in = {std::vector<float>(1), std::vector<float>(1000), std::vector<float>(70000)};
  for (std::size_t m = 0; m < out.size(); ++m) std::iota(out[m].begin(), out[m].end(), static_cast<float>(1000 * r + m));
  std::vector<gpulab::dist::Request> requests;
  for (auto& buffer : in) requests.push_back(comm->irecv(buffer.data(), buffer.size(), prev));
  for (auto& buffer : out) requests.push_back(comm->isend(buffer.data(), buffer.size(), next));
  comm->wait_all(requests);
  for (std::size_t m = 0; m < in.size(); ++m) {
    CHECK(in[m].front() == static_cast<float>(1000 * prev + m));
    CHECK(in[m].back() == static_cast<float>(1000 * prev + m + in[m].size() - 1));
  }
}

TEST_CASE("test() completes a request without blocking and the message log says when", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  const int w = comm->size(), r = comm->rank(), next = (r + 1) % w, prev = (r + w - 1) % w;
  // 64 KiB: above the shared-memory eager limit, so the send cannot be complete before the
  // receive is posted; a barrier (harness, not logged) orders the two.
  std::vector<float> out(16384, static_cast<float>(r)), in(16384, -1.0f);
  comm->clear_messages();
  comm->log_messages(true);
  gpulab::dist::Request send = comm->isend(out.data(), out.size(), next);
  PMPI_Barrier(MPI_COMM_WORLD);
  gpulab::dist::Request recv = comm->irecv(in.data(), in.size(), prev);
  while (!comm->test(recv)) {
  }
  CHECK(in.front() == static_cast<float>(prev));
  CHECK(in.back() == static_cast<float>(prev));
  while (!comm->test(send)) {
  }
  CHECK_FALSE(send.pending);
  CHECK(comm->test(send));  // a completed request stays complete
  comm->wait(send);         // and waiting for it again does nothing
  CHECK(comm->sends_outstanding() == 0);
  CHECK(comm->recvs_outstanding() == 0);
  comm->log_messages(false);
  const auto log = comm->messages();
  REQUIRE(log.size() == 2);
  CHECK(log[0].send);
  CHECK(log[0].peer == next);
  CHECK(log[1].peer == prev);
  CHECK(log[0].count == out.size());
  for (const auto& e : log) {
    CHECK(e.posted > 0);
    CHECK(e.completed >= e.posted);
    CHECK(e.waited >= e.posted);
  }
  // Not logging: nothing is added; a cleared log forgets, and later completions of requests
  // posted before it do not write into it.
  gpulab::dist::Request late = comm->irecv(in.data(), 1, prev);
  gpulab::dist::Request other = comm->isend(out.data(), 1, next);
  comm->wait(other);
  comm->wait(late);
  CHECK(comm->messages().size() == 2);
  comm->clear_messages();
  CHECK(comm->messages().empty());
}

TEST_CASE("traffic is counted per destination", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  const int w = comm->size(), r = comm->rank(), next = (r + 1) % w, prev = (r + w - 1) % w;
  std::vector<float> out(100, 1.0f), in(100);
  comm->reset_traffic();
  comm->sendrecv(out.data(), out.size(), next, in.data(), in.size(), prev);
  comm->sendrecv(out.data(), 0, next, in.data(), 0, prev);  // zero counts send nothing
  CHECK(comm->traffic().bytes_to[static_cast<std::size_t>(next)] == 400);
  CHECK(comm->traffic().messages_to[static_cast<std::size_t>(next)] == 1);
  CHECK(comm->traffic().bytes_sent() == 400);
  CHECK(comm->traffic().messages_sent() == 1);
  CHECK(in.front() == 1.0f);
}

TEST_CASE("library collectives are counted inside a LearnerScope only", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  std::vector<float> x(10, 1.0f);
  gpulab::dist::reset_library_collectives();
  comm->allreduce_sum(x.data(), x.data(), x.size());  // outside: the harness may
  CHECK(gpulab::dist::library_collectives_called().empty());
  CHECK(x.front() == static_cast<float>(comm->size()));
  {
    gpulab::dist::LearnerScope scope;
    comm->allreduce_sum(x.data(), x.data(), x.size());
    MPI_Allreduce(MPI_IN_PLACE, x.data(), 10, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  // around the Communicator
    int one = 1, sum = 0;
    MPI_Reduce(&one, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  }
  const auto& called = gpulab::dist::library_collectives_called();
  REQUIRE(called.size() == 3);
  CHECK(called[0] == "Communicator::allreduce_sum");
  CHECK(called[1] == "MPI_Allreduce");
  CHECK(called[2] == "MPI_Reduce");
}

TEST_CASE("messaging yourself or a rank that does not exist is an error", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  float x = 0.0f;
  CHECK_THROWS_AS(comm->isend(&x, 1, comm->rank()), std::invalid_argument);
  CHECK_THROWS_AS(comm->irecv(&x, 1, comm->size()), std::invalid_argument);
  CHECK_THROWS_AS(comm->isend(&x, 1, -1), std::invalid_argument);
  CHECK(gpulab::dist::backend_from_string("cuda-ipc") == Backend::kCudaIpc);
  CHECK_THROWS_AS(gpulab::dist::backend_from_string("smoke-signals"), std::invalid_argument);
}

TEST_CASE("backend_available says why not", "[cpu]") {
  std::string why;
  CHECK(gpulab::dist::backend_available(Backend::kMpi, &why));
  // Every rank answers the same for the device backends (a collective call).
  const bool ipc = gpulab::dist::backend_available(Backend::kCudaIpc, &why);
  int mine = ipc ? 1 : 0, all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int w = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  CHECK((all == 0 || all == w));
  if (!ipc) CHECK_FALSE(why.empty());
}

// ---------------------------------------------------------------------------------------------
// The library collectives: non-blocking, summed in rank order, with a timeline.
// ---------------------------------------------------------------------------------------------

namespace {

/// Rank @p rank's contribution: fractional values, so that the order of a sum shows in its bits.
std::vector<float> contribution(int rank, std::size_t n, std::uint32_t salt) {
  std::vector<float> v(n);
  std::uint32_t x = 2463534242u ^ (salt * 2654435761u) ^ static_cast<std::uint32_t>(rank * 40503);
  for (float& f : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    f = static_cast<float>(x % 2000001) / 1000000.0f - 1.0f + 1e-3f * static_cast<float>(rank + 1);
  }
  return v;
}

/// Σ over ranks in rank order, as one process would add them: ((x₀ + x₁) + x₂) + …
std::vector<float> rank_order_sum(int w, std::size_t n, std::uint32_t salt) {
  std::vector<float> sum = contribution(0, n, salt);
  for (int r = 1; r < w; ++r) {
    const std::vector<float> x = contribution(r, n, salt);
    for (std::size_t i = 0; i < n; ++i) sum[i] += x[i];
  }
  return sum;
}

std::vector<std::size_t> collective_counts(int w) {
  return {0, 1, static_cast<std::size_t>(w - 1), static_cast<std::size_t>(w + 1), 1000, 100003};
}

}  // namespace

TEST_CASE("a wait past the spin window sleeps between polls and still gets a late message and a late all-reduce", "[cpu]") {
  // The blocking waits poll, then sleep between polls once 300 µs have passed (GPULAB_DIST_WAIT,
  // dist_internal.hpp): the even ranks send 20 ms late, so the odd ranks' receives wait through the
  // sleeping part. The message and the all-reduce must arrive whole, and the waiting rank must
  // have left the CPU to others meanwhile: its own CPU time over the wait stays under half of it
  // (MPI_Wait, spinning, would use nearly all of it whenever it is scheduled). With
  // GPULAB_DIST_WAIT=spin set, the CPU-time check does not apply.
  auto comm = Communicator::create(Backend::kMpi);
  const int w = comm->size(), r = comm->rank(), next = (r + 1) % w, prev = (r + w - 1) % w;
  std::vector<float> out(70000), in(70000, -1.0f);
  std::iota(out.begin(), out.end(), static_cast<float>(r));
  auto late = [&] {
    const double until = gpulab::dist::now() + 0.02;
    while (gpulab::dist::now() < until) {
    }
  };
  auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  comm->barrier();
  auto receive = comm->irecv(in.data(), in.size(), prev);
  if (r % 2 == 0) late();  // even ranks send late: their next (odd) ranks' receives wait
  auto send = comm->isend(out.data(), out.size(), next);
  const double wall0 = gpulab::dist::now(), cpu0 = cpu_seconds();
  comm->wait(receive);
  const double waited = gpulab::dist::now() - wall0, used = cpu_seconds() - cpu0;
  comm->wait(send);
  CHECK(in.front() == static_cast<float>(prev));
  CHECK(in.back() == static_cast<float>(prev + 69999));
  const char* mode = std::getenv("GPULAB_DIST_WAIT");
  if (r % 2 == 1 && waited > 0.01 && (mode == nullptr || std::string(mode) != "spin")) {
    INFO("rank " << r << " waited " << waited * 1e3 << " ms and used " << used * 1e3 << " ms of CPU meanwhile");
    CHECK(used < 0.5 * waited);
  }
  std::vector<float> data = contribution(r, 4096, 1);
  auto request = comm->iallreduce_sum(data.data(), data.size(), "late");
  if (r == 0) late();
  comm->wait(request);
  CHECK(data == rank_order_sum(w, 4096, 1));
}

TEST_CASE("iallreduce_sum equals the rank-order sum bit for bit on every rank", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  const int w = comm->size(), r = comm->rank();
  for (std::size_t n : collective_counts(w)) {
    INFO("n = " << n << ", W = " << w);
    std::vector<float> data = contribution(r, n, 1);
    auto request = comm->iallreduce_sum(data.data(), n, "test");
    CHECK(request.pending());
    comm->wait(request);
    CHECK_FALSE(request.pending());
    CHECK(data == rank_order_sum(w, n, 1));
  }
  CHECK(comm->collectives_outstanding() == 0);
}

TEST_CASE("ireduce_scatter_sum and iall_gather use shard_of's layout", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  const int w = comm->size(), r = comm->rank();
  for (std::size_t n : collective_counts(w)) {
    INFO("n = " << n << ", W = " << w);
    const gpulab::dist::Shard mine = gpulab::dist::shard_of(n, w, r);
    const std::vector<float> send = contribution(r, n, 2), sum = rank_order_sum(w, n, 2);
    std::vector<float> shard(mine.count + 1, -7.0f);  // one past the shard: must stay untouched
    auto rs = comm->ireduce_scatter_sum(send.data(), shard.data(), n);
    comm->wait(rs);
    CHECK(std::vector<float>(shard.begin(), shard.begin() + static_cast<long>(mine.count)) ==
          std::vector<float>(sum.begin() + static_cast<long>(mine.offset), sum.begin() + static_cast<long>(mine.offset + mine.count)));
    CHECK(shard.back() == -7.0f);
    std::vector<float> gathered(n, 0.0f);
    auto ag = comm->iall_gather(shard.data(), gathered.data(), n);
    comm->wait(ag);
    CHECK(gathered == sum);
    // In place: the shard already sits in its place in the whole buffer.
    std::vector<float> whole(n, 0.0f);
    std::copy(shard.begin(), shard.begin() + static_cast<long>(mine.count), whole.begin() + static_cast<long>(mine.offset));
    auto in_place = comm->iall_gather(whole.data() + mine.offset, whole.data(), n);
    comm->wait(in_place);
    CHECK(whole == sum);
  }
  CHECK(gpulab::dist::shard_of(10, 4, 0).count == 3);
  CHECK(gpulab::dist::shard_of(10, 4, 3).offset == 8);
  CHECK_THROWS_AS(gpulab::dist::shard_of(10, 4, 4), std::invalid_argument);
}

TEST_CASE("many collectives in flight waited for in any order are each right", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  const int w = comm->size(), r = comm->rank();
  const std::vector<std::size_t> sizes = {100003, 7, 65536, 1, 3000};
  std::vector<std::vector<float>> data;
  std::vector<gpulab::dist::CollectiveRequest> requests;
  for (std::size_t k = 0; k < sizes.size(); ++k) data.push_back(contribution(r, sizes[k], 10 + static_cast<std::uint32_t>(k)));
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    requests.push_back(comm->iallreduce_sum(data[k].data(), sizes[k], "op " + std::to_string(k)));
    comm->progress();
  }
  const std::vector<float> send = contribution(r, 5001, 20);
  std::vector<float> shard(gpulab::dist::shard_of(5001, w, r).count);
  requests.push_back(comm->ireduce_scatter_sum(send.data(), shard.data(), 5001, "scatter"));
  CHECK(comm->collectives_outstanding() == sizes.size() + 1);
  // Rank-dependent order of the waits: every rank still starts the same collectives in the same order.
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::size_t k = (r % 2 == 0) ? requests.size() - 1 - i : i;
    comm->wait(requests[k]);
  }
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    INFO("op " << k);
    CHECK(data[k] == rank_order_sum(w, sizes[k], 10 + static_cast<std::uint32_t>(k)));
  }
  const std::vector<float> sum = rank_order_sum(w, 5001, 20);
  const gpulab::dist::Shard mine = gpulab::dist::shard_of(5001, w, r);
  CHECK(shard == std::vector<float>(sum.begin() + static_cast<long>(mine.offset), sum.begin() + static_cast<long>(mine.offset + mine.count)));
  CHECK(comm->collectives_outstanding() == 0);
}

TEST_CASE("the timeline says when each collective started and was seen finished and was waited for", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  const int w = comm->size(), r = comm->rank();
  comm->clear_timeline();
  comm->reset_traffic();
  std::vector<float> a = contribution(r, 1000, 30), b = contribution(r, 10, 31);
  const double before = gpulab::dist::now();
  auto first = comm->iallreduce_sum(a.data(), a.size(), "first");
  auto second = comm->iallreduce_sum(b.data(), b.size(), "second");
  // progress() alone finishes them once every rank has started them (no wait needed).
  PMPI_Barrier(MPI_COMM_WORLD);
  for (int k = 0; k < 100000 && comm->timeline().back().completed < 0; ++k) comm->progress();
  const std::vector<gpulab::dist::TimelineEntry> seen = comm->timeline();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].label == "first");
  CHECK(seen[1].label == "second");
  CHECK(seen[0].count == 1000);
  CHECK(seen[0].posted >= before);
  CHECK(seen[0].posted <= seen[1].posted);
  CHECK(seen[1].completed >= seen[1].posted);
  CHECK(seen[0].waited < 0);  // not waited for yet
  comm->wait(second);
  comm->wait(first);
  const std::vector<gpulab::dist::TimelineEntry> done = comm->timeline();
  CHECK(done[1].waited >= done[1].completed);
  CHECK(done[0].waited >= done[1].waited);
  CHECK(a == rank_order_sum(w, 1000, 30));
  const gpulab::dist::Traffic t = comm->traffic();
  CHECK(t.collective_calls[0] == 2);
  CHECK(t.collective_bytes[0] == 1010 * sizeof(float));
  comm->reset_traffic();
  CHECK(comm->traffic().collective_calls[0] == 0);
}

TEST_CASE("the non-blocking collectives are counted as library collectives inside a LearnerScope", "[cpu]") {
  auto comm = Communicator::create(Backend::kMpi);
  std::vector<float> x(10, 1.0f);
  gpulab::dist::reset_library_collectives();
  {
    gpulab::dist::LearnerScope scope;
    auto request = comm->iallreduce_sum(x.data(), x.size());
    comm->wait(request);
  }
  CHECK(gpulab::dist::library_collectives_called() == std::vector<std::string>{"Communicator::iallreduce_sum"});
}
