// CUDA kernels of deform_conv2d: im2col, and the entry points of the forward and the backward.
//
// im2col: one thread per sample (image, offset group, tap, output position): it locates the sample once (four
// neighbours, bilinear weights) and loops over the C_in/G channels of its offset group. Neighbouring threads
// hold neighbouring output positions, so the reads of offset and mask and the writes of cols are coalesced;
// only the bilinear reads of the input are gathers.
//
// The backward is one pass over the samples with the lanes over channels (deform_conv2d_backward_cuda.cu):
// dx, the offset and mask gradients and the recomputed columns for dW. Under DeterministicMode that pass
// leaves dx out and hands over dcols by sample, and dx is summed in a fixed order
// (deform_conv2d_deterministic_cuda.cu).
#include <algorithm>

#include "core/factories.h"
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
  if (input.size(0) * g.offset_groups * g.taps() * g.out_hw() == 0) return;
  const bool sorted_dx = deterministic && out.grad_input.defined();
  DeformBackwardOutputs scattered = out;
  if (sorted_dx) scattered.grad_input = Tensor();
  const Tensor by_sample = sorted_dx ? empty({grad_cols.numel()}, grad_cols.options()) : Tensor();
  deform_col2im_lanes_cuda(grad_cols, input, offset, mask, layout, g, scattered, by_sample);
  if (sorted_dx) deform_input_grad_sorted_cuda(by_sample, offset, mask, out.grad_input, g);
}

}  // namespace minidet::ops::detail
