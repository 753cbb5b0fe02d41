/// @file tp.hpp
/// @brief Lab 10 — tensor and sequence parallelism: the functions and classes you implement in
/// labs/10-tensor-parallel/ (tp.cpp, vocab.cpp, mesh.cpp). Read lessons/10-tensor-parallel.md.
///
/// This header belongs to the tests: do not change it. t ranks share one GPT block
/// (gpulab::nn::Block, common/include/gpulab/nn_gpt.hpp): each holds a slice of every weight
/// matrix (Shoeybi et al., "Megatron-LM", 2019) and, with sequence parallelism, a slice of the
/// tokens between them (Korthikanti et al., "Reducing Activation Recomputation in Large
/// Transformer Models", 2022). Communication goes through a gpulab::dist::Communicator: its
/// non-blocking iallreduce_sum, ireduce_scatter_sum and iall_gather (wait for each). Nothing else
/// may move data: the tests count those three per kind, and a call of MPI or NCCL, or of the
/// Communicator's point-to-point or blocking allreduce_sum, fails the lab (the symbol rules refuse
/// it, and a collective called anyway shows in the counts).
///
/// Layout. Activations are rows of tokens, (B·T) × d, sequence by sequence, as gpulab::nn's.
/// Sequence parallelism splits those R = B·T rows into t equal blocks of consecutive rows: rank r
/// holds rows [r·R/t, (r + 1)·R/t) (the Communicator's shard_of layout over R·d floats).
/// Weights are in × out (y = x·W + b). Rank r of t holds the r-th t-th of whatever is split:
/// columns of a column-parallel W, rows of a row-parallel W, heads, vocabulary rows.
///
/// Arithmetic. The Communicator sums in rank order (((x₀ + x₁) + x₂) + …); the tests compare bit
/// for bit against one process that computes every rank's partial result with gpulab::nn's
/// operations (nn::linear, nn::linear_backward, nn::add_bias, nn::bias_backward, LayerNorm,
/// GELU, attention_heads_forward/backward, nn::dropout) and sums the partials in rank order.
/// Use those operations; add the bias of a row-parallel layer once, after the sum.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpulab/dist.hpp"
#include "gpulab/nn.hpp"
#include "gpulab/nn_gpt.hpp"

namespace lab10 {

namespace nn = gpulab::nn;
using gpulab::dist::Communicator;

/// The first of rank @p r's n / t things (rank r holds [r·n/t, (r + 1)·n/t)). Throws
/// std::invalid_argument naming @p what unless t ≥ 1, 0 ≤ r < t and t divides n. (Given.)
std::size_t slice_begin(std::size_t n, int t, int r, const char* what);

/// Inverted dropout of @p x in place, element k of x being element @p first + k of the site's
/// mask: nn::dropout(x, DropoutStream{seed, pass.step, tensor, p}, first) when pass.training and
/// p > 0, else nothing (on the host or the GPU). Forward and backward are the same call. (Given.)
void dropout_in_place(nn::Tensor& x, float p, std::uint64_t seed, const nn::Pass& pass, std::uint32_t tensor, std::uint64_t first);

// ---------------------------------------------------------------------------------------------
// 10.1 the conjugate operators
// ---------------------------------------------------------------------------------------------

/// TODO(10.1): @p x ← the sum of every rank's @p x (one all-reduce, in place). Megatron's g in
/// forward (after a row-parallel layer) and f in backward (before a column-parallel one).
void all_reduce(Communicator& tp, nn::Tensor& x);

/// TODO(10.1): sequence parallelism's all-gather: every rank gives its R/t × c rows, every rank
/// gets the R × c whole, rank r's rows at r·R/t. (f̄ forward; ḡ backward.)
nn::Tensor gather_rows(Communicator& tp, const nn::Tensor& shard);

/// TODO(10.1): sequence parallelism's reduce-scatter: the R × c sum of every rank's @p full, of
/// which this rank keeps rows [r·R/t, (r + 1)·R/t). (ḡ forward; f̄ backward.) Throws
/// std::invalid_argument unless t divides R.
nn::Tensor reduce_scatter_rows(Communicator& tp, const nn::Tensor& full);

// ---------------------------------------------------------------------------------------------
// 10.2 column- and row-parallel Linear
// ---------------------------------------------------------------------------------------------

/// A Linear split by output columns. The full layer's out columns are @p parts equal groups
/// (3 for c_attn's Q | K | V, 1 otherwise); rank r keeps the r-th t-th of each group, the groups
/// in order: out/t columns of W and of b. Its input is replicated (every rank needs all of it).
class ColumnParallelLinear {
 public:
  /// This rank's slice of @p weight (in × out) and @p bias (1 × out). Throws
  /// std::invalid_argument unless parts · t divides out. (Given.)
  ColumnParallelLinear(Communicator& tp, const nn::Parameter& weight, const nn::Parameter& bias, std::size_t parts, bool sequence_parallel);
  /// TODO(10.2): y_r = x·W_r + b_r, R × out/t. @p x is the whole R × in input (f: the identity),
  /// or with sequence parallelism this rank's R/t rows of it, gathered first. Keeps @p x as given
  /// in @p saved (with sequence parallelism: your rows only, never the gathered whole).
  nn::Tensor forward(const nn::Tensor& x, nn::Saved& saved);
  /// TODO(10.2): from dL/dy_r (R × out/t): dW_r += xᵀ·dy_r, db_r += Σ_rows dy_r, and dL/dx, the
  /// sum over ranks of dy_r·W_rᵀ: all-reduced (f's backward), or with sequence parallelism
  /// reduce-scattered to this rank's rows — after gathering the kept rows into the whole x again.
  nn::Tensor backward(const nn::Tensor& dy, const nn::Saved& saved);

