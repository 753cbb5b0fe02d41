/// @file test_nn.cpp
/// @brief gpulab::nn (common/include/gpulab/nn.hpp): a hand-worked forward and loss; gradients
/// against central differences of an independent fp64 model; training lowers the loss; the seams
/// the training labs use (gradient-ready hooks, layer slices with caller-owned activations, the
/// allocator, poisoning, the rounding hook); the optimizers' update rules by hand; host and
/// device within bounds derived from the arithmetic ([gpu]); OpenBLAS against the plain loop.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpulab/nn.hpp"
#include "gpulab/random.hpp"

namespace nn = gpulab::nn;

namespace {

constexpr double kUnit = 5.9604644775390625e-8;  // fp32 unit roundoff u = 2⁻²⁴

/// Turns poisoning on for one test and puts the previous setting back.
struct PoisonOn {
  bool previous = nn::set_poison_on_free(true);
  ~PoisonOn() { nn::set_poison_on_free(previous); }
};

/// |x − value| ≤ margin, and nothing else (Catch's Approx also passes within its default
/// relative epsilon of ~1.2e-5 unless told otherwise).
Approx near(double value, double margin) { return Approx(value).margin(margin).epsilon(0); }

std::vector<float> grad_of(nn::Parameter& p) { return p.grad.empty() ? std::vector<float>() : p.grad.to_host(); }

/// A batch of @p rows random inputs and labels.
nn::Tensor random_batch(std::size_t rows, std::size_t cols, std::size_t classes, std::vector<int>& labels, std::uint64_t seed) {
  gpulab::Rng rng(seed);
  labels.resize(rows);
  for (int& l : labels) l = static_cast<int>(rng.integer(0, static_cast<std::int64_t>(classes) - 1));
  return nn::Tensor::from(rng.uniform_vector(rows * cols, -1.5f, 1.5f), rows, cols);
}

/// One forward and backward of @p model on (x, labels): the loss (gradients left in the model).
double train_pass(nn::Sequential& model, const nn::Tensor& x, const std::vector<int>& labels, const nn::GradReadyHook& ready = {},
                  const nn::BackwardDoneHook& done = {}) {
  std::vector<nn::Saved> saved;
  const nn::Tensor logits = model.forward(x, saved);
  nn::Tensor dlogits;
  const double loss = nn::softmax_cross_entropy(logits, labels, &dlogits);
  model.backward(dlogits, saved, ready, done);
  return loss;
}

// ---------------------------------------------------------------------------------------------
// An independent fp64 model: the same function written out with plain loops, for the gradient
// check (it shares no code with the library).
// ---------------------------------------------------------------------------------------------

struct ReferenceMlp {
  std::vector<std::size_t> widths;
  bool gelu = true;
  std::vector<std::vector<double>> weights, biases;  // weights[l] is widths[l] × widths[l+1]

  double activation(double z) const { return gelu ? 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))) : std::max(0.0, z); }

  double loss(const std::vector<double>& x, std::size_t batch, const std::vector<int>& labels) const {
    double total = 0.0;
    for (std::size_t s = 0; s < batch; ++s) {
      std::vector<double> h(x.begin() + static_cast<long>(s * widths[0]), x.begin() + static_cast<long>((s + 1) * widths[0]));
      for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
        std::vector<double> z(widths[l + 1]);
        for (std::size_t j = 0; j < z.size(); ++j) {
          z[j] = biases[l][j];
          for (std::size_t i = 0; i < h.size(); ++i) z[j] += h[i] * weights[l][i * widths[l + 1] + j];
          if (l + 2 < widths.size()) z[j] = activation(z[j]);
        }
        h = z;
      }
      double top = *std::max_element(h.begin(), h.end()), sum = 0.0;
      for (double v : h) sum += std::exp(v - top);
      total += std::log(sum) + top - h[static_cast<std::size_t>(labels[s])];
    }
    return total / static_cast<double>(batch);
  }
};

ReferenceMlp reference_of(nn::Sequential& model, const std::vector<std::size_t>& widths, bool gelu) {
  ReferenceMlp ref{widths, gelu, {}, {}};
  const std::vector<nn::Parameter*> params = model.parameters();
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const std::vector<float> w = params[2 * l]->value.to_host(), b = params[2 * l + 1]->value.to_host();
    ref.weights.emplace_back(w.begin(), w.end());
    ref.biases.emplace_back(b.begin(), b.end());
  }
  return ref;
}

