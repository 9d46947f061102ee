// conv2d: hand-computed values, float64 gradient checks over every option, chunking, CUDA parity, errors.
#include <random>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/factories.h"
#include "ops/conv2d/conv2d.h"
#include "ops/conv2d/conv2d_kernels.h"
#include "ops/conv2d/conv2d_lowering.h"
#include "tests/support.h"

using namespace minidet;
using autograd::TensorList;
using minidet::test::max_abs_diff;

namespace {

struct ConvCase {
  std::string what;
  Shape input, weight;
  bool bias;
  Conv2dOptions options;
};

// Small shapes so the full Jacobian is checked; together they cover stride, padding, dilation, groups,
// non-square kernels and inputs, no bias, and more than one chunk.
std::vector<ConvCase> conv_cases() {
  return {
      {"3x3 padding 1 with bias", {2, 3, 5, 6}, {4, 3, 3, 3}, true, Conv2dOptions().set_padding(1)},
      {"stride 2 and non-square kernel and input", {2, 3, 7, 5}, {4, 3, 3, 2}, true,
       Conv2dOptions().set_stride(2, 1).set_padding(2, 1)},
      {"dilation 2 without bias", {2, 2, 7, 6}, {3, 2, 3, 3}, false, Conv2dOptions().set_dilation(2).set_padding(2, 1)},
      {"groups 2 with stride 2", {2, 4, 6, 6}, {6, 2, 3, 3}, true, Conv2dOptions().set_groups(2).set_stride(2).set_padding(1)},
      {"1x1 kernel in chunks of one image", {3, 3, 5, 4}, {2, 3, 1, 1}, true, Conv2dOptions().set_max_column_bytes(1)},
  };
}

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, dtype, &g);
}

}  // namespace

TEST_CASE("values/conv2d: 2x2 kernel on a 3x3 image by hand") {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}).requires_grad_();
  const Tensor w = from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2}).requires_grad_();
  const Tensor b = from_vector<double>({0.5}, {1}).requires_grad_();
  const Tensor y = conv2d(x, w, b);
  // y[p, q] = 1*x[p, q] + 2*x[p, q+1] + 3*x[p+1, q] + 4*x[p+1, q+1] + 0.5
  CHECK(y.sizes() == Shape{1, 1, 2, 2});
  CHECK(y.to_vector<double>() == std::vector<double>{37.5, 47.5, 67.5, 77.5});
  y.backward(ones_like(y));
  // dx: each pixel collects the kernel taps of every window that covers it; dW: the sum of each tap's pixels.
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 3, 2, 4, 10, 6, 3, 7, 4});
  CHECK(w.grad().to_vector<double>() == std::vector<double>{12, 16, 24, 28});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{4});
}

TEST_CASE("values/conv2d: stride 2 padding 1 and a dilated grouped kernel by hand") {
  const Tensor x = arange(1, 10, 1, kFloat64).view({1, 1, 3, 3});
  // A 3x3 box filter centred on the corners: the padding contributes zeros.
  const Tensor y = conv2d(x, ones({1, 1, 3, 3}, kFloat64), Tensor(), Conv2dOptions().set_stride(2).set_padding(1));
  CHECK(y.to_vector<double>() == std::vector<double>{12, 16, 24, 28});
  // Two groups, each a 2x2 kernel with dilation 2 on its own channel: it reads the four corners.
  const Tensor x2 = arange(0, 18, 1, kFloat64).view({1, 2, 3, 3});
  const Tensor w2 = from_vector<double>({1, 0, 0, 0, 0, 0, 0, 1}, {2, 1, 2, 2});
  const Tensor y2 = conv2d(x2, w2, Tensor(), Conv2dOptions().set_dilation(2).set_groups(2));
  CHECK(y2.sizes() == Shape{1, 2, 1, 1});
  CHECK(y2.to_vector<double>() == std::vector<double>{0, 17});  // top-left of channel 0, bottom-right of 1
}

