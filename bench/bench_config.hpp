/// @file bench_config.hpp
/// @brief What gpulab's side-by-side programs share: the configuration both sides read
/// (bench/peers.json), a median, the MLP's batches, and the export that PyTorch's peer checks
/// gradients against (a JSON index beside a file of little-endian float32 arrays).
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpulab/nn.hpp"

namespace gpulab::bench {

/// bench/peers.json (or @p path), parsed; a clear error when it cannot be read.
inline nlohmann::json load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the side-by-side configuration " + path);
  return nlohmann::json::parse(in);
}

/// The median of @p v (v is reordered).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/// The indices of batch @p step of @p batch samples for @p rank of @p ranks: consecutive blocks
/// of the data set, rank after rank, wrapping at its end (the peer takes the same ones).
inline std::vector<std::size_t> batch_indices(std::size_t samples, std::size_t batch, int ranks, int rank, std::size_t step) {
  std::vector<std::size_t> idx(batch);
  const std::size_t first = (step * static_cast<std::size_t>(ranks) + static_cast<std::size_t>(rank)) * batch;
  for (std::size_t i = 0; i < batch; ++i) idx[i] = (first + i) % samples;
  return idx;
}

/// Named float32 arrays written as STEM.bin with an index STEM.json: {"arrays": [{"name", "rows",
/// "cols", "offset"}], ...extra}; offsets count floats.
class Export {
 public:
  void add(const std::string& name, std::size_t rows, std::size_t cols, const std::vector<float>& values) {
    if (values.size() != rows * cols) throw std::logic_error("Export::add: " + name + " has the wrong size");
    index_.push_back({{"name", name}, {"rows", rows}, {"cols", cols}, {"offset", data_.size()}});
    data_.insert(data_.end(), values.begin(), values.end());
  }
  void add(const std::string& name, const nn::Tensor& t) { add(name, t.rows(), t.cols(), t.to_host()); }
  void write(const std::string& dir, const std::string& stem, nlohmann::json extra) const {
    std::ofstream bin(dir + "/" + stem + ".bin", std::ios::binary);
    bin.write(reinterpret_cast<const char*>(data_.data()), static_cast<std::streamsize>(data_.size() * sizeof(float)));
    extra["arrays"] = index_;
    std::ofstream(dir + "/" + stem + ".json") << extra.dump(1) << "\n";
    if (!bin || !std::ofstream(dir + "/" + stem + ".json", std::ios::app)) throw std::runtime_error("cannot write " + dir + "/" + stem + ".*");
  }

 private:
  nlohmann::json index_ = nlohmann::json::array();
  std::vector<float> data_;
};

/// One forward and backward of @p model, layer by layer, keeping what the peer's check needs: the
/// loss, each layer's input (the ReLUs' inputs say which side of 0 each unit took), the logits,
/// and the gradient of each layer's output (dy). The parameters' gradients accumulate as
/// Sequential::backward accumulates them.
struct Trace {
  double loss = 0.0;
  std::vector<nn::Saved> saved;
  nn::Tensor logits;
  std::vector<nn::Tensor> dy;  ///< dy[l]: dL/d(output of layer l)
};
inline Trace trace_step(nn::Sequential& model, const nn::Tensor& x, const std::vector<int>& labels) {
  Trace t;
  t.logits = model.forward(x, t.saved);
  nn::Tensor g;
  t.loss = nn::softmax_cross_entropy(t.logits, labels, &g);
  t.dy.resize(model.size());
  for (std::size_t l = model.size(); l-- > 0;) {
    t.dy[l] = g.clone();
    g = model.layer(l).backward(g, t.saved[l]);
  }
  return t;
}

/// What the check reads of a trace for each Linear l (even l, ReLUs between): "relu_input:<l+1>"
/// (the Linear's output where a ReLU follows), "dy:<l>", and "logits". @p gather turns one
/// rank's rows into every rank's (rank 0's result; a copy on one process).
template <class Gather>
void add_trace(Export& out, const Trace& t, std::size_t layers, Gather gather) {
  for (std::size_t l = 0; l < layers; l += 2) {
    if (l + 1 < layers) out.add("relu_input:" + std::to_string(l + 1), gather(t.saved[l + 1].tensors.at(0)));
    out.add("dy:" + std::to_string(l), gather(t.dy[l]));
  }
  out.add("logits", gather(t.logits));
}

}  // namespace gpulab::bench
