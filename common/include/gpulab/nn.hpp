/// @file nn.hpp
/// @brief gpulab::nn: the small fp32 model library that the training labs train (data parallel,
/// pipeline parallel, memory management, mixed precision): tensors on the host or the device, a
/// multi-layer perceptron of Linear, ReLU and GELU layers with per-layer forward and backward,
/// softmax cross-entropy, SGD with momentum and AdamW, and a synthetic data set made in code.
///
/// The seams the labs use, designed in:
///   - backward calls a hook per parameter the moment its gradient is final (PyTorch's
///     post-accumulate-grad hook: what DDP's buckets wait for), and a callback at the end of the
///     backward pass (to flush buckets whose parameters were unused or frozen);
///   - forward and backward run layer by layer with the activations owned by the caller, so that a
///     pipeline stage can run a slice of the layers on a received activation, and activation
///     checkpointing can drop a segment's activations and recompute them;
///   - every tensor allocation goes through an Allocator (default: aligned malloc on the host,
///     cudaMalloc on the device; freed memory is poisoned in test builds), so that a caching
///     allocator can be plugged in and its traces recorded;
///   - a per-op rounding hook (identity by default) applied to weights, activations and
///     gradients of host tensors, so that the same training can run with values rounded to
///     fp16 or bf16 by a learner's own conversion.
///
/// Device operations run on the legacy default stream (as cuBLAS's handle does) and each waits
/// for its work to finish before it returns: errors are reported by the operation that caused
/// them, and a gradient handed to a hook is complete, so a hook may give it to another stream
/// (NCCL's) without an event. The library's globals (allocator, rounding hook, poisoning, the
/// host GEMM switch) are for one thread: ranks are processes.
///
/// GEMMs go through a real BLAS: cuBLAS on the device, OpenBLAS (CBLAS, pinned to one thread per
/// process, since several ranks share the cores) on the host; without OpenBLAS at build time the
/// host falls back to a plain loop, several times slower (host_gemm_backend() says which).
///
/// Shapes: a tensor is rows × cols, row-major; a batch of B samples of d features is B × d.
/// Linear(in, out) holds W (in × out) and b (1 × out) and computes y = x·W + b.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpulab::nn {

/// Where a tensor's memory lives.
enum class Device { kHost, kGpu };
/// "host" or "gpu".
const char* to_string(Device device);

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

/// Where every tensor's memory comes from (see the file comment). Implementations must return
/// memory aligned to 256 bytes.
class Allocator {
 public:
  virtual ~Allocator();
  /// @p bytes of @p device memory (bytes may be 0: return a valid, unique pointer).
  virtual void* allocate(std::size_t bytes, Device device) = 0;
  /// Gives back what allocate returned, with the same size and device. Must not throw (it runs
  /// in destructors).
  virtual void release(void* pointer, std::size_t bytes, Device device) = 0;
};

/// Aligned malloc on the host, cudaMalloc on the device.
Allocator& default_allocator();
/// Whether a tensor fills its memory with NaNs before giving it back to its allocator, so that a
/// read through a stale pointer shows (the tests turn it on; the default is the environment
/// variable GPULAB_NN_POISON). Returns the previous setting.
bool set_poison_on_free(bool poison);
/// The allocator new tensors use: @p allocator (not owned; it must outlive the tensors), or the
/// default with nullptr. Returns the previous one.
Allocator* set_allocator(Allocator* allocator);
/// The allocator new tensors use now.
Allocator& current_allocator();

// ---------------------------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------------------------