TEST_CASE("gradcheck/conv2d: stride padding dilation groups and non-square shapes in float64") {
  uint64_t seed = 10;
  for (const ConvCase& c : conv_cases()) {
    CAPTURE(c.what);
    const Tensor x = random(c.input, kFloat64, seed++).requires_grad_();
    const Tensor w = random(c.weight, kFloat64, seed++).requires_grad_();
    const Tensor b = c.bias ? random({c.weight[0]}, kFloat64, seed++).requires_grad_() : Tensor();
    const Conv2dOptions options = c.options;
    const auto fn = [options](const TensorList& in) { return conv2d(in[0], in[1], in[2], options); };
    const auto result = autograd::gradcheck(fn, {x, w, b});
    MESSAGE(c.what << ": max_abs_error " << result.max_abs_error);
    CHECK_MESSAGE(result.ok, result.report);
  }
}

TEST_CASE("gradcheck/conv2d: non-contiguous input") {
  const Tensor base = random({2, 5, 6, 3}, kFloat64, 3);  // NHWC buffer, read as NCHW through a permute
  const Tensor x = base.permute({0, 3, 1, 2}).requires_grad_();
  const Tensor w = random({2, 3, 2, 3}, kFloat64, 4).requires_grad_();
  const auto result = autograd::gradcheck(
      [](const TensorList& in) { return conv2d(in[0], in[1], Tensor(), Conv2dOptions().set_padding(1)); }, {x, w});
  MESSAGE("non-contiguous: max_abs_error " << result.max_abs_error);
  CHECK_MESSAGE(result.ok, result.report);
}

TEST_CASE("values/conv2d: a tiny column bound gives several chunks and the unchunked result") {
  const Tensor x = random({5, 4, 9, 8}, kFloat64, 20).requires_grad_();
  const Tensor w = random({6, 2, 3, 3}, kFloat64, 21).requires_grad_();
  const Tensor b = random({6}, kFloat64, 22).requires_grad_();
  const Tensor g = random({5, 6, 5, 8}, kFloat64, 23);
  const Conv2dOptions whole = Conv2dOptions().set_groups(2).set_stride(2, 1).set_padding(1);
  Conv2dOptions chunked = whole;
  chunked.set_max_column_bytes(2 * 36 * 40 * 8);  // two images' columns: chunks of 2, 2, 1
  CHECK(conv2d_chunk_size(x, w, chunked) == 2);
  CHECK(conv2d_chunk_size(x, w, whole) == 5);
  const Tensor y1 = conv2d(x, w, b, whole);
  y1.backward(g);
  const std::vector<Tensor> grads1 = {x.grad(), w.grad(), b.grad()};
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  b.set_grad(Tensor());
  const Tensor y2 = conv2d(x, w, b, chunked);
  y2.backward(g);
  CHECK(max_abs_diff(y1, y2) <= 1e-12);
  CHECK(max_abs_diff(grads1[0], x.grad()) <= 1e-12);
  CHECK(max_abs_diff(grads1[1], w.grad()) <= 1e-12);
  CHECK(max_abs_diff(grads1[2], b.grad()) <= 1e-12);
}

TEST_CASE("values/conv2d: the CPU's columns hold the definition's entries for any segment of a row") {
  // image_columns_cpu (conv2d_kernels.h) against conv2d.h's cols[(c*kh + i)*kw + j, p*W_out + q], entry by
  // entry, image b's columns after image b-1's: segments that start and end anywhere, span output rows and
  // images, or are empty, under strides, dilations and padding from 0 to 3.
  std::mt19937 rng(5);
  const auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int64_t checked = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const Tensor images = random({pick(1, 3), pick(1, 3), pick(1, 9), pick(1, 9)}, kFloat64, trial);
    ConvWindow w;
    w.stride_h = pick(1, 3), w.stride_w = pick(1, 3), w.pad_h = pick(0, 3), w.pad_w = pick(0, 3);
    w.dilation_h = pick(1, 2), w.dilation_w = pick(1, 2);
    const int64_t kh = pick(1, 3), kw = pick(1, 3);
    if (w.dilation_h * (kh - 1) + 1 > images.size(2) + 2 * w.pad_h ||
        w.dilation_w * (kw - 1) + 1 > images.size(3) + 2 * w.pad_w)
      continue;  // no output
    const ops::detail::ConvGeometry g = ops::detail::conv_geometry("test", images, kh, kw, w);
    const auto columns = ops::detail::image_columns_cpu(images, g);
    const int64_t total = images.size(0) * g.column_cols();
    const double* x = images.data<double>();
    for (int segment = 0; segment < 8; ++segment) {
      const int64_t r = pick(0, g.column_rows() - 1), q0 = pick(0, total - 1), count = pick(0, total - q0);
      std::vector<double> got(static_cast<size_t>(count), -7.0);
      columns->row(r, q0, count, got.data());
      const int64_t c = r / (kh * kw), i = r / kw % kh, j = r % kw;
      for (int64_t t = 0; t < count; ++t) {
        const int64_t q = q0 + t, b = q / g.column_cols(), p = q % g.column_cols() / g.out_w, o = q % g.out_w;
        const int64_t y = p * w.stride_h - w.pad_h + i * w.dilation_h, xx = o * w.stride_w - w.pad_w + j * w.dilation_w;
        const bool inside = y >= 0 && y < g.height && xx >= 0 && xx < g.width;
        const double want = inside ? x[((b * g.channels + c) * g.height + y) * g.width + xx] : 0.0;
        if (got[t] != want) {
          CAPTURE(trial);
          CAPTURE(r);
          CAPTURE(q);
          CHECK(got[t] == want);
        }
        ++checked;
      }
    }
  }
  CHECK(checked > 10000);  // the draws above must have reached many entries
}

