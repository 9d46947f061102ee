// The tiled backward of deform_conv2d on CUDA, the default when dx is needed (deform_conv2d_cuda.cu says
// when it runs).
//
// deform_col2im_fused_kernel sends 4 atomicAdds per (sample, channel) to global memory, and those atomics,
// not the arithmetic, bound its speed. Here a block takes a tile of kTileH x kTileW output positions of one
// (image, offset group), all taps, and a slice of at most kMaxSliceChannels of the group's channels. Every
// sample of the tile lands, up to its offset, inside a small window of the input: the tap grid of the tile
// widened by kMargin pixels on each side. The block accumulates dx for that window in shared memory (fast
// shared atomics), then adds the window to grad_input once: one global atomic per touched pixel instead of
// one per contribution (about 15 times fewer for a 3x3 kernel). A neighbour that falls outside the window
// (an offset of kMargin or more) goes straight to global memory, so any offset stays correct.
// The offset and mask gradients sum over channels, which are split across blocks: each block writes its
// slice's partial sums, and sum_slices_kernel adds the slices in a fixed order (no atomics there).
#include <algorithm>
#include <cstdint>

#include "core/factories.h"
#include "ops/deform_conv2d/deform_conv2d_cuda.cuh"

namespace minidet::ops::detail {
namespace {

constexpr int kTileH = 8, kTileW = 32;  // one thread per output position of the tile: 256 threads
constexpr int kMargin = 2;
// Channels per block at most. Thinner slices give more blocks but locate every sample again per slice: each
// block shares one sample's neighbours and weights over up to this many channels (timed on
// bench_deform_conv2d's workloads, docs/benchmarks.md). choose_slice() thins it only to even out the waves.
constexpr int64_t kMaxSliceChannels = 16;
constexpr int64_t kTileSharedBytes = 48 << 10;

// Blocks a multiprocessor must hold at once, as far as registers go. The kernel waits on its gathers and its
// shared-memory atomics (latency, not throughput, bounds it), so what speeds it up is more warps in flight.
// In float32 with 32-bit offsets the compiler fits the kernel in 64 registers a thread without spilling, for
// four blocks of 256 threads; left to itself it takes a few more and gets two. Four were measured faster
// than two on both of bench_deform_conv2d's shapes (docs/benchmarks.md). Float64, or 64-bit offsets, would
// spill at four, so they keep the registers they need.
template <typename T, typename Index>
constexpr int kTiledMinBlocks = sizeof(T) == 4 && sizeof(Index) == 4 ? 4 : 1;

struct TileGeometry {
  int64_t tiles_h, tiles_w;      // tiles per (image, offset group)
  int64_t window_h, window_w;    // the input window of one tile, in pixels
  int64_t slice_channels, slices;
  __host__ __device__ int64_t cells() const { return window_h * window_w; }
};

// A tile's input window: rows [tile_p0*stride_h - pad_h - kMargin, ... + window_h) (columns alike).
TileGeometry tile_geometry(const DeformGeometry& g, int64_t element_bytes) {
  TileGeometry t;
  t.tiles_h = (g.out_h + kTileH - 1) / kTileH;
  t.tiles_w = (g.out_w + kTileW - 1) / kTileW;
  t.window_h = (kTileH - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 2 * kMargin + 1;
  t.window_w = (kTileW - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 2 * kMargin + 1;
  const int64_t group_channels = g.channels_per_offset_group();
  const int64_t fit = kTileSharedBytes / (t.cells() * element_bytes);  // 0: the window does not fit
  t.slice_channels = std::min<int64_t>({group_channels, kMaxSliceChannels, fit});
  t.slices = t.slice_channels > 0 ? (group_channels + t.slice_channels - 1) / t.slice_channels : 0;
  return t;
}

// The GPU runs the grid in waves of (blocks a multiprocessor holds) x (multiprocessors), and a last wave
// that is only partly full takes as long as a full one. So the slice may be thinned, to a half or a quarter
// of the thickest, when that shortens waves x channels per block, the time the busiest multiprocessor
// spends; ties keep the thicker slice, which locates each sample fewer times. E.g. 672 blocks of 16
// channels on 132 multiprocessors holding 4 each are 2 waves x 16, and 1,344 of 8 are 3 x 8.
template <typename Kernel>
void choose_slice(TileGeometry& t, const DeformGeometry& g, int64_t tile_blocks, int64_t element_bytes,
                  Kernel* kernel) {
  const int64_t group_channels = g.channels_per_offset_group(), thickest = t.slice_channels;
  int64_t best_cost = INT64_MAX;
  for (int64_t c = thickest; c >= 1 && c * 4 >= thickest; c = (c + 1) / 2) {
    const int64_t slices = (group_channels + c - 1) / c;
    int resident = 0;
    MINIDET_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kTileH * kTileW,
                                                                     size_t(c * t.cells() * element_bytes)));
    const int64_t slots = std::max(1, resident) * int64_t(cuda::multiprocessor_count());
    const int64_t cost = (tile_blocks * slices + slots - 1) / slots * c;
    if (cost < best_cost) {
      best_cost = cost;
      t.slice_channels = c;
      t.slices = slices;
    }
    if (c == 1) break;
  }
}

// Grid: x = (image*G + group)*tiles + tile, y = channel slice. partial: (slices, 3, samples) or null.
// Index: int32_t when every offset fits (the launcher checks), else int64_t (deform_conv2d_cuda.cuh).
template <typename T, typename Index>
__global__ void __launch_bounds__(kTileH * kTileW, kTiledMinBlocks<T, Index>)
    deform_col2im_tiled_kernel(const T* __restrict__ grad_cols, const T* __restrict__ input,
                               const T* __restrict__ offset, const T* __restrict__ mask, T* grad_input,
                               T* __restrict__ partial, T* __restrict__ cols, ColumnLayout layout, DeformGeometry g,
                               TileGeometry t) {
  extern __shared__ unsigned char shared_bytes[];
  T* window = reinterpret_cast<T*>(shared_bytes);  // (slice channel, window row, window column)
  const Index tiles = Index(t.tiles_h * t.tiles_w), tiles_w = Index(t.tiles_w);
  const Index b_group = Index(blockIdx.x) / tiles, tile = Index(blockIdx.x) % tiles;
  const Index b = b_group / Index(g.offset_groups), group = b_group % Index(g.offset_groups);
  const Index p0 = tile / tiles_w * kTileH, q0 = tile % tiles_w * kTileW;
  const Index p = p0 + Index(threadIdx.y), q = q0 + Index(threadIdx.x);
  const Index group_channels = Index(g.channels_per_offset_group());
  const Index slice = Index(blockIdx.y), first = slice * Index(t.slice_channels);
  const Index count = min(Index(t.slice_channels), group_channels - first);
  const Index c0 = group * group_channels + first;
  const Index row0 = p0 * Index(g.stride_h) - Index(g.pad_h) - kMargin;
  const Index col0 = q0 * Index(g.stride_w) - Index(g.pad_w) - kMargin;
  const Index window_h = Index(t.window_h), window_w = Index(t.window_w), cells = window_h * window_w;
  const Index plane_size = Index(g.height * g.width), taps = Index(g.taps()), out_hw = Index(g.out_hw());
  const Index samples = Index(gridDim.x) / tiles * taps * out_hw;
  const Index col_step = taps * Index(layout.row_stride);  // grad_cols and cols: next channel, same tap
  const int thread = threadIdx.y * kTileW + threadIdx.x;
  for (Index i = thread; i < count * cells; i += kTileH * kTileW) window[i] = T(0);
  __syncthreads();
  if (p < Index(g.out_h) && q < Index(g.out_w)) {
    const T* plane0 = input + (b * Index(g.channels) + c0) * plane_size;
    T* grad_plane0 = grad_input + (b * Index(g.channels) + c0) * plane_size;
    for (Index tap = 0; tap < taps; ++tap) {
      const Index s = (b_group * taps + tap) * out_hw + p * Index(g.out_w) + q;
      const LocatedSample<T, Index> si(s, offset, mask, g);
      Index cell[4];  // the neighbour's place in the window, or -1 when it falls outside
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const Index wy = Index(si.at.y0) + r / 2 - row0, wx = Index(si.at.x0) + r % 2 - col0;
        cell[r] = si.inside[r] && wy >= 0 && wy < window_h && wx >= 0 && wx < window_w ? wy * window_w + wx : -1;
      }
      T weight[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) weight[r] = si.mask * neighbour_weight(si.at, r);
      const T* plane = plane0;
      T* grad_plane = grad_plane0;
      const T* grad_col = grad_cols + Index(layout.index(b, c0 * taps + tap, si.pos));
      T* col = cols ? cols + Index(layout.index(b, c0 * taps + tap, si.pos)) : nullptr;
      T sum_dy = 0, sum_dx = 0, sum_value = 0;
      for (Index c = 0; c < count; ++c, plane += plane_size, grad_plane += plane_size, grad_col += col_step) {
        if (!si.at.valid) {
          if (col) col[c * col_step] = T(0);
          continue;
        }
        T v[4];
        si.read(plane, v);
        const T value = interpolate(si.at, v), dcol = *grad_col;
        if (col) col[c * col_step] = si.mask * value;
        sum_value += dcol * value;
        sum_dy += dcol * interpolate_dy(si.at, v);
        sum_dx += dcol * interpolate_dx(si.at, v);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          if (!si.inside[r]) continue;
          if (cell[r] >= 0)
            atomicAdd(window + c * cells + cell[r], weight[r] * dcol);
          else
            atomicAdd(grad_plane + si.neighbour[r], weight[r] * dcol);
        }
      }
      if (partial) {
        T* out = partial + slice * 3 * samples + s;
        out[0] = sum_dy;
        out[samples] = sum_dx;
        out[2 * samples] = sum_value;
      }
    }
  }
  __syncthreads();
  // One global atomic per touched pixel of the window (pixels outside the image are never touched).
  for (Index i = thread; i < count * cells; i += kTileH * kTileW) {
    const T value = window[i];
    if (value == T(0)) continue;
    const Index c = i / cells, y = row0 + (i % cells) / window_w, x = col0 + (i % cells) % window_w;
    atomicAdd(grad_input + (b * Index(g.channels) + c0 + c) * plane_size + y * Index(g.width) + x, value);
  }
}

