// CUDA kernels of deform_conv2d: im2col, the one-pass backward, and the entry points that choose a backward.
//
// One thread per sample (image, offset group, tap, output position): it locates the sample once (four
// neighbours, bilinear weights) and loops over the C_in/G channels of its offset group. Neighbouring threads
// hold neighbouring output positions, so the reads of offset and mask and the writes of cols, grad_offset
// and grad_mask are coalesced; only the bilinear reads of the input are gathers.
//
// The one-pass backward (deform_col2im_fused_kernel) does what mmcv does in three kernels: for each channel
// it reads the four neighbours once and from them accumulates dS/dy, dS/dx and S (for the offset and mask
// gradients: no atomics, the thread owns its sample), rewrites the column entry for dW, and, unless asked not
// to, scatters m * weight_r * dcols into grad_input with atomicAdd. Which backward runs:
//   dx needed, default            the tiled kernel (deform_conv2d_tiled_cuda.cu), dx through shared memory;
//                                 the one-pass kernel with global atomics if a tile's window does not fit;
//   dx needed, DeterministicMode  the one-pass kernel without dx, then dx as a sorted gather
//                                 (deform_conv2d_deterministic_cuda.cu);
//   no dx                         the one-pass kernel without dx.
#include <algorithm>

#include "ops/deform_conv2d/deform_conv2d_cuda.cuh"

namespace minidet::ops::detail {
namespace {

// Thread e handles sample e % samples for the channels of slice e / samples of its offset group: with few
// samples (a small batch, few positions) slicing the channels keeps enough threads in flight. Index: int32_t
// when every offset fits (the launcher checks), else int64_t.
template <typename T, typename Index>
__global__ void deform_im2col_kernel(Index samples, Index slice_channels, const T* __restrict__ input,
                                     const T* __restrict__ offset, const T* __restrict__ mask, T* __restrict__ cols,
                                     ColumnLayout layout, DeformGeometry g) {
  const Index plane_size = Index(g.height * g.width), group_channels = Index(g.channels_per_offset_group());
  const Index slices = (group_channels + slice_channels - 1) / slice_channels, taps = Index(g.taps());
  const Index col_step = taps * Index(layout.row_stride);  // next channel, same tap
  MINIDET_KERNEL_LOOP_AS(Index, e, samples * slices) {
    const LocatedSample<T, Index> si(e % samples, offset, mask, g);
    const Index first = (e / samples) * slice_channels, count = min(slice_channels, group_channels - first);
    const Index c0 = si.first_channel(g) + first;
    const T* plane = input + (si.b * Index(g.channels) + c0) * plane_size;
    T* col = cols + Index(layout.index(si.b, c0 * taps + si.tap, si.pos));
#pragma unroll 4
    for (Index c = 0; c < count; ++c, plane += plane_size, col += col_step) {
      T v[4];
      si.read(plane, v);
      *col = si.at.valid ? si.mask * interpolate(si.at, v) : T(0);
    }
  }
}

// Channels per thread: all of the group's when the samples alone fill the GPU (one thread per SM slot),
// fewer when they do not (a small batch), so that about one full wave of threads shares the work. Slicing
// more than needed costs: every slice locates its samples again.
int64_t channels_per_slice(int64_t samples, int64_t group_channels) {
  const int64_t one_wave = int64_t(cuda::multiprocessor_count()) * 2048;
  const int64_t slices = std::clamp<int64_t>(one_wave / std::max<int64_t>(samples, 1), 1, group_channels);
  return (group_channels + slices - 1) / slices;
}

// Any output pointer may be null (not needed). grad_input: atomicAdd into a zeroed buffer. grad_cols is read,
// and cols written, in `layout`. Index: int32_t when every offset fits (the launcher checks), else int64_t.
template <typename T, typename Index>
__global__ void deform_col2im_fused_kernel(Index samples, const T* __restrict__ grad_cols, const T* __restrict__ input,
                                           const T* __restrict__ offset, const T* __restrict__ mask, T* grad_input,
                                           T* __restrict__ grad_offset, T* __restrict__ grad_mask, T* __restrict__ cols,
                                           ColumnLayout layout, DeformGeometry g) {
  const Index plane_size = Index(g.height * g.width), group_channels = Index(g.channels_per_offset_group());
  const Index taps = Index(g.taps()), out_hw = Index(g.out_hw()), channels = Index(g.channels);
  const Index col_step = taps * Index(layout.row_stride);
  MINIDET_KERNEL_LOOP_AS(Index, s, samples) {
    const LocatedSample<T, Index> si(s, offset, mask, g);
    const Index c0 = si.first_channel(g);
    T* col = cols ? cols + Index(layout.index(si.b, c0 * taps + si.tap, si.pos)) : nullptr;
    T sum_dy = 0, sum_dx = 0, sum_value = 0;
    if (!si.at.valid) {  // samples nothing: zero columns, zero offset and mask gradients
      if (col)
        for (Index c = 0; c < group_channels; ++c, col += col_step) *col = T(0);
    } else {
      const T* plane = input + (si.b * channels + c0) * plane_size;
      T* grad_plane = grad_input ? grad_input + (si.b * channels + c0) * plane_size : nullptr;
      const T* grad_col = grad_cols + Index(layout.index(si.b, c0 * taps + si.tap, si.pos));
      T weight[4];  // m * bilinear weight: what one unit of dcols sends to each neighbour
#pragma unroll
      for (int r = 0; r < 4; ++r) weight[r] = si.mask * neighbour_weight(si.at, r);
#pragma unroll 2
      for (Index c = 0; c < group_channels; ++c, plane += plane_size, grad_col += col_step) {
        T v[4];
        si.read(plane, v);
        const T value = interpolate(si.at, v), dcol = *grad_col;
        if (col) {
          *col = si.mask * value;
          col += col_step;
        }
        sum_value += dcol * value;
        sum_dy += dcol * interpolate_dy(si.at, v);
        sum_dx += dcol * interpolate_dx(si.at, v);
        if (grad_plane) {
#pragma unroll
          for (int r = 0; r < 4; ++r)
            if (si.inside[r]) atomicAdd(grad_plane + si.neighbour[r], weight[r] * dcol);
          grad_plane += plane_size;
        }
      }
    }
    if (grad_offset) {
      const Index dy = si.dy_index(g);
      grad_offset[dy] = si.mask * sum_dy;
      grad_offset[dy + out_hw] = si.mask * sum_dx;
    }
    if (grad_mask) grad_mask[si.mask_index(g)] = sum_value;
  }
}

}  // namespace

void deform_im2col_cuda(const Tensor& input, const Tensor& offset, const Tensor& mask, const Tensor& cols,
                        const ColumnLayout& layout, const DeformGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  const int64_t samples = input.size(0) * g.offset_groups * g.taps() * g.out_hw();
  if (samples == 0 || cols.numel() == 0) return;
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    const int64_t slice_channels = channels_per_slice(samples, g.channels_per_offset_group());
    const int64_t threads = samples * ((g.channels_per_offset_group() + slice_channels - 1) / slice_channels);
    const int64_t largest = std::max({input.numel(), offset.numel(), cols.numel(), threads});
    const auto launch = [&](auto index) {
      using Index = decltype(index);
      deform_im2col_kernel<scalar_t, Index>
          <<<cuda::blocks_for(threads), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
              Index(samples), Index(slice_channels), input.data<scalar_t>(), offset.data<scalar_t>(),
              data_or_null<scalar_t>(mask), cols.data<scalar_t>(), layout, g);
    };
    cuda::with_index(largest, launch);
    MINIDET_CUDA_LAUNCH_CHECK("deform_im2col_kernel");
  });
}

