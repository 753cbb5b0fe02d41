/// @file nn_gpt.hpp
/// @brief gpulab::nn's GPT, the model labs 10–12 parallelise and serve: token and position
/// embeddings, LayerNorm, causal multi-head self-attention, the pre-LN block, the model with its
/// tied LM head (GPTConfig, GPT), generation with and without a KV cache, dropout that any rank can
/// replay, and the byte-level corpus the course ships (its own lessons).
///
/// Every layer runs on host tensors (OpenBLAS and loops) and on device tensors (cuBLAS and small
/// kernels) through the same code: the operations differ, the composition does not. Like
/// Sequential, a GPT runs unit by unit over activations the caller owns (unit 0 the embeddings,
/// units 1 … L the blocks, unit L + 1 the final LayerNorm and the LM head), calls a hook per
/// parameter the moment its gradient is final, takes every tensor from the Allocator and applies
/// the rounding hook to host tensors.
///
/// Shapes: a batch of B sequences of T tokens is B·T rows, sequence by sequence; activations are
/// (B·T) × d. Weights are in × out, y = x·W + b, as Linear's (and GPT-2's Conv1D).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpulab/nn.hpp"

namespace gpulab::nn {

// ---------------------------------------------------------------------------------------------
// The projections' arithmetic, public so that a tensor-parallel layer (lab 10) can split it
// ---------------------------------------------------------------------------------------------

/// y = x·W (+ b when @p b is given), W in × out: what every projection of the GPT computes (one
/// GEMM, then the bias added to every row). Throws std::invalid_argument for mismatched shapes.
Tensor linear(const Tensor& x, const Parameter& w, const Parameter* b = nullptr);
/// The backward of linear: dW += xᵀ·dy and, when @p b is given, db += Σ_rows dy (a frozen
/// parameter is skipped); returns dx = dy·Wᵀ.
Tensor linear_backward(const Tensor& dy, const Tensor& x, Parameter& w, Parameter* b = nullptr);
/// y[i][j] += b[j] for every row i.
void add_bias(Tensor& y, const Parameter& b);
/// db += Σ_rows dy (nothing when b is frozen).
void bias_backward(const Tensor& dy, Parameter& b);

/// What a GPT layer's forward and backward need besides its tensors: how the rows split into
/// sequences, and what keys dropout's masks. Give a layer's backward the Pass its forward had.
struct Pass {
  std::size_t T = 0;       ///< positions per sequence: the rows of a batch are B sequences of T
  std::uint64_t step = 0;  ///< the training step (keys the dropout masks, with the model's seed)
  bool training = true;    ///< dropout on (at each layer's p, 0 by default); false for evaluation and generation
};

// ---------------------------------------------------------------------------------------------
// Embeddings
// ---------------------------------------------------------------------------------------------

/// The GPT's input: for sequence b and position t, x[b·T + t] = wte[token] + wpe[t]. The token
/// table (vocab × width, named @p name + "token", the one the GPT's LM head shares) and the
/// position table (context × width, @p name + "position") start N(0, 0.02²), as GPT-2's, from
/// @p seed.
class Embedding {
 public:
  /// Tables for @p vocab tokens and @p context positions of @p width features on @p device;
  /// throws std::invalid_argument when any size is 0.
  Embedding(std::size_t vocab, std::size_t context, std::size_t width, std::uint64_t seed, const std::string& name = "",
            Device device = Device::kHost);
  /// @p tokens: batch · T ids in [0, vocab), sequence by sequence, T ≤ context. Returns the
  /// (batch · T) × width rows. Throws std::invalid_argument for an id out of range, T = 0,
  /// T > context, or a count that is not a multiple of T.
  Tensor forward(const std::vector<int>& tokens, std::size_t T) const;
  /// Adds row r of @p dx into the token table's row tokens[r] and the position table's row r mod T
  /// (a token used twice gets both rows), in row order (the same sums on every run).
  void backward(const Tensor& dx, const std::vector<int>& tokens, std::size_t T);
  /// The token table, then the position table.
  std::vector<Parameter*> parameters() { return {&token_, &position_}; }
  Parameter& token() { return token_; }        ///< wte, vocab × width.
  Parameter& position() { return position_; }  ///< wpe, context × width.
  const Parameter& token() const { return token_; }        ///< wte, vocab × width.
  const Parameter& position() const { return position_; }  ///< wpe, context × width.