// The offset and mask gradients from the slices' partial sums, added in slice order.
template <typename T>
__global__ void sum_slices_kernel(int64_t samples, int64_t slices, const T* __restrict__ partial,
                                  const T* __restrict__ mask, T* __restrict__ grad_offset, T* __restrict__ grad_mask,
                                  DeformGeometry g) {
  MINIDET_KERNEL_LOOP(s, samples) {
    T sum_dy = 0, sum_dx = 0, sum_value = 0;
    for (int64_t slice = 0; slice < slices; ++slice) {
      const T* in = partial + slice * 3 * samples + s;
      sum_dy += in[0];
      sum_dx += in[samples];
      sum_value += in[2 * samples];
    }
    const SampleIndex si(s, g);
    const T m = mask ? mask[si.mask_index(g)] : T(1);
    if (grad_offset) {
      grad_offset[si.dy_index(g)] = m * sum_dy;
      grad_offset[si.dy_index(g) + g.out_hw()] = m * sum_dx;
    }
    if (grad_mask) grad_mask[si.mask_index(g)] = sum_value;
  }
}

}  // namespace

bool deform_col2im_tiled_cuda(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                              const ColumnLayout& layout, const DeformGeometry& g, const DeformBackwardOutputs& out) {
  const int64_t element_bytes = static_cast<int64_t>(element_size(input.dtype()));
  TileGeometry tiles = tile_geometry(g, element_bytes);
  if (tiles.slices == 0) return false;
  cuda::DeviceGuard guard(input.device());
  const int64_t samples = input.size(0) * g.offset_groups * g.taps() * g.out_hw();
  const int64_t tile_blocks = input.size(0) * g.offset_groups * tiles.tiles_h * tiles.tiles_w;
  const bool coordinates = out.grad_offset.defined() || out.grad_mask.defined();
  // 32-bit offsets when the largest tensor the kernel indexes allows (grad_cols and cols have as many
  // entries; partial has 3 per sample and slice, at most as many slices as choose_slice's thinnest gives:
  // counted even when no partial sums are needed, which only errs towards 64 bits).
  const int64_t thinnest = (tiles.slice_channels + 3) / 4;
  const int64_t most_slices = (g.channels_per_offset_group() + thinnest - 1) / thinnest;
  const int64_t largest = std::max({input.numel(), grad_cols.numel(), offset.numel(), 3 * most_slices * samples,
                                    out.cols.defined() ? out.cols.numel() : int64_t(0)});
  cudaStream_t stream = cuda::current_stream();
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    using T = scalar_t;
    const auto launch = [&](auto index) {
      auto* kernel = deform_col2im_tiled_kernel<T, decltype(index)>;
      choose_slice(tiles, g, tile_blocks, element_bytes, kernel);
      // Per slice, per sample: the slice's sums of dcols * dS/dy, dcols * dS/dx and dcols * S.
      const Tensor partial = coordinates ? empty({tiles.slices * 3 * samples}, input.options()) : Tensor();
      const dim3 grid(static_cast<unsigned>(tile_blocks), static_cast<unsigned>(tiles.slices));
      const size_t shared = static_cast<size_t>(tiles.slice_channels * tiles.cells() * element_bytes);
      kernel<<<grid, dim3(kTileW, kTileH), shared, stream>>>(
          grad_cols.data<T>(), input.data<T>(), offset.data<T>(), data_or_null<T>(mask), out.grad_input.data<T>(),
          data_or_null<T>(partial), data_or_null<T>(out.cols), layout, g, tiles);
      MINIDET_CUDA_LAUNCH_CHECK("deform_col2im_tiled_kernel");
      if (coordinates) {
        sum_slices_kernel<T><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0, stream>>>(
            samples, tiles.slices, partial.data<T>(), data_or_null<T>(mask), data_or_null<T>(out.grad_offset),
            data_or_null<T>(out.grad_mask), g);
        MINIDET_CUDA_LAUNCH_CHECK("sum_slices_kernel");
      }
    };
    cuda::with_index(largest, launch);
  });
  return true;
}

}  // namespace minidet::ops::detail
