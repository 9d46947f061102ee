// CUDA tensors against their CPU twins: transfers must be exact, the strided copy/fill kernels must agree
// with the CPU loops, and views on the GPU must share storage just like on the host.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/factories.h"
#include "tests/support.h"

using namespace minidet;
using minidet::test::max_abs_diff;

MINIDET_CUDA_TEST_CASE("cuda/tensor: CPU to CUDA to CPU round trip is exact for every dtype") {
  // Extreme and awkward values: a lossy transfer (e.g. through float) would change them.
  const std::vector<float> f = {0.0f, -1.5f, 3.0e38f, 1.0e-45f, std::numeric_limits<float>::infinity()};
  const std::vector<double> d = {1.0 / 3.0, -2.5e-300, 1e300, -0.0};
  const std::vector<int64_t> i = {std::numeric_limits<int64_t>::min(), -1, 0, (int64_t(1) << 53) + 1,
                                  std::numeric_limits<int64_t>::max()};
  const std::vector<bool> b = {true, false, true};
  const std::vector<uint8_t> u = {0, 1, 128, 255};

  const Tensor tf = from_vector<float>(f).cuda();
  CHECK(tf.is_cuda());
  CHECK(tf.device() == Device::cuda(0));
  CHECK(tf.dtype() == kFloat32);
  CHECK(tf.cpu().to_vector<float>() == f);
  CHECK(from_vector<double>(d).cuda().to_vector<double>() == d);  // to_vector copies back by itself
  CHECK(from_vector<int64_t>(i).cuda().to_vector<int64_t>() == i);
  CHECK(from_vector<bool>(b).cuda().to_vector<bool>() == b);
  CHECK(from_vector<uint8_t>(u, {2, 2}).cuda().to_vector<uint8_t>() == u);
  CHECK(from_vector<uint8_t>(u, {2, 2}).cuda().sizes() == Shape{2, 2});
  CHECK(scalar_tensor(2.5, Device::cuda()).item() == 2.5);  // 0-dim
}

MINIDET_CUDA_TEST_CASE("cuda/tensor: to on the same device returns the same tensor") {
  const Tensor t = zeros({3}, Device::cuda());
  CHECK(t.cuda().is_same(t));
  CHECK(t.to(kFloat32).is_same(t));
  CHECK(t.contiguous().is_same(t));
  CHECK_FALSE(t.cpu().is_same(t));
}

MINIDET_CUDA_TEST_CASE("cuda/copy: copy_ across devices with dtype conversion and non-contiguous sides") {
  // CPU int64 transposed (non-contiguous) -> CUDA float32 transposed view of a buffer.
  const Tensor orig = arange(12).view({3, 4});
  Tensor dst_base = zeros({3, 4}, Device::cuda());
  dst_base.t().copy_(orig.t());  // element (a, b) of both transposes is orig[b][a]
  CHECK(dst_base.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});

  // CUDA float64 column slice -> CPU int64 column of a buffer: truncation toward zero on the way.
  const Tensor src = from_vector<double>({1.9, -2.7, 3.5, 4.1, -5.5, 6.0}, {3, 2}).cuda();
  Tensor host = full({3, 2}, 9, kInt64);
  host.select(1, 1).copy_(src.select(1, 0));  // column 0 of src (1.9, 3.5, -5.5) into column 1 of host
  CHECK(host.to_vector<int64_t>() == std::vector<int64_t>{9, 1, 9, 3, 9, -5});
  host.select(0, 0).copy_(src.select(1, 1).slice(0, 0, 2));  // (-2.7, 4.1) into row 0
  CHECK(host.to_vector<int64_t>() == std::vector<int64_t>{-2, 4, 9, 3, 9, -5});

  // Broadcasting across devices: a CPU row fills every row of a CUDA matrix.
  Tensor m = zeros({2, 3}, TensorOptions(kFloat64, Device::cuda()));
  m.copy_(from_vector<int64_t>({1, 2, 3}));
  CHECK(m.to_vector<double>() == std::vector<double>{1, 2, 3, 1, 2, 3});

  // CUDA -> CUDA with conversion into a strided destination (the copy kernel, not a memcpy).
  Tensor flags = zeros({2, 4}, TensorOptions(kBool, Device::cuda()));
  flags.slice(1, 0, 4, 2).copy_(from_vector<float>({0.0f, 0.5f, -1.0f, 0.0f}, {2, 2}).cuda());
  CHECK(flags.to_vector<bool>() == std::vector<bool>{false, false, true, false, true, false, false, false});
}

