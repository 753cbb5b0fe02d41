/// @file test_dist.cpp
/// @brief The Communicator on host memory (run on W ranks by mpirun): messages arrive in order
/// and intact, traffic is counted per destination, library collectives are counted inside a
/// LearnerScope only (through the Communicator or MPI directly), bad peers are errors.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <numeric>
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
