/// @file dist.cpp
/// @brief Communicator base, the MPI host backend, library-collective accounting and the PMPI
/// wrappers that make direct MPI collectives visible.
#include "gpulab/dist.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "dist_internal.hpp"
#include "gpulab/report.hpp"

namespace gpulab::dist {

// ---------------------------------------------------------------------------------------------
// Names, errors, accounting
// ---------------------------------------------------------------------------------------------

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::kMpi: return "mpi";
    case Backend::kMpiStaging: return "mpi-staging";
    case Backend::kCudaIpc: return "cuda-ipc";
    case Backend::kNccl: return "nccl";
  }
  return "?";
}

Backend backend_from_string(const std::string& name) {
  for (Backend b : {Backend::kMpi, Backend::kMpiStaging, Backend::kCudaIpc, Backend::kNccl}) {
    if (name == to_string(b)) return b;
  }
  throw std::invalid_argument("unknown backend \"" + name + "\" (mpi, mpi-staging, cuda-ipc, nccl)");
}

void mpi_check(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  std::ostringstream msg;
  msg << "MPI error " << code << ": " << std::string(text, static_cast<std::size_t>(length))
      << "\n  in " << call << "\n  at " << file << ':' << line;
  throw std::runtime_error(msg.str());
}

std::uint64_t Traffic::bytes_sent() const {
  return std::accumulate(bytes_to.begin(), bytes_to.end(), std::uint64_t{0});
}
std::uint64_t Traffic::messages_sent() const {
  return std::accumulate(messages_to.begin(), messages_to.end(), std::uint64_t{0});
}

namespace {
int& scope_depth() {
  static int depth = 0;
  return depth;
}
std::vector<std::string>& collectives_called() {
  static std::vector<std::string> names;
  return names;
}
}  // namespace

LearnerScope::LearnerScope() { ++scope_depth(); }
LearnerScope::~LearnerScope() { --scope_depth(); }
bool LearnerScope::active() { return scope_depth() > 0; }

const std::vector<std::string>& library_collectives_called() { return collectives_called(); }
void reset_library_collectives() { collectives_called().clear(); }
void note_library_collective(const char* name) {
  if (LearnerScope::active()) collectives_called().emplace_back(name);
}

// ---------------------------------------------------------------------------------------------
// Communicator (common part)
// ---------------------------------------------------------------------------------------------

Communicator::Communicator(Backend backend, MPI_Comm comm) : comm_(comm), backend_(backend) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  // Errors come back as codes (and become exceptions) instead of aborting the job silently.
  MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  reset_traffic();
}

Communicator::~Communicator() {
  // A destructor cannot fail the case: it records the finding, which the grader reads.
  if (const std::string left = outstanding_requests(); !left.empty()) {
    report::record({{"kind", "correctness"}, {"check", "requests waited for"}, {"ok", false}, {"summary", left},
                    {"hint", "wait() for every isend and irecv you start, sends included"}});
  }
  if (!ops_.empty()) {
    report::record({{"kind", "correctness"}, {"check", "collectives waited for"}, {"ok", false},
                    {"summary", std::to_string(ops_.size()) + " library collective(s) on rank " + std::to_string(rank_) + " were never waited for"},
                    {"hint", "wait() for every collective you start before the buffers are read or freed"}});
    return;  // their communicators stay: freeing one with operations in flight is erroneous
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && first_phase_ != MPI_COMM_NULL) {
    PMPI_Comm_free(&first_phase_);
    PMPI_Comm_free(&second_phase_);
  }
}

Request Communicator::isend(const float* buffer, std::size_t count, int dest) {
  const double posted = now();
  Request r = post_send(buffer, count, dest);
  r.is_send = true;
  ++sends_posted_;
  if (log_messages_) {
    r.log_index = log_base_ + static_cast<long>(messages_.size());
    messages_.push_back({true, dest, count, posted});
  }
  return r;
}

Request Communicator::irecv(float* buffer, std::size_t count, int source) {
  const double posted = now();
  Request r = post_recv(buffer, count, source);
  r.is_send = false;
  ++recvs_posted_;
  if (log_messages_) {
    r.log_index = log_base_ + static_cast<long>(messages_.size());
    messages_.push_back({false, source, count, posted});
  }
  return r;
}