void deform_col2im_cuda(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                        const ColumnLayout& layout, const DeformGeometry& g, const DeformBackwardOutputs& out,
                        bool deterministic) {
  cuda::DeviceGuard guard(input.device());
  const int64_t samples = input.size(0) * g.offset_groups * g.taps() * g.out_hw();
  if (samples == 0) return;
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    using T = scalar_t;
    cudaStream_t stream = cuda::current_stream();
    if (out.grad_input.defined() && !deterministic &&
        deform_col2im_tiled_cuda(grad_cols, input, offset, mask, layout, g, out))
      return;
    const bool atomic_input = out.grad_input.defined() && !deterministic;
    if (atomic_input || out.grad_offset.defined() || out.grad_mask.defined() || out.cols.defined()) {
      const auto launch = [&](auto index) {
        using Index = decltype(index);
        deform_col2im_fused_kernel<T, Index><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0, stream>>>(
            Index(samples), grad_cols.data<T>(), input.data<T>(), offset.data<T>(), data_or_null<T>(mask),
            atomic_input ? out.grad_input.data<T>() : nullptr, data_or_null<T>(out.grad_offset),
            data_or_null<T>(out.grad_mask), data_or_null<T>(out.cols), layout, g);
      };
      const int64_t largest = std::max(
          {input.numel(), grad_cols.numel(), offset.numel(), out.cols.defined() ? out.cols.numel() : int64_t(0)});
      cuda::with_index(largest, launch);
      MINIDET_CUDA_LAUNCH_CHECK("deform_col2im_fused_kernel");
    }
    if (out.grad_input.defined() && deterministic)
      deform_input_grad_sorted_cuda(grad_cols, layout, offset, mask, out.grad_input, g);
  });
}

}  // namespace minidet::ops::detail
