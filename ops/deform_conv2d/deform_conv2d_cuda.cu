// CUDA kernels of deform_conv2d.
//
// One thread per sample (image, offset group, tap, output position): it locates the sample once (four
// neighbours, bilinear weights) and loops over the C_in/G channels of its offset group. Neighbouring threads
// hold neighbouring output positions, so the reads of offset and mask and the writes of cols, grad_offset
// and grad_mask are coalesced; only the bilinear reads of the input are gathers.
//
// Backward (deform_col2im_fused_kernel) does in one pass what mmcv does in three kernels: for each channel
// it reads the four neighbours once and from them accumulates dS/dy, dS/dx and S (for the offset and mask
// gradients: no atomics, the thread owns its sample), rewrites the column entry for dW, and scatters
// m * weight_r * dcols into grad_input with atomicAdd.
//
// Deterministic mode replaces that atomic scatter with a gather in a fixed order:
//   1. list every (sample, neighbour r) pair, entry id = sample*4 + r, keyed by the grad_input pixel it
//      feeds, (image, offset group, y, x) flattened; pairs that feed nothing get a key past every pixel;
//   2. sort the keys with a stable radix sort (CUB), carrying the ids: each pixel's pairs become one
//      contiguous run, in increasing id;
//   3. mark where each pixel's run begins and ends;
//   4. one thread per grad_input element (channel c of that pixel) sums m * weight * dcols over the run.
// The run order depends only on the data, so the bits are the same every run. It costs a sort of 4 entries
// per sample and the stored weights: slower than atomics, the price of reproducibility.
#include <algorithm>

#include <cub/device/device_radix_sort.cuh>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/deform_conv2d/deform_conv2d_kernels.h"