void Communicator::wait(Request& request) {
  if (!request.pending) return;
  const bool send = request.is_send;
  const double waited = now();
  complete(request);
  ++(send ? sends_waited_ : recvs_waited_);
  if (MessageEntry* e = log_entry(request)) {
    e->waited = waited;
    e->completed = now();
  }
}

bool Communicator::test(Request& request) {
  if (!request.pending) return true;
  const bool send = request.is_send;
  if (!poll(request)) return false;
  ++(send ? sends_waited_ : recvs_waited_);
  if (MessageEntry* e = log_entry(request)) e->waited = e->completed = now();
  return true;
}

bool Communicator::poll(Request&) { return false; }

bool Communicator::poll_mpi(Request& request) {
  int done = 0;
  MPI_CHECK(MPI_Test(&request.mpi, &done, MPI_STATUS_IGNORE));
  if (!done) return false;
  request.pending = false;
  if (request.on_complete) request.on_complete();
  return true;
}

void Communicator::clear_messages() {
  log_base_ += static_cast<long>(messages_.size());
  messages_.clear();
}

MessageEntry* Communicator::log_entry(const Request& request) {
  const long i = request.log_index - log_base_;
  return request.log_index >= 0 && i >= 0 && i < static_cast<long>(messages_.size()) ? &messages_[static_cast<std::size_t>(i)] : nullptr;
}

std::string Communicator::outstanding_requests() const {
  std::string left;
  if (sends_outstanding() > 0) left = std::to_string(sends_outstanding()) + " isend request(s)";
  if (recvs_outstanding() > 0) left += (left.empty() ? "" : " and ") + std::to_string(recvs_outstanding()) + " irecv request(s)";
  return left.empty() ? left : left + " on rank " + std::to_string(rank_) + " were never waited for";
}

void Communicator::reset_traffic() {
  traffic_.bytes_to.assign(static_cast<std::size_t>(size_), 0);
  traffic_.messages_to.assign(static_cast<std::size_t>(size_), 0);
  traffic_.collective_calls.fill(0);
  traffic_.collective_bytes.fill(0);
}

void Communicator::count_send(int dest, std::size_t count) {
  traffic_.bytes_to[static_cast<std::size_t>(dest)] += count * sizeof(float);
  traffic_.messages_to[static_cast<std::size_t>(dest)] += 1;
}

void Communicator::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size_) {
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(peer) +
                                " does not exist (size " + std::to_string(size_) + ")");
  }
  if (peer == rank_) {
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(rank_) +
                                " cannot message itself; copy() does that");
  }
}

void Communicator::wait_all(std::vector<Request>& requests) {
  for (Request& r : requests) wait(r);
}

void Communicator::sendrecv(const float* send, std::size_t send_count, int dest, float* recv,
                            std::size_t recv_count, int source) {
  std::vector<Request> requests;
  requests.reserve(2);
  if (recv_count > 0) requests.push_back(irecv(recv, recv_count, source));
  if (send_count > 0) requests.push_back(isend(send, send_count, dest));
  wait_all(requests);
}

void Communicator::barrier() { MPI_CHECK(PMPI_Barrier(comm_)); }

// ---------------------------------------------------------------------------------------------
// kMpi: host buffers over MPI
// ---------------------------------------------------------------------------------------------

namespace {

int as_int_count(std::size_t count) {
  if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::invalid_argument("a single message is limited to 2^31 - 1 floats");
  }
  return static_cast<int>(count);
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : Communicator(Backend::kMpi, comm) {}

  Request post_send(const float* buffer, std::size_t count, int dest) override {
    check_peer(dest, "isend");
    Request r;
    MPI_CHECK(MPI_Isend(buffer, as_int_count(count), MPI_FLOAT, dest, 0, comm_, &r.mpi));
    r.pending = true;
    count_send(dest, count);
    return r;
  }

  Request post_recv(float* buffer, std::size_t count, int source) override {
    check_peer(source, "irecv");
    Request r;
    MPI_CHECK(MPI_Irecv(buffer, as_int_count(count), MPI_FLOAT, source, 0, comm_, &r.mpi));
    r.pending = true;
    return r;
  }

  void complete(Request& request) override {
    MPI_Status status;
    detail::wait_request(request.mpi, &status, MPI_Test, MPI_Wait);
    request.pending = false;
    if (request.on_complete) request.on_complete();
  }

  bool poll(Request& request) override { return poll_mpi(request); }

