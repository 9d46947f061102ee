// CUDA im2col / col2im.
//
// im2col: a pure gather. The grid's y walks the column rows (image, channel, tap) and its x the output
// pixels of a row, so the tap, the source plane and the destination row are the same for the whole block:
// each thread does one division (pixel -> p, q) and one read. Either column order is only a different
// destination row (ColumnStrides).
// col2im: one thread per INPUT pixel, the grid's y walking the (image, channel) planes. The naive adjoint of
// im2col (one thread per column entry adding into its pixel) would need atomicAdd, since windows overlap,
// and atomics add in a different order every run. Instead each pixel thread asks, for every kernel tap
// (i, j), which output position (p, q) read it with that tap: p*stride_h - pad_h + i*dilation_h = y has at
// most one solution, p = (y + pad_h - i*dilation_h) / stride_h when that division is exact and
// 0 <= p < H_out (same for q). It sums those entries in tap order and writes its pixel once: no atomics, no
// races, identical bits every run.
//
// Index arithmetic is 32-bit whenever both tensors have fewer than 2^31 elements (every convolution of the
// detector): 64-bit division costs several times more instructions, and these kernels do little else.
#include <cstdint>
#include <limits>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/conv2d/conv2d_kernels.h"

namespace minidet::ops::detail {
namespace {

// The geometry in the kernel's index type.
template <typename Index>
struct Window {
  Index height, width, kernel_w, taps, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, out_h, out_w;
  explicit Window(const ConvGeometry& g)
      : height(Index(g.height)), width(Index(g.width)), kernel_w(Index(g.kernel_w)),
        taps(Index(g.kernel_h * g.kernel_w)), stride_h(Index(g.stride_h)), stride_w(Index(g.stride_w)),
        pad_h(Index(g.pad_h)), pad_w(Index(g.pad_w)), dilation_h(Index(g.dilation_h)),
        dilation_w(Index(g.dilation_w)), out_h(Index(g.out_h)), out_w(Index(g.out_w)) {}
};

// strides: ColumnStrides (image, row) in the index type.
template <typename T, typename Index>
__global__ void im2col_kernel_cuda(const T* images, T* cols, Window<Index> w, Index rows, Index rows_per_image,
                                   Index image_stride, Index row_stride) {
  const Index out_hw = w.out_h * w.out_w;
  for (Index row = blockIdx.y; row < rows; row += gridDim.y) {  // row = (b*C + c)*taps + tap
    const Index plane = row / w.taps, tap = row % w.taps;
    const Index i = tap / w.kernel_w, j = tap % w.kernel_w;
    const Index b = row / rows_per_image, image_row = row - b * rows_per_image;
    const T* src = images + plane * w.height * w.width;
    T* dst = cols + b * image_stride + image_row * row_stride;
    for (Index px = blockIdx.x * blockDim.x + threadIdx.x; px < out_hw; px += blockDim.x * gridDim.x) {
      const Index p = px / w.out_w, q = px - p * w.out_w;
      const Index y = p * w.stride_h - w.pad_h + i * w.dilation_h;
      const Index x = q * w.stride_w - w.pad_w + j * w.dilation_w;
      dst[px] = (y >= 0 && y < w.height && x >= 0 && x < w.width) ? src[y * w.width + x] : T(0);
    }
  }
}

// The output index o with o * stride = scaled and 0 <= o < size, or -1. Stride 1 (most layers) needs no
// division; the branch is the same for every thread.
template <typename Index>
__device__ __forceinline__ Index output_hit(Index scaled, Index stride, Index size) {
  if (scaled < 0) return -1;
  Index o = scaled;
  if (stride != 1) {
    o = scaled / stride;
    if (o * stride != scaled) return -1;
  }
  return o < size ? o : -1;
}

template <typename T, typename Index>
__global__ void col2im_kernel_cuda(const T* cols, T* images, Window<Index> w, Index planes, Index kernel_h) {
  const Index out_hw = w.out_h * w.out_w, plane_hw = w.height * w.width;
  for (Index plane = blockIdx.y; plane < planes; plane += gridDim.y) {  // plane = b*C + c
    const T* plane_cols = cols + plane * w.taps * out_hw;
    T* dst = images + plane * plane_hw;
    for (Index px = blockIdx.x * blockDim.x + threadIdx.x; px < plane_hw; px += blockDim.x * gridDim.x) {
      const Index y = px / w.width, x = px - y * w.width;
      T sum = 0;
      for (Index i = 0; i < kernel_h; ++i) {
        const Index p = output_hit(y + w.pad_h - i * w.dilation_h, w.stride_h, w.out_h);
        if (p < 0) continue;
        for (Index j = 0; j < w.kernel_w; ++j) {
          const Index q = output_hit(x + w.pad_w - j * w.dilation_w, w.stride_w, w.out_w);
          if (q >= 0) sum += plane_cols[(i * w.kernel_w + j) * out_hw + p * w.out_w + q];
        }
      }
      dst[px] = sum;
    }
  }
}

// Whether every index and coordinate fits 32 bits: both tensors' element counts, and the window's
// coordinates (an absurd stride or padding can give a tiny tensor whose arithmetic still needs 64 bits).
// With room for one more grid stride past the end, so the loops' last increment cannot overflow either.
// Never while cuda::int64_index_forced() (core/cuda/context.h), the tests' switch to the int64_t variants.
bool fits_int32(const Tensor& a, const Tensor& b, const ConvGeometry& g) {
  constexpr int64_t limit = std::numeric_limits<int32_t>::max() - cuda::kMaxBlocks * cuda::kThreadsPerBlock;
  const auto axis_fits = [&](int64_t size, int64_t pad, int64_t stride, int64_t dilation, int64_t kernel,
                             int64_t out) {
    // Each term is below 2^31 here, so the sum of the largest magnitudes cannot overflow 64 bits.
    for (int64_t v : {size, pad, stride, dilation, kernel, out})
      if (v >= limit) return false;
    return size + 2 * pad + stride * out + dilation * kernel < limit;
  };
  return !cuda::int64_index_forced() && a.numel() < limit && b.numel() < limit &&
         axis_fits(g.height, g.pad_h, g.stride_h, g.dilation_h, g.kernel_h, g.out_h) &&
         axis_fits(g.width, g.pad_w, g.stride_w, g.dilation_w, g.kernel_w, g.out_w);
}

// x covers `inner` elements (threads rounded to whole warps, at most one block's worth), y covers `outer`.
void launch_shape(int64_t inner, int64_t outer, dim3& grid, dim3& block) {
  const int64_t threads = std::min<int64_t>((inner + 31) / 32 * 32, cuda::kThreadsPerBlock);
  block = dim3(static_cast<unsigned>(threads));
  grid = dim3(cuda::blocks_for(inner, static_cast<int>(threads)),
              static_cast<unsigned>(std::min<int64_t>(outer, cuda::kMaxBlocks)));
}

}  // namespace

void im2col_cuda(const Tensor& images, const Tensor& cols, const ConvGeometry& g, ColumnOrder order) {
  cuda::DeviceGuard guard(images.device());
  if (cols.numel() == 0) return;
  const int64_t rows = cols.numel() / g.column_cols(), rows_per_image = g.column_rows();
  const ColumnStrides strides = ColumnStrides::of(order, g, images.size(0));
  dim3 grid, block;
  launch_shape(g.column_cols(), rows, grid, block);
  MINIDET_DISPATCH_FLOATING(images.dtype(), "conv2d", [&] {
    if (fits_int32(images, cols, g))
      im2col_kernel_cuda<scalar_t, int32_t><<<grid, block, 0, cuda::current_stream()>>>(
          images.data<scalar_t>(), cols.data<scalar_t>(), Window<int32_t>(g), int32_t(rows), int32_t(rows_per_image),
          int32_t(strides.image), int32_t(strides.row));
    else
      im2col_kernel_cuda<scalar_t, int64_t><<<grid, block, 0, cuda::current_stream()>>>(
          images.data<scalar_t>(), cols.data<scalar_t>(), Window<int64_t>(g), rows, rows_per_image, strides.image,
          strides.row);
    MINIDET_CUDA_LAUNCH_CHECK("im2col_kernel_cuda");
  });
}

void col2im_cuda(const Tensor& cols, const Tensor& images, const ConvGeometry& g) {
  cuda::DeviceGuard guard(images.device());
  if (images.numel() == 0) return;
  const int64_t plane_hw = g.height * g.width, planes = images.numel() / plane_hw;
  dim3 grid, block;
  launch_shape(plane_hw, planes, grid, block);
  MINIDET_DISPATCH_FLOATING(images.dtype(), "conv2d", [&] {
    if (fits_int32(images, cols, g))
      col2im_kernel_cuda<scalar_t, int32_t><<<grid, block, 0, cuda::current_stream()>>>(
          cols.data<scalar_t>(), images.data<scalar_t>(), Window<int32_t>(g), static_cast<int32_t>(planes),
          static_cast<int32_t>(g.kernel_h));
    else
      col2im_kernel_cuda<scalar_t, int64_t><<<grid, block, 0, cuda::current_stream()>>>(
          cols.data<scalar_t>(), images.data<scalar_t>(), Window<int64_t>(g), planes, g.kernel_h);
    MINIDET_CUDA_LAUNCH_CHECK("col2im_kernel_cuda");
  });
}

}  // namespace minidet::ops::detail
