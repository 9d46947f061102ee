// deform_conv2d: float64 gradient checks over every input (odd shapes, both offset and convolution groups,
// non-contiguous operands), hand-computed samples, equality with conv2d at zero offsets, chunking, CUDA
// parity and determinism, errors.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/conv2d/conv2d.h"
#include "ops/deform_conv2d/deform_conv2d.h"
#include "ops/elementwise/binary.h"
#include "tests/support.h"
#if MINIDET_WITH_CUDA
#include "core/cuda/launch.h"  // cuda::Int64IndexScope, cuda::fits_int32
#endif

using namespace minidet;
using autograd::TensorList;
using minidet::test::allclose;
using minidet::test::max_abs_diff;

namespace {

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

// Offsets in (-2, 2) whose fractional part stays in [0.15, 0.85]: every sample lands away from the integer
// positions where bilinear interpolation has a kink (and so away from the -1 and H borders, integers too).
Tensor random_offsets(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> values(n);
  for (double& v : values) v = static_cast<double>(g.next_int(-2, 2)) + 0.15 + 0.7 * g.next_uniform();
  return from_vector<double>(values, shape).to(dtype);
}

// Mask values in [0.2, 1.2): DCNv2 masks are sigmoids, but any value is allowed.
Tensor random_mask(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return (rand(shape, dtype, &g) + 0.2);
}

// The same values seen through a permuted buffer: channels last in memory, read as NCHW.
Tensor non_contiguous(const Tensor& t) {
  const Tensor nhwc = t.permute({0, 2, 3, 1}).contiguous();
  Tensor view = nhwc.permute({0, 3, 1, 2});
  REQUIRE(!view.is_contiguous());
  return view;
}

struct DeformCase {
  std::string what;
  int64_t batch, in_channels, out_channels, groups, offset_groups, kernel_h, kernel_w, height, width;
  DeformConv2dOptions options;
  int64_t out_h() const {
    return (height + 2 * options.pad_h - options.dilation_h * (kernel_h - 1) - 1) / options.stride_h + 1;
  }
  int64_t out_w() const {
    return (width + 2 * options.pad_w - options.dilation_w * (kernel_w - 1) - 1) / options.stride_w + 1;
  }
  Shape input() const { return {batch, in_channels, height, width}; }
  Shape weight() const { return {out_channels, in_channels / groups, kernel_h, kernel_w}; }
  Shape offset() const { return {batch, 2 * offset_groups * kernel_h * kernel_w, out_h(), out_w()}; }
  Shape mask() const { return {batch, offset_groups * kernel_h * kernel_w, out_h(), out_w()}; }
};

// An odd configuration: every size different, both kinds of groups, a non-square kernel, and
// stride, padding and dilation that differ between the two axes.
DeformCase odd_case(int64_t batch) {
  return {"odd configuration batch " + std::to_string(batch), batch, 6, 2, 2, 3, 3, 2, 5, 4,
          DeformConv2dOptions().set_stride(2, 1).set_padding(1, 0).set_dilation(2, 1)};
}

DeformCase square_case() {
  return {"square 3x3 padding 1", 2, 4, 3, 1, 2, 3, 3, 5, 5, DeformConv2dOptions().set_padding(1)};
}

void run_gradcheck(const DeformCase& c, bool with_mask, uint64_t seed) {
  CAPTURE(c.what);
  CAPTURE(with_mask);
  const Tensor x = non_contiguous(random(c.input(), kFloat64, seed)).requires_grad_();
  const Tensor offset = non_contiguous(random_offsets(c.offset(), kFloat64, seed + 1)).requires_grad_();
  const Tensor w = random(c.weight(), kFloat64, seed + 2).transpose(2, 3).contiguous().transpose(2, 3).requires_grad_();
  const Tensor b = random({c.out_channels}, kFloat64, seed + 3).requires_grad_();
  const Tensor m = with_mask ? non_contiguous(random_mask(c.mask(), kFloat64, seed + 4)).requires_grad_() : Tensor();
  const DeformConv2dOptions options = c.options;
  const auto fn = [options](const TensorList& in) { return deform_conv2d(in[0], in[1], in[2], in[3], in[4], options); };
  const auto result = autograd::gradcheck(fn, {x, offset, w, b, m});
  MESSAGE(c.what << std::string(with_mask ? " with mask" : " without mask") << ": max_abs_error "
                 << result.max_abs_error << " over " << result.entries_checked << " entries");
  CHECK_MESSAGE(result.ok, result.report);
}

}  // namespace

