/// @file dist_cuda.cu
/// @brief Device backends of the Communicator: MPI with host staging, CUDA IPC (ranks sharing a
/// GPU) and NCCL (one rank per GPU), and the choice between them.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef GPULAB_WITH_NCCL
#include <nccl.h>
#endif

#include "dist_internal.hpp"
#include "gpulab/check.hpp"
#include "gpulab/device_buffer.hpp"

namespace gpulab::dist::detail {
namespace {

__global__ void add_kernel(float* __restrict__ dst, const float* __restrict__ src, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] += src[i];
  }
}

/// Ranks on this node, and this rank's index among them.
void local_rank_and_size(MPI_Comm comm, int& local_rank, int& local_size) {
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
  MPI_CHECK(MPI_Comm_rank(local, &local_rank));
  MPI_CHECK(MPI_Comm_size(local, &local_size));
  MPI_CHECK(MPI_Comm_free(&local));
}

/// Device work shared by the device backends: the device (local rank mod device count), a
/// stream, device-side add / copy / scratch, and an all-reduce staged through host memory.
class DeviceCommunicator : public Communicator {
 public:
  DeviceCommunicator(Backend backend, MPI_Comm comm) : Communicator(backend, comm) {
    int local_rank = 0, local_size = 1, devices = 0;
    // The process's node-local rank in the whole job, not in @p comm: a rank that builds several
    // communicators (a tensor group and a data group, lab 10) keeps one device for all of them.
    local_rank_and_size(MPI_COMM_WORLD, local_rank, local_size);
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    CUDA_CHECK(cudaSetDevice(local_rank % devices));
    // A blocking stream: it waits for the legacy default stream, on which DeviceBuffer's uploads
    // and the staging copies (pageable cudaMemcpy) run, so a comm.add never reads a buffer whose
    // upload is still in flight (a non-blocking stream would race with them).
    CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  ~DeviceCommunicator() override { cudaStreamDestroy(stream_); }

  void add(float* dst, const float* src, std::size_t count) override {
    if (count == 0) return;
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const std::size_t blocks = std::min<std::size_t>((count + 255) / 256, static_cast<std::size_t>(sms) * 8);
    add_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream_>>>(dst, src, count);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void copy(float* dst, const float* src, std::size_t count) override {
    if (count == 0 || dst == src) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  float* scratch(std::size_t count) override {
    if (scratch_.size() < count) scratch_ = DeviceBuffer<float>(count);
    return scratch_.data();
  }

  /// The library collectives' staging (pageable copies on the legacy stream: they wait for
  /// earlier work on it, as the staging backend's do).
  void to_host(float* host, const float* buffer, std::size_t count) override {
    if (count > 0) CUDA_CHECK(cudaMemcpy(host, buffer, count * sizeof(float), cudaMemcpyDeviceToHost));
  }
  void from_host(float* buffer, const float* host, std::size_t count) override {
    if (count > 0) CUDA_CHECK(cudaMemcpy(buffer, host, count * sizeof(float), cudaMemcpyHostToDevice));
  }

  /// The library all-reduce for device buffers without NCCL: MPI over host copies (the slow
  /// path the lesson measures: packaged OpenMPI is not CUDA-aware).
  void allreduce_sum(const float* send, float* recv, std::size_t count) override {
    note_library_collective("Communicator::allreduce_sum");
    std::vector<float> host(count);
    if (count > 0) CUDA_CHECK(cudaMemcpy(host.data(), send, count * sizeof(float), cudaMemcpyDeviceToHost));
    MPI_CHECK(PMPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_));
    if (count > 0) CUDA_CHECK(cudaMemcpy(recv, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  }

 protected:
  cudaStream_t stream_ = nullptr;
  DeviceBuffer<float> scratch_;
};

// ---------------------------------------------------------------------------------------------
// kMpiStaging: device → host copy, MPI, host → device copy
// ---------------------------------------------------------------------------------------------

class StagingCommunicator final : public DeviceCommunicator {
 public:
  explicit StagingCommunicator(MPI_Comm comm) : DeviceCommunicator(Backend::kMpiStaging, comm) {}

  Request post_send(const float* buffer, std::size_t count, int dest) override {
    check_peer(dest, "isend");
    Request r;
    r.backend_slot = next_slot_++;
    std::vector<float>& host = staged_[r.backend_slot];
    host.resize(count);
    if (count > 0) CUDA_CHECK(cudaMemcpy(host.data(), buffer, count * sizeof(float), cudaMemcpyDeviceToHost));
    MPI_CHECK(MPI_Isend(host.data(), static_cast<int>(count), MPI_FLOAT, dest, 0, comm_, &r.mpi));
    r.pending = true;
    count_send(dest, count);
    return r;
  }

  Request post_recv(float* buffer, std::size_t count, int source) override {
    check_peer(source, "irecv");
    Request r;
    r.backend_slot = next_slot_++;
    std::vector<float>& host = staged_[r.backend_slot];
    host.resize(count);
    MPI_CHECK(MPI_Irecv(host.data(), static_cast<int>(count), MPI_FLOAT, source, 0, comm_, &r.mpi));
    const int slot = r.backend_slot;
    r.on_complete = [this, slot, buffer, count] {
      if (count > 0) CUDA_CHECK(cudaMemcpy(buffer, staged_[slot].data(), count * sizeof(float), cudaMemcpyHostToDevice));
    };
    r.pending = true;
    return r;
  }

  void complete(Request& request) override {
    if (!request.pending) return;
    MPI_CHECK(MPI_Wait(&request.mpi, MPI_STATUS_IGNORE));
    request.pending = false;
    if (request.on_complete) request.on_complete();
    staged_.erase(request.backend_slot);
  }

  bool poll(Request& request) override {
    if (!poll_mpi(request)) return false;
    staged_.erase(request.backend_slot);
    return true;
  }

 private:
  std::map<int, std::vector<float>> staged_;
  int next_slot_ = 0;
};

// ---------------------------------------------------------------------------------------------
// kCudaIpc: ranks sharing a GPU. Each receiver lands messages from a peer in a buffer of its own
// (a "landing" buffer per peer), exported once to that peer with cudaIpcGetMemHandle; the sender
// copies device-to-device into it and answers "done"; the receiver then copies the message into
// place. Control messages go over MPI; a progress loop inside wait() serves both directions, so
// a ring where every rank waits on its receive first cannot deadlock.
//
// Lifetimes (the CUDA runtime's rules: a handle names one allocation, and an exporter must not
// free memory an importer still has open): only the communicator's own landing buffers are ever
// exported, never the caller's (whose addresses a later cudaMalloc may reuse). A landing buffer
// that must grow is replaced by a new one of a new generation; the sender closes its mapping of
// the old one before opening the new one and says so in its next "done", and only then is the
// old one freed. Destruction is collective: imports are closed, every rank waits for every
// other, then the landing buffers are freed. NCCL's own peer-to-peer path lands messages in
// buffers of its own in the same way.
// ---------------------------------------------------------------------------------------------

constexpr int kTagReady = 101;
constexpr int kTagDone = 102;

/// Receiver → sender: where in which generation of the receiver's landing buffer to write.
struct ReadyMessage {
  cudaIpcMemHandle_t handle;
  std::uint32_t generation;  ///< 1, 2, ...: a new one whenever the landing buffer was replaced
  std::uint64_t offset;      ///< floats into the landing buffer
  std::uint64_t count;
};

/// Sender → receiver: written; and the generation the sender has open now (older ones are closed).
struct DoneMessage {
  std::uint32_t generation_open;
};

class IpcCommunicator final : public DeviceCommunicator {
 public:
  explicit IpcCommunicator(MPI_Comm comm) : DeviceCommunicator(Backend::kCudaIpc, comm), landing_(static_cast<std::size_t>(size_)),
                                            imports_(static_cast<std::size_t>(size_)) {}

  ~IpcCommunicator() override {
    for (Import& i : imports_) {
      if (i.ptr != nullptr) cudaIpcCloseMemHandle(i.ptr);
    }
    PMPI_Barrier(comm_);  // every importer has closed before any exporter frees (the landing buffers, below)
  }

  Request post_send(const float* buffer, std::size_t count, int dest) override {
    check_peer(dest, "isend");
    Slot slot;
    slot.send = true;
    slot.peer = dest;
    slot.src = buffer;
    slot.count = count;
    const int id = next_slot_++;
    Slot& s = slots_.emplace(id, slot).first->second;
    MPI_CHECK(MPI_Irecv(&s.ready, sizeof(ReadyMessage), MPI_BYTE, dest, kTagReady, comm_, &s.control));
    send_order_.push_back(id);
    count_send(dest, count);
    Request r;
    r.backend_slot = id;
    r.pending = true;
    return r;
  }

  Request post_recv(float* buffer, std::size_t count, int source) override {
    check_peer(source, "irecv");
    Slot slot;
    slot.peer = source;
    slot.count = count;
    slot.dst = buffer;
    const int id = next_slot_++;
    Slot& s = slots_.emplace(id, slot).first->second;
    Peer& peer = landing_[static_cast<std::size_t>(source)];
    Landing& l = room_for(peer, count);
    s.generation = l.generation;
    s.ready = {l.handle, l.generation, l.used, count};
    l.used += count;
    ++l.outstanding;
    MPI_CHECK(MPI_Isend(&s.ready, sizeof(ReadyMessage), MPI_BYTE, source, kTagReady, comm_, &s.control));
    MPI_CHECK(MPI_Irecv(&s.done_message, sizeof(DoneMessage), MPI_BYTE, source, kTagDone, comm_, &s.done));
    Request r;
    r.backend_slot = id;
    r.pending = true;
    return r;
  }

  void complete(Request& request) override {
    auto it = slots_.find(request.backend_slot);
    if (it == slots_.end()) throw std::logic_error("cuda-ipc: unknown request");
    Slot& s = it->second;
    for (;;) {
      progress();
      if (s.send ? s.copied : test(s.done)) break;
    }
    // Both control messages of the slot are complete before it is forgotten.
    MPI_CHECK(MPI_Wait(&s.control, MPI_STATUS_IGNORE));
    MPI_CHECK(MPI_Wait(&s.done, MPI_STATUS_IGNORE));
    if (!s.send) landed(s);
    slots_.erase(it);
    request.pending = false;
  }

 private:
  struct Landing {
    DeviceBuffer<float> buffer;
    cudaIpcMemHandle_t handle{};
    std::uint32_t generation = 0;
    std::size_t used = 0;  ///< floats handed out since it was last empty
    int outstanding = 0;   ///< receives into it not yet landed
  };
  struct Peer {
    Landing current;
    std::vector<Landing> retired;  ///< replaced, until the sender has closed them and they are empty
  };
  struct Import {
    std::uint32_t generation = 0;
    void* ptr = nullptr;
  };
  struct Slot {
    bool send = false;
    int peer = -1;
    const float* src = nullptr;
    float* dst = nullptr;
    std::size_t count = 0;
    std::uint32_t generation = 0;
    ReadyMessage ready{};
    DoneMessage done_message{};
    MPI_Request control = MPI_REQUEST_NULL;  // send: the ready message in; recv: it out
    MPI_Request done = MPI_REQUEST_NULL;     // send: "done" out; recv: "done" in
    bool copied = false;
  };

  bool test(MPI_Request& r) {
    int flag = 0;
    MPI_CHECK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  }

  /// The landing buffer for @p count more floats from a peer: the current one, emptied when no
  /// receive is outstanding, or a new generation twice as large.
  Landing& room_for(Peer& peer, std::size_t count) {
    Landing& l = peer.current;
    if (l.outstanding == 0) l.used = 0;
    if (l.generation != 0 && l.used + count <= l.buffer.size()) return l;
    const std::size_t size = std::max({std::size_t{1} << 16, 2 * l.buffer.size(), l.used + count, count});
    Landing fresh;
    fresh.buffer = DeviceBuffer<float>(size);
    CUDA_CHECK(cudaIpcGetMemHandle(&fresh.handle, fresh.buffer.data() - guard::kFrontBytes / sizeof(float)));
    fresh.generation = l.generation + 1;
    if (l.generation != 0) peer.retired.push_back(std::move(l));
    peer.current = std::move(fresh);
    return peer.current;
  }

  /// A receive's data has arrived in the landing buffer: copy it into place, then free what the
  /// sender no longer maps.
  void landed(Slot& s) {
    Peer& peer = landing_[static_cast<std::size_t>(s.peer)];
    Landing* l = s.generation == peer.current.generation ? &peer.current : nullptr;
    for (Landing& r : peer.retired) {
      if (r.generation == s.generation) l = &r;
    }
    if (l == nullptr) throw std::logic_error("cuda-ipc: a receive's landing buffer is gone");
    if (s.count > 0) {
      CUDA_CHECK(cudaMemcpyAsync(s.dst, l->buffer.data() + s.ready.offset, s.count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
      CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    --l->outstanding;
    const std::uint32_t open = s.done_message.generation_open;
    peer.retired.erase(std::remove_if(peer.retired.begin(), peer.retired.end(),
                                      [open](const Landing& r) { return r.outstanding == 0 && (open == 0 || r.generation < open); }),
                       peer.retired.end());
  }

  /// The peer's landing buffer of this generation, mapped: an older mapping is closed first.
  void* import(int peer, const ReadyMessage& ready) {
    Import& i = imports_[static_cast<std::size_t>(peer)];
    if (i.generation == ready.generation) return i.ptr;
    if (i.ptr != nullptr) CUDA_CHECK(cudaIpcCloseMemHandle(i.ptr));
    i.ptr = nullptr;
    CUDA_CHECK(cudaIpcOpenMemHandle(&i.ptr, ready.handle, cudaIpcMemLazyEnablePeerAccess));
    i.generation = ready.generation;
    return i.ptr;
  }

  /// Serves pending sends, oldest first per destination (the receiver matches "done" messages
  /// in the order it posted its receives).
  void progress() {
    std::vector<int> blocked;  // destinations with an older send still waiting
    for (auto id_it = send_order_.begin(); id_it != send_order_.end();) {
      Slot& s = slots_.at(*id_it);
      if (std::find(blocked.begin(), blocked.end(), s.peer) != blocked.end() || !test(s.control)) {
        blocked.push_back(s.peer);
        ++id_it;
        continue;
      }
      if (s.ready.count != s.count) {
        throw std::runtime_error("cuda-ipc: rank " + std::to_string(rank_) + " sends " + std::to_string(s.count) + " floats to rank " +
                                 std::to_string(s.peer) + ", which receives " + std::to_string(s.ready.count));
      }
      if (s.count > 0) {
        // The landing buffer's data starts after DeviceBuffer's front guard band.
        float* landing = static_cast<float*>(import(s.peer, s.ready)) + guard::kFrontBytes / sizeof(float);
        CUDA_CHECK(cudaMemcpyAsync(landing + s.ready.offset, s.src, s.count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
      }
      s.done_message.generation_open = imports_[static_cast<std::size_t>(s.peer)].generation;
      MPI_CHECK(MPI_Isend(&s.done_message, sizeof(DoneMessage), MPI_BYTE, s.peer, kTagDone, comm_, &s.done));
      s.copied = true;
      id_it = send_order_.erase(id_it);
    }
  }

  std::vector<Peer> landing_;     ///< as a receiver, per source rank (destroyed after the barrier above)
  std::vector<Import> imports_;   ///< as a sender, the mapping of each destination's landing buffer
  std::map<int, Slot> slots_;
  std::deque<int> send_order_;
  int next_slot_ = 0;
};

// ---------------------------------------------------------------------------------------------
// kNccl: one rank per GPU. isend/irecv are queued and issued together, inside one
// ncclGroupStart/End, at the first wait: NCCL point-to-point calls outside a group block until
// the peer's matching call, so a ring of plain sends would deadlock.
// ---------------------------------------------------------------------------------------------

#ifdef GPULAB_WITH_NCCL
#define NCCL_CHECK(call)                                                                       \
  do {                                                                                         \
    const ncclResult_t gpulab_nccl_ = (call);                                                  \
    if (gpulab_nccl_ != ncclSuccess)                                                           \
      throw std::runtime_error(std::string("NCCL error: ") + ncclGetErrorString(gpulab_nccl_) + \
                               "\n  in " #call "\n  at " __FILE__);                            \
  } while (0)

class NcclCommunicator final : public DeviceCommunicator {
 public:
  explicit NcclCommunicator(MPI_Comm comm) : DeviceCommunicator(Backend::kNccl, comm) {
    ncclUniqueId id;
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(PMPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm_));
    NCCL_CHECK(ncclCommInitRank(&nccl_, size_, id, rank_));
  }
  ~NcclCommunicator() override { ncclCommDestroy(nccl_); }

  Request post_send(const float* buffer, std::size_t count, int dest) override {
    check_peer(dest, "isend");
    count_send(dest, count);
    return queue({true, dest, const_cast<float*>(buffer), count});
  }
  Request post_recv(float* buffer, std::size_t count, int source) override {
    check_peer(source, "irecv");
    return queue({false, source, buffer, count});
  }
  void complete(Request& request) override {
    if (!request.pending) return;
    if (request.backend_slot >= flushed_) flush();
    request.pending = false;
  }
  void allreduce_sum(const float* send, float* recv, std::size_t count) override {
    note_library_collective("Communicator::allreduce_sum");
    NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, nccl_, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  struct Op {
    bool send;
    int peer;
    float* buffer;
    std::size_t count;
  };
  Request queue(const Op& op) {
    queued_.push_back(op);
    Request r;
    r.backend_slot = issued_++;
    r.pending = true;
    return r;
  }
  void flush() {
    NCCL_CHECK(ncclGroupStart());
    for (const Op& op : queued_) {
      if (op.count == 0) continue;
      if (op.send) {
        NCCL_CHECK(ncclSend(op.buffer, op.count, ncclFloat, op.peer, nccl_, stream_));
      } else {
        NCCL_CHECK(ncclRecv(op.buffer, op.count, ncclFloat, op.peer, nccl_, stream_));
      }
    }
    NCCL_CHECK(ncclGroupEnd());
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    queued_.clear();
    flushed_ = issued_;
  }
  ncclComm_t nccl_ = nullptr;
  std::vector<Op> queued_;
  int issued_ = 0;   // requests handed out
  int flushed_ = 0;  // requests below this index have completed
};
#endif

}  // namespace

std::unique_ptr<Communicator> create_device_communicator(Backend backend, MPI_Comm comm) {
  switch (backend) {
    case Backend::kMpiStaging:
      return std::make_unique<StagingCommunicator>(comm);
    case Backend::kCudaIpc:
      return std::make_unique<IpcCommunicator>(comm);
    case Backend::kNccl:
#ifdef GPULAB_WITH_NCCL
      return std::make_unique<NcclCommunicator>(comm);
#else
      throw std::runtime_error("the nccl backend is not built in: NCCL was not found at configure time");
#endif
    case Backend::kMpi:
      break;
  }
  throw std::logic_error("create_device_communicator: not a device backend");
}

namespace {
/// What every rank sees, agreed on by all: does every rank have a GPU, a GPU of its own, and
/// are all ranks on one node?
struct Placement {
  bool gpu_everywhere = false;
  bool own_gpu_everywhere = false;
  bool one_node = false;
};
Placement placement(MPI_Comm comm) {
  int local_rank = 0, local_size = 1, size = 1, devices = 0;
  local_rank_and_size(comm, local_rank, local_size);
  MPI_CHECK(MPI_Comm_size(comm, &size));
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  cudaGetLastError();
  int mine[3] = {devices > 0 ? 1 : 0, local_size <= devices ? 1 : 0, local_size == size ? 1 : 0};
  int all[3] = {0, 0, 0};
  MPI_CHECK(PMPI_Allreduce(mine, all, 3, MPI_INT, MPI_MIN, comm));
  return {all[0] == 1, all[1] == 1, all[2] == 1};
}
}  // namespace

bool device_backend_available(Backend backend, std::string& why, MPI_Comm comm) {
  const Placement p = placement(comm);
  why.clear();
  if (!p.gpu_everywhere) {
    why = "a rank has no GPU";
  } else if (backend == Backend::kCudaIpc && !p.one_node) {
    why = "ranks on several nodes (CUDA IPC works inside one node)";
  } else if (backend == Backend::kNccl) {
#ifdef GPULAB_WITH_NCCL
    if (!p.own_gpu_everywhere) why = "ranks share a GPU (NCCL needs one GPU per rank)";
#else
    why = "not built with NCCL";
#endif
  }
  return why.empty();
}

Backend choose_device_backend(MPI_Comm comm) {
  const Placement p = placement(comm);
  if (!p.gpu_everywhere) throw std::runtime_error("device buffers need a GPU on every rank");
#ifdef GPULAB_WITH_NCCL
  if (p.own_gpu_everywhere) return Backend::kNccl;
#endif
  return p.one_node ? Backend::kCudaIpc : Backend::kMpiStaging;
}

}  // namespace gpulab::dist::detail