 private:
  void check(const std::vector<int>& tokens, std::size_t T) const;
  Parameter token_, position_;
};

// ---------------------------------------------------------------------------------------------
// LayerNorm
// ---------------------------------------------------------------------------------------------

/// y = (x − mean)·rstd·γ + β over each row, rstd = 1/√(var + eps), var the biased variance (÷ n),
/// mean and variance by Welford in fp32 (no E[x²] − E[x]²). γ starts at 1, β at 0, named @p name +
/// "weight" and "bias". Saves x, and each row's mean and rstd, for backward:
/// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·γ; dγ += Σ_rows dy·x̂, dβ += Σ_rows dy.
/// On the device each warp runs Welford over its lanes' columns and merges them pairwise.
class LayerNorm final : public Layer {
 public:
  /// Over rows of @p width features, with parameters on @p device.
  explicit LayerNorm(std::size_t width, float eps = 1e-5f, const std::string& name = "", Device device = Device::kHost);
  Tensor forward(const Tensor& x, Saved& saved) const override;
  Tensor backward(const Tensor& dy, const Saved& saved) override;
  std::vector<Parameter*> parameters() override { return {&gamma_, &beta_}; }
  std::string describe() const override;
  double forward_flops(std::size_t batch) const override;
  std::size_t saved_floats(std::size_t batch) const override;
  Parameter& gamma() { return gamma_; }  ///< γ, 1 × width.
  Parameter& beta() { return beta_; }    ///< β, 1 × width.

