// Layers without parameters: ReLU, MaxPool2d, AvgPool2d, Flatten.
#pragma once

#include "nn/module/module.h"
#include "ops/pooling/pool2d.h"

namespace minidet::nn {

class ReLU final : public UnaryModule {
 public:
  ReLU() : UnaryModule("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

class MaxPool2d final : public UnaryModule {
 public:
  explicit MaxPool2d(Pool2dOptions options) : UnaryModule("MaxPool2d"), options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  Pool2dOptions options;
};

class AvgPool2d final : public UnaryModule {
 public:
  explicit AvgPool2d(Pool2dOptions options) : UnaryModule("AvgPool2d"), options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  Pool2dOptions options;
};

// Flattens dims start_dim..end_dim into one: (N, C, H, W) -> (N, C*H*W) by default.
class Flatten final : public UnaryModule {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : UnaryModule("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) override;
  int64_t start_dim, end_dim;
};

}  // namespace minidet::nn