  Communicator& tp;             ///< the tensor-parallel group
  bool sequence_parallel;       ///< input and dL/dx are this rank's rows, not all of them
  nn::Parameter weight;         ///< W_r, in × out/t
  nn::Parameter bias;           ///< b_r, 1 × out/t
};

/// A Linear split by input rows. Rank r keeps rows [r·in/t, (r + 1)·in/t) of W, and the whole
/// bias (replicated: the same on every rank). Its input is this rank's in/t features.
class RowParallelLinear {
 public:
  /// This rank's rows of @p weight; all of @p bias. Throws std::invalid_argument unless t divides
  /// in. (Given.)
  RowParallelLinear(Communicator& tp, const nn::Parameter& weight, const nn::Parameter& bias, bool sequence_parallel);
  /// TODO(10.2): y = Σ_ranks x_r·W_r + b: the partial products summed by an all-reduce (g), or
  /// with sequence parallelism reduce-scattered to this rank's R/t rows; b added once, after the
  /// sum, to the rows this rank holds. Keeps x_r in @p saved.
  nn::Tensor forward(const nn::Tensor& x, nn::Saved& saved);
  /// TODO(10.2): from dL/dy (R × out, or this rank's R/t rows with sequence parallelism: gathered
  /// first): db += Σ_rows dL/dy over the rows this rank was given (with sequence parallelism a
  /// partial sum that sync_gradients completes), dW_r += x_rᵀ·dy, and dL/dx_r = dy·W_rᵀ (g's
  /// backward is the identity: no communication after it).
  nn::Tensor backward(const nn::Tensor& dy, const nn::Saved& saved);

  Communicator& tp;             ///< the tensor-parallel group
  bool sequence_parallel;       ///< output and dL/dy are this rank's rows, not all of them
  nn::Parameter weight;         ///< W_r, in/t × out
  nn::Parameter bias;           ///< b, 1 × out (replicated)
};

// ---------------------------------------------------------------------------------------------
// 10.3 attention split by heads
// ---------------------------------------------------------------------------------------------

/// TODO(10.3): the heads rank @p r of @p t computes: heads [r·H/t, (r + 1)·H/t) of @p heads, each
/// @p head_width wide. Throws std::invalid_argument, naming both numbers, unless t divides H.
nn::HeadSlice heads_of(std::size_t heads, std::size_t head_width, int t, int r);

/// Causal self-attention split by heads: c_attn column-parallel (Q | K | V: 3 groups) holding
/// this rank's heads, their core (nn::attention_heads_forward over heads_of), c_proj
/// row-parallel. Its attention dropout is the whole layer's, each rank making its heads' slice.
class ParallelAttention {
 public:
  /// This rank's part of @p full; @p dropout, @p tensor and @p seed as the full layer's (its
  /// attention dropout site). Throws std::invalid_argument when t does not divide the heads.
  /// (Given.)
  ParallelAttention(Communicator& tp, nn::CausalSelfAttention& full, float dropout, std::uint32_t tensor, std::uint64_t seed,
                    bool sequence_parallel);
  /// TODO(10.3): y from x (R × d, or this rank's R/t rows with sequence parallelism): c_attn, the
  /// core over this rank's heads, c_proj. What backward needs goes into @p saved.
  nn::Tensor forward(const nn::Tensor& x, const nn::Pass& pass, nn::Saved& saved);
  /// TODO(10.3): dL/dx from dL/dy, in the reverse order; adds into the four parameters' gradients.
  nn::Tensor backward(const nn::Tensor& dy, const nn::Pass& pass, const nn::Saved& saved);