void check_gradients_by_central_differences(const std::string& activation) {
  const std::vector<std::size_t> widths = {5, 7, 6, 3};
  const std::size_t batch = 4;
  nn::Sequential model = nn::Sequential::mlp(widths, activation, 11);
  std::vector<int> labels;
  const nn::Tensor x = random_batch(batch, widths[0], widths.back(), labels, 12);
  model.zero_grad();
  const double loss = train_pass(model, x, labels);

  ReferenceMlp ref = reference_of(model, widths, activation == "gelu");
  const std::vector<float> xf = x.to_host();
  const std::vector<double> xd(xf.begin(), xf.end());
  // The two compute one function: the loss agrees to fp32 rounding (a few u per layer).
  CHECK(loss == Approx(ref.loss(xd, batch, labels)).epsilon(1e-5));

  // Central differences in fp64, h = 1e-5: truncation ~h²·|f'''| ≈ 1e-10, cancellation ~1e-16/h
  // ≈ 1e-11. The library's fp32 gradient: three GEMMs of at most 7 terms of O(1) values, each
  // within ~7u ≈ 4e-7 of exact, through three layers: ~1e-6 of the gradients' O(1) scale.
  // Checked to 3e-6 + 3e-5·|g| (the tanh approximation of GELU's slope is off by up to ~1e-3).
  const double h = 1e-5;
  const std::vector<nn::Parameter*> params = model.parameters();
  std::size_t checked = 0, wrong = 0;
  double worst = 0.0;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    for (int which = 0; which < 2; ++which) {
      std::vector<double>& values = which == 0 ? ref.weights[l] : ref.biases[l];
      const std::vector<float> grad = params[2 * l + static_cast<std::size_t>(which)]->grad.to_host();
      REQUIRE(grad.size() == values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        const double keep = values[i];
        values[i] = keep + h;
        const double up = ref.loss(xd, batch, labels);
        values[i] = keep - h;
        const double down = ref.loss(xd, batch, labels);
        values[i] = keep;
        const double numeric = (up - down) / (2 * h);
        ++checked;
        worst = std::max(worst, std::abs(numeric - grad[i]));
        if (std::abs(numeric - grad[i]) > 3e-6 + 3e-5 * std::abs(numeric)) {
          if (++wrong <= 5) UNSCOPED_INFO(params[2 * l + static_cast<std::size_t>(which)]->name << "[" << i << "]: library " << grad[i] << ", central difference " << numeric);
        }
      }
    }
  }
  INFO("largest difference " << worst);
  CHECK(checked == 5 * 7 + 7 + 7 * 6 + 6 + 6 * 3 + 3);
  CHECK(wrong == 0);
}

/// An allocator that counts, checks what comes back, and hands the rest to the default.
class CountingAllocator final : public nn::Allocator {
 public:
  void* allocate(std::size_t bytes, nn::Device device) override {
    void* p = nn::default_allocator().allocate(bytes, device);
    ++allocations;
    live_bytes += bytes;
    peak_bytes = std::max(peak_bytes, live_bytes);
    if (reinterpret_cast<std::uintptr_t>(p) % 256 != 0) ++misaligned;
    sizes[p] = bytes;
    return p;
  }
  void release(void* p, std::size_t bytes, nn::Device device) override {
    ++releases;
    live_bytes -= bytes;
    if (sizes.count(p) == 0 || sizes[p] != bytes) ++mismatched;
    sizes.erase(p);
    if (device == nn::Device::kHost) {
      const float* f = static_cast<const float*>(p);
      for (std::size_t i = 0; i < bytes / sizeof(float); ++i) {
        if (!std::isnan(f[i])) {
          ++unpoisoned;
          break;
        }
      }
    }
    nn::default_allocator().release(p, bytes, device);
  }
  std::size_t allocations = 0, releases = 0, live_bytes = 0, peak_bytes = 0, misaligned = 0, mismatched = 0, unpoisoned = 0;
  std::map<void*, std::size_t> sizes;
};

/// Installs an allocator for one scope.
struct UseAllocator {
  explicit UseAllocator(nn::Allocator& a) : previous(nn::set_allocator(&a)) {}
  ~UseAllocator() { nn::set_allocator(previous); }
  nn::Allocator* previous;
};