TEST_CASE("gradcheck/deform_conv2d: odd configuration with and without mask in float64") {
  for (int64_t batch : {1, 3})
    for (bool with_mask : {false, true}) run_gradcheck(odd_case(batch), with_mask, 100 + batch * 10 + with_mask);
}

TEST_CASE("gradcheck/deform_conv2d: square 3x3 padding 1 with and without mask in float64") {
  for (bool with_mask : {false, true}) run_gradcheck(square_case(), with_mask, 200 + with_mask);
}

TEST_CASE("values/deform_conv2d: samples of a 1x1 kernel by hand") {
  // x[y][x] = 3y + x + 1 is linear, so where all four neighbours are inside, bilinear interpolation is
  // exact: S(y, x) = 3y + x + 1, dS/dy = 3, dS/dx = 1.
  const Tensor x = arange(1, 10, 1, kFloat64).view({1, 1, 3, 3}).requires_grad_();
  const Tensor w = from_vector<double>({2}, {1, 1, 1, 1}).requires_grad_();
  std::vector<double> dy(9, 0.0), dx(9, 0.0), mask(9, 1.0);
  dy[0] = 0.5, dx[0] = 0.25;  // (0, 0) reads (0.5, 0.25): 2.75
  dy[8] = 0.5;                // (2, 2) reads (2.5, 2): half of x[2][2] = 9, half of the row below (0)
  dy[1] = -1.5;               // (0, 1) reads (-1.5, 1): beyond -1, contributes 0
  mask[4] = 0.5;              // (1, 1) reads x[1][1] = 5 at half weight
  std::vector<double> offset_values(dy);
  offset_values.insert(offset_values.end(), dx.begin(), dx.end());
  const Tensor offset = from_vector<double>(offset_values, {1, 2, 3, 3}).requires_grad_();
  const Tensor m = from_vector<double>(mask, {1, 1, 3, 3}).requires_grad_();
  const Tensor y = deform_conv2d(x, offset, w, Tensor(), m);
  CHECK(y.to_vector<double>() ==
        std::vector<double>{2 * 2.75, 0, 2 * 3, 2 * 4, 2 * 0.5 * 5, 2 * 6, 2 * 7, 2 * 8, 2 * 4.5});
  const Tensor grad = zeros({1, 1, 3, 3}, kFloat64);
  grad.view({9}).narrow(0, 0, 1).fill_(1.0);  // only output (0, 0)
  y.backward(grad);
  // Output (0, 0): dcols = w * 1 = 2; its sample (0.5, 0.25) splits 2 over four pixels with weights
  // (1-0.5)(1-0.25) = 0.375, (1-0.5)(0.25) = 0.125, 0.375, 0.125.
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0.75, 0.25, 0, 0.75, 0.25, 0, 0, 0, 0});
  // d offset = dcols * (dS/dy, dS/dx) = 2 * (3, 1); d mask = dcols * S = 2 * 2.75; dW = S * m = 2.75.
  const std::vector<double> grad_offset = offset.grad().to_vector<double>();
  CHECK(grad_offset[0] == 6.0);
  CHECK(grad_offset[9] == 2.0);
  CHECK(m.grad().to_vector<double>()[0] == 5.5);
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2.75});
  // Only output (0, 0) had a gradient: every other offset and mask gradient is 0.
  double others = 0;
  for (int k = 1; k < 18; ++k) others += k == 9 ? 0 : std::abs(grad_offset[k]);
  CHECK(others == 0.0);
}

