// Device helpers shared by deform_conv2d's CUDA files, and the launchers they call one another through.
//
//   deform_conv2d_cuda.cu                im2col, the one-pass backward with global atomics, the entry points
//   deform_conv2d_tiled_cuda.cu          the tiled backward (dx through shared memory): the default
//   deform_conv2d_deterministic_cuda.cu  dx as a sorted gather, for DeterministicMode
#pragma once

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/deform_conv2d/deform_conv2d_kernels.h"

namespace minidet::ops::detail {

// The coordinates of sample s = ((b*G + group)*taps + tap)*out_hw + pos, the thread index of the kernels.
struct SampleIndex {
  int64_t b, group, tap, pos, b_group;
  __device__ SampleIndex(int64_t s, const DeformGeometry& g) {
    const int64_t out_hw = g.out_hw(), taps = g.taps();
    pos = s % out_hw;
    tap = (s / out_hw) % taps;
    b_group = s / (out_hw * taps);
    group = b_group % g.offset_groups;
    b = b_group / g.offset_groups;
  }
  __device__ int64_t dy_index(const DeformGeometry& g) const {
    return (b_group * 2 * g.taps() + 2 * tap) * g.out_hw() + pos;
  }
  __device__ int64_t mask_index(const DeformGeometry& g) const { return (b_group * g.taps() + tap) * g.out_hw() + pos; }
  __device__ int64_t first_channel(const DeformGeometry& g) const { return group * g.channels_per_offset_group(); }
};

// A sample located once for every channel of its offset group: its bilinear weights and mask value (1 without
// a mask), and each neighbour as an offset inside a channel plane, so that the channel loop below does no
// index arithmetic beyond moving its pointers by one plane. A neighbour outside the map has inside = false:
// it is never read (it reads as 0) and never written.
template <typename T>
struct LocatedSample : SampleIndex {
  DeformSample<T> at;
  T mask;
  int64_t neighbour[4];
  bool inside[4];
  __device__ LocatedSample(int64_t s, const T* offset, const T* mask_data, const DeformGeometry& g)
      : SampleIndex(s, g) {
    const int64_t dy = dy_index(g);
    at = locate_sample<T>(g, tap / g.kernel_w, tap % g.kernel_w, pos / g.out_w, pos % g.out_w, offset[dy],
                          offset[dy + g.out_hw()]);
    mask = mask_data ? mask_data[mask_index(g)] : T(1);
    for (int r = 0; r < 4; ++r) {
      const int64_t y = at.y0 + r / 2, x = at.x0 + r % 2;
      inside[r] = at.valid && neighbour_inside(y, x, g.height, g.width);
      neighbour[r] = inside[r] ? y * g.width + x : 0;
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

// The tiled backward: grad_input (required) and whatever else `out` asks for. Returns false, doing nothing,
// when a tile's input window does not fit in shared memory (huge stride or dilation): then the caller uses
// the one-pass kernel.
bool deform_col2im_tiled_cuda(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                              const DeformGeometry& g, const DeformBackwardOutputs& out);
// grad_input = col2im(grad_cols) in a fixed order (deterministic); grad_input is overwritten.
void deform_input_grad_sorted_cuda(const Tensor& grad_cols, const Tensor& offset, const Tensor& mask,
                                   const Tensor& grad_input, const DeformGeometry& g);

}  // namespace minidet::ops::detail
