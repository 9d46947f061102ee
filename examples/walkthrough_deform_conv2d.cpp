// walkthrough_deform_conv2d: one output position of a deformable convolution (DCNv2), step by step.
//
// On a 1-channel 4x4 image with a 3x3 kernel (padding 1), for output position (1, 2) it prints
//   1. the regular grid the kernel would read, tap by tap;
//   2. the learned offsets (dy, dx) and the deformed sampling points;
//   3. for each point its four neighbours, their bilinear weights and values, the sample S and the
//      column entry m * S (the mask m scales it); then the output as weight . column + bias;
//   4. backward with dL/dy = 1 at that position: the offset gradient of one tap derived by hand,
//        d dy = m * w_k * dS/dy,   dS/dy = (1-lx)(v10 - v00) + lx (v11 - v01)     (same for dx)
//      next to what deform_conv2d's backward computed.
// The math is in ops/deform_conv2d/deform_conv2d.h.
//
//   walkthrough_deform_conv2d [--tap K]    (K in 0..8, the tap whose offset gradient is derived; default 3)
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/factories.h"
#include "ops/deform_conv2d/deform_conv2d.h"

using namespace minidet;

namespace {

constexpr int64_t kSize = 4, kKernel = 3, kPad = 1, kOutY = 1, kOutX = 2;
const std::vector<double> kImage = {1, 3, 2, 0,  //
                                    4, 1, 5, 2,  //
                                    0, 2, 3, 6,  //
                                    1, 4, 0, 2};
const std::vector<double> kWeight = {0.5, -1, 0.25, 1, 2, -0.5, 0.75, -0.25, 1.5};
const double kBias = 0.1;
// Offsets and mask of output (1, 2), one per tap k = i*3 + j. Tap 8 is pushed below the image (y >= 4):
// it samples nothing.
const std::vector<double> kDy = {0.3, -0.6, 1.2, -0.25, 0.5, 0.7, -1.4, 0.15, 2.6};
const std::vector<double> kDx = {-0.4, 0.25, 0.8, 1.1, -0.3, 0.45, -0.7, 1.6, 0.35};
const std::vector<double> kMask = {0.9, 0.6, 1.0, 0.8, 0.5, 0.7, 0.95, 0.4, 0.85};

double pixel(int64_t y, int64_t x) {
  return y >= 0 && y < kSize && x >= 0 && x < kSize ? kImage[y * kSize + x] : 0.0;
}

struct Sample {
  double y, x, ly = 0, lx = 0, v[4] = {0, 0, 0, 0}, value = 0;
  int64_t y0 = 0, x0 = 0;
  bool valid;
};

// Bilinear sampling with minidet's rule: a point at y <= -1, y >= H, x <= -1 or x >= W reads 0; a
// neighbour outside the image reads 0.
Sample sample_at(double y, double x) {
  Sample s{y, x};
  s.valid = y > -1 && y < kSize && x > -1 && x < kSize;
  if (!s.valid) return s;
  s.y0 = static_cast<int64_t>(std::floor(y));
  s.x0 = static_cast<int64_t>(std::floor(x));
  s.ly = y - s.y0;
  s.lx = x - s.x0;
  for (int r = 0; r < 4; ++r) s.v[r] = pixel(s.y0 + r / 2, s.x0 + r % 2);
  s.value = (1 - s.ly) * ((1 - s.lx) * s.v[0] + s.lx * s.v[1]) + s.ly * ((1 - s.lx) * s.v[2] + s.lx * s.v[3]);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"deformable convolution, one output position step by step"};
  int tap = 3;
  app.add_option("--tap", tap, "tap whose offset gradient is derived (0..8)")->check(CLI::Range(0, 8));
  CLI11_PARSE(app, argc, argv);

  std::printf("Input (1 x 1 x 4 x 4), kernel 3x3, padding 1, stride 1, output position (p, q) = (%lld, %lld)\n",
              (long long)kOutY, (long long)kOutX);
  for (int64_t y = 0; y < kSize; ++y) {
    for (int64_t x = 0; x < kSize; ++x) std::printf("%6.2f", pixel(y, x));
    std::printf("\n");
  }

  std::printf("\n1-2. Regular grid (p - pad + i, q - pad + j), offsets (dy, dx) and deformed points:\n");
  std::printf("%4s %6s %12s %16s %18s\n", "tap", "(i,j)", "grid (y,x)", "offset (dy,dx)", "point (y,x)");
  std::vector<Sample> samples;
  for (int k = 0; k < kKernel * kKernel; ++k) {
    const int64_t i = k / kKernel, j = k % kKernel;
    const double grid_y = static_cast<double>(kOutY - kPad + i), grid_x = static_cast<double>(kOutX - kPad + j);
    samples.push_back(sample_at(grid_y + kDy[k], grid_x + kDx[k]));
    std::printf("%4d  (%lld,%lld) (%4.0f,%4.0f)   (%5.2f,%5.2f)    (%5.2f,%5.2f)%s\n", k, (long long)i, (long long)j,
                grid_y, grid_x, kDy[k], kDx[k], samples[k].y, samples[k].x, samples[k].valid ? "" : "  outside: 0");
  }