TEST_CASE("values/deform_conv2d: the border sample and its one-sided gradient by hand") {
  // Output (2, 2) reads (2.5, 2) of x[y][x] = 3y + x + 1: y0 = 2, ly = 0.5; the row below is outside (0).
  const Tensor x = arange(1, 10, 1, kFloat64).view({1, 1, 3, 3});
  std::vector<double> offset_values(18, 0.0);
  offset_values[8] = 0.5;
  const Tensor offset = from_vector<double>(offset_values, {1, 2, 3, 3}).requires_grad_();
  const Tensor y = deform_conv2d(x, offset, ones({1, 1, 1, 1}, kFloat64));
  CHECK(y.to_vector<double>()[8] == 4.5);
  const Tensor grad = zeros({1, 1, 3, 3}, kFloat64);
  grad.view({9}).narrow(0, 8, 1).fill_(1.0);
  y.backward(grad);
  // dS/dy = (1-lx)(v10 - v00) + lx (v11 - v01) = 0 - 9; dS/dx = (1-ly)(v01 - v00) + ly (v11 - v10) with
  // v01 (column 3) and the row below outside: 0.5 * (0 - 9) + 0.5 * 0 = -4.5 (x = 2 is an integer: the
  // derivative from the right).
  CHECK(offset.grad().to_vector<double>()[8] == -9.0);
  CHECK(offset.grad().to_vector<double>()[17] == -4.5);
}

TEST_CASE("values/deform_conv2d: a sample exactly on the -1 border has the derivative from the right") {
  // A 3x3 kernel with padding 1 and zero offsets: output (0, 1) reads tap (0, 1) at (y, x) = (-1, 1), one
  // row above the map. Its value is 0, S(-1 + e, 1) = e * x[0][1], so dS/dy = x[0][1] = 2 from the right
  // (0 from the left); along x the row is outside: 0. torchvision's deform_conv2d gives the same.
  const Tensor x = arange(1, 10, 1, kFloat64).view({1, 1, 3, 3});
  const Tensor offset = zeros({1, 18, 3, 3}, kFloat64).requires_grad_();
  std::vector<double> weight(9, 0.0);
  weight[1] = 1.0;  // only tap (0, 1)
  const Tensor y = deform_conv2d(x, offset, from_vector<double>(weight, {1, 1, 3, 3}), Tensor(), Tensor(),
                                 DeformConv2dOptions().set_padding(1));
  CHECK(y.to_vector<double>()[1] == 0.0);
  const Tensor grad = zeros({1, 1, 3, 3}, kFloat64);
  grad.view({9}).narrow(0, 1, 1).fill_(1.0);
  y.backward(grad);
  const std::vector<double> g = offset.grad().to_vector<double>();
  // Channel 2k (dy) and 2k + 1 (dx) of tap k = 1, at output position 1 of 9.
  CHECK(g[2 * 9 + 1] == 2.0);
  CHECK(g[3 * 9 + 1] == 0.0);
}