namespace minidet::ops::detail {
namespace {

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
  BilinearSample<T> at;
  T mask;
  int64_t neighbour[4];
  bool inside[4];
  __device__ LocatedSample(int64_t s, const T* offset, const T* mask_data, const DeformGeometry& g) : SampleIndex(s, g) {
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

// Thread e handles sample e % samples for the channels of slice e / samples of its offset group: with few
// samples (a small batch, few positions) slicing the channels keeps enough threads in flight.
template <typename T>
__global__ void deform_im2col_kernel(int64_t samples, int64_t slice_channels, const T* __restrict__ input,
                                     const T* __restrict__ offset, const T* __restrict__ mask, T* __restrict__ cols,
                                     ColumnLayout layout, DeformGeometry g) {
  const int64_t plane_size = g.height * g.width, group_channels = g.channels_per_offset_group();
  const int64_t slices = (group_channels + slice_channels - 1) / slice_channels;
  MINIDET_KERNEL_LOOP(e, samples * slices) {
    const LocatedSample<T> si(e % samples, offset, mask, g);
    const int64_t first = (e / samples) * slice_channels, count = min(slice_channels, group_channels - first);
    const int64_t c0 = si.first_channel(g) + first;
    const T* plane = input + (si.b * g.channels + c0) * plane_size;
    T* col = cols + layout.index(si.b, c0 * g.taps() + si.tap, si.pos);
    const int64_t col_step = g.taps() * layout.row_stride;  // next channel, same tap
#pragma unroll 4
    for (int64_t c = 0; c < count; ++c, plane += plane_size, col += col_step) {
      T v[4];
      si.read(plane, v);
      *col = si.at.valid ? si.mask * interpolate(si.at, v) : T(0);
    }
  }
}

// Channels per thread so that about four full waves of threads (4 x SMs x 2048) share the work.
int64_t channels_per_slice(int64_t samples, int64_t group_channels) {
  const int64_t threads_wanted = int64_t(4) * cuda::multiprocessor_count() * 2048;
  const int64_t slices = std::clamp<int64_t>(threads_wanted / std::max<int64_t>(samples, 1), 1, group_channels);
  return (group_channels + slices - 1) / slices;
}

// Any output pointer may be null (not needed). grad_input: atomicAdd into a zeroed buffer. grad_cols is
// per_image; cols is written in `layout`.
template <typename T>
__global__ void deform_col2im_fused_kernel(int64_t samples, const T* __restrict__ grad_cols,
                                           const T* __restrict__ input, const T* __restrict__ offset,
                                           const T* __restrict__ mask, T* grad_input, T* __restrict__ grad_offset,
                                           T* __restrict__ grad_mask, T* __restrict__ cols, ColumnLayout layout,
                                           DeformGeometry g) {
  const int64_t plane_size = g.height * g.width, group_channels = g.channels_per_offset_group();
  const int64_t taps = g.taps(), out_hw = g.out_hw();
  MINIDET_KERNEL_LOOP(s, samples) {
    const LocatedSample<T> si(s, offset, mask, g);
    const int64_t c0 = si.first_channel(g);
    const int64_t col_step = taps * layout.row_stride;
    T* col = cols ? cols + layout.index(si.b, c0 * taps + si.tap, si.pos) : nullptr;
    T sum_dy = 0, sum_dx = 0, sum_value = 0;
    if (!si.at.valid) {  // samples nothing: zero columns, zero offset and mask gradients
      if (col)
        for (int64_t c = 0; c < group_channels; ++c, col += col_step) *col = T(0);
    } else {
      const T* plane = input + (si.b * g.channels + c0) * plane_size;
      T* grad_plane = grad_input ? grad_input + (si.b * g.channels + c0) * plane_size : nullptr;
      const T* grad_col = grad_cols + ((si.b * g.channels + c0) * taps + si.tap) * out_hw + si.pos;
      T weight[4];  // m * bilinear weight: what one unit of dcols sends to each neighbour
#pragma unroll
      for (int r = 0; r < 4; ++r) weight[r] = si.mask * neighbour_weight(si.at, r);
#pragma unroll 2
      for (int64_t c = 0; c < group_channels; ++c, plane += plane_size, grad_col += taps * out_hw) {
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
      const int64_t dy = si.dy_index(g);
      grad_offset[dy] = si.mask * sum_dy;
      grad_offset[dy + out_hw] = si.mask * sum_dx;
    }
    if (grad_mask) grad_mask[si.mask_index(g)] = sum_value;
  }
}

// ---- The tiled backward (the default when dx is needed and determinism is not asked for) ----------------
//
// deform_col2im_fused_kernel sends 4 atomicAdds per (sample, channel) to global memory, and those atomics,
// not the arithmetic, bound its speed. Here a block takes a tile of kTileH x kTileW output positions of one
// (image, offset group), all taps, and a slice of the group's channels. Every sample of the tile lands, up to
// its offset, inside a small window of the input: the tap grid of the tile widened by kMargin pixels on each
// side. The block accumulates dx for that window in shared memory (fast shared atomics), then adds the window
// to grad_input once: one global atomic per touched pixel instead of one per contribution (about 15 times
// fewer for a 3x3 kernel). A neighbour that falls outside the window (an offset of kMargin or more) goes
// straight to global memory, so any offset stays correct.
// The offset and mask gradients sum over channels, which are split across blocks: each block writes its
// slice's partial sums, and sum_slices_kernel adds the slices in a fixed order (no atomics there).
constexpr int kTileH = 8, kTileW = 32;  // one thread per output position of the tile: 256 threads
constexpr int kMargin = 2;
constexpr int kMaxSliceChannels = 16;
constexpr int64_t kTileSharedBytes = 48 << 10;

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
  const int64_t fit = kTileSharedBytes / (t.cells() * element_bytes);  // 0: the window does not fit
  t.slice_channels = std::min<int64_t>({g.channels_per_offset_group(), kMaxSliceChannels, fit});
  t.slices = t.slice_channels > 0 ? (g.channels_per_offset_group() + t.slice_channels - 1) / t.slice_channels : 0;
  return t;
}

// Grid: x = (image*G + group)*tiles + tile, y = channel slice. partial: (slices, 3, samples) or null.
template <typename T>
__global__ void __launch_bounds__(kTileH * kTileW)
    deform_col2im_tiled_kernel(const T* __restrict__ grad_cols, const T* __restrict__ input,
                               const T* __restrict__ offset, const T* __restrict__ mask, T* grad_input,
                               T* __restrict__ partial, T* __restrict__ cols, ColumnLayout layout, DeformGeometry g,
                               TileGeometry t) {
  extern __shared__ unsigned char shared_bytes[];
  T* window = reinterpret_cast<T*>(shared_bytes);  // (slice channel, window row, window column)
  const int64_t tiles = t.tiles_h * t.tiles_w, b_group = blockIdx.x / tiles, tile = blockIdx.x % tiles;
  const int64_t b = b_group / g.offset_groups, group = b_group % g.offset_groups;
  const int64_t p0 = tile / t.tiles_w * kTileH, q0 = tile % t.tiles_w * kTileW;
  const int64_t p = p0 + threadIdx.y, q = q0 + threadIdx.x;
  const int64_t slice = blockIdx.y, first = slice * t.slice_channels;
  const int64_t count = min(t.slice_channels, g.channels_per_offset_group() - first);
  const int64_t c0 = group * g.channels_per_offset_group() + first;
  const int64_t row0 = p0 * g.stride_h - g.pad_h - kMargin, col0 = q0 * g.stride_w - g.pad_w - kMargin;
  const int64_t cells = t.cells(), plane_size = g.height * g.width, taps = g.taps(), out_hw = g.out_hw();
  const int64_t samples = static_cast<int64_t>(gridDim.x) / tiles * taps * out_hw;
  const int thread = threadIdx.y * kTileW + threadIdx.x;
  for (int64_t i = thread; i < count * cells; i += kTileH * kTileW) window[i] = T(0);
  __syncthreads();
  if (p < g.out_h && q < g.out_w) {
    for (int64_t tap = 0; tap < taps; ++tap) {
      const int64_t s = (b_group * taps + tap) * out_hw + p * g.out_w + q;
      const LocatedSample<T> si(s, offset, mask, g);
      int64_t cell[4];  // the neighbour's place in the window, or -1 when it falls outside
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t wy = si.at.y0 + r / 2 - row0, wx = si.at.x0 + r % 2 - col0;
        cell[r] = si.inside[r] && wy >= 0 && wy < t.window_h && wx >= 0 && wx < t.window_w ? wy * t.window_w + wx : -1;
      }
      T weight[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) weight[r] = si.mask * neighbour_weight(si.at, r);
      const T* plane = input + (b * g.channels + c0) * plane_size;
      T* grad_plane = grad_input + (b * g.channels + c0) * plane_size;
      const T* grad_col = grad_cols + ((b * g.channels + c0) * taps + tap) * out_hw + si.pos;
      T* col = cols ? cols + layout.index(b, c0 * taps + tap, si.pos) : nullptr;
      T sum_dy = 0, sum_dx = 0, sum_value = 0;
      for (int64_t c = 0; c < count; ++c, plane += plane_size, grad_plane += plane_size, grad_col += taps * out_hw) {
        if (!si.at.valid) {
          if (col) col[c * taps * layout.row_stride] = T(0);
          continue;
        }
        T v[4];
        si.read(plane, v);
        const T value = interpolate(si.at, v), dcol = *grad_col;
        if (col) col[c * taps * layout.row_stride] = si.mask * value;
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
  for (int64_t i = thread; i < count * cells; i += kTileH * kTileW) {
    const T value = window[i];
    if (value == T(0)) continue;
    const int64_t c = i / cells, y = row0 + (i % cells) / t.window_w, x = col0 + (i % cells) % t.window_w;
    atomicAdd(grad_input + (b * g.channels + c0 + c) * plane_size + y * g.width + x, value);
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

// Deterministic step 1: entry id = s*4 + r -> (pixel key, weight). key_none marks an entry that feeds nothing.
template <typename T>
__global__ void list_neighbours_kernel(int64_t samples, const T* offset, const T* mask, DeformGeometry g,
                                       int64_t key_none, int64_t* keys, int64_t* ids, T* weights) {
  MINIDET_KERNEL_LOOP(s, samples) {
    const LocatedSample<T> si(s, offset, mask, g);
    for (int r = 0; r < 4; ++r) {
      const int64_t id = s * 4 + r;
      keys[id] = si.inside[r] ? si.b_group * g.height * g.width + si.neighbour[r] : key_none;
      ids[id] = id;
      weights[id] = si.inside[r] ? si.mask * neighbour_weight(si.at, r) : T(0);
    }
  }
}

// Deterministic step 3: run of pixel key = [begin[key], end[key]) in the sorted list (begin = end = 0: none).
__global__ void run_bounds_kernel(int64_t entries, const int64_t* sorted_keys, int64_t key_none, int64_t* begin,
                                  int64_t* end) {
  MINIDET_KERNEL_LOOP(i, entries) {
    const int64_t key = sorted_keys[i];
    if (key == key_none) continue;
    if (i == 0 || sorted_keys[i - 1] != key) begin[key] = i;
    if (i == entries - 1 || sorted_keys[i + 1] != key) end[key] = i + 1;
  }
}

// Deterministic step 4: one thread per grad_input element (b, c, y, x), summing its pixel's run in order.
template <typename T>
__global__ void gather_input_grad_kernel(int64_t n, const T* grad_cols, const int64_t* sorted_ids,
                                         const T* weights, const int64_t* begin, const int64_t* end, T* grad_input,
                                         DeformGeometry g) {
  const int64_t plane_size = g.height * g.width, out_hw = g.out_hw(), taps = g.taps();
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t pixel = e % plane_size, c = (e / plane_size) % g.channels, b = e / (plane_size * g.channels);
    const int64_t key = (b * g.offset_groups + c / g.channels_per_offset_group()) * plane_size + pixel;
    const T* grad_cols_c = grad_cols + (b * g.channels + c) * taps * out_hw;  // (tap, pos) of channel c
    T sum = 0;
    for (int64_t i = begin[key]; i < end[key]; ++i) {
      const int64_t id = sorted_ids[i], s = id / 4;
      sum += weights[id] * grad_cols_c[(s / out_hw) % taps * out_hw + s % out_hw];
    }
    grad_input[e] = sum;
  }
}

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

int bits_for(int64_t value) {
  int bits = 1;
  while (bits < 63 && (int64_t(1) << bits) <= value) ++bits;
  return bits;
}

template <typename T>
void deterministic_input_grad(const Tensor& grad_cols, const Tensor& offset, const Tensor& mask,
                              const Tensor& grad_input, const DeformGeometry& g) {
  const int64_t batch = grad_input.size(0), samples = batch * g.offset_groups * g.taps() * g.out_hw();
  const int64_t entries = samples * 4, key_none = batch * g.offset_groups * g.height * g.width;
  const TensorOptions index_options(kInt64, grad_input.device());
  Tensor keys = empty({entries}, index_options), ids = empty({entries}, index_options);
  Tensor sorted_keys = empty({entries}, index_options), sorted_ids = empty({entries}, index_options);
  Tensor weights = empty({entries}, grad_input.options());
  cudaStream_t stream = cuda::current_stream();
  list_neighbours_kernel<T><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0, stream>>>(
      samples, offset.data<T>(), data_or_null<T>(mask), g, key_none, keys.data<int64_t>(), ids.data<int64_t>(),
      weights.data<T>());
  MINIDET_CUDA_LAUNCH_CHECK("list_neighbours_kernel");
  // Only the bits that can be set: key_none is the largest key.
  const int end_bit = bits_for(key_none);
  auto sort = [&](void* temp, size_t& temp_bytes) {
    return cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys.data<int64_t>(), sorted_keys.data<int64_t>(),
                                           ids.data<int64_t>(), sorted_ids.data<int64_t>(), entries, 0, end_bit,
                                           stream);
  };
  size_t temp_bytes = 0;
  MINIDET_CUDA_CHECK(sort(nullptr, temp_bytes));
  Tensor temp = empty({static_cast<int64_t>(temp_bytes) + 1}, TensorOptions(kUInt8, grad_input.device()));
  MINIDET_CUDA_CHECK(sort(temp.raw_data(), temp_bytes));
  Tensor begin = zeros({key_none}, index_options), end = zeros({key_none}, index_options);
  run_bounds_kernel<<<cuda::blocks_for(entries), cuda::kThreadsPerBlock, 0, stream>>>(
      entries, sorted_keys.data<int64_t>(), key_none, begin.data<int64_t>(), end.data<int64_t>());
  MINIDET_CUDA_LAUNCH_CHECK("run_bounds_kernel");
  const int64_t n = grad_input.numel();
  gather_input_grad_kernel<T><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, stream>>>(
      n, grad_cols.data<T>(), sorted_ids.data<int64_t>(), weights.data<T>(), begin.data<int64_t>(),
      end.data<int64_t>(), grad_input.data<T>(), g);
  MINIDET_CUDA_LAUNCH_CHECK("gather_input_grad_kernel");
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
    deform_im2col_kernel<scalar_t><<<cuda::blocks_for(threads), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        samples, slice_channels, input.data<scalar_t>(), offset.data<scalar_t>(), data_or_null<scalar_t>(mask),
        cols.data<scalar_t>(), layout, g);
    MINIDET_CUDA_LAUNCH_CHECK("deform_im2col_kernel");
  });
}

void deform_col2im_cuda(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                        const DeformGeometry& g, const DeformBackwardOutputs& out, bool deterministic) {
  cuda::DeviceGuard guard(input.device());
  const int64_t samples = input.size(0) * g.offset_groups * g.taps() * g.out_hw();
  if (samples == 0) return;
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    using T = scalar_t;
    cudaStream_t stream = cuda::current_stream();
    const TileGeometry tiles = tile_geometry(g, sizeof(T));
    if (out.grad_input.defined() && !deterministic && tiles.slices > 0) {
      const bool coordinates = out.grad_offset.defined() || out.grad_mask.defined();
      Tensor partial = coordinates ? empty({tiles.slices * 3 * samples}, input.options()) : Tensor();
      const dim3 grid(static_cast<unsigned>(input.size(0) * g.offset_groups * tiles.tiles_h * tiles.tiles_w),
                      static_cast<unsigned>(tiles.slices));
      const size_t shared = static_cast<size_t>(tiles.slice_channels * tiles.cells()) * sizeof(T);
      deform_col2im_tiled_kernel<T><<<grid, dim3(kTileW, kTileH), shared, stream>>>(
          grad_cols.data<T>(), input.data<T>(), offset.data<T>(), data_or_null<T>(mask), out.grad_input.data<T>(),
          data_or_null<T>(partial), data_or_null<T>(out.cols), out.cols_layout, g, tiles);
      MINIDET_CUDA_LAUNCH_CHECK("deform_col2im_tiled_kernel");
      if (coordinates) {
        sum_slices_kernel<T><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0, stream>>>(
            samples, tiles.slices, partial.data<T>(), data_or_null<T>(mask), data_or_null<T>(out.grad_offset),
            data_or_null<T>(out.grad_mask), g);
        MINIDET_CUDA_LAUNCH_CHECK("sum_slices_kernel");
      }
      return;
    }
    const bool atomic_input = out.grad_input.defined() && !deterministic;
    if (atomic_input || out.grad_offset.defined() || out.grad_mask.defined() || out.cols.defined()) {
      deform_col2im_fused_kernel<T><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0, stream>>>(
          samples, grad_cols.data<T>(), input.data<T>(), offset.data<T>(), data_or_null<T>(mask),
          atomic_input ? out.grad_input.data<T>() : nullptr, data_or_null<T>(out.grad_offset),
          data_or_null<T>(out.grad_mask), data_or_null<T>(out.cols), out.cols_layout, g);
      MINIDET_CUDA_LAUNCH_CHECK("deform_col2im_fused_kernel");
    }
    if (out.grad_input.defined() && deterministic) deterministic_input_grad<T>(grad_cols, offset, mask, out.grad_input, g);
  });
}

}  // namespace minidet::ops::detail
