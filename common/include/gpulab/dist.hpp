/// @file dist.hpp
/// @brief Communicator: point-to-point between ranks, with traffic accounting, over MPI (host
/// buffers), MPI with host staging or CUDA IPC (device buffers, ranks sharing a GPU) and NCCL
/// (device buffers, one rank per GPU).
///
/// The collectives lab builds its all-reduce from isend / irecv / wait (or sendrecv, one ring
/// step). The training labs call the library's non-blocking collectives (iallreduce_sum,
/// ireduce_scatter_sum, iall_gather), which sum in rank order, so that their results are the same
/// bit for bit as a single process summing the ranks' contributions in order, and which keep a
/// timeline of when each was started, seen finished and waited for. Every byte sent is counted per destination (`traffic()`), so a test can check which
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

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
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

/// The library collectives (the training labs call them; the collectives lab builds its own).
enum class Collective { kAllReduce, kReduceScatter, kAllGather };
/// "all-reduce", "reduce-scatter", "all-gather".
const char* to_string(Collective op);

/// A contiguous piece [offset, offset + count) of a buffer that is split among ranks.
struct Shard {
  std::size_t offset = 0;  ///< first element
  std::size_t count = 0;   ///< elements
};
/// Shard @p index of @p n elements split into @p parts: sizes differ by at most one, the larger
/// first (n = 10, parts = 4: 3, 3, 2, 2). The layout of ireduce_scatter_sum and iall_gather.
/// Throws std::invalid_argument unless parts ≥ 1 and 0 ≤ index < parts.
Shard shard_of(std::size_t n, int parts, int index);

/// Seconds on the machine's monotonic clock: the same clock in every process of one machine, so
/// ranks' timelines line up.
double now();

/// One library collective as this rank saw it (times from now(); −1: not yet).
struct TimelineEntry {
  Collective op = Collective::kAllReduce;  ///< which collective
  std::string label;                       ///< the caller's name for it ("bucket 0")
  std::size_t count = 0;                   ///< floats of the whole buffer
  double posted = 0.0;                     ///< when it was started
  double completed = -1.0;                 ///< when this rank saw it finished (in progress() or wait())
  double waited = -1.0;                    ///< when wait() was first called for it
};

/// A library collective in flight; complete it with Communicator::wait. Move-only.
class CollectiveRequest {
 public:
  CollectiveRequest() = default;
  CollectiveRequest(const CollectiveRequest&) = delete;
  CollectiveRequest& operator=(const CollectiveRequest&) = delete;
  /// Takes over @p other's collective; @p other is left empty.
  CollectiveRequest(CollectiveRequest&& other) noexcept : id_(std::exchange(other.id_, -1)) {}
  /// Takes over @p other's collective (this one must not be pending).
  CollectiveRequest& operator=(CollectiveRequest&& other) noexcept {
    id_ = std::exchange(other.id_, -1);
    return *this;
  }
  /// Whether it stands for a collective not yet waited for.
  bool pending() const { return id_ >= 0; }

 private:
  friend class Communicator;
  long id_ = -1;
};

/// Messages and bytes this rank sent, per destination rank, and the library collectives it
/// started.
struct Traffic {
  std::vector<std::uint64_t> bytes_to;     ///< bytes sent to each rank
  std::vector<std::uint64_t> messages_to;  ///< messages sent to each rank
  std::array<std::uint64_t, 3> collective_calls{};  ///< library collectives started, by Collective
  std::array<std::uint64_t, 3> collective_bytes{};  ///< their buffers' bytes (the whole buffer, as algbw counts)
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
  long log_index = -1;                ///< its entry in the communicator's message log, when logging

  Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  /// Takes over @p other's message; @p other is left empty (not pending).
  Request(Request&& other) noexcept
      : mpi(std::exchange(other.mpi, MPI_REQUEST_NULL)), on_complete(std::move(other.on_complete)),
        backend_slot(std::exchange(other.backend_slot, -1)), pending(std::exchange(other.pending, false)), is_send(other.is_send),
        log_index(std::exchange(other.log_index, -1)) {}
  /// Takes over @p other's message; this request must not be pending.
  Request& operator=(Request&& other) noexcept {
    mpi = std::exchange(other.mpi, MPI_REQUEST_NULL);
    on_complete = std::move(other.on_complete);
    backend_slot = std::exchange(other.backend_slot, -1);
    pending = std::exchange(other.pending, false);
    is_send = other.is_send;
    log_index = std::exchange(other.log_index, -1);
    return *this;
  }
};

/// One isend or irecv as this rank saw it, while message logging is on (times from now(); −1:
/// not yet).
struct MessageEntry {
  bool send = false;       ///< an isend (else an irecv)
  int peer = -1;           ///< the destination or source rank
  std::size_t count = 0;   ///< floats
  double posted = 0.0;     ///< when it was started
  double waited = -1.0;    ///< when wait() was called for it (or test() found it complete)
  double completed = -1.0; ///< when it was seen complete
};