struct UseRounding {
  explicit UseRounding(nn::RoundingHook hook) : previous(nn::set_rounding(std::move(hook))) {}
  ~UseRounding() { nn::set_rounding(previous); }
  nn::RoundingHook previous;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Worked by hand
// ---------------------------------------------------------------------------------------------

TEST_CASE("nn: a Linear layer and softmax cross-entropy on a 2 × 3 example worked by hand", "[cpu]") {
  // x = [[1, 2], [0, −1]], W = [[0.5, −1, 0], [0.25, 0, 1]], b = [0.1, 0.2, −0.3], labels {0, 2}.
  // logits = x·W + b = [[1.1, −0.8, 1.7], [−0.15, 0.2, −1.3]]
  // row 0: log(e^1.1 + e^−0.8 + e^1.7) − 1.1 = log(3.004166 + 0.449329 + 5.473947) − 1.1 = 1.0891299
  // row 1: log(e^−0.15 + e^0.2 + e^−1.3) + 1.3 = log(0.860708 + 1.221403 + 0.272532) + 1.3 = 2.1563889
  // loss = (1.0891299 + 2.1563889) / 2 = 1.6227594
  // dlogits = (softmax − one-hot) / 2, e.g. [0][0] = (3.004166 / 8.927442 − 1) / 2 = −0.3317454
  // dW = xᵀ·dlogits (row 1 = 2·dlogits[0] − dlogits[1]), db = column sums, dx = dlogits·Wᵀ.
  nn::Linear linear(2, 3, 1);
  linear.weight().value.assign({0.5f, -1.0f, 0.0f, 0.25f, 0.0f, 1.0f});
  linear.bias().value.assign({0.1f, 0.2f, -0.3f});
  const nn::Tensor x = nn::Tensor::from({1.0f, 2.0f, 0.0f, -1.0f}, 2, 2);
  nn::Saved saved;
  const nn::Tensor logits = linear.forward(x, saved);
  const std::vector<float> z = logits.to_host();
  const std::vector<float> z_hand = {1.1f, -0.8f, 1.7f, -0.15f, 0.2f, -1.3f};
  for (std::size_t i = 0; i < z.size(); ++i) CHECK(z[i] == near(z_hand[i], 1e-6));

  nn::Tensor dlogits;
  const double loss = nn::softmax_cross_entropy(logits, {0, 2}, &dlogits);
  CHECK(loss == near(1.6227594, 1e-6));
  const std::vector<float> dz = dlogits.to_host();
  const std::vector<double> dz_hand = {-0.3317454, 0.0251656, 0.3065798, 0.1827683, 0.2593605, -0.4421288};
  for (std::size_t i = 0; i < dz.size(); ++i) CHECK(dz[i] == near(dz_hand[i], 1e-6));

  const nn::Tensor dx = linear.backward(dlogits, saved);
  const std::vector<double> dw_hand = {-0.3317454, 0.0251656, 0.3065798, -0.8462591, -0.2090293, 1.0552885};
  const std::vector<double> db_hand = {-0.1489771, 0.2845262, -0.1355490};
  const std::vector<double> dx_hand = {-0.1910383, 0.2236435, -0.1679764, -0.3964368};
  const std::vector<float> dw = linear.weight().grad.to_host(), db = linear.bias().grad.to_host(), dxv = dx.to_host();
  for (std::size_t i = 0; i < dw.size(); ++i) CHECK(dw[i] == near(dw_hand[i], 1e-6));
  for (std::size_t i = 0; i < db.size(); ++i) CHECK(db[i] == near(db_hand[i], 1e-6));
  for (std::size_t i = 0; i < dxv.size(); ++i) CHECK(dxv[i] == near(dx_hand[i], 1e-6));

  // Gradients accumulate: a second backward doubles them.
  (void)linear.backward(dlogits, saved);
  CHECK(linear.weight().grad.to_host()[3] == near(2 * -0.8462591, 2e-6));
}

TEST_CASE("nn: SGD with momentum and AdamW follow their update rules worked by hand", "[cpu]") {
  SECTION("SGD, momentum 0.9: v₁ = g = 0.5, w₁ = 1 − 0.1·0.5 = 0.95; v₂ = 0.9·0.5 + 0.5 = 0.95, w₂ = 0.95 − 0.095 = 0.855") {
    nn::Parameter p{"w", nn::Tensor::from({1.0f}, 1, 1), nn::Tensor::from({0.5f}, 1, 1), false};
    nn::SGD sgd(0.1f, 0.9f);
    sgd.step({&p});
    // A few fp32 roundings of values near 1: u ≈ 6e-8 each.
    CHECK(p.value.to_host()[0] == near(0.95, 3e-7));
    sgd.step({&p});
    CHECK(p.value.to_host()[0] == near(0.855, 3e-7));
    CHECK(sgd.state_floats_per_parameter() == 1);
  }
  SECTION("AdamW, one step: m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25, w = 1 − 0.1·(0.5/(0.5 + 1e-8) + 0.01·1) = 0.899") {
    nn::Parameter p{"w", nn::Tensor::from({1.0f, -2.0f}, 1, 2), nn::Tensor::from({0.5f, 0.5f}, 1, 2), false};
    nn::AdamW adam(0.1f, 0.9f, 0.999f, 1e-8f, 0.01f);
    adam.step({&p});
    const std::vector<float> w = p.value.to_host();
    CHECK(w[0] == near(0.899, 1e-6));
    CHECK(w[1] == near(-2.0 - 0.1 * (1.0 - 0.01 * 2.0), 1e-6));  // decay pulls toward 0: −2.098
    // Step 2, same gradient: m = 0.095, v = 0.00049975; m̂ = 0.5, v̂ = 0.25 again: w = 0.899 − 0.1·(1 + 0.00899).
    adam.step({&p});
    CHECK(p.value.to_host()[0] == near(0.899 - 0.1 * (1.0 + 0.01 * 0.899), 1e-6));
    CHECK(adam.steps() == 2);
  }
  SECTION("state is kept per parameter: a call with a subset, in another order, continues each one's own") {
    auto make = [] { return nn::Parameter{"w", nn::Tensor::from({1.0f, 2.0f, 3.0f}, 1, 3), nn::Tensor::from({0.5f, -0.25f, 1.0f}, 1, 3), false}; };
    nn::Parameter a = make(), b = make(), small{"s", nn::Tensor::from({1.0f}, 1, 1), nn::Tensor::from({0.5f}, 1, 1), false};
    nn::AdamW together(0.1f), alone(0.1f);
    together.step({&a, &small});
    together.step({&small});
    together.step({&small, &a});  // a's second update
    alone.step({&b});
    alone.step({&b});
    CHECK(a.value.to_host() == b.value.to_host());
    nn::SGD sgd(0.1f, 0.9f);
    sgd.step({&small, &a});
    CHECK_NOTHROW(sgd.step({&a}));  // 3 floats of velocity for a, 1 for small: never mixed up
  }
  SECTION("frozen parameters are left alone") {
    nn::Parameter p{"w", nn::Tensor::from({1.0f}, 1, 1), nn::Tensor::from({0.5f}, 1, 1), true};
    nn::AdamW adam(0.1f);
    adam.step({&p});
    nn::SGD sgd(0.1f);
    sgd.step({&p});
    CHECK(p.value.to_host()[0] == 1.0f);
  }
}

// ---------------------------------------------------------------------------------------------
// Gradients and training
// ---------------------------------------------------------------------------------------------

TEST_CASE("nn: backward equals central differences of an independent fp64 model (GELU)", "[cpu]") {
  check_gradients_by_central_differences("gelu");
}

TEST_CASE("nn: backward equals central differences of an independent fp64 model (ReLU)", "[cpu]") {
  check_gradients_by_central_differences("relu");
}

TEST_CASE("nn: training on the teacher data set lowers the loss (SGD with momentum and AdamW)", "[cpu]") {
  const nn::Dataset data = nn::teacher_dataset(1024, 16, 4, 5);
  std::vector<std::size_t> all(data.samples());
  std::iota(all.begin(), all.end(), 0);
  std::vector<int> all_labels;
  const nn::Tensor everything = data.batch(all, all_labels);
  auto full_loss = [&](nn::Sequential& model) {
    std::vector<nn::Saved> saved;
    return nn::softmax_cross_entropy(model.forward(everything, saved), all_labels, nullptr);
  };
  auto train = [&](nn::Optimizer& optimizer) {
    nn::Sequential model = nn::Sequential::mlp({16, 64, 4}, "relu", 9);
    const double before = full_loss(model);
    gpulab::Rng rng(3);
    for (int step = 0; step < 150; ++step) {
      std::vector<std::size_t> idx(32);
      for (std::size_t& i : idx) i = static_cast<std::size_t>(rng.integer(0, static_cast<std::int64_t>(data.samples()) - 1));
      std::vector<int> labels;
      const nn::Tensor x = data.batch(idx, labels);
      model.zero_grad();
      (void)train_pass(model, x, labels);
      optimizer.step(model.parameters());
    }
    const double after = full_loss(model);
    INFO("loss over the whole set: " << before << " before, " << after << " after 150 steps");
    // Chance is ln 4 ≈ 1.39; a model that learns nothing stays near it.
    CHECK(after < 0.5 * before);
  };
  SECTION("SGD, lr 0.05, momentum 0.9") {
    nn::SGD sgd(0.05f, 0.9f);
    train(sgd);
  }
  SECTION("AdamW, lr 3e-3") {
    nn::AdamW adam(3e-3f);
    train(adam);
  }
}

TEST_CASE("nn: the teacher data set is deterministic from its seed and uses every class", "[cpu]") {
  const nn::Dataset a = nn::teacher_dataset(2000, 8, 5, 42), b = nn::teacher_dataset(2000, 8, 5, 42), c = nn::teacher_dataset(2000, 8, 5, 43);
  CHECK(a.inputs == b.inputs);
  CHECK(a.labels == b.labels);
  CHECK(a.inputs != c.inputs);
  std::vector<std::size_t> count(5);
  for (int l : a.labels) ++count.at(static_cast<std::size_t>(l));
  for (std::size_t k = 0; k < 5; ++k) {
    INFO("class " << k);
    CHECK(count[k] > 0);
  }
  std::vector<int> labels;
  CHECK_THROWS_AS(a.batch({1999, 2000}, labels), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// The seams
// ---------------------------------------------------------------------------------------------

TEST_CASE("nn: gradient-ready hooks come in reverse order once each with final gradients and then done", "[cpu]") {
  nn::Sequential model = nn::Sequential::mlp({3, 4, 4, 2}, "gelu", 1);  // 0 Linear, 1 GELU, 2 Linear, 3 GELU, 4 Linear
  std::vector<int> labels;
  const nn::Tensor x = random_batch(5, 3, 2, labels, 2);
  std::vector<std::string> order;
  std::map<std::string, std::vector<float>> at_hook;
  bool done = false, hook_after_done = false;
  auto ready = [&](nn::Parameter& p) {
    order.push_back(p.name);
    at_hook[p.name] = grad_of(p);
    hook_after_done = hook_after_done || done;
  };

  SECTION("every parameter") {
    model.zero_grad();
    (void)train_pass(model, x, labels, ready, [&] { done = true; });
    CHECK(order == std::vector<std::string>{"4.bias", "4.weight", "2.bias", "2.weight", "0.bias", "0.weight"});
    CHECK(done);
    CHECK_FALSE(hook_after_done);
    // Final: nothing changed a gradient after its hook.
    for (nn::Parameter* p : model.parameters()) CHECK(at_hook[p->name] == grad_of(*p));
  }
  SECTION("a frozen parameter gets no hook and no gradient, the others the same gradients") {
    model.zero_grad();
    (void)train_pass(model, x, labels);
    std::map<std::string, std::vector<float>> expected;
    for (nn::Parameter* p : model.parameters()) expected[p->name] = grad_of(*p);
    nn::Parameter& frozen = *model.parameters()[2];  // 2.weight
    REQUIRE(frozen.name == "2.weight");
    frozen.frozen = true;
    frozen.grad.fill(7.0f);
    model.zero_grad();  // leaves the frozen one alone
    (void)train_pass(model, x, labels, ready, [&] { done = true; });
    CHECK(order == std::vector<std::string>{"4.bias", "4.weight", "2.bias", "0.bias", "0.weight"});
    CHECK(done);
    CHECK(frozen.grad.to_host() == std::vector<float>(16, 7.0f));  // untouched
    for (nn::Parameter* p : model.parameters()) {
      if (p != &frozen) CHECK(grad_of(*p) == expected[p->name]);  // the frozen weight still carries dx back
    }
  }
}

TEST_CASE("nn: layer slices with caller-owned activations equal the whole pass bitwise and recompute (checkpointing)", "[cpu]") {
  nn::Sequential model = nn::Sequential::mlp({6, 8, 8, 4}, "gelu", 4);  // 5 layers
  std::vector<int> labels;
  const nn::Tensor x = random_batch(7, 6, 4, labels, 5);
  model.zero_grad();
  const double whole_loss = train_pass(model, x, labels);
  std::vector<std::vector<float>> whole;
  for (nn::Parameter* p : model.parameters()) whole.push_back(grad_of(*p));

  auto check_same = [&](const char* what) {
    INFO(what);
    std::vector<nn::Parameter*> params = model.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) CHECK(grad_of(*params[i]) == whole[i]);
  };

  SECTION("two stages: layers [0, 3) and [3, 5)") {
    model.zero_grad();
    std::vector<nn::Saved> saved;
    const nn::Tensor h = model.forward(x, saved, 0, 3);  // stage 1; h would be sent to stage 2
    const nn::Tensor logits = model.forward(h, saved, 3, 5);
    nn::Tensor dlogits;
    CHECK(nn::softmax_cross_entropy(logits, labels, &dlogits) == whole_loss);
    const nn::Tensor dh = model.backward(dlogits, saved, {}, {}, 3, 5);  // sent back to stage 1
    (void)model.backward(dh, saved, {}, {}, 0, 3);
    check_same("stages");
  }
  SECTION("checkpointing: the first segment's activations dropped after forward, recomputed before its backward") {
    model.zero_grad();
    std::vector<nn::Saved> saved;
    const nn::Tensor h = model.forward(x, saved, 0, 3);
    for (std::size_t i = 0; i < 3; ++i) saved[i].tensors.clear();  // dropped: only x and h are kept
    const nn::Tensor logits = model.forward(h, saved, 3, 5);
    nn::Tensor dlogits;
    (void)nn::softmax_cross_entropy(logits, labels, &dlogits);
    const nn::Tensor dh = model.backward(dlogits, saved, {}, {}, 3, 5);
    (void)model.forward(x, saved, 0, 3);  // recompute
    (void)model.backward(dh, saved, {}, {}, 0, 3);
    check_same("recomputed");
  }
  SECTION("a backward over a slice without its activations is an error, not garbage") {
    std::vector<nn::Saved> saved;
    (void)model.forward(nn::Tensor(7, 8), saved, 3, 5);  // layers [0, 3) never ran
    nn::Tensor dh(7, 8);
    CHECK_THROWS(model.backward(dh, saved, {}, {}, 0, 3));
  }
}

TEST_CASE("nn: every tensor allocation goes through the installed allocator and freed memory is poisoned", "[cpu]") {
  PoisonOn poison;
  CountingAllocator counting;
  {
    UseAllocator use(counting);
    nn::Sequential model = nn::Sequential::mlp({6, 8, 3}, "relu", 2);
    std::vector<int> labels;
    const nn::Tensor x = random_batch(4, 6, 3, labels, 3);
    nn::AdamW adam(1e-3f);
    model.zero_grad();
    (void)train_pass(model, x, labels);
    adam.step(model.parameters());
    CHECK(counting.live_bytes > 0);
  }
  CHECK(counting.allocations > 10);
  CHECK(counting.allocations == counting.releases);
  CHECK(counting.live_bytes == 0);
  CHECK(counting.misaligned == 0);
  CHECK(counting.mismatched == 0);
  CHECK(counting.unpoisoned == 0);

  SECTION("a tensor goes back to the allocator it came from, whatever is installed when it dies") {
    CountingAllocator first;
    nn::Tensor t;
    {
      UseAllocator use(first);
      t = nn::Tensor(3, 3);
    }
    CHECK(first.live_bytes == 36);
    t = nn::Tensor();
    CHECK(first.live_bytes == 0);
    CHECK(first.releases == 1);
  }
}

TEST_CASE("nn: the rounding hook rounds weights and activations and gradients and none is the identity", "[cpu]") {
  std::vector<int> labels;
  const nn::Tensor x = random_batch(6, 5, 3, labels, 8);
  auto on_grid = [](const std::vector<float>& v) {
    for (float f : v) {
      if (std::nearbyint(f * 64.0f) != f * 64.0f) return false;
    }
    return true;
  };
  std::vector<std::vector<float>> plain;
  {
    nn::Sequential model = nn::Sequential::mlp({5, 9, 3}, "gelu", 6);
    model.zero_grad();
    (void)train_pass(model, x, labels);
    for (nn::Parameter* p : model.parameters()) plain.push_back(grad_of(*p));
  }
  SECTION("a grid of 1/64") {
    std::size_t calls = 0;
    UseRounding rounding([&](float v) {
      ++calls;
      return std::nearbyint(v * 64.0f) / 64.0f;
    });
    nn::Sequential model = nn::Sequential::mlp({5, 9, 3}, "gelu", 6);
    model.zero_grad();
    std::vector<nn::Saved> saved;
    const nn::Tensor logits = model.forward(x, saved);
    CHECK(on_grid(logits.to_host()));
    CHECK(on_grid(saved[2].tensors.at(0).to_host()));  // the GELU's output, kept by the last Linear
    nn::Tensor dlogits;
    (void)nn::softmax_cross_entropy(logits, labels, &dlogits);
    (void)model.backward(dlogits, saved);
    nn::SGD sgd(0.1f);
    sgd.step(model.parameters());
    for (nn::Parameter* p : model.parameters()) {
      INFO(p->name);
      CHECK(on_grid(p->grad.to_host()));
      CHECK(on_grid(p->value.to_host()));
    }
    CHECK(calls > 0);
  }
  SECTION("no hook: the same gradients as before, bitwise") {
    UseRounding rounding({});
    nn::Sequential model = nn::Sequential::mlp({5, 9, 3}, "gelu", 6);
    model.zero_grad();
    (void)train_pass(model, x, labels);
    std::vector<nn::Parameter*> params = model.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) CHECK(grad_of(*params[i]) == plain[i]);
  }
}

TEST_CASE("nn: shape and device mismatches throw errors that name both shapes", "[cpu]") {
  const nn::Tensor a(2, 3), b(4, 5);
  nn::Tensor c(2, 5);
  try {
    nn::gemm(a, false, b, false, c);
    FAIL("gemm accepted 2 × 3 times 4 × 5");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::Contains("2 × 3") && Catch::Contains("4 × 5"));
  }
  nn::Tensor y(3, 2);
  CHECK_THROWS_WITH(nn::axpy(1.0f, a, y), Catch::Contains("2 × 3 on the host") && Catch::Contains("3 × 2 on the host"));
  CHECK_THROWS_AS(nn::Tensor(2, 2).assign({1.0f, 2.0f, 3.0f}), std::invalid_argument);
  nn::Linear linear(4, 2, 1);
  nn::Saved saved;
  CHECK_THROWS_WITH(linear.forward(a, saved), Catch::Contains("Linear(4 → 2)") && Catch::Contains("2 × 3"));
  CHECK_THROWS_AS(nn::softmax_cross_entropy(a, {0, 3}, nullptr), std::invalid_argument);  // label 3 of 3 classes
  CHECK_THROWS_AS(nn::Sequential::mlp({4}, "relu", 1), std::invalid_argument);
  CHECK_THROWS_AS(nn::Sequential::mlp({4, 2}, "tanh", 1), std::invalid_argument);
}