/// A rows × cols fp32 matrix, row-major, on the host or the device; move-only. Every operation
/// checks shapes and devices and throws std::invalid_argument naming both when they disagree.
class Tensor {
 public:
  Tensor() = default;
  /// rows × cols zeros on @p device.
  Tensor(std::size_t rows, std::size_t cols, Device device = Device::kHost);
  /// A copy of @p values (rows · cols of them, row by row).
  static Tensor from(const std::vector<float>& values, std::size_t rows, std::size_t cols, Device device = Device::kHost);
  /// rows × cols with unspecified values (for outputs that an operation writes whole).
  static Tensor uninitialized(std::size_t rows, std::size_t cols, Device device = Device::kHost);
  /// A rows × cols tensor over @p data, memory it does not own and never gives back: a view into
  /// a larger buffer (lab 11's parameters are views into their unit's flat buffer). The buffer
  /// must outlive the view; moving or destroying the view leaves it alone.
  static Tensor view(float* data, std::size_t rows, std::size_t cols, Device device = Device::kHost);
  ~Tensor();
  /// Takes over @p other's memory; @p other is left empty.
  Tensor(Tensor&& other) noexcept;
  /// Gives this tensor's memory back, then takes over @p other's.
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  std::size_t rows() const { return rows_; }          ///< Rows (the batch, for activations).
  std::size_t cols() const { return cols_; }          ///< Columns (the features).
  std::size_t size() const { return rows_ * cols_; }  ///< Elements.
  Device device() const { return device_; }           ///< Where the memory lives.
  bool empty() const { return size() == 0; }          ///< No elements (a default or moved-from tensor).
  bool is_view() const { return data_ != nullptr && allocator_ == nullptr; }  ///< Made by view(): not its own memory.
  float* data() { return data_; }                     ///< The first element, in the tensor's device memory.
  const float* data() const { return data_; }         ///< The first element, in the tensor's device memory.
  /// "3 × 4 on the host"
  std::string shape() const;

  /// The values, copied to the host, row by row.
  std::vector<float> to_host() const;
  /// A copy on @p device.
  Tensor to(Device device) const;
  /// A copy on the same device.
  Tensor clone() const;
  /// Every element set to @p value.
  void fill(float value);
  /// Replaces the values (size() of them).
  void assign(const std::vector<float>& values);

 private:
  float* data_ = nullptr;
  std::size_t rows_ = 0, cols_ = 0;
  Device device_ = Device::kHost;
  Allocator* allocator_ = nullptr;
  void release() noexcept;
};

/// The element-wise rounding applied at op boundaries to host tensors: weights when a Linear is
/// made and after each update, the model's input, activations after each layer, gradients after
/// each backward step; identity by default. Install it before making the model. Device tensors
/// are left as they are (lab 04's mixed-precision training runs on host tensors).
using RoundingHook = std::function<float(float)>;
/// Installs @p hook (empty: none). Returns the previous one.
RoundingHook set_rounding(RoundingHook hook);
/// Applies the current hook to @p t in place (a no-op for device tensors or without a hook).
void round_in_place(Tensor& t);

// ---------------------------------------------------------------------------------------------
// Operations (each on host or device tensors, all operands on one device)
// ---------------------------------------------------------------------------------------------

/// C = alpha · op(A) · op(B) + beta · C, op = transpose when the flag is set: the one GEMM.
void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& c, float alpha = 1.0f, float beta = 0.0f);
/// y += alpha · x (same shape): gradient accumulation, averaging.
void axpy(float alpha, const Tensor& x, Tensor& y);
/// x *= alpha.
void scale(Tensor& x, float alpha);

/// The host GEMM in use: "OpenBLAS (1 thread)" or "a plain loop (...)".
std::string host_gemm_backend();
/// For measuring: force the plain loop on the host even when OpenBLAS is there (true), or not.
void use_plain_host_gemm(bool plain);

// ---------------------------------------------------------------------------------------------
// Layers and the model
// ---------------------------------------------------------------------------------------------

/// A tensor the model learns, with its gradient. `frozen` ones get no gradient and no update.
struct Parameter {
  std::string name;  ///< "0.weight", "0.bias", "2.weight", ...
  Tensor value;      ///< the parameter's values
  Tensor grad;       ///< accumulated by backward (+=); zero it with Sequential::zero_grad
  bool frozen = false;  ///< no gradient (its grad is left as it is), no hook, no update
};

/// What a layer's forward kept for its backward: owned by the caller.
struct Saved {
  std::vector<Tensor> tensors;  ///< empty until forward runs (or after a checkpoint drops them)
  std::vector<Saved> parts;     ///< a layer made of layers (a GPT block): what each of them kept
  /// Drops everything (what activation checkpointing does to a segment).
  void clear() {
    tensors.clear();
    parts.clear();
  }
};