/// Point-to-point communication between the ranks of an MPI communicator.
class Communicator {
 public:
  /// A communicator of the given backend over @p comm (ranks and size from it). It uses @p comm
  /// and never frees it: a communicator from MPI_Comm_split stays the caller's (MPI_Finalize frees
  /// what is left).
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
  /// Completes @p request if its message has gone (a send) or arrived (a receive), without
  /// blocking; true when it is complete now (it needs no wait() then). Backends that cannot ask
  /// without blocking (CUDA IPC, NCCL) answer false until wait().
  bool test(Request& request);
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

  /// Starts an all-reduce (sum) of @p data[0, count) in place, summed in rank order
  /// (((x₀ + x₁) + x₂) + …): an all-to-all of the shards, each rank summing its own, then an
  /// all-gather — 2(W − 1)/W · 4·count bytes per rank, as a ring. The buffer must not be touched
  /// until wait(). Every rank must start the same collectives in the same order.
  [[nodiscard]] CollectiveRequest iallreduce_sum(float* data, std::size_t count, const std::string& label = "");
  /// Starts a reduce-scatter (sum, rank order) of @p send[0, count): @p recv receives this rank's
  /// shard, shard_of(count, size(), rank()).count floats.
  [[nodiscard]] CollectiveRequest ireduce_scatter_sum(const float* send, float* recv, std::size_t count, const std::string& label = "");
  /// Starts an all-gather: @p send holds this rank's shard of shard_of(count, size(), rank());
  /// @p recv[0, count) receives every rank's, in place.
  [[nodiscard]] CollectiveRequest iall_gather(const float* send, float* recv, std::size_t count, const std::string& label = "");
  /// Completes a library collective (and makes progress on the others).
  void wait(CollectiveRequest& request);
  /// Advances every library collective in flight without blocking (MPI makes progress only
  /// inside MPI calls when no progress thread runs: call it now and then while computing, e.g.
  /// from a gradient-ready hook).
  void progress();
  /// The library collectives started since the last clear_timeline(), in order.
  std::vector<TimelineEntry> timeline() const { return timeline_; }
  /// Forgets the timeline.
  void clear_timeline() { timeline_.clear(); }
  /// Starts (true) or stops recording every isend and irecv in messages() (off by default: the
  /// collectives lab posts millions).
  void log_messages(bool on) { log_messages_ = on; }
  /// The isends and irecvs started since the last clear_messages() while logging was on, in order.
  std::vector<MessageEntry> messages() const { return messages_; }
  /// Forgets the message log (requests still pending keep no entry).
  void clear_messages();
  /// Library collectives started and not yet waited for.
  std::size_t collectives_outstanding() const { return ops_.size(); }

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
  /// The backend's test: completes @p request and returns true if it is done; false when it is
  /// not, or when the backend cannot tell without blocking (the default).
  virtual bool poll(Request& request);
  /// Completes @p request (pending, with an MPI request and nothing else to do at the end)
  /// through MPI_Test; the host backends' poll.
  bool poll_mpi(Request& request);
  /// Sets rank and size from @p comm and makes MPI report errors as codes.
  Communicator(Backend backend, MPI_Comm comm);
  /// Adds one message of @p count floats to @p dest to the traffic.
  void count_send(int dest, std::size_t count);
  /// Throws std::invalid_argument for a rank that does not exist or is this one.
  void check_peer(int peer, const char* what) const;
  /// @p count floats from a buffer of this communicator's memory into host memory (the library
  /// collectives stage device buffers through the host). The host backend never calls it.
  virtual void to_host(float* host, const float* buffer, std::size_t count);
  /// The other way.
  virtual void from_host(float* buffer, const float* host, std::size_t count);
  MPI_Comm comm_;    ///< the ranks
  int rank_ = 0;     ///< this rank
  int size_ = 1;     ///< number of ranks
  Backend backend_;  ///< how messages travel
  Traffic traffic_;  ///< what this rank sent

 private:
  struct Op;  // a library collective in flight (dist_collectives.cpp)
  CollectiveRequest start(Collective kind, const float* send, float* recv, std::size_t count, const std::string& label);
  void advance(bool block);
  std::size_t sends_posted_ = 0, sends_waited_ = 0, recvs_posted_ = 0, recvs_waited_ = 0;
  std::deque<std::unique_ptr<Op>> ops_;   ///< in the order they were started
  std::vector<TimelineEntry> timeline_;
  std::vector<MessageEntry> messages_;
  long log_base_ = 0;  ///< the log index of messages_[0] (entries before it were cleared)
  bool log_messages_ = false;
  MessageEntry* log_entry(const Request& request);
  long next_op_id_ = 0;
  MPI_Comm first_phase_ = MPI_COMM_NULL;   ///< every collective's first phase, in start order
  MPI_Comm second_phase_ = MPI_COMM_NULL;  ///< all-reduces' all-gathers, in start order
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
