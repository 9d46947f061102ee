// Linear: y = x W^T + b, for x of shape (..., in_features). weight (out, in), bias (out).
// Initialised like PyTorch: W ~ U(+-1/sqrt(in)) (kaiming_uniform_ with a = sqrt(5)), b ~ U(+-1/sqrt(in)).
#pragma once

#include "core/generator.h"
#include "nn/module/module.h"

namespace minidet::nn {

class Linear final : public UnaryModule {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* generator = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Tensor weight, bias;  // bias undefined when constructed without one
};

}  // namespace minidet::nn
