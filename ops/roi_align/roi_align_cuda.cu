// CUDA RoIAlign: forward, the atomic input-gradient backward, and the RoI-coordinate gradient.
//
// Why channel-last. The geometry of a sample (where it sits, its weights) is the same for all C channels,
// and C is large (256 in a detector's box head). So the work is split as (RoI, bin, channels) with the
// CHANNELS FASTEST: the 32 lanes of a warp are 32 channels of one bin (each lane serves 8 channels, 32
// apart, so one geometry computation serves 256 outputs; see WorkItem). The lanes compute the same geometry
// in lockstep and read and write the 32 channels of the same pixel. In the usual NCHW layout those 32 values
// are H*W apart, 32 memory transactions; in NHWC (channel last) they are consecutive: ONE 128-byte line.
//   forward:   input NCHW -> NHWC once (a tiled transpose, ~2 passes over the input), then every bilinear
//              read is a coalesced warp read.
//   backward:  the atomicAdd scatter goes into an NHWC gradient buffer, so each warp-wide atomic covers one
//              128-byte line instead of 32 scattered addresses (torchvision's layout), then NHWC -> NCHW.
// Zero-weight neighbours are skipped (a sample on a pixel line, the duplicated border neighbours).
// DeterministicMode replaces the atomics by a sorted, fixed-order gather (roi_align_cuda_sorted.cu).
//
// The RoI-coordinate gradient needs a sum over channels, bins and samples per RoI: one block per RoI, each
// thread a fixed strided part of that sum, then a fixed-shape tree in shared memory. No atomics, so it is
// deterministic in every mode.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align_kernels.h"