TEST_CASE("nn: the transposed GEMMs agree with a plain fp64 product", "[cpu]") {
  const bool plain = GENERATE(false, true);  // OpenBLAS, then the plain loop
  nn::use_plain_host_gemm(plain);
  INFO("host GEMM: " << nn::host_gemm_backend());
  gpulab::Rng rng(21);
  const std::size_t m = 7, n = 5, k = 11;  // awkward sizes
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const std::vector<float> av = rng.uniform_vector(m * k), bv = rng.uniform_vector(k * n), cv = rng.uniform_vector(m * n);
      const nn::Tensor a = nn::Tensor::from(av, ta ? k : m, ta ? m : k), b = nn::Tensor::from(bv, tb ? n : k, tb ? k : n);
      nn::Tensor c = nn::Tensor::from(cv, m, n);
      nn::gemm(a, ta != 0, b, tb != 0, c, 0.5f, 2.0f);
      const std::vector<float> got = c.to_host();
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
          double s = 0.0, abs_s = 0.0;
          for (std::size_t p = 0; p < k; ++p) {
            const double x = ta ? av[p * m + i] : av[i * k + p], y = tb ? bv[j * k + p] : bv[p * n + j];
            s += x * y;
            abs_s += std::abs(x * y);
          }
          const double want = 0.5 * s + 2.0 * cv[i * n + j];
          INFO("op(A) " << (ta ? "transposed" : "plain") << ", op(B) " << (tb ? "transposed" : "plain") << ", C[" << i << "][" << j << "]");
          // Wilkinson: |fl(Σ) − Σ| ≤ γ_k Σ|x·y|, plus the scaling and the add.
          CHECK(std::abs(got[i * n + j] - want) <= (k + 2) * kUnit * (0.5 * abs_s + 2.0 * std::abs(cv[i * n + j])) * 1.01 + 1e-30);
        }
      }
    }
  }  nn::use_plain_host_gemm(false);
}