MINIDET_CUDA_TEST_CASE("cuda/copy: contiguous clone and fill_ of a permuted tensor match the CPU") {
  const Tensor x = arange(0, 24, 1, kFloat32).view({2, 3, 4});
  const Tensor xc = x.cuda();
  const Tensor p = x.permute({2, 0, 1}), pc = xc.permute({2, 0, 1});
  const Tensor cont = pc.contiguous();
  CHECK(cont.is_cuda());
  CHECK(cont.is_contiguous());
  CHECK(cont.storage() != xc.storage());
  CHECK(cont.to_vector<float>() == p.contiguous().to_vector<float>());
  CHECK(pc.clone().to_vector<float>() == p.clone().to_vector<float>());
  CHECK(pc.to_vector<float>() == p.to_vector<float>());  // reading a non-contiguous CUDA view

  // fill_ through a strided view writes the same elements on both devices.
  Tensor hb = x.clone(), db = xc.clone();
  hb.permute({2, 0, 1}).slice(0, 0, 4, 2).fill_(-1);
  db.permute({2, 0, 1}).slice(0, 0, 4, 2).fill_(-1);
  CHECK(max_abs_diff(db, hb) == 0);
  CHECK(hb.to_vector<float>()[0] == -1.0f);  // sanity: the fill did something
  CHECK(hb.to_vector<float>()[1] == 1.0f);

  // Overlapping copy on the GPU: t.copy_(t.t()) must equal the transpose of the original.
  Tensor sq = arange(0, 16, 1, kFloat64).view({4, 4}).cuda();
  const Tensor expected = sq.cpu().t().contiguous();
  sq.copy_(sq.t());
  CHECK(max_abs_diff(sq, expected) == 0);
}

MINIDET_CUDA_TEST_CASE("cuda/copy: plane transposes, row broadcasts and misaligned views copy as on the CPU") {
  // A same-dtype copy whose last dim is contiguous in dst and contiguous or broadcast in src goes in 16-byte
  // vectors, when the rows start on 16-byte boundaries and hold whole vectors; anything else takes the
  // element-wise kernel. Row lengths 16, 12 and 7 hold whole vectors for some dtypes and not for others.
  for (DType dtype : {kBool, kUInt8, kFloat32, kInt64, kFloat64}) {
    for (int64_t row : {16, 12, 7}) {
      CAPTURE(dtype);
      CAPTURE(row);
      const Tensor host = arange(0, 3 * 5 * row + 1, 1, kFloat64).to(dtype), device = host.cuda();
      const auto same = [](const Tensor& gpu, const Tensor& cpu) {
        return gpu.cpu().to(kFloat64).to_vector<double>() == cpu.to(kFloat64).to_vector<double>();
      };
      const auto planes = [&](const Tensor& t, int64_t start) {  // (3, 5, row) from element `start` on
        return t.slice(0, start, start + 3 * 5 * row).view({3, 5, row});
      };
      // (B, C, HW) -> (C, B, HW), from an aligned start and from one element past it.
      for (int64_t start : {0, 1}) {
        CAPTURE(start);
        CHECK(
            same(planes(device, start).transpose(0, 1).contiguous(), planes(host, start).transpose(0, 1).contiguous()));
      }
      // A bias (C,) broadcast along rows: (1, C, 1) expanded to (B, C, HW).
      const Tensor bias = host.slice(0, 0, 5).view({1, 5, 1});
      CHECK(same(bias.cuda().expand({3, 5, row}).contiguous(), bias.expand({3, 5, row}).contiguous()));
      // Into a strided destination: every other plane of a larger buffer, the rest untouched.
      Tensor host_dst = zeros({6, 5, row}, TensorOptions(dtype, Device::cpu())), device_dst = host_dst.cuda();
      host_dst.slice(0, 0, 6, 2).copy_(planes(host, 0));
      device_dst.slice(0, 0, 6, 2).copy_(planes(device, 0));
      CHECK(same(device_dst, host_dst));
    }
  }
}

