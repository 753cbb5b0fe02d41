/// @file nn_model.cpp
/// @brief gpulab::nn's layers, model, loss, optimizers and data set (nn.hpp).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "gpulab/nn.hpp"
#include "nn_internal.hpp"

namespace gpulab::nn {
namespace {


/// Zeros shaped like @p t (gradients, optimizer state: they accumulate).
Tensor zeros_like(const Tensor& t) { return Tensor(t.rows(), t.cols(), t.device()); }
/// An output shaped like @p t that an operation writes whole.
Tensor output_like(const Tensor& t) { return Tensor::uninitialized(t.rows(), t.cols(), t.device()); }

/// What a layer's forward keeps for its backward: a copy of its input.
void keep_input(Saved& saved, const Tensor& x) {
  saved.tensors.clear();
  saved.tensors.push_back(x.clone());
}
const Tensor& kept_input(const Saved& saved, const std::string& layer) {
  if (saved.tensors.size() != 1) throw std::invalid_argument(layer + ": backward without its forward's saved input");
  return saved.tensors[0];
}

/// The state tensor of @p p in @p state (zeros on first use), checked against p's shape.
Tensor& state_of(std::map<const Parameter*, Tensor>& state, const Parameter& p, const char* optimizer) {
  Tensor& s = state[&p];
  if (s.empty()) s = zeros_like(p.value);
  detail::check_like(s, p.value, std::string(optimizer) + " state of " + p.name);
  return s;
}

}  // namespace

// Box–Muller on std::mt19937_64 (see nn_internal.hpp).
std::vector<float> detail::normal(std::size_t n, float stddev, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(engine() >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
    const double u2 = static_cast<double>(engine() >> 11) / 9007199254740992.0;          // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
    out[i] = static_cast<float>(stddev * r * std::cos(a));
    if (i + 1 < n) out[i + 1] = static_cast<float>(stddev * r * std::sin(a));
  }
  return out;
}

Layer::~Layer() = default;
Optimizer::~Optimizer() = default;

Linear::Linear(std::size_t in, std::size_t out, std::uint64_t seed, Device device, const std::string& name) {
  weight_.name = name + "weight";
  bias_.name = name + "bias";
  weight_.value = Tensor::from(detail::normal(in * out, static_cast<float>(1.0 / std::sqrt(static_cast<double>(in))), seed), in, out, device);
  bias_.value = Tensor(1, out, device);
  round_in_place(weight_.value);
}

Tensor Linear::forward(const Tensor& x, Saved& saved) const {
  if (x.cols() != weight_.value.rows()) throw std::invalid_argument(describe() + ": input " + x.shape());
  Tensor y = Tensor::uninitialized(x.rows(), weight_.value.cols(), x.device());
  gemm(x, false, weight_.value, false, y);  // beta = 0: y is written, not read
  detail::ops_for(x.device()).add_row(y.data(), bias_.value.data(), y.rows(), y.cols());
  round_in_place(y);
  keep_input(saved, x);
  return y;
}

Tensor Linear::backward(const Tensor& dy, const Saved& saved) {
  const std::string name = describe();  // named: g++ 13 reads a temporary argument as a dangling risk
  const Tensor& x = kept_input(saved, name);
  if (dy.rows() != x.rows() || dy.cols() != weight_.value.cols() || dy.device() != x.device()) {
    throw std::invalid_argument(describe() + ": backward of dy " + dy.shape() + " for the input " + x.shape());
  }
  if (!weight_.frozen) {
    if (weight_.grad.empty()) weight_.grad = zeros_like(weight_.value);
    gemm(x, true, dy, false, weight_.grad, 1.0f, 1.0f);  // dW += xᵀ · dy
    round_in_place(weight_.grad);
  }
  if (!bias_.frozen) {
    if (bias_.grad.empty()) bias_.grad = zeros_like(bias_.value);
    detail::ops_for(dy.device()).sum_rows(bias_.grad.data(), dy.data(), dy.rows(), dy.cols());  // db += Σ rows of dy
    round_in_place(bias_.grad);
  }
  Tensor dx = Tensor::uninitialized(dy.rows(), weight_.value.rows(), dy.device());
  gemm(dy, false, weight_.value, true, dx);  // dx = dy · Wᵀ
  round_in_place(dx);
  return dx;
}

std::string Linear::describe() const {
  return "Linear(" + std::to_string(weight_.value.rows()) + " → " + std::to_string(weight_.value.cols()) + ")";
}
double Linear::forward_flops(std::size_t batch) const {
  return 2.0 * static_cast<double>(batch) * static_cast<double>(weight_.value.size());
}
std::size_t Linear::saved_floats(std::size_t batch) const { return batch * weight_.value.rows(); }

Tensor Activation::forward(const Tensor& x, Saved& saved) const {
  if (x.cols() != width_) throw std::invalid_argument(describe() + "(" + std::to_string(width_) + "): input " + x.shape());
  Tensor y = output_like(x);
  const detail::Ops& o = detail::ops_for(x.device());
  (kind_ == Kind::kRelu ? o.relu : o.gelu)(y.data(), x.data(), x.size());
  round_in_place(y);
  keep_input(saved, x);
  return y;
}

Tensor Activation::backward(const Tensor& dy, const Saved& saved) {
  const std::string name = describe();  // named: g++ 13 reads a temporary argument as a dangling risk
  const Tensor& x = kept_input(saved, name);
  detail::check_like(dy, x, describe() + " backward: dy and the saved input");
  Tensor dx = output_like(dy);
  const detail::Ops& o = detail::ops_for(dy.device());
  (kind_ == Kind::kRelu ? o.relu_backward : o.gelu_backward)(dx.data(), dy.data(), x.data(), dy.size());
  round_in_place(dx);
  return dx;
}

std::string Activation::describe() const { return kind_ == Kind::kRelu ? "ReLU" : "GELU"; }

// A ReLU is a compare per element; a GELU's erf and exp are a dozen or two FLOPs each.
double Activation::forward_flops(std::size_t batch) const { return (kind_ == Kind::kRelu ? 1.0 : 20.0) * static_cast<double>(batch * width_); }

std::size_t Activation::saved_floats(std::size_t batch) const { return batch * width_; }

Sequential Sequential::mlp(const std::vector<std::size_t>& widths, const std::string& activation, std::uint64_t seed, Device device) {
  if (widths.size() < 2) throw std::invalid_argument("Sequential::mlp: need at least an input and an output width");
  if (activation != "relu" && activation != "gelu") throw std::invalid_argument("Sequential::mlp: activation is relu or gelu, not " + activation);
  Sequential model;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    const std::string name = std::to_string(model.size()) + ".";
    model.add(std::make_unique<Linear>(widths[i], widths[i + 1], seed * 1000003u + i, device, name));
    if (i + 2 < widths.size()) {
      if (activation == "relu") model.add(std::make_unique<ReLU>(widths[i + 1]));
      else model.add(std::make_unique<GELU>(widths[i + 1]));
    }
  }
  return model;
}

