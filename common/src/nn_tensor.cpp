/// @file nn_tensor.cpp
/// @brief gpulab::nn's tensors, allocators, rounding hook and the operations' checks (nn.hpp).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "gpulab/nn.hpp"
#include "nn_internal.hpp"

namespace gpulab::nn {
namespace {

bool& poison_flag() {
  static bool poison = [] {
    const char* v = std::getenv("GPULAB_NN_POISON");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return poison;
}

class DefaultAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes, Device device) override { return detail::ops_for(device).allocate(bytes); }
  void release(void* p, std::size_t, Device device) override {
    if (p != nullptr) detail::ops_for(device).release(p);
  }
};

Allocator*& installed() {
  static Allocator* a = nullptr;
  return a;
}

RoundingHook& rounding() {
  static RoundingHook hook;
  return hook;
}

void same_device(const Tensor& a, const Tensor& b, const char* what) {
  if (a.device() != b.device()) throw std::invalid_argument(std::string(what) + ": " + a.shape() + " and " + b.shape() + " are on different devices");
}

/// BLAS takes int dimensions.
int blas_int(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max())) throw std::invalid_argument(std::string(what) + ": a dimension over 2³¹ − 1");
  return static_cast<int>(n);
}

}  // namespace

const char* to_string(Device device) { return device == Device::kHost ? "host" : "gpu"; }

Allocator::~Allocator() = default;

Allocator& default_allocator() {
  static DefaultAllocator a;
  return a;
}

Allocator* set_allocator(Allocator* allocator) {
  Allocator* previous = installed();
  installed() = allocator;
  return previous;
}

bool set_poison_on_free(bool poison) {
  const bool previous = poison_flag();
  poison_flag() = poison;
  return previous;
}

Allocator& current_allocator() { return installed() != nullptr ? *installed() : default_allocator(); }

Tensor Tensor::uninitialized(std::size_t rows, std::size_t cols, Device device) {
  Tensor t;
  t.rows_ = rows;
  t.cols_ = cols;
  t.device_ = device;
  Allocator& allocator = current_allocator();
  t.data_ = static_cast<float*>(allocator.allocate(t.size() * sizeof(float), device));
  t.allocator_ = &allocator;  // set once there is memory to give back
  return t;
}

Tensor::Tensor(std::size_t rows, std::size_t cols, Device device) : Tensor(uninitialized(rows, cols, device)) { fill(0.0f); }

Tensor Tensor::view(float* data, std::size_t rows, std::size_t cols, Device device) {
  if (data == nullptr && rows * cols != 0) throw std::invalid_argument("Tensor::view: a null buffer for " + std::to_string(rows) + " × " + std::to_string(cols));
  Tensor t;
  t.data_ = data;
  t.rows_ = rows;
  t.cols_ = cols;
  t.device_ = device;
  return t;  // no allocator: release() leaves the memory alone
}

Tensor Tensor::from(const std::vector<float>& values, std::size_t rows, std::size_t cols, Device device) {
  Tensor t = uninitialized(rows, cols, device);
  t.assign(values);
  return t;
}

void Tensor::release() noexcept {
  if (allocator_ == nullptr) return;
  // Poisoned before it goes back, whatever the allocator does with it (a caching allocator keeps
  // it): a tensor read through a stale pointer computes NaNs.
  if (poison_flag() && data_ != nullptr) {
    try {
      detail::ops_for(device_).fill(data_, size(), std::nanf(""));
    } catch (...) {  // a failing device (already reported by the operation that broke it)
    }
  }
  allocator_->release(data_, size() * sizeof(float), device_);
  allocator_ = nullptr;
  data_ = nullptr;
}

Tensor::~Tensor() { release(); }

Tensor::Tensor(Tensor&& other) noexcept
    : data_(other.data_), rows_(other.rows_), cols_(other.cols_), device_(other.device_), allocator_(other.allocator_) {
  other.data_ = nullptr;
  other.rows_ = other.cols_ = 0;
  other.allocator_ = nullptr;
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    rows_ = other.rows_;
    cols_ = other.cols_;
    device_ = other.device_;
    allocator_ = other.allocator_;
    other.data_ = nullptr;
    other.rows_ = other.cols_ = 0;
    other.allocator_ = nullptr;
  }
  return *this;
}

std::string Tensor::shape() const {
  return std::to_string(rows_) + " × " + std::to_string(cols_) + " on the " + to_string(device_);
}

std::vector<float> Tensor::to_host() const {
  std::vector<float> v(size());
  detail::ops_for(device_).copy_out(v.data(), data_, size());
  return v;
}

Tensor Tensor::to(Device device) const {
  Tensor t = uninitialized(rows_, cols_, device);
  if (device_ == Device::kHost) {
    detail::ops_for(device).copy_in(t.data_, data_, size());
  } else if (device == Device::kHost) {
    detail::ops_for(device_).copy_out(t.data_, data_, size());
  } else {
    detail::ops_for(device).copy(t.data_, data_, size());
  }
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = uninitialized(rows_, cols_, device_);
  detail::ops_for(device_).copy(t.data_, data_, size());
  return t;
}

void Tensor::fill(float value) { detail::ops_for(device_).fill(data_, size(), value); }

void Tensor::assign(const std::vector<float>& values) {
  if (values.size() != size()) {
    throw std::invalid_argument("Tensor::assign: " + std::to_string(values.size()) + " values for a " + shape() + " tensor");
  }
  detail::ops_for(device_).copy_in(data_, values.data(), size());
}

RoundingHook set_rounding(RoundingHook hook) {
  RoundingHook previous = std::move(rounding());
  rounding() = std::move(hook);
  return previous;
}

void round_in_place(Tensor& t) {
  if (!rounding() || t.device() != Device::kHost) return;
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = rounding()(t.data()[i]);
}

void gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, float alpha, float beta) {
  same_device(a, b, "gemm");
  same_device(a, c, "gemm");
  const std::size_t m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols();
  const std::size_t kb = tb ? b.cols() : b.rows(), n = tb ? b.rows() : b.cols();
  if (k != kb || c.rows() != m || c.cols() != n) {
    throw std::invalid_argument("gemm: op(A) " + std::to_string(m) + " × " + std::to_string(k) + ", op(B) " + std::to_string(kb) + " × " +
                                std::to_string(n) + ", C " + c.shape());
  }
  blas_int(m, "gemm");
  blas_int(n, "gemm");
  blas_int(k, "gemm");
  detail::ops_for(a.device()).gemm(ta, tb, m, n, k, alpha, a.data(), b.data(), beta, c.data());
}

namespace detail {
void check_like(const Tensor& a, const Tensor& b, const std::string& what) {
  if (a.rows() != b.rows() || a.cols() != b.cols() || a.device() != b.device()) throw std::invalid_argument(what + ": " + a.shape() + " and " + b.shape());
}
}  // namespace detail

void axpy(float alpha, const Tensor& x, Tensor& y) {
  detail::check_like(x, y, "axpy");
  detail::ops_for(x.device()).axpy(alpha, x.data(), y.data(), x.size());
}

void scale(Tensor& x, float alpha) { detail::ops_for(x.device()).scale(x.data(), x.size(), alpha); }

std::string host_gemm_backend() { return detail::plain_in_use() ? "a plain loop (no OpenBLAS at build time, or forced)" : "OpenBLAS (1 thread)"; }

void use_plain_host_gemm(bool plain) { detail::use_plain(plain); }

}  // namespace gpulab::nn
