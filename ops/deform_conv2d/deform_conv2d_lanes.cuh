// The work split of deform_conv2d's channel-last CUDA backward (deform_conv2d_backward_cuda.cu).
//
// Why channel-last. A sample's four neighbours, weights and mask are the same for every channel of its
// offset group. With the lanes of a warp over OUTPUT POSITIONS (the layout of the columns), the 32 lanes
// read (and, in the backward, add into) 32 scattered pixels: 32 separate memory transactions per neighbour.
// With the lanes over CHANNELS of one sample, in an NHWC copy of the input, the lanes read 32 consecutive
// words of one pixel: one transaction. In float32, when every offset group's channels come in fours, each
// lane takes 4 neighbouring channels at a time (V = 4), so the reads are 16-byte loads. (RoIAlign's kernels split their
// work the same way, ops/roi_align/roi_align_nhwc.cuh.)
//
// A block takes `positions` consecutive output positions of one (image, offset group, tap), one position
// per team of `lanes` lanes, and a slice of the group's channels. The columns are position-fastest, so a
// block moves its columns between global memory and a (position, channel) array in shared memory with
// reads and writes coalesced along the positions, and its teams work on that array along the channels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/factories.h"
#include "ops/common/transpose.cuh"
#include "ops/common/vectors.cuh"
#include "ops/deform_conv2d/deform_conv2d_cuda.cuh"