void Sequential::add(std::unique_ptr<Layer> layer) { layers_.push_back(std::move(layer)); }

std::vector<Parameter*> Sequential::parameters() {
  std::vector<Parameter*> all;
  for (auto& l : layers_) {
    for (Parameter* p : l->parameters()) all.push_back(p);
  }
  return all;
}

void Sequential::zero_grad() {
  for (Parameter* p : parameters()) {
    if (p->frozen) continue;
    if (p->grad.empty()) p->grad = zeros_like(p->value);
    p->grad.fill(0.0f);
  }
}

Tensor Sequential::forward(const Tensor& x, std::vector<Saved>& saved, std::size_t first, std::size_t last) const {
  last = std::min(last, layers_.size());
  if (first > last) throw std::invalid_argument("Sequential::forward: first layer after the last");
  saved.resize(layers_.size());
  if (first == last) return x.clone();
  Tensor input;
  const Tensor* in = &x;
  if (first == 0 && x.device() == Device::kHost) {  // the model's input is rounded like every activation
    input = x.clone();
    round_in_place(input);
    in = &input;
  }
  Tensor h;
  for (std::size_t i = first; i < last; ++i) {
    Tensor y = layers_[i]->forward(*in, saved[i]);  // the layer keeps what it needs of its input
    h = std::move(y);
    in = &h;
  }
  return h;
}

Tensor Sequential::backward(const Tensor& dy, const std::vector<Saved>& saved, const GradReadyHook& ready, const BackwardDoneHook& done,
                            std::size_t first, std::size_t last) {
  last = std::min(last, layers_.size());
  if (first > last || saved.size() < last) throw std::invalid_argument("Sequential::backward: layers [first, last) and their saved activations");
  if (first == last) {
    if (done) done();
    return dy.clone();
  }
  Tensor g;
  const Tensor* in = &dy;
  for (std::size_t i = last; i-- > first;) {
    if (saved[i].tensors.empty()) {
      throw std::invalid_argument("Sequential::backward: layer " + std::to_string(i) + " (" + layers_[i]->describe() +
                                  ") has no saved activations: its forward did not run, or they were dropped and not recomputed");
    }
    Tensor dx = layers_[i]->backward(*in, saved[i]);
    g = std::move(dx);
    in = &g;
    if (!ready) continue;
    std::vector<Parameter*> params = layers_[i]->parameters();
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      if (!(*it)->frozen) ready(**it);  // final: no other layer adds into it
    }
  }
  if (done) done();
  return g;
}

