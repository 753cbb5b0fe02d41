/// @file serving.hpp
/// @brief Lab 12 — inference serving: the functions you implement in labs/12-serving/
/// (cache.cpp, blocks.cpp, scheduler.cpp; the GPU kernel of part 5, decode.cu, has its own header,
/// decode.hpp). Read lessons/12-serving.md.
///
/// This header belongs to the tests: do not change it. One gpulab::nn::GPT
/// (common/include/gpulab/nn_gpt.hpp) serves many requests at once. GPT::decode_rows runs a batch
/// of rows — any rows of any sequences: a chunk of one prompt, the next token of another — and
/// keeps each row's key and value in a KVStore, which also answers each row's attention. Every
/// row is computed on its own, so nothing about the batch (which rows, how many, in which cache)
/// can change a row's logits: the tests hold every output to the bits of the same request served
/// alone with a contiguous cache.
///
/// The pieces, in the order the lab builds them (Kwon et al., "Efficient Memory Management for
/// Large Language Model Serving with PagedAttention", SOSP 2023; Yu et al., "Orca: A Distributed
/// Serving System for Transformer-Based Generative Models", OSDI 2022):
///   12.1 ContiguousCache — each sequence reserves the whole context up front;
///   12.2 BlockManager   — the cache cut into blocks of B positions: block tables, reference
///        counts, prefix sharing, copy on write;
///   12.3 PagedCache     — keys and values in a pool of blocks, read through the block table;
///   12.4 Scheduler      — which rows run in each step: continuous batching under a token budget
///        and a block budget, chunked prefill, preemption by recomputation.
/// Engine (below, given) puts them together; the tests also run your scheduler on a cost model
/// of a 7B model on an H200 (lesson 12 derives it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpulab/nn.hpp"
#include "gpulab/nn_gpt.hpp"

namespace lab12 {

namespace nn = gpulab::nn;

/// "No such position" in a Slot.
inline constexpr std::size_t kNone = static_cast<std::size_t>(-1);

// ---------------------------------------------------------------------------------------------
// 12.1 the contiguous cache
// ---------------------------------------------------------------------------------------------

/// TODO(12.1): the bytes of cache one token of @p config's model keeps: its key and its value,
/// width floats each (every head's), in every layer, as fp32.
std::size_t kv_bytes_per_token(const nn::GPTConfig& config);

/// A KV cache that gives each sequence one buffer of the whole context, as GPT::generate's
/// KVCache does: layer l's keys are heads × context × hd floats, head by head, position p of head
/// h at row h·context + p; the values likewise.
class ContiguousCache : public nn::KVStore {
 public:
  explicit ContiguousCache(const nn::GPTConfig& config) : config_(config) { config_.validate(); }
  /// TODO(12.1): reserves the whole context for a new @p sequence (every layer's keys and
  /// values, zeros) and returns the bytes reserved. Throws std::invalid_argument if it exists.
  /// (Every member below throws std::invalid_argument for a sequence not added.)
  std::size_t add(std::size_t sequence);
  /// TODO(12.1): gives the sequence's memory back. Throws std::invalid_argument if unknown.
  void release(std::size_t sequence);
  /// TODO(12.1): positions filled in every layer (0 for a sequence just added).
  std::size_t length(std::size_t sequence) const;
  /// TODO(12.1): bytes reserved for all sequences (what a contiguous cache costs however short
  /// they are).
  std::size_t bytes_reserved() const;
  /// TODO(12.1): keeps the row's key and value of @p layer at row.position. Positions come in
  /// order: row.position must be the layer's next position; anything else throws
  /// std::logic_error (a gap would leave zeros that attention reads as keys).
  void append(const nn::DecodeRow& row, std::size_t layer, const float* key, const float* value) override;
  /// TODO(12.1): for each head, nn::attend over positions 0 … row.position. Throws
  /// std::logic_error unless they are all filled in @p layer.
  void attend(const nn::DecodeRow& row, std::size_t layer, const float* query, float* out) override;