TEST_CASE("values/conv2d: float32 on the CPU, its columns never stored, agrees with float64") {
  // On the CPU the float32 GEMM packs the columns straight from the images (conv2d.h), a row segment at a time:
  // segments that start and end inside an output row, span several rows and images, and fall in the padding
  // must all hold what im2col would have written. Shapes past a register tile (16 or 32 columns) and a block of k,
  // with output rows narrower and wider than a tile, and several chunks.
  std::vector<ConvCase> cases = conv_cases();
  cases.push_back(
      {"a backbone layer, 64 outputs a row", {2, 16, 64, 64}, {32, 16, 3, 3}, true, Conv2dOptions().set_padding(1)});
  cases.push_back({"rows of 11 outputs, stride 2 and dilation 2",
                   {3, 20, 25, 23},
                   {8, 20, 3, 3},
                   false,
                   Conv2dOptions().set_stride(2).set_dilation(2).set_padding(2, 1)});
  cases.push_back({"groups in chunks of two images",
                   {5, 12, 14, 9},
                   {18, 4, 3, 3},
                   true,
                   Conv2dOptions().set_groups(3).set_padding(1).set_max_column_bytes(2 * 108 * 126 * 4)});
  uint64_t seed = 60;
  for (const ConvCase& c : cases) {
    CAPTURE(c.what);
    const Tensor x64 = random(c.input, kFloat64, seed++), w64 = random(c.weight, kFloat64, seed++);
    const Tensor b64 = c.bias ? random({c.weight[0]}, kFloat64, seed++) : Tensor();
    std::vector<Tensor> results[2];
    for (DType dtype : {kFloat32, kFloat64}) {
      Tensor x = x64.to(dtype).requires_grad_(), w = w64.to(dtype).requires_grad_();
      Tensor b = c.bias ? b64.to(dtype).requires_grad_() : Tensor();
      const Tensor y = conv2d(x, w, b, c.options);
      Generator gen(9);
      y.backward(randn(y.sizes(), kFloat64, &gen).to(dtype));
      results[dtype == kFloat64] = {y.detach(), x.grad(), w.grad()};
    }
    const char* names[3] = {"output", "grad_input", "grad_weight"};
    for (int i = 0; i < 3; ++i) {
      CAPTURE(names[i]);
      CHECK(minidet::test::allclose(results[0][i].to(kFloat64), results[1][i], 1e-4, 1e-4));
    }
  }
}