double softmax_cross_entropy(const Tensor& logits, const std::vector<int>& labels, Tensor* dlogits) {
  if (labels.size() != logits.rows()) throw std::invalid_argument("softmax_cross_entropy: " + std::to_string(labels.size()) + " labels for " + logits.shape());
  for (int l : labels) {
    if (l < 0 || static_cast<std::size_t>(l) >= logits.cols()) throw std::invalid_argument("softmax_cross_entropy: label " + std::to_string(l) + " out of range");
  }
  if (dlogits != nullptr && (dlogits->rows() != logits.rows() || dlogits->cols() != logits.cols() || dlogits->device() != logits.device())) {
    *dlogits = output_like(logits);
  }
  std::vector<double> losses(logits.rows());
  detail::ops_for(logits.device()).softmax_ce(logits.data(), labels.data(), logits.rows(), logits.cols(), losses.data(),
                                  dlogits != nullptr ? dlogits->data() : nullptr);
  if (dlogits != nullptr) round_in_place(*dlogits);
  return logits.rows() == 0 ? 0.0 : std::accumulate(losses.begin(), losses.end(), 0.0) / static_cast<double>(logits.rows());
}

SGD::SGD(float lr, float momentum, float weight_decay) : lr_(lr), momentum_(momentum), weight_decay_(weight_decay) {}

void SGD::step(const std::vector<Parameter*>& params) {
  for (Parameter* param : params) {
    Parameter& p = *param;
    if (p.frozen || p.grad.empty()) continue;
    detail::check_like(p.grad, p.value, "SGD: the gradient of " + p.name);
    float* velocity = momentum_ > 0 ? state_of(velocity_, p, "SGD").data() : nullptr;
    detail::ops_for(p.value.device()).sgd(p.value.data(), p.grad.data(), velocity, p.value.size(), lr_, momentum_, weight_decay_);
    round_in_place(p.value);
  }
}

AdamW::AdamW(float lr, float beta1, float beta2, float eps, float weight_decay)
    : lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {}

void AdamW::step(const std::vector<Parameter*>& params) {
  ++t_;
  for (Parameter* param : params) {
    Parameter& p = *param;
    if (p.frozen || p.grad.empty()) continue;
    const float t = static_cast<float>(++updates_[&p]);
    const float c1 = 1.0f - std::pow(beta1_, t), c2 = 1.0f - std::pow(beta2_, t);
    detail::check_like(p.grad, p.value, "AdamW: the gradient of " + p.name);
    Tensor& m = state_of(m_, p, "AdamW");
    Tensor& v = state_of(v_, p, "AdamW");
    detail::ops_for(p.value.device()).adamw(p.value.data(), p.grad.data(), m.data(), v.data(), p.value.size(), lr_, beta1_, beta2_, eps_,
                                            weight_decay_, c1, c2);
    round_in_place(p.value);
  }
}

Tensor Dataset::batch(const std::vector<std::size_t>& indices, std::vector<int>& batch_labels, Device device) const {
  std::vector<float> values(indices.size() * features);
  batch_labels.resize(indices.size());
  for (std::size_t r = 0; r < indices.size(); ++r) {
    const std::size_t i = indices[r];
    if (i >= samples()) throw std::invalid_argument("Dataset::batch: sample " + std::to_string(i) + " of " + std::to_string(samples()));
    std::copy_n(inputs.begin() + static_cast<long>(i * features), features, values.begin() + static_cast<long>(r * features));
    batch_labels[r] = labels[i];
  }
  return Tensor::from(values, indices.size(), features, device);
}

Dataset teacher_dataset(std::size_t samples, std::size_t features, std::size_t classes, std::uint64_t seed) {
  Dataset d;
  d.features = features;
  d.classes = classes;
  d.inputs = detail::normal(samples * features, 1.0f, seed);
  // The labels are the data set's, whatever rounding hook a lab has installed.
  struct NoRounding {
    RoundingHook previous = set_rounding({});
    ~NoRounding() { set_rounding(std::move(previous)); }
  } no_rounding;
  Sequential teacher = Sequential::mlp({features, 2 * features, classes}, "gelu", seed ^ 0x7EAC4E5ull);
  std::vector<Saved> saved;
  const Tensor logits = teacher.forward(Tensor::from(d.inputs, samples, features), saved);
  const std::vector<float> z = logits.to_host();
  d.labels.resize(samples);
  for (std::size_t i = 0; i < samples; ++i) {
    d.labels[i] = static_cast<int>(std::max_element(z.begin() + static_cast<long>(i * classes), z.begin() + static_cast<long>((i + 1) * classes)) -
                                   (z.begin() + static_cast<long>(i * classes)));
  }
  return d;
}

}  // namespace gpulab::nn
