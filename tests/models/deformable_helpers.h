// Test helper shared by the models' gradient checks.
#pragma once

#include <string>

#include "core/factories.h"
#include "core/generator.h"
#include "nn/module/module.h"
#include "ops/elementwise/binary.h"

namespace minidet::test {

// Gives every offset (and mask) predictor small random weights and biases, so that the deformable convs
// sample at fractional positions: away from the integer grid, where bilinear sampling has its kinks.
inline void perturb_offset_predictors(nn::Module& module, uint64_t seed) {
  Generator gen(seed);
  NoGradGuard no_grad;
  for (const auto& [name, p] : module.named_parameters()) {
    if (name.find("offset_conv") == std::string::npos) continue;
    const double scale = name.find("bias") != std::string::npos ? 0.5 : 0.1;
    p.copy_(mul(randn(p.sizes(), p.options(), &gen), scale));
  }
}

}  // namespace minidet::test