 private:
  std::size_t width_;
  float eps_;
  Parameter gamma_, beta_;
};

// ---------------------------------------------------------------------------------------------
// Causal multi-head self-attention
// ---------------------------------------------------------------------------------------------

/// Which heads of an attention layer a call computes: heads [first, first + count) of total, each
/// head_width wide. A rank of a tensor-parallel group holds such a slice; one process holds all.
struct HeadSlice {
  std::size_t count = 0;       ///< heads computed here
  std::size_t first = 0;       ///< the global index of the first of them
  std::size_t total = 0;       ///< heads in the whole layer (H)
  std::size_t head_width = 0;  ///< hd
};

/// The attention dropout of one layer: its mask is element ((b·H + h)·T + i)·T + j of
/// DropoutStream{seed, pass.step, tensor, p} for global head h, whichever slice computes it.
struct AttentionDropout {
  std::uint64_t seed = 0;    ///< the model's seed
  std::uint32_t tensor = 0;  ///< the layer's attention dropout tensor id
  float p = 0.0f;            ///< the probability of dropping (applied only when pass.training)
};

/// The core of causal attention for the heads of @p slice: from @p qkv, (B·T) × 3·count·hd laid out
/// [Q | K | V] with head h of the slice at columns h·hd … of each third (what a column-parallel
/// c_attn computes on one rank), to the heads' outputs merged into rows, (B·T) × count·hd (what a
/// row-parallel c_proj takes). Keeps Q, K, V and P (B·count·T × T, before dropout) in @p saved.
/// Throws std::invalid_argument for a slice outside its layer or a qkv of another shape.
Tensor attention_heads_forward(const Tensor& qkv, const HeadSlice& slice, const Pass& pass, const AttentionDropout& dropout, Saved& saved);
/// dL/dqkv from dL/d(merged output), with the masks made again from @p dropout.
Tensor attention_heads_backward(const Tensor& dmerged, const HeadSlice& slice, const Pass& pass, const AttentionDropout& dropout,
                                const Saved& saved);

/// y = c_proj(concat_h softmax_causal(Q_h·K_hᵀ/√hd)·V_h) with [Q | K | V] = c_attn(x), written as
/// GEMMs and row operations:
///   qkv = x·W_attn + b_attn                        (B·T) × 3d
///   Q, K, V = the heads of qkv                      (B·H·T) × hd each, head by head
///   P = causal softmax of Q·Kᵀ/√hd per (b, h)       (B·H·T) × T, row i sees keys j ≤ i
///   O = dropout(P)·V per (b, h), merged to rows     (B·T) × d
///   y = O·W_proj + b_proj                           (B·T) × d
///
/// The per-head layout, which tensor parallelism splits: column c of qkv is Q for c < d, K for
/// d ≤ c < 2d, V after, and within each third head h owns columns h·hd … (h + 1)·hd − 1 (hd = d/H).
/// Row h·hd … of W_proj reads head h's output. Attention dropout's mask element for (b, h, i, j)
/// is index ((b·H + h)·T + i)·T + j of the tensor id given at construction. The core between the
/// projections is attention_heads_forward over all heads.
class CausalSelfAttention {
 public:
  /// @p width = d features in @p heads heads (d divisible by heads); W_attn ~ N(0, 0.02²),
  /// W_proj ~ N(0, @p proj_std²) (GPT-2 scales the residual projections by 1/√(2·layers)), biases
  /// 0, from @p seed; attention dropout at @p dropout with tensor id @p dropout_tensor, keyed by
  /// @p dropout_seed. Parameters named @p name + "c_attn.weight", "c_attn.bias", "c_proj.weight",
  /// "c_proj.bias".
  CausalSelfAttention(std::size_t width, std::size_t heads, std::uint64_t seed, float proj_std, float dropout, std::uint32_t dropout_tensor,
                      std::uint64_t dropout_seed, const std::string& name = "", Device device = Device::kHost);
  /// y from x ((B·T) × d, T = pass.T); keeps x and the merged heads in @p saved, and the core's
  /// Q, K, V and P in its part 0.
  Tensor forward(const Tensor& x, const Pass& pass, Saved& saved) const;
  /// dL/dx from dL/dy; adds into the four parameters' gradients.
  Tensor backward(const Tensor& dy, const Pass& pass, const Saved& saved);
  /// c_attn.weight, c_attn.bias, c_proj.weight, c_proj.bias.
  std::vector<Parameter*> parameters() { return {&w_attn_, &b_attn_, &w_proj_, &b_proj_}; }
  std::size_t heads() const { return heads_; }                ///< H.
  std::size_t head_width() const { return width_ / heads_; }  ///< hd = d / H.
  /// Forward FLOPs for B·T rows: the four GEMMs, the two projections counted whole and the two
  /// attention GEMMs over the full T × T (the masked half is computed too).
  double forward_flops(std::size_t rows, std::size_t T) const;
  /// Floats kept in Saved for B·T rows.
  std::size_t saved_floats(std::size_t rows, std::size_t T) const;

 private:
  friend class GPT;
  std::size_t width_, heads_;
  float p_;
  std::uint32_t tensor_;
  std::uint64_t dropout_seed_;
  Parameter w_attn_, b_attn_, w_proj_, b_proj_;
};

/// A pre-LN transformer block (GPT-2's): x + dropout(attn(ln_1(x))), then + dropout(mlp(ln_2(·)))
/// with mlp = c_proj(GELU(c_fc(·))), 4·d hidden. Its parameters, in order, named @p name + …:
/// ln_1.weight, ln_1.bias, attn.c_attn.weight, attn.c_attn.bias, attn.c_proj.weight,
/// attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight, mlp.c_fc.bias, mlp.c_proj.weight,
/// mlp.c_proj.bias. Dropout tensor ids: @p first_tensor (attention's P), + 1 (the attention
/// branch), + 2 (the MLP branch).
class Block {
 public:
  /// A block of @p width features and @p heads heads in a model of @p layers blocks (the
  /// residual projections start N(0, 0.02²/(2·layers))), from @p seed.
  Block(std::size_t width, std::size_t heads, std::size_t layers, std::uint64_t seed, float dropout, std::uint32_t first_tensor,
        std::uint64_t dropout_seed, const std::string& name = "", Device device = Device::kHost);
  /// The block's output from its input x ((B·T) × d); what backward needs goes into @p saved
  /// (its parts: ln_1, attn, ln_2; its tensors: the MLP's).
  Tensor forward(const Tensor& x, const Pass& pass, Saved& saved) const;
  /// dL/dx from dL/d(output); adds into every parameter's gradient.
  Tensor backward(const Tensor& dy, const Pass& pass, const Saved& saved);
  /// The twelve parameters, in the order above.
  std::vector<Parameter*> parameters();
  CausalSelfAttention& attention() { return attn_; }  ///< The attention layer.
  /// Forward FLOPs for B·T rows.
  double forward_flops(std::size_t rows, std::size_t T) const;
  /// Floats kept in Saved for B·T rows.
  std::size_t saved_floats(std::size_t rows, std::size_t T) const;

