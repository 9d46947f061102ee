#include "nn/init/init.h"

#include <cmath>

#include "core/factories.h"
#include "ops/elementwise/binary.h"

namespace minidet::nn::init {

std::pair<int64_t, int64_t> fan_in_and_out(const Tensor& weight) {
  MINIDET_CHECK(weight.dim() >= 2, "init: fan in/out need a weight with at least 2 dims, got shape ",
                weight.sizes());
  int64_t receptive = 1;
  for (int64_t d = 2; d < weight.dim(); ++d) receptive *= weight.size(d);
  return {weight.size(1) * receptive, weight.size(0) * receptive};
}

double gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity == "conv2d") return 1.0;
  MINIDET_FAIL("init::gain: unknown nonlinearity '", nonlinearity, "'");
}

namespace {
// Draws on the host in float64 (the same numbers for every dtype and device), then copies in.
void fill_from(const Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  t.copy_(values);
}
int64_t pick_fan(const Tensor& t, FanMode mode) {
  const auto [fan_in, fan_out] = fan_in_and_out(t);
  const int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  MINIDET_CHECK(fan > 0, "init: zero fan for a weight of shape ", t.sizes());
  return fan;
}
}  // namespace

void uniform_(const Tensor& t, double low, double high, Generator* generator) {
  MINIDET_CHECK(low <= high, "init::uniform_: low ", low, " > high ", high);
  fill_from(t, rand(t.sizes(), kFloat64, generator) * (high - low) + low);
}

void normal_(const Tensor& t, double mean, double std, Generator* generator) {
  MINIDET_CHECK(std >= 0, "init::normal_: negative std ", std);
  fill_from(t, randn(t.sizes(), kFloat64, generator) * std + mean);
}

void constant_(const Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
}

void kaiming_uniform_(const Tensor& t, double a, FanMode mode, const std::string& nonlinearity, Generator* g) {
  const double bound = gain(nonlinearity, a) * std::sqrt(3.0 / static_cast<double>(pick_fan(t, mode)));
  uniform_(t, -bound, bound, g);
}

void kaiming_normal_(const Tensor& t, double a, FanMode mode, const std::string& nonlinearity, Generator* g) {
  normal_(t, 0.0, gain(nonlinearity, a) / std::sqrt(static_cast<double>(pick_fan(t, mode))), g);
}

void xavier_uniform_(const Tensor& t, double gain_value, Generator* g) {
  const auto [fan_in, fan_out] = fan_in_and_out(t);
  const double bound = gain_value * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  uniform_(t, -bound, bound, g);
}

void xavier_normal_(const Tensor& t, double gain_value, Generator* g) {
  const auto [fan_in, fan_out] = fan_in_and_out(t);
  normal_(t, 0.0, gain_value * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), g);
}

}  // namespace minidet::nn::init