namespace minidet::ops::detail::lanes {

constexpr int kThreads = 256;
// Channels per slice at most. A (position, channel) array then holds at most about kThreads x 9 elements
// (the most is a float32 slice of 8 channels: 256 positions of 8 + 1): about 9 KB, 18 KB for the backward's
// two, under the 48 KB a block may take without opting in.
template <typename T>
constexpr int64_t kMaxSliceChannels = sizeof(T) == 4 ? 256 : 128;

struct Geometry {
  int64_t positions;               // consecutive output positions per block
  int64_t tiles;                   // blocks of positions per (image, offset group, tap)
  int64_t slice_channels, slices;  // the slice is a multiple of the vector width
  int lanes;                       // lanes per sample: a power of two, at most 32
  int position_bits;               // positions = 2^position_bits
  int vector;                      // channels a lane takes at once: 4 or 1
  int stride;                      // a (position, channel) array's row in shared memory, in elements
  // Grid: x = ((image*G + group)*taps + tap)*tiles + tile, y = channel slice.
  dim3 grid(const DeformGeometry& g, int64_t batch) const {
    const int64_t rows = batch * g.offset_groups * g.taps() * tiles;
    MINIDET_CHECK(rows < (int64_t(1) << 31), "deform_conv2d: ", rows, " blocks of positions exceed a CUDA grid");
    return dim3(static_cast<unsigned>(rows), static_cast<unsigned>(slices));
  }
  size_t array_bytes(int64_t element_bytes) const { return size_t(positions * stride * element_bytes); }
};

// Four channels at a time in float32 when every offset group's channels come in fours (so that each 16-byte
// access is aligned); else one. Also the sorted gather's width (deform_conv2d_deterministic_cuda.cu).
template <typename T>
int vector_width(const DeformGeometry& g) {
  return std::is_same_v<T, float> && g.channels_per_offset_group() % 4 == 0 ? 4 : 1;
}

// Slices of at most kMaxSliceChannels, evened out (320 channels go as
// 160 + 160, not 256 + 64), rounded up to the vector. Each lane takes two of the slice's vectors where it
// can (8 float32 channels): locating a sample (offsets, neighbours, weights) is then shared by 8 channels'
// work instead of 4, which measured faster on bench_deform_conv2d's 64-channel shape (docs/benchmarks.md).
template <typename T>
Geometry geometry(const DeformGeometry& g) {
  Geometry t;
  const int64_t group_channels = g.channels_per_offset_group();
  t.vector = vector_width<T>(g);
  t.slices = (group_channels + kMaxSliceChannels<T> - 1) / kMaxSliceChannels<T>;
  t.slice_channels = ((group_channels + t.slices - 1) / t.slices + t.vector - 1) / t.vector * t.vector;
  t.slices = (group_channels + t.slice_channels - 1) / t.slice_channels;
  const int64_t per_lane = (t.slice_channels / t.vector + 1) / 2;
  t.lanes = 1;
  while (t.lanes < per_lane && t.lanes < 32) t.lanes *= 2;
  t.positions = kThreads / t.lanes;
  t.position_bits = 0;
  while ((int64_t(1) << t.position_bits) < t.positions) ++t.position_bits;
  t.tiles = (g.out_hw() + t.positions - 1) / t.positions;
  t.stride = int(t.slice_channels) + 1;  // +1: neighbouring positions' rows start in different banks
  return t;
}

// What a block of the grid above works on.
template <typename Index>
struct Block {
  Index b_group, tap, b, pos0, first, c0;  // first: the slice's first channel in its group; c0: in the input
  int positions, count;                    // positions and channels that exist (a last block or slice is short)
  __device__ Block(const DeformGeometry& g, const Geometry& t) {
    const Index taps = Index(g.taps()), group_channels = Index(g.channels_per_offset_group());
    const Index sample_row = Index(blockIdx.x) / Index(t.tiles);  // (image*G + group)*taps + tap
    tap = sample_row % taps;
    b_group = sample_row / taps;
    b = b_group / Index(g.offset_groups);
    pos0 = Index(blockIdx.x) % Index(t.tiles) * Index(t.positions);
    positions = int(min(Index(t.positions), Index(g.out_hw()) - pos0));
    first = Index(blockIdx.y) * Index(t.slice_channels);
    count = int(min(Index(t.slice_channels), group_channels - first));
    c0 = b_group % Index(g.offset_groups) * group_channels + first;
  }
  // Position p of the block as a sample, and its index s = ((b*G + group)*taps + tap)*out_hw + pos.
  __device__ SampleIndex<Index> where(int p, const DeformGeometry& g) const {
    return SampleIndex<Index>(b_group, tap, pos0 + p, g);
  }
  __device__ Index sample(int p, const DeformGeometry& g) const {
    return (b_group * Index(g.taps()) + tap) * Index(g.out_hw()) + pos0 + p;
  }
  // The (position, channel) array <-> the columns, coalesced along the positions. Entry (c, p) of the block
  // is column row (c0 + c)*taps + tap at position pos0 + p: a fixed step per channel, so the loops need no
  // division (positions is a power of two).
  template <typename Move>
  __device__ void for_columns(const ColumnLayout& layout, const DeformGeometry& g, const Geometry& t,
                              Move&& move) const {
    const Index column0 = Index(layout.index(b, c0 * Index(g.taps()) + tap, pos0));
    const Index channel_step = Index(g.taps()) * Index(layout.row_stride);
    const int last = count << t.position_bits, mask = int(t.positions) - 1;
#pragma unroll 4
    for (int i = threadIdx.x; i < last; i += kThreads) {
      const int c = i >> t.position_bits, p = i & mask;
      move(column0 + Index(c) * channel_step + p, p * t.stride + c, p);
    }
  }
  template <typename T>
  __device__ void load_columns(const T* __restrict__ cols, const ColumnLayout& layout, const DeformGeometry& g,
                               const Geometry& t, T* array) const {
    for_columns(layout, g, t,
                [&](Index column, int cell, int p) { array[cell] = p < positions ? cols[column] : T(0); });
  }
  template <typename T>
  __device__ void store_columns(const T* array, const ColumnLayout& layout, const DeformGeometry& g, const Geometry& t,
                                T* __restrict__ cols) const {
    for_columns(layout, g, t, [&](Index column, int cell, int p) {
      if (p < positions) cols[column] = array[cell];
    });
  }
};

// V neighbouring channels at once: one 16-byte load in float32 with V = 4 (ops/common/vectors.cuh).
using vectors::load_vector;

// The four neighbours of a located sample, V channels from c on (0 for a neighbour outside the map).
template <int V, typename T, typename Index>
__device__ inline void load_neighbours(const LocatedSample<T, Index>& si, const T* image, Index channels, int c,
                                       T v[4][V]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    if (si.inside[r]) {
      load_vector<V>(image + si.neighbour[r] * channels + c, v[r]);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) v[r][k] = T(0);
    }
  }
}

// The input (B, C, H, W) as (B, H, W, C), the layout the kernels read.
template <typename T>
Tensor channels_last(const Tensor& input, const DeformGeometry& g) {
  Tensor nhwc = empty({input.size(0), g.height, g.width, g.channels}, input.options());
  tiled_transpose::transpose(input.data<T>(), nhwc.data<T>(), input.size(0), g.channels, g.height * g.width);
  return nhwc;
}

}  // namespace minidet::ops::detail::lanes
