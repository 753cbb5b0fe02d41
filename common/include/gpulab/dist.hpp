/// @file dist.hpp
/// @brief Communicator: point-to-point between ranks, with traffic accounting, over MPI (host
/// buffers), MPI with host staging or CUDA IPC (device buffers, ranks sharing a GPU) and NCCL
/// (device buffers, one rank per GPU).
///
/// The collectives lab builds its all-reduce from isend / irecv / wait (or sendrecv, one ring
/// step). Every byte sent is counted per destination (`traffic()`), so a test can check which
/// algorithm ran. Library collectives — the Communicator's own `allreduce_sum`, and MPI_Allreduce
/// & co. called directly (intercepted through the MPI profiling interface, PMPI) — are counted
/// while a LearnerScope is alive, so learner code cannot hide one.
///
/// Backends (see choose_backend):
///   kMpi        host memory; the reference everywhere, and the only one without a GPU
///   kMpiStaging device memory; each message copied device → host → MPI → host → device
///   kCudaIpc    device memory, ranks on one GPU; data copied device-to-device into the peer's
///               buffer opened with cudaIpcOpenMemHandle, control messages over MPI
///   kNccl       device memory, one rank per GPU; ncclSend/ncclRecv inside a group
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpulab::dist {

/// How messages travel (see the file comment).
enum class Backend { kMpi, kMpiStaging, kCudaIpc, kNccl };
/// "mpi", "mpi-staging", "cuda-ipc", "nccl".
const char* to_string(Backend backend);
/// The inverse of to_string; throws std::invalid_argument.
Backend backend_from_string(const std::string& name);

/// Where the buffers given to a communicator live.
enum class Memory { kHost, kDevice };

/// Messages and bytes this rank sent, per destination rank.
struct Traffic {
  std::vector<std::uint64_t> bytes_to;     ///< bytes sent to each rank
  std::vector<std::uint64_t> messages_to;  ///< messages sent to each rank
  /// Bytes sent to all ranks.
  std::uint64_t bytes_sent() const;
  /// Messages sent to all ranks.
  std::uint64_t messages_sent() const;
};

/// A pending isend or irecv; complete it with Communicator::wait. Move-only: a request stands for
/// one message, so it cannot be waited for twice through a copy (and isend/irecv are
/// [[nodiscard]]: dropping one is the collectives lab's classic bug, a message never waited for).
struct Request {
  MPI_Request mpi = MPI_REQUEST_NULL;  ///< the MPI request, where the backend uses one
  std::function<void()> on_complete;  ///< backend work after the message arrived (e.g. a copy)
  int backend_slot = -1;              ///< backend bookkeeping (IPC, NCCL)
  bool pending = false;               ///< started and not yet completed by wait()
  bool is_send = false;               ///< an isend (else an irecv)

  Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  /// Takes over @p other's message; @p other is left empty (not pending).
  Request(Request&& other) noexcept
      : mpi(std::exchange(other.mpi, MPI_REQUEST_NULL)), on_complete(std::move(other.on_complete)),
        backend_slot(std::exchange(other.backend_slot, -1)), pending(std::exchange(other.pending, false)), is_send(other.is_send) {}
  /// Takes over @p other's message; this request must not be pending.
  Request& operator=(Request&& other) noexcept {
    mpi = std::exchange(other.mpi, MPI_REQUEST_NULL);
    on_complete = std::move(other.on_complete);
    backend_slot = std::exchange(other.backend_slot, -1);
    pending = std::exchange(other.pending, false);
    is_send = other.is_send;
    return *this;
  }
};

/// Point-to-point communication between the ranks of an MPI communicator.
class Communicator {
 public:
  /// A communicator of the given backend over @p comm (ranks and size from it).
  static std::unique_ptr<Communicator> create(Backend backend, MPI_Comm comm = MPI_COMM_WORLD);
  virtual ~Communicator();

  /// This rank, 0 … size() − 1.
  int rank() const { return rank_; }
  /// The number of ranks, W.
  int size() const { return size_; }
  /// How messages travel.
  Backend backend() const { return backend_; }
  /// Where the buffers given to this communicator must live.
  Memory memory() const { return backend_ == Backend::kMpi ? Memory::kHost : Memory::kDevice; }

  /// Starts sending @p count floats to @p dest. The buffer must not change until wait().
  [[nodiscard]] Request isend(const float* buffer, std::size_t count, int dest);
  /// Starts receiving @p count floats from @p source. Messages between two ranks arrive in the
  /// order they were sent.
  [[nodiscard]] Request irecv(float* buffer, std::size_t count, int source);
  /// Completes one request (and makes progress on the others).
  void wait(Request& request);
  /// Completes all of them, in order.
  void wait_all(std::vector<Request>& requests);
  /// One ring step: send to @p dest and receive from @p source at once (no deadlock when every
  /// rank does the same). Counts of 0 send or receive nothing.
  void sendrecv(const float* send, std::size_t send_count, int dest, float* recv,
                std::size_t recv_count, int source);
  /// Waits until every rank has called it (not counted as the learner's collective).
  virtual void barrier();

  /// dst[i] += src[i] for i < count, in the buffers' memory (a loop, or a kernel).
  virtual void add(float* dst, const float* src, std::size_t count) = 0;
  /// dst[i] = src[i] for i < count, in the buffers' memory.
  virtual void copy(float* dst, const float* src, std::size_t count) = 0;
  /// At least @p count floats of scratch space in the buffers' memory, owned by the
  /// communicator. Valid until scratch() is called again with a larger count.
  virtual float* scratch(std::size_t count) = 0;

  /// The library's all-reduce (sum): the baseline the lab compares with. recv may equal send.
  /// Counted as a library collective inside a LearnerScope.
  virtual void allreduce_sum(const float* send, float* recv, std::size_t count) = 0;

  /// What this rank has sent since the last reset_traffic(): a copy, so that no code it was
  /// handed to can change the count a test reads.
  Traffic traffic() const { return traffic_; }
  /// Zeroes the traffic counts.
  void reset_traffic();

  /// isend and irecv requests posted and not (yet) waited for. A communicator destroyed with
  /// some left records a failure ("2 isend requests on rank 1 were never waited for"): an MPI
  /// program must complete every request it starts.
  std::size_t sends_outstanding() const { return sends_posted_ - sends_waited_; }
  /// See sends_outstanding().
  std::size_t recvs_outstanding() const { return recvs_posted_ - recvs_waited_; }
  /// "" when every request was waited for, else what was not (for a test's message).
  std::string outstanding_requests() const;

 protected:
  /// The backend's isend (the public one counts requests around it).
  virtual Request post_send(const float* buffer, std::size_t count, int dest) = 0;
  /// The backend's irecv.
  virtual Request post_recv(float* buffer, std::size_t count, int source) = 0;
  /// The backend's wait, for a pending request.
  virtual void complete(Request& request) = 0;
  /// Sets rank and size from @p comm and makes MPI report errors as codes.
  Communicator(Backend backend, MPI_Comm comm);
  /// Adds one message of @p count floats to @p dest to the traffic.
  void count_send(int dest, std::size_t count);
  /// Throws std::invalid_argument for a rank that does not exist or is this one.
  void check_peer(int peer, const char* what) const;
  MPI_Comm comm_;    ///< the ranks
  int rank_ = 0;     ///< this rank
  int size_ = 1;     ///< number of ranks
  Backend backend_;  ///< how messages travel
  Traffic traffic_;  ///< what this rank sent

 private:
  std::size_t sends_posted_ = 0, sends_waited_ = 0, recvs_posted_ = 0, recvs_waited_ = 0;
};

/// While alive, calls to library collectives are counted (see the file comment). Tests wrap
/// the learner's call in one.
class LearnerScope {
 public:
  LearnerScope();
  ~LearnerScope();
  LearnerScope(const LearnerScope&) = delete;
  LearnerScope& operator=(const LearnerScope&) = delete;
  /// True while at least one LearnerScope is alive.
  static bool active();
};

/// Library collectives called inside LearnerScopes since the last reset, by name.
const std::vector<std::string>& library_collectives_called();
/// Forgets the calls recorded so far.
void reset_library_collectives();
/// Records one call (used by the PMPI wrappers and the backends).
void note_library_collective(const char* name);

/// The backend for buffers in @p memory: GPULAB_DIST_BACKEND if set; host → kMpi; device →
/// kNccl when every rank has a GPU of its own, kCudaIpc when ranks share one.
Backend choose_backend(Memory memory, MPI_Comm comm = MPI_COMM_WORLD);

/// Whether @p backend can run on these ranks (collective: call on every rank). When it cannot,
/// @p why says so: "no GPU", "ranks share a GPU (NCCL needs one per rank)", "not built with NCCL",
/// "ranks on several nodes (CUDA IPC works inside one)".
bool backend_available(Backend backend, std::string* why = nullptr, MPI_Comm comm = MPI_COMM_WORLD);

/// Throws std::runtime_error with the MPI error string when @p code is not MPI_SUCCESS.
void mpi_check(int code, const char* call, const char* file, int line);

}  // namespace gpulab::dist

/// Checks an MPI call (communicators should use MPI_ERRORS_RETURN for this to see errors).
#define MPI_CHECK(call) ::gpulab::dist::mpi_check((call), #call, __FILE__, __LINE__)