// ---------------------------------------------------------------------------------------------
// Host and device
// ---------------------------------------------------------------------------------------------

namespace {

/// |op(A)|·|op(B)| in fp64: the scale of a GEMM's rounding error, element by element.
std::vector<double> abs_product(const nn::Tensor& a, bool ta, const nn::Tensor& b, bool tb) {
  const std::vector<float> av = a.to_host(), bv = b.to_host();
  const std::size_t m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols(), n = tb ? b.rows() : b.cols();
  std::vector<double> out(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t p = 0; p < k; ++p) {
      const double x = std::abs(ta ? av[p * m + i] : av[i * k + p]);
      for (std::size_t j = 0; j < n; ++j) out[i * n + j] += x * std::abs(tb ? bv[j * k + p] : bv[p * n + j]);
    }
  }
  return out;
}

/// How many elements of @p device differ from @p host by more than @p bound(i).
std::size_t outside(const nn::Tensor& host, const nn::Tensor& device, const std::function<double(std::size_t)>& bound) {
  const std::vector<float> h = host.to_host(), d = device.to_host();
  REQUIRE(h.size() == d.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (!(std::abs(static_cast<double>(h[i]) - d[i]) <= bound(i))) ++wrong;  // NaN counts as wrong
  }
  return wrong;
}

}  // namespace