 private:
  friend class GPT;
  std::size_t width_;
  float p_;
  std::uint32_t tensor_;
  std::uint64_t dropout_seed_;
  LayerNorm ln_1_;
  CausalSelfAttention attn_;
  LayerNorm ln_2_;
  Parameter w_fc_, b_fc_, w_out_, b_out_;
};

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

/// A GPT's shape.
struct GPTConfig {
  std::size_t vocab = 256;    ///< tokens (bytes: 256)
  std::size_t context = 128;  ///< the longest sequence, T ≤ context
  std::size_t layers = 4;     ///< blocks
  std::size_t heads = 4;      ///< attention heads per block
  std::size_t width = 128;    ///< d_model (a multiple of heads)
  float dropout = 0.0f;       ///< p of every dropout site (embeddings, attention, both branches)

  /// The course's model: 4 layers, 4 heads of 32, d = 128, context 128, bytes: 0.84 M parameters
  /// (parameter_count() says exactly), a training step of 8 × 128 tokens in well under a second on
  /// one core.
  static GPTConfig tiny();
  /// The number of parameter floats (the LM head is the token table: counted once).
  std::size_t parameter_count() const;
  /// Throws std::invalid_argument naming the first problem (a zero size, width not a multiple of
  /// heads, p outside [0, 1)).
  void validate() const;
};

/// A batch of token sequences for GPT::forward and GPT::backward.
struct TokenBatch {
  std::vector<int> tokens;  ///< B · T ids in [0, vocab), sequence by sequence
  Pass pass;                ///< T, the step and whether dropout is on
};

/// One sequence's keys and values for every layer, for generation without recomputation: layer
/// l's K (and V) is heads × context × hd, head by head, rows 0 … length − 1 filled.
struct KVCache {
  std::vector<Tensor> keys;    ///< one per layer
  std::vector<Tensor> values;  ///< one per layer
  std::size_t length = 0;            ///< positions filled
};

/// One row of GPT::decode_rows: the token at @c position of sequence @c sequence (an id the
/// caller and its KVStore agree on).
struct DecodeRow {
  std::size_t sequence = 0;  ///< which sequence (the store's key)
  std::size_t position = 0;  ///< where in it, 0-based: the row sees positions 0 … position
  int token = 0;             ///< the token there
};

/// Where GPT::decode_rows keeps and reads keys and values (lab 12's caches implement it). Each
/// layer of a decode_rows call first appends every row's key and value, then asks for every row's
/// attention: a row may read the keys of earlier rows of the same call (a chunk of a prompt).
class KVStore {
 public:
  virtual ~KVStore() = default;
  /// Keep @p row's key and value of layer @p layer: heads × hd floats each, head by head (head h
  /// at h·hd …), host memory valid only during the call.
  virtual void append(const DecodeRow& row, std::size_t layer, const float* key, const float* value) = 0;
  /// @p out (heads × hd) = for each head, softmax(q·Kᵀ·scale)·V over the keys and values of
  /// positions 0 … row.position of row.sequence in layer @p layer (attend() does the arithmetic).
  virtual void attend(const DecodeRow& row, std::size_t layer, const float* query, float* out) = 0;
};

/// One head's attention for one query over @p n cached positions whose key and value rows
/// (@p hd floats each) are at keys[j] and values[j]: s_j = scale·Σ_c q_c·k_jc (c in order),
/// p_j = exp(s_j − max s) / Σ_j exp(s_j − max s) (j in order), out_c = Σ_j p_j·v_jc (j in order),
/// in float. Where the rows live is the caller's business: a contiguous cache and a paged one
/// give the same pointers in the same order and so the same bits. Throws std::invalid_argument
/// for n = 0.
void attend(const float* query, const float* const* keys, const float* const* values, std::size_t n, std::size_t hd, float scale, float* out);

/// How generate picks each next token.
struct Sampling {
  float temperature = 0.0f;  ///< 0: greedy (the argmax, lowest id on a tie); > 0: sample softmax(logits / temperature)
  std::uint64_t seed = 0;    ///< sampling's randomness: the n-th draw is a pure function of (seed, n)
};

/// GPT-2's architecture at any size: embeddings (+ dropout), the blocks, a final LayerNorm, and an
/// LM head that is the token table (logits = h·wteᵀ). Its parameters, in order (labs shard by
/// these names): wte.weight, wpe.weight, then h.0. … h.(L−1). (each Block's twelve), then
/// ln_f.weight, ln_f.bias. Dropout tensor ids: 0 the embeddings, then 3 per block. Run unit by unit
/// like Sequential: unit 0 embeds the tokens, units 1 … L are the blocks, unit L + 1 is ln_f and
/// the head (its output: the logits, (B·T) × vocab).
class GPT {
 public:
  /// A model of @p config on @p device with its parameters from @p seed (the dropout masks are
  /// keyed by the seed too). Throws std::invalid_argument for a config validate() rejects.
  GPT(const GPTConfig& config, std::uint64_t seed, Device device = Device::kHost);
  /// Its shape.
  const GPTConfig& config() const { return config_; }
  /// Where its parameters live.
  Device device() const { return device_; }
  /// layers + 2.
  std::size_t units() const { return blocks_.size() + 2; }
  /// Every parameter, in the documented order.
  std::vector<Parameter*> parameters();
  /// Every gradient set to zero (allocated on first use); frozen parameters skipped.
  void zero_grad();
  /// Block @p i (0-based), for tests and for labs that reach into one.
  Block& block(std::size_t i) { return blocks_.at(i); }