TEST_CASE("values/deform_conv2d: zero offsets and mask 1 equal conv2d with the same weights") {
  std::vector<DeformCase> cases = {odd_case(3), square_case(),
                                   {"groups 3 and one offset group", 2, 6, 6, 3, 1, 3, 3, 6, 7,
                                    DeformConv2dOptions().set_stride(2).set_padding(1)}};
  uint64_t seed = 300;
  for (const DeformCase& c : cases) {
    CAPTURE(c.what);
    const Tensor x = random(c.input(), kFloat64, seed++).requires_grad_();
    const Tensor w = random(c.weight(), kFloat64, seed++).requires_grad_();
    const Tensor b = random({c.out_channels}, kFloat64, seed++).requires_grad_();
    const Tensor g = random({c.batch, c.out_channels, c.out_h(), c.out_w()}, kFloat64, seed++);
    const DeformConv2dOptions& o = c.options;
    const Conv2dOptions conv_options = Conv2dOptions()
                                           .set_stride(o.stride_h, o.stride_w)
                                           .set_padding(o.pad_h, o.pad_w)
                                           .set_dilation(o.dilation_h, o.dilation_w)
                                           .set_groups(c.groups);
    const Tensor expected = conv2d(x, w, b, conv_options);
    expected.backward(g);
    const std::vector<Tensor> conv_grads = {x.grad(), w.grad(), b.grad()};
    for (bool with_mask : {false, true}) {
      CAPTURE(with_mask);
      x.set_grad(Tensor());
      w.set_grad(Tensor());
      b.set_grad(Tensor());
      const Tensor m = with_mask ? ones(c.mask(), kFloat64) : Tensor();
      const Tensor y = deform_conv2d(x, zeros(c.offset(), kFloat64), w, b, m, o);
      CHECK(max_abs_diff(y, expected) <= 1e-12);
      y.backward(g);
      CHECK(max_abs_diff(x.grad(), conv_grads[0]) <= 1e-12);
      CHECK(max_abs_diff(w.grad(), conv_grads[1]) <= 1e-12);
      CHECK(max_abs_diff(b.grad(), conv_grads[2]) <= 1e-12);
    }
  }
}

TEST_CASE("values/deform_conv2d: a tiny column bound gives several chunks and the unchunked result") {
  DeformCase c = odd_case(5);
  const Tensor x = random(c.input(), kFloat64, 400).requires_grad_();
  const Tensor offset = random_offsets(c.offset(), kFloat64, 401).requires_grad_();
  const Tensor w = random(c.weight(), kFloat64, 402).requires_grad_();
  const Tensor b = random({c.out_channels}, kFloat64, 403).requires_grad_();
  const Tensor m = random_mask(c.mask(), kFloat64, 404).requires_grad_();
  const Tensor g = random({c.batch, c.out_channels, c.out_h(), c.out_w()}, kFloat64, 405);
  DeformConv2dOptions chunked = c.options;
  chunked.set_max_column_bytes(2 * 36 * 6 * 8);  // two images' columns (C_in*kh*kw = 36 rows, 2x3 outputs)
  CHECK(deform_conv2d_chunk_size(x, offset, w, chunked) == 2);
  CHECK(deform_conv2d_chunk_size(x, offset, w, c.options) == 5);
  const TensorList leaves = {x, offset, w, b, m};
  std::vector<Tensor> results[2];
  for (int run = 0; run < 2; ++run) {
    for (const Tensor& t : leaves) t.set_grad(Tensor());
    const Tensor y = deform_conv2d(x, offset, w, b, m, run ? chunked : c.options);
    y.backward(g);
    results[run] = {y.detach()};
    for (const Tensor& t : leaves) results[run].push_back(t.grad());
  }
  for (size_t i = 0; i < results[0].size(); ++i) {
    CAPTURE(i);
    CHECK(max_abs_diff(results[0][i], results[1][i]) <= 1e-12);
  }
}

TEST_CASE("values/deform_conv2d: batch 0 gives an empty output and zero gradients") {
  const Tensor x = zeros({0, 4, 5, 5}).requires_grad_();
  const Tensor offset = zeros({0, 18, 5, 5}).requires_grad_();
  const Tensor w = ones({2, 4, 3, 3}).requires_grad_();
  const Tensor b = ones({2}).requires_grad_();
  const Tensor m = zeros({0, 9, 5, 5}).requires_grad_();
  const Tensor y = deform_conv2d(x, offset, w, b, m, DeformConv2dOptions().set_padding(1));
  CHECK(y.sizes() == Shape{0, 2, 5, 5});
  y.backward(zeros_like(y));
  CHECK(x.grad().sizes() == x.sizes());
  CHECK(offset.grad().sizes() == offset.sizes());
  CHECK(m.grad().sizes() == m.sizes());
  CHECK(w.grad().to_vector<float>() == std::vector<float>(72, 0.0f));
  CHECK(b.grad().to_vector<float>() == std::vector<float>(2, 0.0f));
}