  void add(float* dst, const float* src, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i) dst[i] += src[i];
  }
  void copy(float* dst, const float* src, std::size_t count) override {
    if (count > 0 && dst != src) std::memmove(dst, src, count * sizeof(float));
  }
  float* scratch(std::size_t count) override {
    if (scratch_.size() < count) scratch_.resize(count);
    return scratch_.data();
  }

  void allreduce_sum(const float* send, float* recv, std::size_t count) override {
    note_library_collective("Communicator::allreduce_sum");
    MPI_CHECK(PMPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, as_int_count(count),
                             MPI_FLOAT, MPI_SUM, comm_));
  }

 private:
  std::vector<float> scratch_;
};

}  // namespace

std::unique_ptr<Communicator> Communicator::create(Backend backend, MPI_Comm comm) {
  // A bad GPULAB_DIST_WAIT or GPULAB_DIST_SPIN_US is an error here, on every rank alike, not at
  // some rank's first wait with the others inside a collective.
  (void)detail::wait_mode();
  (void)detail::wait_spin_us();
  if (backend == Backend::kMpi) return std::make_unique<MpiCommunicator>(comm);
  return detail::create_device_communicator(backend, comm);
}

bool backend_available(Backend backend, std::string* why, MPI_Comm comm) {
  std::string reason;
  const bool ok = backend == Backend::kMpi || detail::device_backend_available(backend, reason, comm);
  if (why != nullptr) *why = reason;
  return ok;
}

Backend choose_backend(Memory memory, MPI_Comm comm) {
  if (const char* env = std::getenv("GPULAB_DIST_BACKEND"); env != nullptr && *env != '\0') {
    return backend_from_string(env);
  }
  if (memory == Memory::kHost) return Backend::kMpi;
  return detail::choose_device_backend(comm);
}

}  // namespace gpulab::dist

// ---------------------------------------------------------------------------------------------
// PMPI wrappers: a direct call to an MPI collective from learner code is counted, then done.
// They live in this file so that linking the Communicator always links them too.
// ---------------------------------------------------------------------------------------------

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  gpulab::dist::note_library_collective("MPI_Allreduce");
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  gpulab::dist::note_library_collective("MPI_Iallreduce");
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  gpulab::dist::note_library_collective("MPI_Reduce");
  return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  gpulab::dist::note_library_collective("MPI_Bcast");
  return PMPI_Bcast(buffer, count, datatype, root, comm);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  gpulab::dist::note_library_collective("MPI_Allgather");
  return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  gpulab::dist::note_library_collective("MPI_Reduce_scatter");
  return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  gpulab::dist::note_library_collective("MPI_Reduce_scatter_block");
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  gpulab::dist::note_library_collective("MPI_Alltoall");
  return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm) {
  gpulab::dist::note_library_collective("MPI_Scan");
  return PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm);
}

}  // extern "C"

namespace gpulab::dist::detail {

WaitMode wait_mode() {
  static const WaitMode mode = [] {
    const char* v = std::getenv("GPULAB_DIST_WAIT");
    if (v == nullptr || std::string(v).empty() || std::string(v) == "backoff") return WaitMode::kBackoff;
    if (std::string(v) == "spin") return WaitMode::kSpin;
    throw std::invalid_argument("GPULAB_DIST_WAIT must be backoff or spin, not " + std::string(v));
  }();
  return mode;
}

long wait_spin_us() {
  static const long us = [] {
    const char* v = std::getenv("GPULAB_DIST_SPIN_US");
    if (v == nullptr || *v == '\0') return 300L;
    const std::string text(v);
    if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) {
      throw std::invalid_argument("GPULAB_DIST_SPIN_US must be a whole number of microseconds, not " + text);
    }
    return std::stol(text);
  }();
  return us;
}

void wait_request(MPI_Request& request, MPI_Status* status, int (*test)(MPI_Request*, int*, MPI_Status*), int (*wait)(MPI_Request*, MPI_Status*)) {
  if (wait_mode() == WaitMode::kSpin) {
    MPI_CHECK(wait(&request, status));
    return;
  }
  using clock = std::chrono::steady_clock;
  const auto spin_until = clock::now() + std::chrono::microseconds(wait_spin_us());
  for (int done = 0;;) {
    MPI_CHECK(test(&request, &done, status));
    if (done) return;
    if (clock::now() >= spin_until) {
      const timespec nap{0, 1000};  // asks for 1 µs; the kernel's timer slack makes it ~50-60
      nanosleep(&nap, nullptr);
    }
  }
}

}  // namespace gpulab::dist::detail