/// One layer: forward from an input, backward from the gradient of its output.
class Layer {
 public:
  virtual ~Layer();
  /// y = f(x); keeps in @p saved what backward will need.
  virtual Tensor forward(const Tensor& x, Saved& saved) const = 0;
  /// dL/dx from dL/dy and what forward kept; adds the parameters' gradients into their grad.
  virtual Tensor backward(const Tensor& dy, const Saved& saved) = 0;
  /// The parameters, in a fixed order (weight, then bias).
  virtual std::vector<Parameter*> parameters() { return {}; }
  /// "Linear(784 → 256)", "ReLU", "GELU".
  virtual std::string describe() const = 0;
  /// Forward FLOPs for a batch of @p batch samples (2·in·out per sample for a Linear).
  virtual double forward_flops(std::size_t batch) const = 0;
  /// Floats kept in Saved for a batch of @p batch samples (the activation memory of training).
  virtual std::size_t saved_floats(std::size_t batch) const = 0;
};

/// y = x·W + b. W starts N(0, 1/in) (LeCun), b at 0, both from @p seed.
class Linear final : public Layer {
 public:
  /// An @p in → @p out layer on @p device; its parameters are named @p name + "weight" and "bias".
  Linear(std::size_t in, std::size_t out, std::uint64_t seed, Device device = Device::kHost, const std::string& name = "");
  Tensor forward(const Tensor& x, Saved& saved) const override;
  Tensor backward(const Tensor& dy, const Saved& saved) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  std::string describe() const override;
  double forward_flops(std::size_t batch) const override;
  std::size_t saved_floats(std::size_t batch) const override;
  Parameter& weight() { return weight_; }  ///< W, in × out.
  Parameter& bias() { return bias_; }      ///< b, 1 × out.

 private:
  Parameter weight_, bias_;
};

/// An element-wise activation, y = f(x), dx = dy · f′(x), that keeps x for its backward.
class Activation : public Layer {
 public:
  Tensor forward(const Tensor& x, Saved& saved) const override;
  Tensor backward(const Tensor& dy, const Saved& saved) override;
  std::string describe() const override;
  double forward_flops(std::size_t batch) const override;
  std::size_t saved_floats(std::size_t batch) const override;
  /// The features per sample it takes (its input must have this many columns).
  std::size_t width() const { return width_; }

 protected:
  /// Which function.
  enum class Kind { kRelu, kGelu };
  /// The activation @p kind over @p width features.
  Activation(Kind kind, std::size_t width) : kind_(kind), width_(width) {}

 private:
  Kind kind_;
  std::size_t width_;
};

/// max(0, x) over @p width features.
class ReLU final : public Activation {
 public:
  /// Over inputs of @p width columns.
  explicit ReLU(std::size_t width) : Activation(Kind::kRelu, width) {}
};

/// x · Φ(x), the exact GELU (with erf), over @p width features.
class GELU final : public Activation {
 public:
  /// Over inputs of @p width columns.
  explicit GELU(std::size_t width) : Activation(Kind::kGelu, width) {}
};

/// Called with a parameter the moment its gradient is final in this backward call: no later
/// layer of the call adds into it. (With gradient accumulation over micro-batches it is called
/// in every micro-batch's backward; whether to act on it, e.g. DDP's no_sync, is the hook's
/// decision.)
using GradReadyHook = std::function<void(Parameter&)>;
/// Called once when a backward call has finished all its layers (a pipeline stage's call covers
/// its slice: that is its whole backward pass).
using BackwardDoneHook = std::function<void()>;

/// The layers in order, and their parameters in a fixed order (layer by layer, weight then bias).
class Sequential {
 public:
  Sequential() = default;
  /// An MLP: Linear(widths[0] → widths[1]), activation, ..., Linear(→ widths.back()), no
  /// activation after the last; parameters seeded from @p seed.
  static Sequential mlp(const std::vector<std::size_t>& widths, const std::string& activation, std::uint64_t seed,
                        Device device = Device::kHost);
  /// Appends @p layer.
  void add(std::unique_ptr<Layer> layer);
  /// The number of layers (activations count as layers).
  std::size_t size() const { return layers_.size(); }
  /// Layer @p i.
  Layer& layer(std::size_t i) { return *layers_.at(i); }
  /// Every parameter, in order.
  std::vector<Parameter*> parameters();
  /// Sets every gradient to zero (allocating them on first use); frozen parameters are skipped.
  void zero_grad();