TEST_CASE("values/conv2d: the default column bound is the device's") {
  // 8 channels x 9 taps x 256 x 256 outputs x 4 bytes = 18 MiB of columns per image: over the CPU's 16 MiB,
  // so one image per chunk there; seven fit in CUDA's 128 MiB, and an explicit bound wins on either device.
  const Tensor x = zeros({8, 8, 256, 256});
  const Tensor w = zeros({8, 8, 3, 3});
  const Conv2dOptions padded = Conv2dOptions().set_padding(1);
  CHECK(conv2d_chunk_size(x, w, padded) == 1);
  CHECK(conv2d_chunk_size(x, w, Conv2dOptions(padded).set_max_column_bytes(kCudaColumnBytes)) == 7);
  CHECK_THROWS_CONTAINING(conv2d(x, w, Tensor(), Conv2dOptions().set_max_column_bytes(-1)),
                          "max_column_bytes must be >= 0");
  if (cuda::is_available()) CHECK(conv2d_chunk_size(x.cuda(), w.cuda(), padded) == 7);
}

TEST_CASE("values/conv2d: batch 0 gives an empty output and zero parameter gradients") {
  const Tensor x = zeros({0, 3, 5, 5}).requires_grad_();
  const Tensor w = ones({4, 3, 3, 3}).requires_grad_();
  const Tensor b = ones({4}).requires_grad_();
  const Tensor y = conv2d(x, w, b);
  CHECK(y.sizes() == Shape{0, 4, 3, 3});
  y.backward(zeros_like(y));
  CHECK(w.grad().to_vector<float>() == std::vector<float>(108, 0.0f));
  CHECK(b.grad().to_vector<float>() == std::vector<float>(4, 0.0f));
}