TEST_CASE("values/deform_conv2d: samples outside the map and NaN offsets contribute 0") {
  const Tensor x = ones({1, 2, 4, 4}, kFloat64);
  const Tensor w = ones({1, 2, 1, 1}, kFloat64);
  // Every sample of position (p, q) moved by dy = -p - 1 (row -1: outside) or by NaN.
  Tensor offset = zeros({1, 2, 4, 4}, kFloat64);
  for (int64_t p = 0; p < 4; ++p) offset.select(1, 0).select(1, p).fill_(static_cast<double>(-p - 1));
  CHECK(deform_conv2d(x, offset, w).to_vector<double>() == std::vector<double>(16, 0.0));
  offset.fill_(std::nan(""));
  CHECK(deform_conv2d(x, offset, w).to_vector<double>() == std::vector<double>(16, 0.0));
  // Half a pixel above row 0: the row at -1 reads 0, so the sample is half of the ones.
  offset.fill_(0.0);
  offset.select(1, 0).select(1, 0).fill_(-0.5);
  const std::vector<double> y = deform_conv2d(x, offset, w).to_vector<double>();
  CHECK(y[0] == 1.0);   // 2 channels x 0.5
  CHECK(y[4] == 2.0);
}

TEST_CASE("errors/deform_conv2d: channels shapes groups output size dtypes and options") {
  const Tensor x = zeros({2, 6, 5, 5});
  const Tensor w = zeros({4, 3, 3, 3});  // groups 2
  const Tensor offset = zeros({2, 18, 3, 3}), mask = zeros({2, 9, 3, 3});
  CHECK_NOTHROW(deform_conv2d(x, offset, w, zeros({4}), mask));
  // Offset and mask channels.
  CHECK_THROWS_CONTAINING(deform_conv2d(x, zeros({2, 17, 3, 3}), w), "positive multiple of 2*kh*kw = 18");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, zeros({2, 0, 3, 3}), w), "positive multiple of 2*kh*kw = 18");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w, Tensor(), zeros({2, 18, 3, 3})), "expected mask with 9 channels");
  // Spatial sizes and batch that do not match the output.
  CHECK_THROWS_CONTAINING(deform_conv2d(x, zeros({2, 18, 4, 3}), w), "spatial size 3 x 3");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, zeros({1, 18, 3, 3}), w), "expected offset of batch 2");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w, Tensor(), zeros({2, 9, 3, 2})), "expected mask of batch 2");
  // C_in not divisible by groups or by offset groups.
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, zeros({4, 4, 3, 3})), "divisible by weight.size(1) = 4");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, zeros({3, 3, 3, 3})), "divisible by groups = 2");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, zeros({2, 72, 3, 3}), w), "divisible by offset_groups = 4");
  // Output size below 1.
  CHECK_THROWS_CONTAINING(deform_conv2d(zeros({1, 6, 2, 5}), zeros({1, 18, 1, 3}), w),
                          "the output size would be below 1");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w, Tensor(), Tensor(), DeformConv2dOptions().set_dilation(3)),
                          "the output size would be below 1");
  // Dtypes, dims, bias, options.
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset.to(kFloat64), w), "of the same dtype");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w.to(kFloat64)), "of the same dtype");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w, zeros({4}, kFloat64)), "of the same dtype");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w, Tensor(), mask.to(kFloat64)), "of the same dtype");
  CHECK_THROWS_CONTAINING(
      deform_conv2d(zeros({2, 6, 5, 5}, kInt64), zeros({2, 18, 3, 3}, kInt64), zeros({4, 3, 3, 3}, kInt64)),
      "float32 or float64");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w, zeros({3})), "expected bias of shape (4,)");
  CHECK_THROWS_CONTAINING(deform_conv2d(zeros({6, 5, 5}), offset, w), "expected input (N, C_in, H, W) with 4 dims");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, zeros({18, 3, 3}), w), "with 4 dims");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w, Tensor(), zeros({9, 3, 3})), "with 4 dims");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, Tensor(), w), "offset");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w, Tensor(), Tensor(), DeformConv2dOptions().set_stride(0)),
                          "stride");
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset, w, Tensor(), Tensor(), DeformConv2dOptions().set_padding(-1)),
                          "padding");
}