  /// Forward through layers [first, last) from @p x; saved[i] receives layer i's activations
  /// (@p saved is resized to size()). The whole model: forward(x, saved).
  Tensor forward(const Tensor& x, std::vector<Saved>& saved, std::size_t first = 0, std::size_t last = SIZE_MAX) const;
  /// Backward through layers [first, last) in reverse from @p dy, calling @p ready for each
  /// parameter of a layer once that layer's backward has run (last layer's first, bias before
  /// weight), skipping frozen ones; then @p done. Returns dL/d(input of layer first).
  Tensor backward(const Tensor& dy, const std::vector<Saved>& saved, const GradReadyHook& ready = {}, const BackwardDoneHook& done = {},
                  std::size_t first = 0, std::size_t last = SIZE_MAX);

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

/// Mean softmax cross-entropy over the batch of @p logits (B × C) against class @p labels
/// (B of them); @p dlogits (when not null) receives dL/dlogits = (softmax − one-hot) / B.
double softmax_cross_entropy(const Tensor& logits, const std::vector<int>& labels, Tensor* dlogits);

// ---------------------------------------------------------------------------------------------
// Optimizers
// ---------------------------------------------------------------------------------------------

/// An optimizer updates the parameters from their gradients, keeping its state per parameter
/// (keyed by the parameter, so each call may pass any subset: a pipeline stage's, a ZeRO shard's).
class Optimizer {
 public:
  virtual ~Optimizer();
  /// One step over @p params (frozen ones are left alone).
  virtual void step(const std::vector<Parameter*>& params) = 0;
  /// Floats of state per parameter float (SGD with momentum 1, AdamW 2): the memory budget.
  virtual std::size_t state_floats_per_parameter() const = 0;
};

/// w −= lr · v, v = momentum · v + (g + weight_decay · w).
class SGD final : public Optimizer {
 public:
  /// Learning rate @p lr; no velocity is kept when @p momentum is 0.
  explicit SGD(float lr, float momentum = 0.0f, float weight_decay = 0.0f);
  void step(const std::vector<Parameter*>& params) override;
  std::size_t state_floats_per_parameter() const override { return momentum_ > 0 ? 1 : 0; }

 private:
  float lr_, momentum_, weight_decay_;
  std::map<const Parameter*, Tensor> velocity_;
};

/// AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019): m, v moments
/// with bias correction by each parameter's own update count, decoupled weight decay.
class AdamW final : public Optimizer {
 public:
  /// PyTorch's defaults, but for @p lr.
  explicit AdamW(float lr, float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-8f, float weight_decay = 0.01f);
  void step(const std::vector<Parameter*>& params) override;
  std::size_t state_floats_per_parameter() const override { return 2; }
  /// The number of step calls so far.
  int steps() const { return t_; }

 private:
  float lr_, beta1_, beta2_, eps_, weight_decay_;
  int t_ = 0;
  std::map<const Parameter*, Tensor> m_, v_;
  std::map<const Parameter*, int> updates_;  ///< per parameter: its bias correction's t (as PyTorch's per-parameter "step")
};

// ---------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------

/// A synthetic classification set, made in code (no download), deterministic from its seed:
/// Gaussian inputs labelled by a fixed random "teacher" MLP (argmax of its logits).
struct Dataset {
  std::size_t features = 0;  ///< inputs per sample
  std::size_t classes = 0;   ///< labels are 0 .. classes − 1
  std::vector<float> inputs;  ///< samples × features, row by row
  std::vector<int> labels;    ///< one per sample
  std::size_t samples() const { return labels.size(); }  ///< The number of samples.
  /// The samples at @p indices as a batch (indices.size() × features) on @p device, and their labels.
  Tensor batch(const std::vector<std::size_t>& indices, std::vector<int>& batch_labels, Device device = Device::kHost) const;
};
/// @p samples samples of @p features Gaussian features in @p classes classes (teacher: one hidden
/// layer of 2·features GELU units), all from @p seed.
Dataset teacher_dataset(std::size_t samples, std::size_t features, std::size_t classes, std::uint64_t seed);

}  // namespace gpulab::nn