  /// Forward through units [first, last) (the whole model by default). Unit 0 reads
  /// @p batch.tokens; a call that starts later reads @p x, the output of unit first − 1.
  /// saved[i] receives unit i's activations (@p saved is resized to units()). Throws
  /// std::invalid_argument for bad tokens, T = 0 or T > context, or a missing or misshapen x.
  Tensor forward(const TokenBatch& batch, std::vector<Saved>& saved, std::size_t first = 0, std::size_t last = SIZE_MAX,
                 const Tensor& x = Tensor()) const;
  /// Backward through units [first, last) in reverse from @p dy (dL/d(output of unit last − 1):
  /// dlogits for the whole model), calling @p ready for each parameter the moment its gradient is
  /// final (a unit's parameters after that unit, in reverse order; wte only after unit 0, since
  /// the head adds into it too — a pipeline whose first and last stages share the table must add
  /// their two parts itself), then @p done. Returns dL/d(input of unit first); empty when first
  /// is 0 (tokens have no gradient).
  Tensor backward(const TokenBatch& batch, const Tensor& dy, const std::vector<Saved>& saved, const GradReadyHook& ready = {},
                  const BackwardDoneHook& done = {}, std::size_t first = 0, std::size_t last = SIZE_MAX);
  /// Forward FLOPs of the whole model for B·T rows.
  double forward_flops(std::size_t rows, std::size_t T) const;

  /// The first @p count next tokens after @p prompt (1 ≤ size, prompt + count ≤ context), with the
  /// KV cache: the prompt runs once, then each token one row at a time.
  std::vector<int> generate(const std::vector<int>& prompt, std::size_t count, const Sampling& sampling = {});
  /// The same with no cache: the whole prefix is recomputed for every token, the reference that a
  /// KV cache is checked against.
  std::vector<int> generate_reference(const std::vector<int>& prompt, std::size_t count, const Sampling& sampling = {});
  /// The logits (1 × vocab) of the next token after the tokens in @p cache plus @p token, which
  /// is appended to it (at position cache.length). An empty cache is made on first use.
  Tensor decode(KVCache& cache, int token);
  /// The logits (rows × vocab) of the next token after each row, the keys and values kept in and
  /// read from @p store: serving's step (lab 12). Rows of one sequence come in position order;
  /// every row is computed on its own (1-row GEMMs), so a row's logits never depend on what else
  /// is in the batch: batching, chunking and paging cannot change an output. Host models only
  /// (throws std::invalid_argument on a GPU model, for bad tokens or a position ≥ context).
  Tensor decode_rows(const std::vector<DecodeRow>& rows, KVStore& store) const;