MINIDET_CUDA_TEST_CASE("cuda/copy: fill_ of contiguous pieces at every offset and length writes exactly them") {
  // The contiguous fill stores 16 bytes at a time between the piece's first and last 16-byte boundaries and
  // single elements outside them: pieces that start off a boundary, end off one, or hold no whole vector.
  for (DType dtype : {kBool, kUInt8, kFloat32, kInt64, kFloat64}) {
    CAPTURE(dtype);
    const Tensor host = arange(0, 80, 1, kFloat64).to(dtype);
    for (int64_t start : {0, 1, 3, 5}) {
      for (int64_t length : {0, 1, 2, 7, 17, 40}) {
        CAPTURE(start);
        CAPTURE(length);
        Tensor expected = host.clone(), device = host.cuda();
        expected.slice(0, start, start + length).fill_(9);
        device.slice(0, start, start + length).fill_(9);
        CHECK(device.cpu().to(kFloat64).to_vector<double>() == expected.to(kFloat64).to_vector<double>());
      }
    }
  }
  // A large buffer, as a gradient's zero fill is: every element written.
  const Tensor big = full({(int64_t(1) << 20) + 3}, 2.0, TensorOptions(kFloat32, Device::cuda()));
  big.slice(0, 1, big.numel()).zero_();
  const std::vector<float> values = big.to_vector<float>();
  CHECK(values[0] == 2.0f);
  CHECK(std::count(values.begin() + 1, values.end(), 0.0f) == int64_t(values.size()) - 1);
}

MINIDET_CUDA_TEST_CASE("cuda/random: rand randn randint on CUDA equal the CPU draws for the same seed") {
  // Numbers are drawn on the host and copied, so the device never changes an experiment's data.
  Generator a(2024), b(2024);
  CHECK(max_abs_diff(rand({1000}, Device::cuda(), &a), rand({1000}, Device::cpu(), &b)) == 0);
  CHECK(max_abs_diff(randn({7, 9}, TensorOptions(kFloat64, Device::cuda()), &a),
                     randn({7, 9}, TensorOptions(kFloat64, Device::cpu()), &b)) == 0);
  CHECK(randint(-5, 5, {100}, TensorOptions(kInt64, Device::cuda()), &a).to_vector<int64_t>() ==
        randint(-5, 5, {100}, kInt64, &b).to_vector<int64_t>());
  CHECK(rand({4}, Device::cuda(), &a).is_cuda());
}

MINIDET_CUDA_TEST_CASE("cuda/print: a CUDA tensor prints its values and cuda:0") {
  const Tensor t = from_vector<float>({1, -2.5f, 3, 4}, {2, 2}).cuda();
  CHECK(t.str() ==
        "tensor([[ 1.0000, -2.5000],\n"
        "        [ 3.0000,  4.0000]], shape=(2, 2), dtype=float32, device=cuda:0)");
  CHECK(arange(2000, TensorOptions(kInt64, Device::cuda())).str().find("..., 1997, 1998, 1999]") !=
        std::string::npos);
}

MINIDET_CUDA_TEST_CASE("cuda/views: views of a CUDA tensor share its storage") {
  Tensor base = zeros({4, 5}, TensorOptions(kInt64, Device::cuda()));
  Tensor cols = base.slice(1, 1, 3);  // columns 1 and 2: non-contiguous
  CHECK(cols.storage() == base.storage());
  CHECK(cols.storage_offset() == 1);
  CHECK(cols.strides() == Shape{5, 1});
  cols.copy_(from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  base.select(0, 3).fill_(-1);  // then overwrite the last row
  CHECK(base.to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 2, 0, 0, 0, 3, 4, 0, 0, 0, 5, 6, 0, 0, -1, -1, -1, -1, -1});
  CHECK(cols.select(0, 1).select(0, 1).item<int64_t>() == 4);  // read back through the view
  // The transpose is not viewable as 1-D, so reshape copies on the GPU, column by column.
  CHECK(base.t().reshape({-1}).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 0, -1, 1, 3, 5, -1, 2, 4, 6, -1, 0, 0, 0, -1, 0, 0, 0, -1});
  CHECK(base.view({20}).storage() == base.storage());
}
