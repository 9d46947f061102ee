// Device helpers shared by deform_conv2d's CUDA files, and the launchers they call one another through.
//
//   deform_conv2d_cuda.cu                im2col, and the entry points
//   deform_conv2d_backward_cuda.cu       the backward pass over the samples, lanes over channels
//   deform_conv2d_lanes.cuh              that pass's work split
//   deform_conv2d_deterministic_cuda.cu  dx as a sorted gather, for DeterministicMode
#pragma once

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/deform_conv2d/deform_conv2d_kernels.h"

namespace minidet::ops::detail {

// The coordinates of sample s = ((b*G + group)*taps + tap)*out_hw + pos, the thread index of the kernels.
// Index is int64_t, or int32_t where the launcher has checked that every offset fits (cuda::with_index).
template <typename Index = int64_t>
struct SampleIndex {
  Index b, group, tap, pos, b_group;
  __device__ SampleIndex(Index b_group_, Index tap_, Index pos_, const DeformGeometry& g)
      : b(b_group_ / Index(g.offset_groups)),
        group(b_group_ % Index(g.offset_groups)),
        tap(tap_),
        pos(pos_),
        b_group(b_group_) {}
  __device__ SampleIndex(Index s, const DeformGeometry& g) {
    const Index out_hw = Index(g.out_hw()), taps = Index(g.taps());
    pos = s % out_hw;
    tap = (s / out_hw) % taps;
    b_group = s / (out_hw * taps);
    group = b_group % Index(g.offset_groups);
    b = b_group / Index(g.offset_groups);
  }
  __device__ Index dy_index(const DeformGeometry& g) const {
    return (b_group * 2 * Index(g.taps()) + 2 * tap) * Index(g.out_hw()) + pos;
  }
  __device__ Index mask_index(const DeformGeometry& g) const {
    return (b_group * Index(g.taps()) + tap) * Index(g.out_hw()) + pos;
  }
  __device__ Index first_channel(const DeformGeometry& g) const {
    return group * Index(g.channels_per_offset_group());
  }
};

// A sample located once for every channel of its offset group: its bilinear weights and mask value (1 without
// a mask), and each neighbour as an offset inside a channel plane, so that the channel loop below does no
// index arithmetic beyond moving its pointers by one plane. A neighbour outside the map has inside = false:
// it is never read (it reads as 0) and never written.
template <typename T, typename Index = int64_t>
struct LocatedSample : SampleIndex<Index> {
  DeformSample<T> at;
  T mask;
  Index neighbour[4];
  bool inside[4];
  __device__ LocatedSample(Index s, const T* offset, const T* mask_data, const DeformGeometry& g)
      : LocatedSample(SampleIndex<Index>(s, g), offset, mask_data, g) {}
  __device__ LocatedSample(const SampleIndex<Index>& where, const T* offset, const T* mask_data,
                           const DeformGeometry& g)
      : SampleIndex<Index>(where) {
    const Index dy = this->dy_index(g), out_w = Index(g.out_w), kernel_w = Index(g.kernel_w);
    at = locate_sample<T>(g, this->tap / kernel_w, this->tap % kernel_w, this->pos / out_w, this->pos % out_w,
                          offset[dy], offset[dy + Index(g.out_hw())]);
    mask = mask_data ? mask_data[this->mask_index(g)] : T(1);
    for (int r = 0; r < 4; ++r) {
      const Index y = Index(at.y0) + r / 2, x = Index(at.x0) + r % 2;
      inside[r] = at.valid && neighbour_inside(y, x, g.height, g.width);
      neighbour[r] = inside[r] ? y * Index(g.width) + x : 0;
    }
  }
  __device__ void read(const T* __restrict__ plane, T v[4]) const {
#pragma unroll
    for (int r = 0; r < 4; ++r) v[r] = inside[r] ? plane[neighbour[r]] : T(0);
  }
};

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// The backward pass over the samples, lanes over channels: whatever `out` asks for (grad_input is written
// whole). With grad_cols_by_sample defined it also writes grad_cols there, laid out (sample, channel of
// its offset group), for deform_input_grad_sorted_cuda.
void deform_col2im_lanes_cuda(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                              const ColumnLayout& layout, const DeformGeometry& g, const DeformBackwardOutputs& out,
                              const Tensor& grad_cols_by_sample);
// grad_input = col2im(grad_cols) in a fixed order (deterministic), from grad_cols laid out (sample, channel of
// its offset group); grad_input is overwritten.
void deform_input_grad_sorted_cuda(const Tensor& grad_cols_by_sample, const Tensor& offset, const Tensor& mask,
                                   const Tensor& grad_input, const DeformGeometry& g);

}  // namespace minidet::ops::detail