  std::printf("\n3. Bilinear sampling: y0 = floor(y), ly = y - y0 (same for x); neighbours v00 v01 v10 v11 at\n"
              "   (y0,x0) (y0,x0+1) (y0+1,x0) (y0+1,x0+1) with weights (1-ly)(1-lx), (1-ly)lx, ly(1-lx), ly lx:\n");
  std::printf("%4s %9s %11s %26s %26s %8s %6s %9s\n", "tap", "(y0,x0)", "(ly,lx)", "weights", "values", "S", "mask",
              "column");
  double output = kBias;
  for (int k = 0; k < kKernel * kKernel; ++k) {
    const Sample& s = samples[k];
    const double column = kMask[k] * s.value;
    output += kWeight[k] * column;
    if (!s.valid) {
      std::printf("%4d %68s %8.4f %6.2f %9.4f\n", k, "(no sample)", 0.0, kMask[k], 0.0);
      continue;
    }
    const double w[4] = {(1 - s.ly) * (1 - s.lx), (1 - s.ly) * s.lx, s.ly * (1 - s.lx), s.ly * s.lx};
    std::printf("%4d  (%2lld,%2lld) (%4.2f,%4.2f)  %5.3f %5.3f %5.3f %5.3f  %5.2f %5.2f %5.2f %5.2f %8.4f %6.2f %9.4f\n",
                k, (long long)s.y0, (long long)s.x0, s.ly, s.lx, w[0], w[1], w[2], w[3], s.v[0], s.v[1], s.v[2],
                s.v[3], s.value, kMask[k], column);
  }
  std::printf("   (a neighbour outside the image reads 0; the column entry is mask * S)\n");

  // The same computation through the op: offsets and mask are zero / one everywhere except position (1, 2).
  const int64_t taps = kKernel * kKernel, out_hw = kSize * kSize, position = kOutY * kSize + kOutX;
  std::vector<double> offset_values(2 * taps * out_hw, 0.0), mask_values(taps * out_hw, 1.0);
  for (int k = 0; k < taps; ++k) {
    offset_values[(2 * k) * out_hw + position] = kDy[k];
    offset_values[(2 * k + 1) * out_hw + position] = kDx[k];
    mask_values[k * out_hw + position] = kMask[k];
  }
  const Tensor x = from_vector<double>(kImage, {1, 1, kSize, kSize}).requires_grad_();
  const Tensor offset = from_vector<double>(offset_values, {1, 2 * taps, kSize, kSize}).requires_grad_();
  const Tensor mask = from_vector<double>(mask_values, {1, taps, kSize, kSize}).requires_grad_();
  const Tensor weight = from_vector<double>(kWeight, {1, 1, kKernel, kKernel}).requires_grad_();
  const Tensor bias = from_vector<double>({kBias}, {1}).requires_grad_();
  const Tensor y = deform_conv2d(x, offset, weight, bias, mask, DeformConv2dOptions().set_padding(kPad));
  const double op_output = y.to_vector<double>()[position];
  std::printf("\n   output = bias + sum_k weight_k * column_k = %.6f    deform_conv2d: %.6f\n", output, op_output);

  std::printf("\n4. Backward with dL/dy[%lld, %lld] = 1 (0 elsewhere), tap %d:\n", (long long)kOutY, (long long)kOutX,
              tap);
  std::vector<double> upstream(out_hw, 0.0);
  upstream[position] = 1.0;
  y.backward(from_vector<double>(upstream, {1, 1, kSize, kSize}));
  const Sample& s = samples[tap];
  const double grad_column = kWeight[tap] * 1.0;  // dcols = W^T dY
  std::printf("   dL/dcolumn = weight_%d * dL/dy = %.4f\n", tap, grad_column);
  double by_hand_dy = 0.0, by_hand_dx = 0.0;
  if (!s.valid) {
    std::printf("   the point lies outside the image: S = 0 around it, so its offset gradient is 0\n");
  } else {
    const double ds_dy = (1 - s.lx) * (s.v[2] - s.v[0]) + s.lx * (s.v[3] - s.v[1]);
    const double ds_dx = (1 - s.ly) * (s.v[1] - s.v[0]) + s.ly * (s.v[3] - s.v[2]);
    std::printf("   dS/dy = (1-lx)(v10 - v00) + lx (v11 - v01) = %.2f*(%.2f - %.2f) + %.2f*(%.2f - %.2f) = %.4f\n",
                1 - s.lx, s.v[2], s.v[0], s.lx, s.v[3], s.v[1], ds_dy);
    std::printf("   dS/dx = (1-ly)(v01 - v00) + ly (v11 - v10) = %.2f*(%.2f - %.2f) + %.2f*(%.2f - %.2f) = %.4f\n",
                1 - s.ly, s.v[1], s.v[0], s.ly, s.v[3], s.v[2], ds_dx);
    by_hand_dy = kMask[tap] * grad_column * ds_dy;
    by_hand_dx = kMask[tap] * grad_column * ds_dx;
    std::printf("   d dy = mask * dL/dcolumn * dS/dy = %.2f * %.4f * %.4f = %.6f\n", kMask[tap], grad_column, ds_dy,
                by_hand_dy);
    std::printf("   d dx = mask * dL/dcolumn * dS/dx = %.2f * %.4f * %.4f = %.6f\n", kMask[tap], grad_column, ds_dx,
                by_hand_dx);
    std::printf("   d mask = dL/dcolumn * S = %.4f * %.4f = %.6f\n", grad_column, s.value, grad_column * s.value);
  }
  const std::vector<double> grad_offset = offset.grad().to_vector<double>();
  const double op_dy = grad_offset[(2 * tap) * out_hw + position], op_dx = grad_offset[(2 * tap + 1) * out_hw + position];
  const double op_dmask = mask.grad().to_vector<double>()[tap * out_hw + position];
  std::printf("   deform_conv2d backward:  d dy = %.6f   d dx = %.6f   d mask = %.6f\n", op_dy, op_dx, op_dmask);
  const bool agree = std::abs(op_dy - by_hand_dy) < 1e-12 && std::abs(op_dx - by_hand_dx) < 1e-12 &&
                     std::abs(op_output - output) < 1e-12;
  std::printf("   %s\n", agree ? "by hand and by the op agree" : "MISMATCH between the hand derivation and the op");
  return agree ? 0 : 1;
}