 private:
  struct Sequence {
    std::vector<std::vector<float>> keys, values;  ///< per layer: heads × context × hd
    std::vector<std::size_t> filled;               ///< per layer: positions written
  };
  nn::GPTConfig config_;
  std::map<std::size_t, Sequence> sequences_;
};

// ---------------------------------------------------------------------------------------------
// 12.2 the block manager
// ---------------------------------------------------------------------------------------------

/// The cache has run out of free blocks.
class OutOfBlocks : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Where an append goes: block and offset (the position's slot), and, on a copy on write, the
/// block whose first @c offset slots must be copied into @c block first (kNone otherwise).
struct Slot {
  std::size_t block = kNone;
  std::size_t offset = 0;
  std::size_t copy_from = kNone;
};

/// The bookkeeping of a paged cache, without the memory: `blocks` blocks of `block_size`
/// positions; per sequence a block table (block i holds positions i·B … i·B + B − 1) and its
/// tokens; per block a reference count (how many tables hold it). Free blocks are handed out
/// lowest id first. Sharing, two ways:
///  - prefix sharing: a block just filled is registered under its whole prefix — every token from
///    position 0 to its end, since a key or value depends on all the tokens before it — unless
///    that prefix is registered already (a second sequence filling the same tokens keeps its block
///    unregistered). A new sequence whose prompt starts with registered prefixes takes their
///    blocks (count + 1 each) instead of computing them, at most (prompt − 1) / B blocks: its last
///    prompt token is always computed (its logits are the first output). A block is forgotten
///    when it is freed. (Serving systems hash the prefix as a chain, h_i = hash(h_(i−1), block i's
///    tokens); here the key is the tokens themselves, so no two prefixes can collide.)
///  - fork: a child shares all of its parent's blocks, the partial last one too (parallel
///    sampling, beam search).
/// Copy on write: an append into a block whose count is above 1 takes a new block for this
/// sequence, copies the slots before the offset (Slot::copy_from) and gives the shared one up.
class BlockManager {
 public:
  /// Throws std::invalid_argument for zero blocks or a block size of 0.
  BlockManager(std::size_t blocks, std::size_t block_size);
  std::size_t blocks() const { return refcount_.size(); }  ///< Blocks in all.
  std::size_t block_size() const { return block_size_; }   ///< B.
  /// TODO(12.2): blocks no table holds.
  std::size_t free_blocks() const;
  /// TODO(12.2): positions a new sequence with @p prompt would share (a multiple of B), without
  /// changing anything.
  std::size_t shared_prefix(const std::vector<int>& prompt) const;
  /// TODO(12.2): starts @p sequence from @p prompt: takes the shared prefix's blocks (the table
  /// starts with them, the sequence's length is the shared positions, its tokens those of the
  /// prompt's shared part) and returns the positions shared. Allocates no other block. Throws
  /// std::invalid_argument for an existing sequence or an empty prompt.
  std::size_t add(std::size_t sequence, const std::vector<int>& prompt);
  /// TODO(12.2): the new blocks @p count more appends to @p sequence would take (a new block at
  /// every position that starts one, and one for a copy on write of a shared last block).
  std::size_t blocks_needed(std::size_t sequence, std::size_t count) const;
  /// TODO(12.2): the slot for @p token at the sequence's next position (its length), which then
  /// grows by one: a new block when the position starts one, a copy on write when the last block
  /// is shared; a block just filled is registered for prefix sharing. Throws OutOfBlocks (and
  /// changes nothing) when a block is needed and none is free; std::invalid_argument for an
  /// unknown sequence.
  Slot append(std::size_t sequence, int token);
  /// TODO(12.2): @p child starts as a copy of @p parent's table, length and tokens, every block's
  /// count + 1. Throws std::invalid_argument for an unknown parent or an existing child.
  void fork(std::size_t parent, std::size_t child);
  /// TODO(12.2): ends @p sequence: every block of its table − 1; a block at 0 is free again (and
  /// forgotten for prefix sharing). Throws std::invalid_argument for an unknown sequence.
  void release(std::size_t sequence);
  /// TODO(12.2): the block table of @p sequence (throws std::invalid_argument if unknown).
  const std::vector<std::size_t>& table(std::size_t sequence) const;
  /// TODO(12.2): positions with a slot (throws std::invalid_argument if unknown).
  std::size_t length(std::size_t sequence) const;
  /// How many tables hold @p block.
  std::size_t refcount(std::size_t block) const { return refcount_.at(block); }
  /// Whether @p sequence is known.
  bool contains(std::size_t sequence) const { return sequences_.count(sequence) != 0; }

 private:
  struct Sequence {
    std::vector<std::size_t> table;
    std::vector<int> tokens;  ///< one per position with a slot
  };
  struct PrefixHash {  ///< FNV-1a over the tokens
    std::size_t operator()(const std::vector<int>& prefix) const {
      std::uint64_t h = 0xcbf29ce484222325ull;
      for (const int t : prefix) h = (h ^ static_cast<std::uint32_t>(t)) * 0x100000001b3ull;
      return static_cast<std::size_t>(h);
    }
  };
  std::size_t block_size_;
  std::vector<std::size_t> refcount_;
  std::set<std::size_t> free_;                         ///< free block ids, lowest first
  std::map<std::size_t, Sequence> sequences_;
  std::unordered_map<std::vector<int>, std::size_t, PrefixHash> registered_;  ///< a full block's whole prefix → the block
  std::map<std::size_t, std::vector<int>> key_of_;                            ///< registered block → its prefix
};

// ---------------------------------------------------------------------------------------------
// 12.3 the paged cache
// ---------------------------------------------------------------------------------------------

/// Keys and values in one pool of blocks, allocated once: block b, layer l, K (0) or V (1), head
/// h, slot s starts at float (((b·layers + l)·2 + kv)·heads + h)·B·hd + s·hd of pool().
class PagedCache : public nn::KVStore {
 public:
  /// TODO(12.3): the pool for @p manager's blocks (zeros). Throws std::invalid_argument when the
  /// block size does not divide the model's context.
  PagedCache(const nn::GPTConfig& config, BlockManager& manager);
  /// TODO(12.3): floats per block: every layer's keys and values for B positions.
  std::size_t block_floats() const;
  /// The pool.
  const std::vector<float>& pool() const { return pool_; }
  /// TODO(12.3): in layer 0 the row takes its slot (BlockManager::append with the row's token,
  /// carrying out a copy on write: every layer's first `offset` slots of copy_from into the new
  /// block); every layer then writes its key and value at the slot of row.position, found through
  /// the block table. In layer 0 row.position must be the sequence's length (its next position);
  /// in later layers a position that has a slot (below the length: layer 0 gave every row of the
  /// call its slot first). std::logic_error otherwise.
  void append(const nn::DecodeRow& row, std::size_t layer, const float* key, const float* value) override;
  /// TODO(12.3): for each head, nn::attend over positions 0 … row.position, each found through
  /// the block table: the same pointers in the same order as a contiguous cache, so the same
  /// bits. Throws std::logic_error for a position the sequence has no slot for.
  void attend(const nn::DecodeRow& row, std::size_t layer, const float* query, float* out) override;

 private:
  nn::GPTConfig config_;
  BlockManager& manager_;
  std::vector<float> pool_;
};

// ---------------------------------------------------------------------------------------------
// 12.4 the scheduler
// ---------------------------------------------------------------------------------------------

/// A request: its prompt and how many tokens to generate (greedy), arriving at @c arrival seconds.
struct Request {
  std::size_t id = 0;
  std::vector<int> prompt;
  std::size_t max_new = 1;
  double arrival = 0.0;
};

/// Positions first … first + count − 1 of request @c id run in this step.
struct Chunk {
  std::size_t id = 0;
  std::size_t first = 0;
  std::size_t count = 0;
};

/// One step's plan and why.
struct Step {
  std::vector<Chunk> chunks;            ///< the rows, chunk by chunk, request by request
  std::vector<std::size_t> admitted;    ///< requests admitted this step (BlockManager::add done)
  std::vector<std::size_t> preempted;   ///< requests preempted this step (blocks released, back to waiting)
  std::vector<std::string> log;         ///< one line per decision: admit, preempt, wait, budget
};

struct SchedulerConfig {
  std::size_t context = 128;       ///< the longest request, prompt + max_new (the model's context)
  std::size_t token_budget = 64;   ///< rows per step at most
  std::size_t max_running = 16;    ///< requests admitted at once at most
};

/// Iteration-level scheduling. A request knows prompt + generated tokens and has computed those
/// whose keys and values are in the cache. Each step, with a budget of token_budget rows:
///  1. the running requests, oldest first (arrival, then submission), each a chunk of its next
///     min(known − computed, budget left) positions (one row when it decodes), shrunk to what the
///     free blocks hold (less what this step's earlier chunks will take: blocks_needed). If not
///     one row fits, the youngest running request not yet scheduled this step is preempted (its
///     blocks released, its progress dropped: when admitted again it recomputes everything it
///     knows, which changes no output), again until one row fits; if the youngest is the request
///     itself, it is preempted and the running pass ends.
///  2. the waiting requests in arrival order (a preempted one back in its place): the first is
///     admitted when fewer than max_running run, a row of budget is left and the free blocks (less
///     this step's) hold all it knows beyond its shared prefix; its chunk is min(those positions,
///     budget left) — a long prompt runs in chunks (chunked prefill). The first that cannot be
///     admitted stops admission: nothing overtakes, so nothing starves.
class Scheduler {
 public:
  /// Throws std::invalid_argument for a zero budget, context or max_running, or a block size that
  /// does not divide the context.
  Scheduler(const SchedulerConfig& config, BlockManager& manager);
  /// TODO(12.4): queues @p request. Throws std::invalid_argument (and queues nothing) for an
  /// empty prompt, a negative token, a repeated id, prompt + max_new above the context, max_new = 0, or a request
  /// whose prompt + max_new − 1 positions (the last token generated never takes a slot) need more
  /// blocks than the cache has: it could never finish.
  void submit(const Request& request);
  /// TODO(12.4): plans the next step (admissions through BlockManager::add, preemptions through
  /// BlockManager::release). The chunks' new blocks are not taken yet (the cache appends as the
  /// rows run) but must fit: the step's blocks_needed, summed, ≤ free blocks.
  Step schedule();
  /// TODO(12.4): the step ran: each chunk's positions are computed; @p next holds, for every
  /// request whose chunk reached the last token it knows, the token generated (the argmax of
  /// that row's logits). A request with max_new tokens generated finishes: its blocks released.
  void complete(const Step& step, const std::map<std::size_t, int>& next);
  /// TODO(12.4): whether anything is waiting or running.
  bool busy() const;
  /// TODO(12.4): the tokens @p id has generated so far (throws std::invalid_argument if unknown).
  const std::vector<int>& generated(std::size_t id) const;
  /// TODO(12.4): whether @p id has generated all of its tokens.
  bool finished(std::size_t id) const;

 private:
  struct State {
    Request request;
    std::vector<int> tokens;     ///< prompt + generated: what it knows
    std::vector<int> generated;  ///< its output so far
    std::size_t computed = 0;    ///< positions whose keys and values are in the cache
    std::size_t order = 0;       ///< submission order: breaks ties of arrival
    bool running = false, done = false;
  };
  SchedulerConfig config_;
  BlockManager& manager_;
  std::map<std::size_t, State> requests_;
  std::vector<std::size_t> running_;  ///< admitted, oldest first
  std::deque<std::size_t> waiting_;   ///< arrival order (a preempted request goes back in its place)
};

// ---------------------------------------------------------------------------------------------
// Given: the engine and the simulator
// ---------------------------------------------------------------------------------------------

/// Serves requests with a GPT: each step runs the scheduler's chunks as one decode_rows call on
/// the paged cache and picks the argmax (lowest id on a tie) of each row that generates.
class Engine {
 public:
  Engine(const nn::GPT& model, const SchedulerConfig& config, std::size_t blocks, std::size_t block_size)
      : model_(model), manager_(blocks, block_size), cache_(model.config(), manager_), scheduler_(config, manager_) {}
  void submit(const Request& request) {
    scheduler_.submit(request);
    known_[request.id] = request.prompt;
  }
  /// One step; returns its plan (the rows it ran).
  Step step() {
    Step plan = scheduler_.schedule();
    std::vector<nn::DecodeRow> rows;
    std::vector<std::size_t> owner;
    for (const Chunk& c : plan.chunks) {
      const std::vector<int>& known = tokens_of(c.id);
      for (std::size_t p = c.first; p < c.first + c.count; ++p) {
        rows.push_back({c.id, p, known.at(p)});
        owner.push_back(c.id);
      }
    }
    std::map<std::size_t, int> next;
    if (!rows.empty()) {
      const nn::Tensor logits = model_.decode_rows(rows, cache_);
      const std::size_t V = model_.config().vocab;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].position + 1 != tokens_of(owner[i]).size()) continue;  // not the last known token
        const float* z = logits.data() + i * V;
        std::size_t best = 0;
        for (std::size_t j = 1; j < V; ++j) best = z[j] > z[best] ? j : best;
        next[owner[i]] = static_cast<int>(best);
      }
    }
    scheduler_.complete(plan, next);
    for (const auto& [id, token] : next) known_[id].push_back(token);
    return plan;
  }
  bool busy() const { return scheduler_.busy(); }
  const Scheduler& scheduler() const { return scheduler_; }
  const BlockManager& manager() const { return manager_; }
  const PagedCache& cache() const { return cache_; }
  /// prompt + generated of @p id, as the engine knows it.
  const std::vector<int>& tokens_of(std::size_t id) {
    auto it = known_.find(id);
    if (it == known_.end()) throw std::invalid_argument("Engine: unknown request " + std::to_string(id));
    return it->second;
  }

 private:
  const nn::GPT& model_;
  BlockManager manager_;
  PagedCache cache_;
  Scheduler scheduler_;
  std::map<std::size_t, std::vector<int>> known_;
};

}  // namespace lab12
