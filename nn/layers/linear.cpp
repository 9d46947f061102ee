#include "nn/layers/linear.h"

#include <cmath>

#include "core/factories.h"
#include "nn/init/init.h"
#include "ops/matmul/linear.h"

namespace minidet::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Generator* generator)
    : UnaryModule("Linear") {
  MINIDET_CHECK(in_features > 0 && out_features > 0, "Linear: feature counts must be positive, got ", in_features,
                " and ", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", generator);
  if (with_bias) {
    bias = register_parameter("bias", empty({out_features}));
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound, generator);
  }
}

Tensor Linear::forward(const Tensor& input) { return linear(input, weight, bias); }

std::string Linear::extra_repr() const {
  return "in=" + std::to_string(weight.size(1)) + ", out=" + std::to_string(weight.size(0)) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

}  // namespace minidet::nn
