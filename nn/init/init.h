// Weight initialisers, all drawn from a seeded minidet::Generator (the default one when null), so a model
// starts from the same weights on every machine. They write in place without recording gradients.
//
//   fan_in  = size(1) * receptive field   (inputs feeding one output unit; for conv: C_in/groups * kh * kw)
//   fan_out = size(0) * receptive field
//   kaiming_uniform_: U(-b, b),  b = gain * sqrt(3 / fan)          (He et al. 2015)
//   kaiming_normal_:  N(0, s^2), s = gain / sqrt(fan)
//   xavier_uniform_:  U(-b, b),  b = gain * sqrt(6 / (fan_in + fan_out))   (Glorot & Bengio 2010)
//   xavier_normal_:   N(0, s^2), s = gain * sqrt(2 / (fan_in + fan_out))
//   gain("relu") = sqrt(2), gain("leaky_relu", a) = sqrt(2 / (1 + a^2)), gain("tanh") = 5/3, else 1.
//
// PyTorch's default for Linear and Conv2d weights is kaiming_uniform_(a = sqrt(5)), i.e. U(+-1/sqrt(fan_in)),
// and U(+-1/sqrt(fan_in)) for their biases; minidet's layers do the same.
#pragma once

#include <string>
#include <utility>

#include "core/generator.h"
#include "core/tensor.h"

namespace minidet::nn::init {

enum class FanMode { FanIn, FanOut };

std::pair<int64_t, int64_t> fan_in_and_out(const Tensor& weight);
double gain(const std::string& nonlinearity, double param = 0.01);

void uniform_(const Tensor& t, double low, double high, Generator* generator = nullptr);
void normal_(const Tensor& t, double mean, double std, Generator* generator = nullptr);
void constant_(const Tensor& t, double value);
void kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                      const std::string& nonlinearity = "leaky_relu", Generator* generator = nullptr);
void kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                     const std::string& nonlinearity = "relu", Generator* generator = nullptr);
void xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* generator = nullptr);
void xavier_normal_(const Tensor& t, double gain = 1.0, Generator* generator = nullptr);

}  // namespace minidet::nn::init