MINIDET_CUDA_TEST_CASE("errors/deform_conv2d: operands on different devices") {
  const Tensor x = zeros({2, 6, 5, 5}), w = zeros({4, 3, 3, 3}), offset = zeros({2, 18, 3, 3});
  CHECK_THROWS_CONTAINING(deform_conv2d(x, offset.cuda(), w), "on the same device");
  CHECK_THROWS_CONTAINING(deform_conv2d(x.cuda(), offset.cuda(), w), "on the same device");
  CHECK_THROWS_CONTAINING(deform_conv2d(x.cuda(), offset.cuda(), w.cuda(), zeros({4})), "on the same device");
  CHECK_THROWS_CONTAINING(deform_conv2d(x.cuda(), offset.cuda(), w.cuda(), Tensor(), zeros({2, 9, 3, 3})),
                          "on the same device");
}

namespace {

// Forward and every gradient on `device` (grads in input, offset, weight, bias, mask order).
std::vector<Tensor> run_on(const Device& device, const std::vector<Tensor>& cpu_inputs, const Tensor& cpu_grad,
                           const DeformConv2dOptions& options) {
  TensorList leaves;
  for (const Tensor& t : cpu_inputs)  // fresh leaves on either device, never the caller's tensors
    leaves.push_back(t.defined() ? (device.is_cuda() ? t.to(device) : t.clone()).requires_grad_() : Tensor());
  const Tensor y = deform_conv2d(leaves[0], leaves[1], leaves[2], leaves[3], leaves[4], options);
  y.backward(cpu_grad.to(device));
  std::vector<Tensor> results = {y.detach().cpu()};
  for (const Tensor& t : leaves) results.push_back(t.defined() ? t.grad().cpu() : Tensor());
  return results;
}

std::vector<Tensor> float32_inputs(const DeformCase& c, bool with_mask, uint64_t seed) {
  return {random(c.input(), kFloat32, seed), random_offsets(c.offset(), kFloat32, seed + 1),
          random(c.weight(), kFloat32, seed + 2), random({c.out_channels}, kFloat32, seed + 3),
          with_mask ? random_mask(c.mask(), kFloat32, seed + 4) : Tensor()};
}

}  // namespace