  nn::HeadSlice heads;          ///< this rank's heads
  nn::AttentionDropout dropout; ///< the layer's attention dropout
  ColumnParallelLinear c_attn;  ///< this rank's Q, K and V columns
  RowParallelLinear c_proj;     ///< this rank's rows of the output projection
};

// ---------------------------------------------------------------------------------------------
// 10.4 the vocabulary-parallel embedding and loss
// ---------------------------------------------------------------------------------------------

/// The token table split by vocabulary rows: rank r holds wte rows [r·V/t, (r + 1)·V/t) (the
/// same slice serves as its part of the tied LM head); the position table is replicated.
class VocabParallelEmbedding {
 public:
  /// This rank's rows of @p full's token table and all of its position table. Throws
  /// std::invalid_argument unless t divides the vocabulary. (Given.)
  VocabParallelEmbedding(Communicator& tp, const nn::Embedding& full, bool sequence_parallel);
  /// TODO(10.4): x[b·T + i] = wte[token] + wpe[i] without any rank holding all of wte: each rank
  /// writes the rows of its own tokens (zeros elsewhere), the partial rows are summed over ranks
  /// (all-reduced; with sequence parallelism reduce-scattered to this rank's rows), then wpe is
  /// added to the rows this rank holds. Throws std::invalid_argument for a token outside
  /// [0, V) or a batch that is not whole sequences of T ≤ context.
  nn::Tensor forward(const std::vector<int>& tokens, std::size_t T);
  /// TODO(10.4): from dL/dx (R × d, or this rank's rows with sequence parallelism: gathered
  /// first): wte.grad[token − first] += dx[row] for this rank's tokens, wpe.grad[i] += dx[row]
  /// for every row (row order, as nn::Embedding); an empty grad starts as zeros. Since dx is
  /// whole, wpe's gradient is complete on every rank even with sequence parallelism: give it to
  /// sync_gradients as not replicated, or the tensor group would add it t times.
  void backward(const nn::Tensor& dx, const std::vector<int>& tokens, std::size_t T);