namespace minidet::ops::detail {
namespace {

constexpr int kTile = 32;  // transpose tile: kTile x kTile values through shared memory, kTile x 8 threads

// out[b, s, r] = in[b, r, s] for (B, R, S) -> (B, S, R). Reads and writes are both coalesced: a warp reads
// a row of the tile and writes a column of it, through shared memory (+1 column against bank conflicts).
template <typename T>
__global__ void transpose_kernel(const T* in, T* out, int64_t batch, int64_t rows, int64_t cols) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t col_tiles = (cols + kTile - 1) / kTile, row_tiles = (rows + kTile - 1) / kTile;
  const int64_t tiles = batch * row_tiles * col_tiles;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / (row_tiles * col_tiles);
    const int64_t r0 = (t / col_tiles) % row_tiles * kTile, c0 = t % col_tiles * kTile;
    const T* src = in + b * rows * cols;
    T* dst = out + b * rows * cols;
    for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = src[r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) dst[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

template <typename T>
void transpose(const T* in, T* out, int64_t batch, int64_t rows, int64_t cols) {
  const int64_t tiles = batch * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  if (tiles == 0) return;
  transpose_kernel<T><<<cuda::blocks_for(tiles, 1), dim3(kTile, 8), 0, cuda::current_stream()>>>(in, out, batch,
                                                                                                   rows, cols);
  MINIDET_CUDA_LAUNCH_CHECK("transpose_kernel");
}

// Work items. Item i is (RoI k, bin, slab, lane), lane fastest: the 32 lanes of a warp share one (RoI, bin),
// so they compute the same sample geometry in lockstep, and lane l of slab b serves the kChannelsPerLane
// channels c = b * kChannelsPerSlab + l + 32 j. For each j the warp touches 32 consecutive channels of one
// pixel: one 128-byte line in NHWC. One geometry computation serves 8 channels per lane (256 per warp),
// which is what makes the kernels memory-bound rather than busy recomputing positions and weights.
// Index is int32_t when the item count is below 2^31 (64-bit division costs several times more), int64_t
// otherwise; addresses are always computed in 64 bits.
constexpr int kLanes = 32;
constexpr int kChannelsPerLane = 8;
constexpr int64_t kChannelsPerSlab = kLanes * kChannelsPerLane;

__host__ __device__ inline int64_t channel_slabs(int64_t channels) { return (channels + kChannelsPerSlab - 1) / kChannelsPerSlab; }

template <typename Index>
struct WorkItem {
  Index k, bin, slab, lane;
};
template <typename Index>
__device__ inline WorkItem<Index> split_item(Index i, Index slabs, Index bins) {
  const Index warp = i / kLanes, k_bin = warp / slabs, k = k_bin / bins;
  return {k, k_bin - k * bins, warp - k_bin * slabs, i - warp * kLanes};
}

// kMax is g.max_mode as a template argument: the avg kernel then keeps no winners (fewer registers, more
// threads in flight to hide the latency of the scattered reads).
template <typename T, typename Index, bool kMax>
__global__ void forward_kernel(Index n, const T* input_nhwc, const T* rois, T* output, int64_t* argmax,
                               RoiAlignGeometry g) {
  const Index slabs = Index(channel_slabs(g.channels)), bins = Index(g.bins()), pooled_w = Index(g.pooled_w);
  for (Index i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += Index(blockDim.x) * gridDim.x) {
    const WorkItem<Index> e = split_item(i, slabs, bins);
    const RoiBox<T> box = roi_box(rois + int64_t(e.k) * 5, g);
    const Index p = e.bin / pooled_w, q = e.bin - p * pooled_w;
    const int64_t c0 = int64_t(e.slab) * kChannelsPerSlab + e.lane;  // this thread's channels: c0 + 32 j
    // Pixel `offset` of channel c0 + 32 j is features[offset * C + 32 j]: NHWC.
    const T* features = input_nhwc + box.batch * g.height * g.width * g.channels + c0;
    T result[kChannelsPerLane];
    int64_t best[kChannelsPerLane];  // max mode: index of the winning sample (kMax only)
#pragma unroll
    for (int j = 0; j < kChannelsPerLane; ++j) {
      result[j] = T(0);
      best[j] = 0;
    }
    int64_t s = 0;
    for (int64_t iy = 0; iy < box.grid_h; ++iy) {
      for (int64_t ix = 0; ix < box.grid_w; ++ix, ++s) {
        const BilinearSample<T> w = roi_sample_at(box, p, q, iy, ix, g).bilinear;
        const T* f0 = features + w.offset[0] * g.channels;
        const T* f1 = features + w.offset[1] * g.channels;
        const T* f2 = features + w.offset[2] * g.channels;
        const T* f3 = features + w.offset[3] * g.channels;
#pragma unroll
        for (int j = 0; j < kChannelsPerLane; ++j) {
          if (c0 + kLanes * j >= g.channels) continue;
          const int d = kLanes * j;
          // Same expression and order as the CPU's bilinear_interpolate; outside samples read 0.
          const T v = w.inside ? w.weight[0] * f0[d] + w.weight[1] * f1[d] + w.weight[2] * f2[d] + w.weight[3] * f3[d]
                               : T(0);
          if constexpr (!kMax) {
            result[j] += v;
          } else if (s == 0 || max_sample_wins(v, result[j])) {
            result[j] = v;
            best[j] = s;
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kChannelsPerLane; ++j) {
      const int64_t c = c0 + kLanes * j;
      if (c >= g.channels) continue;
      const int64_t out = (int64_t(e.k) * g.channels + c) * g.bins() + e.bin;  // (K, C, ph, pw)
      if constexpr (kMax) {
        output[out] = result[j];
        argmax[out] = best[j];
      } else {
        output[out] = result[j] / T(box.count());
      }
    }
  }
}

template <typename T, typename Index, bool kMax>
__global__ void backward_input_atomic_kernel(Index n, const T* grad_output, const T* rois, const int64_t* argmax,
                                             T* grad_nhwc, RoiAlignGeometry g) {
  const Index slabs = Index(channel_slabs(g.channels)), bins = Index(g.bins()), pooled_w = Index(g.pooled_w);
  for (Index i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += Index(blockDim.x) * gridDim.x) {
    const WorkItem<Index> e = split_item(i, slabs, bins);
    const RoiBox<T> box = roi_box(rois + int64_t(e.k) * 5, g);
    const Index p = e.bin / pooled_w, q = e.bin - p * pooled_w;
    const int64_t c0 = int64_t(e.slab) * kChannelsPerSlab + e.lane;
    const int64_t first_out = (int64_t(e.k) * g.channels + c0) * g.bins() + e.bin;  // channel c0 + 32 j: + 32 j bins
    T* dst = grad_nhwc + box.batch * g.height * g.width * g.channels + c0;
    if constexpr (kMax) {
      // Only the winning sample, with the whole gradient; each channel has its own winner.
#pragma unroll
      for (int j = 0; j < kChannelsPerLane; ++j) {
        if (c0 + kLanes * j >= g.channels) continue;
        const int64_t out = first_out + int64_t(kLanes) * j * g.bins(), s = argmax[out];
        const BilinearSample<T> w = roi_sample_at(box, p, q, s / box.grid_w, s % box.grid_w, g).bilinear;
        if (!w.inside) continue;
        for (int corner = 0; corner < 4; ++corner)
          if (w.weight[corner] != T(0))
            atomicAdd(dst + w.offset[corner] * g.channels + kLanes * j, grad_output[out] * w.weight[corner]);
      }
    } else {
      // avg: every sample hands gradient / count to its four neighbours, for each of the thread's channels.
      T share[kChannelsPerLane];
#pragma unroll
      for (int j = 0; j < kChannelsPerLane; ++j)
        share[j] = c0 + kLanes * j < g.channels
                       ? grad_output[first_out + int64_t(kLanes) * j * g.bins()] / T(box.count())
                       : T(0);
      for (int64_t iy = 0; iy < box.grid_h; ++iy) {
        for (int64_t ix = 0; ix < box.grid_w; ++ix) {
          const BilinearSample<T> w = roi_sample_at(box, p, q, iy, ix, g).bilinear;
          if (!w.inside) continue;
          for (int corner = 0; corner < 4; ++corner) {
            // Zero weights (a sample on a pixel line, the duplicated neighbours at the border) add nothing.
            if (w.weight[corner] == T(0)) continue;
            T* pixel = dst + w.offset[corner] * g.channels;
#pragma unroll
            for (int j = 0; j < kChannelsPerLane; ++j)
              if (c0 + kLanes * j < g.channels) atomicAdd(pixel + kLanes * j, share[j] * w.weight[corner]);
          }
        }
      }
    }
  }
}

constexpr int kRoiGradThreads = 256;

template <typename T>
__global__ void backward_rois_kernel(const T* grad_output, const T* input, const T* rois, const int64_t* argmax,
                                     T* grad_rois, RoiAlignGeometry g) {
  __shared__ T partial[4][kRoiGradThreads];
  const int64_t plane = g.height * g.width, bins = g.bins();
  const T scale = T(g.spatial_scale);
  for (int64_t k = blockIdx.x; k < g.rois; k += gridDim.x) {
    const RoiBox<T> box = roi_box(rois + k * 5, g);
    const int64_t per_bin = g.max_mode ? 1 : box.count();
    const int64_t items = g.channels * bins * per_bin;  // (channel, bin, counted sample)
    T box_grad[4] = {0, 0, 0, 0};
    for (int64_t item = threadIdx.x; item < items; item += blockDim.x) {
      const int64_t c = item / (bins * per_bin), bin = (item / per_bin) % bins;
      const int64_t out = (k * g.channels + c) * bins + bin;
      const int64_t s = g.max_mode ? argmax[out] : item % per_bin;
      const T share = g.max_mode ? grad_output[out] : grad_output[out] / T(box.count());
      const RoiSample<T> sample = roi_sample(box, bin / g.pooled_w, bin % g.pooled_w, s, g);
      const BilinearSample<T>& w = sample.bilinear;
      if (!w.inside) continue;
      const T* features = input + (box.batch * g.channels + c) * plane;
      T dv_dy = 0, dv_dx = 0;
      for (int j = 0; j < 4; ++j) {
        dv_dy += w.dweight_dy[j] * features[w.offset[j]];
        dv_dx += w.dweight_dx[j] * features[w.offset[j]];
      }
      add_box_gradient(box, sample, dv_dy, dv_dx, share, scale, box_grad);
    }
    for (int j = 0; j < 4; ++j) partial[j][threadIdx.x] = box_grad[j];
    __syncthreads();
    for (int half = kRoiGradThreads / 2; half > 0; half /= 2) {  // fixed tree: same bits every run
      if (threadIdx.x < half)
        for (int j = 0; j < 4; ++j) partial[j][threadIdx.x] += partial[j][threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      grad_rois[k * 5] = T(0);
      for (int j = 0; j < 4; ++j) grad_rois[k * 5 + 1 + j] = partial[j][0];
    }
    __syncthreads();  // `partial` is reused by the next RoI
  }
}

// The grid-stride loop adds at most one grid (65535 * 256 < 2^24) past n, so n below 2^31 - 2^24 is safe.
bool fits_int32(int64_t n) { return n < (int64_t(1) << 31) - (int64_t(1) << 24); }

}  // namespace

void roi_align_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                            const RoiAlignGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  if (output.numel() == 0) return;
  const int64_t n = g.rois * g.bins() * channel_slabs(g.channels) * kLanes;  // work items
  Tensor input_nhwc = empty({g.batch, g.height, g.width, g.channels}, input.options());
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_align", [&] {
    transpose(input.data<scalar_t>(), input_nhwc.data<scalar_t>(), g.batch, g.channels, g.height * g.width);
    const auto launch = [&](auto index) {
      using Index = decltype(index);
      const auto kernel = g.max_mode ? forward_kernel<scalar_t, Index, true> : forward_kernel<scalar_t, Index, false>;
      kernel<<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          Index(n), input_nhwc.data<scalar_t>(), rois.data<scalar_t>(), output.data<scalar_t>(),
          argmax.defined() ? argmax.data<int64_t>() : nullptr, g);
    };
    if (fits_int32(n)) launch(int32_t()); else launch(int64_t());
    MINIDET_CUDA_LAUNCH_CHECK("roi_align forward_kernel");
  });
}

void roi_align_backward_input_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                                   const Tensor& grad_input, const RoiAlignGeometry& g, bool deterministic) {
  if (deterministic) {
    roi_align_backward_input_sorted_cuda(grad_output, rois, argmax, grad_input, g);
    return;
  }
  cuda::DeviceGuard guard(grad_input.device());
  if (grad_input.numel() == 0) return;
  if (grad_output.numel() == 0) {
    grad_input.zero_();
    return;
  }
  const int64_t n = g.rois * g.bins() * channel_slabs(g.channels) * kLanes;  // work items
  Tensor grad_nhwc = zeros({g.batch, g.height, g.width, g.channels}, grad_input.options());
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_align", [&] {
    const auto launch = [&](auto index) {
      using Index = decltype(index);
      const auto kernel = g.max_mode ? backward_input_atomic_kernel<scalar_t, Index, true>
                                     : backward_input_atomic_kernel<scalar_t, Index, false>;
      kernel<<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
              Index(n), grad_output.data<scalar_t>(), rois.data<scalar_t>(),
              argmax.defined() ? argmax.data<int64_t>() : nullptr, grad_nhwc.data<scalar_t>(), g);
    };
    if (fits_int32(n)) launch(int32_t()); else launch(int64_t());
    MINIDET_CUDA_LAUNCH_CHECK("roi_align backward_input_atomic_kernel");
    transpose(grad_nhwc.data<scalar_t>(), grad_input.data<scalar_t>(), g.batch, g.height * g.width, g.channels);
  });
}

void roi_align_backward_rois_cuda(const Tensor& grad_output, const Tensor& input, const Tensor& rois,
                                  const Tensor& argmax, const Tensor& grad_rois, const RoiAlignGeometry& g) {
  cuda::DeviceGuard guard(grad_rois.device());
  if (g.rois == 0) return;
  MINIDET_DISPATCH_FLOATING(grad_rois.dtype(), "roi_align", [&] {
    backward_rois_kernel<scalar_t><<<cuda::blocks_for(g.rois, 1), kRoiGradThreads, 0, cuda::current_stream()>>>(
        grad_output.data<scalar_t>(), input.data<scalar_t>(), rois.data<scalar_t>(),
        argmax.defined() ? argmax.data<int64_t>() : nullptr, grad_rois.data<scalar_t>(), g);
    MINIDET_CUDA_LAUNCH_CHECK("roi_align backward_rois_kernel");
  });
}

}  // namespace minidet::ops::detail