MINIDET_CUDA_TEST_CASE("cuda/deform_conv2d: forward and every gradient match the CPU with batch 33 in chunks") {
  DeformCase big = {"batch 33 in chunks", 33, 8, 6, 2, 2, 3, 3, 9, 11, DeformConv2dOptions().set_padding(1)};
  DeformCase big_one_chunk = big;
  big_one_chunk.what = "batch 33 in one chunk";
  big.options.set_max_column_bytes(5 * 8 * 9 * 99 * 4);  // 5 images per chunk: 7 chunks, the last of 3
  const std::vector<DeformCase> cases = {big, big_one_chunk, odd_case(33), square_case()};
  const char* names[6] = {"output", "grad_input", "grad_offset", "grad_weight", "grad_bias", "grad_mask"};
  uint64_t seed = 500;
  for (const DeformCase& c : cases) {
    for (bool with_mask : {false, true}) {
      CAPTURE(c.what);
      CAPTURE(with_mask);
      const std::vector<Tensor> inputs = float32_inputs(c, with_mask, seed);
      seed += 5;
      const Tensor grad = random({c.batch, c.out_channels, c.out_h(), c.out_w()}, kFloat32, seed++);
      const std::vector<Tensor> cpu = run_on(Device::cpu(), inputs, grad, c.options);
      const std::vector<Tensor> gpu = run_on(Device::cuda(), inputs, grad, c.options);
      for (int i = 0; i < 6; ++i) {
        if (!cpu[i].defined()) continue;
        CAPTURE(names[i]);
        // float32 sums in different orders: dW and db add up to 33 images of positions.
        CHECK(allclose(gpu[i], cpu[i], 1e-4, 1e-3));
      }
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/deform_conv2d: many channels per offset group and large offsets match the CPU") {
  // 40 channels per offset group: 10 vectors of four over a team of eight lanes, so two lanes take two
  // vectors and six take one. A 19x70 output spans many blocks of positions, and offsets scaled by 4 send many
  // samples across the border and onto the same pixels.
  const DeformCase c = {"many channels", 3, 40, 8, 1, 1, 3, 3, 19, 70, DeformConv2dOptions().set_padding(1)};
  for (double scale : {1.0, 4.0}) {
    CAPTURE(scale);
    std::vector<Tensor> inputs = float32_inputs(c, true, 650);
    {
      NoGradGuard raw;
      inputs[1] = inputs[1] * scale;
    }
    const Tensor grad = random({c.batch, c.out_channels, c.out_h(), c.out_w()}, kFloat32, 656);
    const std::vector<Tensor> cpu = run_on(Device::cpu(), inputs, grad, c.options);
    const std::vector<Tensor> gpu = run_on(Device::cuda(), inputs, grad, c.options);
    for (int i = 0; i < 6; ++i) {
      CAPTURE(i);
      CHECK(allclose(gpu[i], cpu[i], 1e-4, 1e-3));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/deform_conv2d: offset groups wider than one slice match the CPU in float32 and float64") {
  // The channel-last backward takes at most 256 float32 (128 float64) channels of an offset group per block,
  // and adds the slices' offset and mask sums afterwards. 300 float32 channels per group go as two slices
  // of 152 and 148, four at a time per lane; 130 float64 channels as two of 65, one at a time. Two offset
  // groups and two convolution groups, offsets scaled by 3 to push samples across the border, and an output
  // of 9 x 13 = 117 positions, which leaves the last block of 8 positions part empty.
  for (const DType dtype : {kFloat32, kFloat64}) {
    const int64_t channels = dtype == kFloat32 ? 600 : 260;
    const DeformCase c = {"wide groups", 2, channels, 4, 2, 2, 3, 3, 9, 13, DeformConv2dOptions().set_padding(1)};
    std::vector<Tensor> inputs = float32_inputs(c, true, 620);
    {
      NoGradGuard raw;
      inputs[1] = inputs[1] * 3.0;
      for (Tensor& t : inputs) t = t.to(dtype);
    }
    const Tensor grad = random({c.batch, c.out_channels, c.out_h(), c.out_w()}, dtype, 626);
    const std::vector<Tensor> cpu = run_on(Device::cpu(), inputs, grad, c.options);
    const std::vector<Tensor> gpu = run_on(Device::cuda(), inputs, grad, c.options);
    std::vector<Tensor> deterministic;
    {
      DeterministicGuard fixed_order;  // the pass without dx (its sums over both slices), then the sorted gather
      deterministic = run_on(Device::cuda(), inputs, grad, c.options);
    }
    const double rtol = dtype == kFloat32 ? 1e-4 : 1e-10, atol = dtype == kFloat32 ? 1e-3 : 1e-10;
    for (int i = 0; i < 6; ++i) {
      CAPTURE(dtype);
      CAPTURE(i);
      CHECK(allclose(gpu[i], cpu[i], rtol, atol));
      CHECK(allclose(deterministic[i], cpu[i], rtol, atol));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/deform_conv2d: float64 forward and gradients match the CPU") {
  const DeformCase c = odd_case(3);
  std::vector<Tensor> inputs = float32_inputs(c, true, 600);
  for (Tensor& t : inputs) t = t.to(kFloat64);
  const Tensor grad = random({c.batch, c.out_channels, c.out_h(), c.out_w()}, kFloat64, 606);
  const std::vector<Tensor> cpu = run_on(Device::cpu(), inputs, grad, c.options);
  const std::vector<Tensor> gpu = run_on(Device::cuda(), inputs, grad, c.options);
  for (int i = 0; i < 6; ++i) CHECK(allclose(gpu[i], cpu[i], 1e-10, 1e-10));
}

MINIDET_CUDA_TEST_CASE("cuda/deform_conv2d: deterministic mode gives identical bits twice") {
  // Large offsets pile many samples onto the same pixels, where atomic order would show.
  DeformCase c = {"deterministic", 33, 8, 8, 1, 2, 3, 3, 12, 10,
                  DeformConv2dOptions().set_padding(1).set_max_column_bytes(4 * 8 * 9 * 120 * 4)};
  const std::vector<Tensor> inputs = float32_inputs(c, true, 700);
  const Tensor grad = random({c.batch, c.out_channels, c.out_h(), c.out_w()}, kFloat32, 706);
  std::vector<Tensor> runs[2];
  {
    DeterministicGuard deterministic;
    for (int r = 0; r < 2; ++r) runs[r] = run_on(Device::cuda(), inputs, grad, c.options);
  }
  for (int i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(runs[0][i].to_vector<float>() == runs[1][i].to_vector<float>());
  }
  // The deterministic gather and the atomic scatter compute the same sums (in different orders).
  const std::vector<Tensor> atomic = run_on(Device::cuda(), inputs, grad, c.options);
  CHECK(allclose(runs[0][1], atomic[1], 1e-4, 1e-4));
  const std::vector<Tensor> cpu = run_on(Device::cpu(), inputs, grad, c.options);
  CHECK(allclose(runs[0][1], cpu[1], 1e-4, 1e-4));
}

#if MINIDET_WITH_CUDA  // cuda::Int64IndexScope exists only in a CUDA build (a CPU build skips cuda/ cases)
MINIDET_CUDA_TEST_CASE("cuda/deform_conv2d: the int64_t-indexed kernels match the CPU and the int32_t ones") {
  // Every kernel of the op has an int32_t and an int64_t variant; the latter runs by itself only on tensors
  // of 2^31 elements. Int64IndexScope forces it here. Scaled offsets send samples across the border, and
  // the deterministic mode's listing and gather have 64-bit variants too.
  const DeformCase c = {"int64 indices", 3, 40, 8, 1, 1, 3, 3, 19, 70, DeformConv2dOptions().set_padding(1)};
  std::vector<Tensor> inputs = float32_inputs(c, true, 760);
  {
    NoGradGuard raw;
    inputs[1] = inputs[1] * 4.0;
  }
  const Tensor grad = random({c.batch, c.out_channels, c.out_h(), c.out_w()}, kFloat32, 766);
  const std::vector<Tensor> cpu = run_on(Device::cpu(), inputs, grad, c.options);
  std::vector<Tensor> wide, wide_deterministic, narrow_deterministic;
  const bool forced_before = cuda::int64_index_forced();  // true when MINIDET_CUDA_INDEX64=1 runs the suite
  {
    cuda::Int64IndexScope int64_indices;
    CHECK(cuda::int64_index_forced());
    CHECK_FALSE(cuda::fits_int32(1));
    wide = run_on(Device::cuda(), inputs, grad, c.options);
    DeterministicGuard deterministic;
    wide_deterministic = run_on(Device::cuda(), inputs, grad, c.options);
  }
  CHECK(cuda::int64_index_forced() == forced_before);  // the scope restores the setting it found
  {
    DeterministicGuard deterministic;
    narrow_deterministic = run_on(Device::cuda(), inputs, grad, c.options);
  }
  for (int i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(allclose(wide[i], cpu[i], 1e-4, 1e-3));
    CHECK(allclose(wide_deterministic[i], cpu[i], 1e-4, 1e-3));
    // The index type changes no arithmetic: the fixed-order sums give the same bits either way.
    CHECK(wide_deterministic[i].to_vector<float>() == narrow_deterministic[i].to_vector<float>());
  }
}
#endif