MINIDET_CUDA_TEST_CASE("cuda/conv2d: forward and backward match the CPU in float32 including chunks") {
  uint64_t seed = 40;
  std::vector<ConvCase> cases = conv_cases();
  cases.push_back({"larger with forced chunks", {6, 16, 20, 18}, {24, 8, 3, 3}, true,
                   Conv2dOptions().set_groups(2).set_padding(1).set_max_column_bytes(100000)});
  cases.push_back({"larger in one chunk", {6, 16, 20, 18}, {24, 8, 3, 3}, true, Conv2dOptions().set_groups(2).set_padding(1)});
  // The detector's shape of layer (batch 8, 3x3, stride 1 and 2); more column rows (2 x 36,000) than a grid's
  // y dimension holds (65,535), so im2col's row loop wraps; more planes (17 x 4,000) than that, for col2im's.
  cases.push_back({"a backbone layer", {8, 32, 32, 32}, {32, 32, 3, 3}, false, Conv2dOptions().set_padding(1)});
  cases.push_back({"a backbone layer with stride 2", {8, 32, 32, 32}, {64, 32, 3, 3}, false,
                   Conv2dOptions().set_stride(2).set_padding(1)});
  cases.push_back({"more rows than the grid's y", {2, 4000, 3, 3}, {2, 4000, 3, 3}, true, Conv2dOptions().set_padding(1)});
  cases.push_back({"more planes than the grid's y", {17, 4000, 2, 2}, {1, 4000, 1, 1}, false, Conv2dOptions()});
  // One group in chunks of 4 + 2 images: the weight gradient's K slices, summed over two chunks.
  cases.push_back({"K slices over two chunks", {6, 32, 32, 32}, {32, 32, 3, 3}, false,
                   Conv2dOptions().set_padding(1).set_max_column_bytes(4 * 288 * 1024 * 4)});
  for (const ConvCase& c : cases) {
    CAPTURE(c.what);
    const Tensor x_cpu = random(c.input, kFloat32, seed++), w_cpu = random(c.weight, kFloat32, seed++);
    const Tensor b_cpu = c.bias ? random({c.weight[0]}, kFloat32, seed++) : Tensor();
    std::vector<Tensor> results[2];
    for (int device = 0; device < 2; ++device) {
      const auto move = [&](const Tensor& t) { return device ? t.cuda() : t.clone(); };
      Tensor x = move(x_cpu).requires_grad_(), w = move(w_cpu).requires_grad_();
      Tensor b = c.bias ? move(b_cpu).requires_grad_() : Tensor();
      const Tensor y = conv2d(x, w, b, c.options);
      Generator gen(7);
      y.backward(randn(y.sizes(), kFloat32, &gen).to(y.device()));
      results[device] = {y.detach().cpu(), x.grad().cpu(), w.grad().cpu(), c.bias ? b.grad().cpu() : zeros({1})};
    }
    const char* names[4] = {"output", "grad_input", "grad_weight", "grad_bias"};
    for (int i = 0; i < 4; ++i) {
      CAPTURE(names[i]);
      CHECK(minidet::test::allclose(results[1][i], results[0][i], 1e-4, 1e-4));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/conv2d: col2im backward gives identical bits twice") {
  const Tensor x = random({4, 6, 13, 11}, kFloat32, 50).cuda().requires_grad_();
  const Tensor w = random({8, 6, 3, 3}, kFloat32, 51).cuda();
  const Tensor g = random({4, 8, 7, 6}, kFloat32, 52).cuda();
  const Conv2dOptions options = Conv2dOptions().set_stride(2).set_padding(1, 2).set_dilation(1, 2);
  conv2d(x, w, Tensor(), options).backward(g);
  const std::vector<float> first = x.grad().to_vector<float>();
  x.set_grad(Tensor());
  conv2d(x, w, Tensor(), options).backward(g);
  CHECK(x.grad().to_vector<float>() == first);
}

MINIDET_CUDA_TEST_CASE("cuda/conv2d: the weight gradient's K slices give identical bits twice") {
  const Tensor x = random({8, 32, 32, 32}, kFloat32, 53).cuda();
  const Tensor w = random({32, 32, 3, 3}, kFloat32, 54).cuda().requires_grad_();
  const Tensor g = random({8, 32, 32, 32}, kFloat32, 55).cuda();
  const Conv2dOptions options = Conv2dOptions().set_padding(1);
  conv2d(x, w, Tensor(), options).backward(g);
  const std::vector<float> first = w.grad().to_vector<float>();
  w.set_grad(Tensor());
  conv2d(x, w, Tensor(), options).backward(g);
  CHECK(w.grad().to_vector<float>() == first);
}

TEST_CASE("errors/conv2d: wrong channels kernel too large mismatched dtypes and bad options") {
  const Tensor x = zeros({1, 3, 5, 5});
  CHECK_THROWS_CONTAINING(conv2d(x, zeros({4, 2, 3, 3})), "expected input with 2 channels");
  CHECK_THROWS_CONTAINING(conv2d(x, zeros({4, 1, 3, 3}), Tensor(), Conv2dOptions().set_groups(2)),
                          "expected input with 2 channels");
  CHECK_THROWS_CONTAINING(conv2d(zeros({1, 4, 5, 5}), zeros({3, 2, 3, 3}), Tensor(), Conv2dOptions().set_groups(2)),
                          "divisible by groups");
  CHECK_THROWS_CONTAINING(conv2d(x, zeros({4, 3, 7, 3}), Tensor(), Conv2dOptions().set_padding(0, 1)),
                          "larger than the padded input");
  CHECK_THROWS_CONTAINING(conv2d(x, zeros({4, 3, 3, 3}), Tensor(), Conv2dOptions().set_dilation(3)),
                          "larger than the padded input");
  CHECK_THROWS_CONTAINING(conv2d(x, zeros({4, 3, 3, 3}, kFloat64)), "of the same dtype");
  CHECK_THROWS_CONTAINING(conv2d(x, zeros({4, 3, 3, 3}), zeros({4}, kFloat64)), "of the same dtype");
  CHECK_THROWS_CONTAINING(conv2d(x, zeros({4, 3, 3, 3}), zeros({3})), "expected bias of shape (4,)");
  CHECK_THROWS_CONTAINING(conv2d(zeros({3, 5, 5}), zeros({4, 3, 3, 3})), "expected input (N, C_in, H, W) with 4 dims");
  CHECK_THROWS_CONTAINING(conv2d(x, zeros({4, 3, 3, 3}), Tensor(), Conv2dOptions().set_stride(0)), "stride");
  CHECK_THROWS_CONTAINING(conv2d(zeros({1, 3, 5, 5}, kInt64), zeros({4, 3, 3, 3}, kInt64)), "float32 or float64");
}

MINIDET_CUDA_TEST_CASE("errors/conv2d: input and weight on different devices") {
  CHECK_THROWS_CONTAINING(conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}, Device::cuda())), "on the same device");
  CHECK_THROWS_CONTAINING(conv2d(zeros({1, 3, 5, 5}, Device::cuda()), zeros({4, 3, 3, 3}, Device::cuda()),
                                 zeros({4})),
                          "on the same device");
}