  Communicator& tp;          ///< the tensor-parallel group
  bool sequence_parallel;    ///< the output and dL/dx are this rank's rows
  std::size_t first = 0;     ///< the first token id this rank holds
  nn::Parameter wte;         ///< V/t × d
  nn::Parameter wpe;         ///< context × d (replicated)
};

/// TODO(10.4): the tied LM head and cross-entropy, vocabulary-parallel: this rank's logits
/// h·wte_rᵀ (R × V/t) are never gathered. The loss of row i is log Σ_v exp(l_v − m) − (l_target − m)
/// with m the row's max over the whole vocabulary: every rank's row maxima gathered (an
/// all-gather of R floats each), then one all-reduce of 2R floats — each row's Σ exp(l − m) over
/// this rank's columns and its target's l − m (zero unless this rank holds the target). Returns
/// the mean over rows (the same on every rank). With @p dh: dL/dlogits_r = (softmax − onehot)/R,
/// wte_r.grad += dlogits_rᵀ·h (an empty grad starts as zeros), and *dh is assigned
/// Σ_ranks dlogits_r·wte_r (all-reduced; whatever it held is replaced). @p h is R × d on every rank. Throws std::invalid_argument for a target outside [0, V).
double vocab_parallel_cross_entropy(Communicator& tp, const nn::Tensor& h, nn::Parameter& wte, std::size_t vocab, const std::vector<int>& targets,
                                    nn::Tensor* dh);

// ---------------------------------------------------------------------------------------------
// 10.5 the block, with or without sequence parallelism
// ---------------------------------------------------------------------------------------------

/// A parameter of a tensor-parallel layer and whether every rank holds the same copy of it
/// (LayerNorm's γ and β, a row-parallel layer's bias) or its own slice.
struct TPParameter {
  nn::Parameter* param = nullptr;  ///< the parameter
  bool replicated = false;         ///< the same on every rank of the group
};

/// nn::Block split over t ranks: x + dropout(attn(ln_1(x))), then + dropout(mlp(ln_2(·))), with
/// mlp = c_proj(GELU(c_fc(·))) as a ColumnParallelLinear and a RowParallelLinear. Without sequence
/// parallelism every rank holds the whole R × d residual stream (LayerNorm, dropout and the
/// residual additions are computed t times, identically); with it each rank holds its R/t rows of
/// it, and LayerNorm, dropout and the additions run on those rows only.
class ParallelBlock {
 public:
  /// This rank's part of @p full, whose construction took @p dropout, @p first_tensor and
  /// @p dropout_seed (attention's P is @p first_tensor, the attention branch + 1, the MLP branch
  /// + 2, as nn::Block). (Given.)
  ParallelBlock(Communicator& tp, nn::Block& full, float dropout, std::uint32_t first_tensor, std::uint64_t dropout_seed, bool sequence_parallel);
  /// TODO(10.5): the block's output from x (R × d, or this rank's R/t rows). The branch dropouts
  /// are the whole R × d tensor's masks: with sequence parallelism a rank applies its rows' slice.
  /// What stays alive until backward is what the layers keep in @p saved and nothing else (no
  /// extra copies): the tests count it against the derivation in lessons/10-tensor-parallel.md.
  nn::Tensor forward(const nn::Tensor& x, const nn::Pass& pass, nn::Saved& saved);
  /// TODO(10.5): dL/dx from dL/d(output), in the reverse order; adds into every gradient.
  nn::Tensor backward(const nn::Tensor& dy, const nn::Pass& pass, const nn::Saved& saved);
  /// ln_1, attention's four, ln_2, c_fc's two, c_proj's two: nn::Block's order. (Given.)
  std::vector<TPParameter> parameters();

  Communicator& tp;          ///< the tensor-parallel group
  bool sequence_parallel;    ///< the residual stream is split by rows
  float p;                   ///< the branch dropout probability
  std::uint32_t tensor;      ///< the attention dropout site; the branches are tensor + 1, + 2
  std::uint64_t seed;        ///< the model's dropout seed
  nn::LayerNorm ln_1;        ///< replicated
  ParallelAttention attn;    ///< split by heads
  nn::LayerNorm ln_2;        ///< replicated
  ColumnParallelLinear c_fc; ///< d → 4d/t
  RowParallelLinear c_proj;  ///< 4d/t → d
};

// ---------------------------------------------------------------------------------------------
// 10.6 the mesh: tensor × data parallel
// ---------------------------------------------------------------------------------------------

/// W = t × D ranks: D data-parallel replicas of a model split over t ranks. World rank w is
/// tensor rank w mod t of tensor group ⌊w / t⌋ (consecutive ranks share a layer: inside one node)
/// and data rank ⌊w / t⌋ of data group w mod t (the ranks holding the same slices).
struct Mesh {
  std::unique_ptr<Communicator> tp;  ///< the t ranks that share each layer
  std::unique_ptr<Communicator> dp;  ///< the D ranks that hold the same slices
};

/// TODO(10.6): the two groups of this rank, from @p world split with MPI_Comm_split (then
/// Communicator::create(@p backend, that communicator), which does not free it: leaving the two
/// split communicators to MPI_Finalize is fine). Throws std::invalid_argument unless
/// t ≥ 1 divides the world's size.
Mesh make_mesh(MPI_Comm world, int t, gpulab::dist::Backend backend);

/// TODO(10.6): after backward, one parameter after another in the order of @p params: with
/// sequence parallelism a replicated parameter's gradient is a partial sum over the tensor group's
/// rows, so it is all-reduced over mesh.tp first; then the gradient is averaged over mesh.dp
/// (summed by an all-reduce, then nn::scale by 1/D). A frozen parameter is skipped; one with no
/// gradient yet gets a zero gradient of its value's shape and takes part with it.
void sync_gradients(Mesh& mesh, const std::vector<TPParameter>& params, bool sequence_parallel);

}  // namespace lab10