 private:
  GPTConfig config_;
  Device device_;
  std::uint64_t seed_;
  Embedding embedding_;
  std::vector<Block> blocks_;
  LayerNorm ln_f_;
  void check_batch(const TokenBatch& batch) const;
  int pick(const Tensor& logits, const Sampling& sampling, std::size_t draw) const;
};

// ---------------------------------------------------------------------------------------------
// Dropout that can be replayed
// ---------------------------------------------------------------------------------------------

/// Where a dropout mask comes from. Element i of tensor @c tensor at step @c step of the run seeded
/// @c seed is kept with probability 1 − p, decided by a pure function of (seed, step, tensor, i):
/// the i-th output of SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014) seeded with a key mixed from (seed, step, tensor). No state advances,
/// so a rank holding elements [first, first + n) of a tensor makes exactly its slice of the mask,
/// and a recomputation (activation checkpointing) makes the same mask again.
struct DropoutStream {
  std::uint64_t seed = 0;    ///< the run's seed
  std::uint64_t step = 0;    ///< the training step
  std::uint32_t tensor = 0;  ///< which dropout site (a stable id per layer and use)
  float p = 0.0f;            ///< the probability of dropping, in [0, 1)
};

/// Whether element @p index of @p d's tensor is kept. Throws std::invalid_argument unless 0 ≤ p < 1.
bool dropout_keeps(const DropoutStream& d, std::uint64_t index);

/// y[k] = x[k] / (1 − p) where element first + k is kept, else 0, for k < n (inverted dropout:
/// the expectation of y is x, so inference needs no rescaling). In place when x == y.
void dropout_forward(const DropoutStream& d, std::uint64_t first, const float* x, float* y, std::size_t n);

/// dx[k] = dy[k] / (1 − p) where element first + k is kept, else 0: the mask is made again, never
/// stored.
void dropout_backward(const DropoutStream& d, std::uint64_t first, const float* dy, float* dx, std::size_t n);

/// The same as dropout_forward (and dropout_backward) on a whole tensor in place, on its device
/// (host or GPU): element k of @p x is element @p first + k of @p d's mask; then the rounding hook.
void dropout(Tensor& x, const DropoutStream& d, std::uint64_t first);

// ---------------------------------------------------------------------------------------------
// The corpus: the course's own lessons, as bytes
// ---------------------------------------------------------------------------------------------

/// Text as bytes, vocabulary 256, split once: the first 90 % of the bytes train, the last 10 %
/// validate (a fixed split, the same on every machine for the same lessons).
struct ByteCorpus {
  std::vector<std::uint8_t> train;       ///< the first 90 %
  std::vector<std::uint8_t> validation;  ///< the last 10 %
  std::vector<std::string> files;        ///< the files read, in order (names only)
};

/// lessons/*.md of @p lessons_dir in file-name order, each followed by one newline. Throws
/// std::runtime_error when the folder holds no lesson.
ByteCorpus lessons_corpus(const std::string& lessons_dir);

/// A batch of (context, next byte) windows: row b is text[starts[b] ..] for inputs and
/// text[starts[b] + 1 ..] for targets, context bytes each.
struct Windows {
  std::size_t batch = 0;             ///< windows
  std::size_t context = 0;           ///< bytes per window
  std::vector<int> inputs;           ///< batch × context byte values, row by row
  std::vector<int> targets;          ///< the next byte of each input position
  std::vector<std::size_t> starts;   ///< where each window starts in the text
};

/// @p batch windows of @p context bytes from @p text, each start uniform in
/// [0, size − context − 1], a pure function of (@p seed, @p step): every rank that asks for the
/// same step gets the same batch. Throws std::invalid_argument when the text is shorter than
/// context + 1 bytes or context or batch is 0.
Windows sample_windows(const std::vector<std::uint8_t>& text, std::size_t context, std::size_t batch, std::uint64_t seed, std::uint64_t step);

}  // namespace gpulab::nn