TEST_CASE("nn: host and device layers agree within the bounds of their arithmetic", "[gpu]") {
  // Layer by layer on the same inputs, so each bound is one operation's. A k-term fp32 dot
  // product on either side is within γ_k·Σ|x·w| ≈ k·u·Σ|x·w| of the exact one (Higham, Accuracy
  // and Stability of Numerical Algorithms, §3.1), so the two are within 2(k + 1)·u·Σ|x·w| (one
  // more rounding for the bias or the accumulation into the gradient). GELU's erf and exp are
  // within 2 ulp on the device (CUDA C++ Programming Guide, Mathematical Functions) and about 1
  // on the host; with the products around them, 8u·(|x| + |y|) forward and 8u·|dy|·(2 + |x|)
  // backward cover them.
  const std::vector<std::size_t> widths = {300, 257, 10};
  nn::Sequential host = nn::Sequential::mlp(widths, "gelu", 3), device = nn::Sequential::mlp(widths, "gelu", 3, nn::Device::kGpu);
  std::vector<int> labels;
  nn::Tensor x = random_batch(64, widths[0], widths.back(), labels, 4);
  std::vector<nn::Saved> saved_host(host.size()), saved_device(device.size());
  for (std::size_t l = 0; l < host.size(); ++l) {
    INFO("forward of layer " << l << ": " << host.layer(l).describe());
    const nn::Tensor y_host = host.layer(l).forward(x, saved_host[l]);
    const nn::Tensor y_device = device.layer(l).forward(x.to(nn::Device::kGpu), saved_device[l]);
    const std::vector<float> xv = x.to_host(), yv = y_host.to_host();
    if (l % 2 == 0) {
      const std::vector<double> scale = abs_product(x, false, host.layer(l).parameters()[0]->value, false);
      CHECK(outside(y_host, y_device, [&](std::size_t i) { return 2.0 * (x.cols() + 1) * kUnit * scale[i] * 1.01; }) == 0);
    } else {
      CHECK(outside(y_host, y_device, [&](std::size_t i) { return 8.0 * kUnit * (std::abs(xv[i]) + std::abs(yv[i])) + 1e-37; }) == 0);
    }
    x = y_host.clone();
  }
  // Backward from the host's dlogits, the same dy into both sides at every layer.
  host.zero_grad();
  device.zero_grad();
  nn::Tensor dy;
  (void)nn::softmax_cross_entropy(x, labels, &dy);
  for (std::size_t l = host.size(); l-- > 0;) {
    INFO("backward of layer " << l << ": " << host.layer(l).describe());
    const nn::Tensor dx_host = host.layer(l).backward(dy, saved_host[l]);
    const nn::Tensor dx_device = device.layer(l).backward(dy.to(nn::Device::kGpu), saved_device[l]);
    const nn::Tensor& input = saved_host[l].tensors.at(0);
    if (l % 2 == 0) {
      nn::Parameter& w_host = *host.layer(l).parameters()[0];
      nn::Parameter& w_device = *device.layer(l).parameters()[0];
      nn::Parameter& b_host = *host.layer(l).parameters()[1];
      nn::Parameter& b_device = *device.layer(l).parameters()[1];
      const std::vector<double> dw_scale = abs_product(input, true, dy, false), dx_scale = abs_product(dy, false, w_host.value, true);
      const std::vector<float> dyv = dy.to_host();
      std::vector<double> db_scale(dy.cols(), 0.0);
      for (std::size_t i = 0; i < dyv.size(); ++i) db_scale[i % dy.cols()] += std::abs(dyv[i]);
      CHECK(outside(w_host.grad, w_device.grad, [&](std::size_t i) { return 2.0 * (dy.rows() + 1) * kUnit * dw_scale[i] * 1.01; }) == 0);
      CHECK(outside(b_host.grad, b_device.grad, [&](std::size_t i) { return 2.0 * (dy.rows() + 1) * kUnit * db_scale[i] * 1.01; }) == 0);
      CHECK(outside(dx_host, dx_device, [&](std::size_t i) { return 2.0 * (dy.cols() + 1) * kUnit * dx_scale[i] * 1.01; }) == 0);
    } else {
      const std::vector<float> dyv = dy.to_host(), xv = input.to_host();
      CHECK(outside(dx_host, dx_device, [&](std::size_t i) { return 8.0 * kUnit * std::abs(dyv[i]) * (2.0 + std::abs(xv[i])) + 1e-37; }) == 0);
    }
    dy = dx_host.clone();
  }
  // One update each, from the same gradients: SGD and AdamW are a few roundings per element.
  for (std::size_t i = 0; i < host.parameters().size(); ++i) device.parameters()[i]->grad = host.parameters()[i]->grad.to(nn::Device::kGpu);
  nn::AdamW adam_host(1e-2f), adam_device(1e-2f);
  adam_host.step(host.parameters());
  adam_device.step(device.parameters());
  for (std::size_t i = 0; i < host.parameters().size(); ++i) {
    nn::Parameter& h = *host.parameters()[i];
    INFO("AdamW update of " << h.name);
    // sqrt and division are correctly rounded on both (IEEE, nvcc's default -prec-sqrt/-prec-div):
    // the difference is FMA contraction, a few u of |w| + lr (the first step moves w by ≈ lr).
    const std::vector<float> w = h.value.to_host();
    CHECK(outside(h.value, device.parameters()[i]->value, [&](std::size_t k) { return 8.0 * kUnit * (std::abs(w[k]) + 1e-2) + 1e-12; }) == 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Speed of the host path
// ---------------------------------------------------------------------------------------------

TEST_CASE("nn: OpenBLAS runs the lab-08 MLP's forward and backward several times faster than the plain loop", "[cpu][perf]") {
  // The MLP of lab 08: 256 → 512 → 512 → 10, ReLU, a batch of 64 per rank. Forward + backward ≈
  // 3 GEMMs per Linear = 6·P·B FLOPs, P ≈ 0.40 M parameters: ≈ 0.15 GFLOP per step.
  INFO("host GEMM: " << nn::host_gemm_backend());
  REQUIRE(nn::host_gemm_backend().rfind("OpenBLAS", 0) == 0);  // built without OpenBLAS: install libopenblas-dev
  nn::Sequential model = nn::Sequential::mlp({256, 512, 512, 10}, "relu", 1);
  std::vector<int> labels;
  const nn::Tensor x = random_batch(64, 256, 10, labels, 2);
  auto median_ms = [&](bool plain) {
    nn::use_plain_host_gemm(plain);
    std::vector<double> ms;
    for (int rep = 0; rep < 7; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      model.zero_grad();
      (void)train_pass(model, x, labels);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    nn::use_plain_host_gemm(false);
    ms.erase(ms.begin());  // warm-up
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const double blas = median_ms(false), loop = median_ms(true);
  const double gflop = 6.0 * (256.0 * 512 + 512.0 * 512 + 512.0 * 10) * 64 / 1e9;
  std::printf("nn host step (256-512-512-10, batch 64): OpenBLAS %.2f ms (%.1f GFLOP/s), plain loop %.2f ms (%.1f GFLOP/s): %.1fx\n", blas,
              gflop / blas * 1e3, loop, gflop / loop * 1e3, loop / blas);
  INFO("OpenBLAS " << blas << " ms, plain loop " << loop << " ms");
  // The reason the library links OpenBLAS: netlib's reference BLAS runs at the plain loop's
  // speed; one OpenBLAS thread with its packed, vectorised kernels is several times faster.
  CHECK(loop / blas >= 3.0);
}

TEST_CASE("nn: a view reads and writes its buffer and never gives it back even with poisoning on", "[cpu]") {
  const bool previous = nn::set_poison_on_free(true);
  nn::Tensor flat = nn::Tensor::from({1, 2, 3, 4, 5, 6, 7}, 1, 7);
  {
    nn::Tensor v = nn::Tensor::view(flat.data() + 1, 2, 3);
    CHECK(v.is_view());
    CHECK_FALSE(flat.is_view());
    CHECK(v.rows() == 2);
    CHECK(v.to_host() == std::vector<float>{2, 3, 4, 5, 6, 7});
    nn::scale(v, 2.0f);
    nn::Tensor moved = std::move(v);
    CHECK(moved.is_view());
    CHECK_FALSE(moved.clone().is_view());
  }  // the view and its moved-to tensor die: the buffer is neither freed nor poisoned
  CHECK(flat.to_host() == std::vector<float>{1, 4, 6, 8, 10, 12, 14});
  CHECK_THROWS_AS(nn::Tensor::view(nullptr, 1, 1), std::invalid_argument);
  nn::set_poison_on_free(previous);
}
