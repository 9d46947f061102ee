// RoIPool's forward over tiles of a channel-last map, for float32 inputs larger than the L2 cache
// (roi_pool_cuda.cu picks it).
//
// Why. A max over a bin reads every pixel of the bin, and a detector's RoIs overlap, so the bins of all RoIs
// together read each pixel many times. A kernel that reads per bin from global memory then moves gigabytes
// through L1 and L2; the plane kernels (roi_pool_cuda.cu) copy each (n, c) plane into shared memory once,
// but there a warp's 32 lanes are 32 bins scanning 32 scattered pixels, and the shared-memory banks serialise
// them. Here the 32 lanes are CHANNELS of one pixel, as in RoIAlign's channel-last kernels: every
// shared-memory read is one conflict-free row.
//
//   1. The input is laid out channel-last, (N, H, W, C) (roi_nhwc::transpose).
//   2. Block = (image, 16 x 16 tile of pixels, group of 64 channels). It copies its tile's 64 channels into
//      shared memory (64 KB), then its warps walk the RoIs 32 at a time (roi_pool_tiles.cuh) and, for each
//      bin that meets the tile, take the maximum of the bin's part of the tile; lane l scans channels l and
//      l + 32, so each bin's geometry serves two channels per lane. A tile with no NaN (the usual case,
//      found while copying it) scans with the plain "strictly greater" test.
//   3. A bin that spans several tiles gets one partial maximum from each. They are merged by a 64-bit
//      atomicMax on a key that orders (value, pixel) the way roi_pool.h's rule does:
//        high word: the value's bits made order-preserving as an unsigned integer, -0 read as +0 (they
//                   compare equal), and every NaN above +inf;
//        low word:  0xFFFFFFFF - the pixel's flat index in its plane, so of equal values the first pixel
//                   in row-major order wins.
//      The maximum key is then the first NaN in row-major order if the bin holds one, else the largest value
//      at its first pixel: exactly the CPU's scan (roi_pool_bin_max). Each tile's part is scanned in
//      row-major order with that scan's own rule, which picks its part's maximum key. The merge is
//      order-independent, so the output is the same every run.
//   4. Keys live channel-last, (K, bins, C), so a warp's atomics cover 256 contiguous bytes; a tiled
//      transpose decodes them into the output and the argmax, (K, C, bins). Key 0, which no pixel makes, is
//      an empty bin: (0, -1). A maximum of zero or NaN is read back from the input at its argmax, which
//      keeps the sign of a zero and a NaN's payload; every other value is the key's high word decoded.
// float64 values do not fit 32 bits of key, so float64 keeps the plane kernels.
#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align_nhwc.cuh"  // transpose, kLanes
#include "ops/roi_pool/roi_pool_kernels.h"
#include "ops/roi_pool/roi_pool_tiles.cuh"

namespace minidet::ops::detail {
namespace {

using roi_nhwc::kLanes;
using Key = unsigned long long;  // atomicMax's 64-bit type

constexpr int kTileSide = 16;  // a tile is kTileSide x kTileSide pixels of 64 channels: 64 KB of float32
constexpr int kTilePixels = kTileSide * kTileSide;
constexpr int kGroupChannels = 2 * kLanes;  // lane l takes channels l and l + 32 of its group
// Warps per block, sharing one staged tile. Two blocks of 16 fit a multiprocessor (64 registers a thread),
// which measured faster than three blocks of 8 (docs/benchmarks.md).
constexpr int kTileWarps = 16;
constexpr size_t kTileBytes = size_t(kTilePixels) * kLanes * sizeof(float2);

constexpr uint32_t kNaNHigh = 0xFFFFFFFFu;   // the high word of every NaN: above +inf's 0xFF800000
constexpr uint32_t kZeroHigh = 0x80000000u;  // the high word of +0 and -0

// The key of value v at flat plane index `index` (see the top of the file). Never 0: the smallest high word,
// -inf's, is 0x007FFFFF.
__device__ inline Key max_key(float v, uint32_t index) {
  uint32_t high = kNaNHigh;
  if (v == v) {
    const uint32_t bits = __float_as_uint(v == 0.0f ? 0.0f : v);
    high = bits & 0x80000000u ? ~bits : bits | 0x80000000u;
  }
  return (Key(high) << 32) | Key(0xFFFFFFFFu - index);
}

struct TileGrid {
  int64_t tiles_y, tiles_x, groups;
  int64_t items(int64_t images) const { return images * tiles_y * tiles_x * groups; }
};

// The maximum of rows [top, bottom) and columns [left, right) of the staged tile (relative to it), for both of
// the lane's channels, and where it is: the scan of roi_pool_bin_max in row-major order. kClean: the tile
// holds no NaN, so the rule is just "strictly greater" (two instructions fewer per pixel and channel).
template <bool kClean>
__device__ inline void scan_part(const float2* tile, int top, int bottom, int left, int right, float2& best,
                                 int2& best_at) {
  const int lane = threadIdx.x % 32;
  best_at = make_int2(top * kTileSide + left, top * kTileSide + left);
  best = tile[best_at.x * kLanes + lane];
  for (int y = top; y < bottom; ++y) {
    const float2* row = tile + y * kTileSide * kLanes + lane;
    for (int x = left; x < right; ++x) {
      const float2 v = row[x * kLanes];
      if (kClean ? v.x > best.x : roi_pool_replaces(v.x, best.x)) {
        best.x = v.x;
        best_at.x = y * kTileSide + x;
      }
      if (kClean ? v.y > best.y : roi_pool_replaces(v.y, best.y)) {
        best.y = v.y;
        best_at.y = y * kTileSide + x;
      }
    }
  }
}

__global__ void __launch_bounds__(kTileWarps * 32, 2)
    forward_tiles_kernel(int64_t items, const float* input, const float* rois, const int4* spans, Key* keys,
                         RoIPoolGeometry g, TileGrid grid) {
  // Pixel i, channels (l, l + 32) of the group at tile[i * kLanes + l]: a warp's read of one pixel is one
  // conflict-free 256-byte row.
  extern __shared__ float2 tile[];
  __shared__ int next_round;  // the next round of 32 RoIs that no warp has taken yet
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t bins = g.pooled_height * g.pooled_width;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t group = item % grid.groups, t = item / grid.groups;
    const int64_t tx = t % grid.tiles_x, ty = t / grid.tiles_x % grid.tiles_y,
                  image = t / (grid.tiles_x * grid.tiles_y);
    const int64_t y0 = ty * kTileSide, x0 = tx * kTileSide;
    const roi_tiles::Tile rect{image, y0, min(y0 + kTileSide, g.height), x0, min(x0 + kTileSide, g.width)};
    // A tile that no RoI meets is never read.
    bool met = false;
    for (int64_t k0 = warp * 32; k0 < g.num_rois && !met; k0 += kTileWarps * 32)
      met = roi_tiles::any_roi_meets(spans, g, k0, rect);
    if (!__syncthreads_or(met)) continue;

    // The tile's pixels for the group's channels (a warp reads one pixel's two runs of 32 channels), and
    // whether any is NaN.
    bool nan = false;
#pragma unroll 8
    for (int i = threadIdx.x; i < kTilePixels * kLanes; i += kTileWarps * 32) {
      const int64_t y = y0 + i / kLanes / kTileSide, x = x0 + i / kLanes % kTileSide;
      const int64_t c = group * kGroupChannels + i % kLanes;
      const float* pixel = input + ((image * g.height + y) * g.width + x) * g.channels;
      const bool inside = y < rect.y1 && x < rect.x1;
      const float2 v = make_float2(inside && c < g.channels ? pixel[c] : 0.0f,
                                   inside && c + kLanes < g.channels ? pixel[c + kLanes] : 0.0f);
      nan |= v.x != v.x || v.y != v.y;
      tile[i] = v;
    }
    if (threadIdx.x == 0) next_round = kTileWarps;
    const bool clean = !__syncthreads_or(nan);

    const int64_t c0 = group * kGroupChannels + lane, c1 = c0 + kLanes;
    // Rounds of 32 RoIs, handed out as the warps finish theirs: the RoIs that meet a tile cluster in a few
    // rounds, which would otherwise keep one warp busy while the others wait at the barrier.
    const auto next = [&](int64_t) {
      int taken = 0;
      if (lane == 0) taken = atomicAdd(&next_round, 1);
      return int64_t(__shfl_sync(0xffffffffu, taken, 0));
    };
    roi_tiles::walk_rois_meeting(
        rois, spans, g, warp, rect, next, [&](int64_t k, const RoIPoolFrame<float>& f, int p0, int p1, int q0, int q1) {
          for (int p = p0; p < p1; ++p) {
            // The bin's part of the tile, relative to it. It is empty only for a bin that is empty everywhere: a
            // bin a hair thin, whose edges round to one whole number inside the tile, still "meets" it, and
            // stays empty, (0, -1), as on the CPU. (The test is the same on every lane.)
            const int top = int(max(f.row_start(p), rect.y0) - y0), bottom = int(min(f.row_end(p), rect.y1) - y0);
            for (int q = q0; q < q1; ++q) {
              const int left = int(max(f.col_start(q), rect.x0) - x0), right = int(min(f.col_end(q), rect.x1) - x0);
              if (top >= bottom || left >= right) continue;
              float2 best;
              int2 at;
              if (clean)
                scan_part<true>(tile, top, bottom, left, right, best, at);
              else
                scan_part<false>(tile, top, bottom, left, right, best, at);
              // Flat plane index of a tile position.
              const auto index = [&](int i) { return uint32_t((y0 + i / kTileSide) * g.width + x0 + i % kTileSide); };
              Key* key = keys + (k * bins + p * g.pooled_width + q) * g.channels;
              if (c0 < g.channels) atomicMax(key + c0, max_key(best.x, index(at.x)));
              if (c1 < g.channels) atomicMax(key + c1, max_key(best.y, index(at.y)));
            }
          }
        });
    __syncthreads();  // the next item stages its own tile
  }
}

// keys (K, bins, C) -> output and argmax (K, C, bins), through a shared tile as roi_nhwc::transpose does.
__global__ void __launch_bounds__(roi_nhwc::kTransposeThreads)
    decode_kernel(const Key* keys, const float* input, const float* rois, float* output, int64_t* argmax,
                  RoIPoolGeometry g) {
  using roi_nhwc::kTile;
  using roi_nhwc::kTileRows;
  __shared__ Key staged[kTile][kTile + 1];
  const int64_t bins = g.pooled_height * g.pooled_width, plane = g.height * g.width;
  const int64_t bin_tiles = (bins + kTile - 1) / kTile, channel_tiles = (g.channels + kTile - 1) / kTile;
  const int64_t tiles = g.num_rois * bin_tiles * channel_tiles;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t k = t / (bin_tiles * channel_tiles);
    const int64_t b0 = t / channel_tiles % bin_tiles * kTile, c0 = t % channel_tiles * kTile;
#pragma unroll
    for (int j = 0; j < kTile / kTileRows; ++j) {
      const int64_t b = b0 + threadIdx.y + j * kTileRows, c = c0 + threadIdx.x;
      if (b < bins && c < g.channels)
        staged[threadIdx.y + j * kTileRows][threadIdx.x] = keys[(k * bins + b) * g.channels + c];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile / kTileRows; ++j) {
      const int64_t c = c0 + threadIdx.y + j * kTileRows, b = b0 + threadIdx.x;
      if (b >= bins || c >= g.channels) continue;
      const Key key = staged[threadIdx.x][threadIdx.y + j * kTileRows];
      const int64_t e = (k * g.channels + c) * bins + b;
      if (key == 0) {  // no pixel: an empty bin
        output[e] = 0.0f;
        argmax[e] = -1;
        continue;
      }
      const uint32_t high = uint32_t(key >> 32);
      const int64_t index = int64_t(0xFFFFFFFFu - uint32_t(key));
      argmax[e] = index;
      if (high == kNaNHigh || high == kZeroHigh) {
        const int64_t batch = static_cast<int64_t>(rois[k * 5]);
        output[e] = input[(batch * g.channels + c) * plane + index];
      } else {
        output[e] = __uint_as_float(high & 0x80000000u ? high & 0x7FFFFFFFu : ~high);
      }
    }
    __syncthreads();
  }
}

}  // namespace

bool roi_pool_tiles_take(const Tensor& input, const RoIPoolGeometry& g) {
  const int64_t images = input.size(0);
  return input.dtype() == kFloat32 && input.numel() * int64_t(sizeof(float)) > cuda::l2_cache_bytes() &&
         g.height * g.width < int64_t(UINT32_MAX) && images * g.height < (int64_t(1) << 31) &&
         g.width < (int64_t(1) << 31);
}

void roi_pool_forward_tiles_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                                 const RoIPoolGeometry& g) {
  const cudaStream_t stream = cuda::current_stream();
  const int64_t images = input.size(0), bins = g.pooled_height * g.pooled_width;
  const Tensor nhwc = empty({images, g.height, g.width, g.channels}, input.options());
  roi_nhwc::transpose(input.data<float>(), nhwc.data<float>(), images, g.channels, g.height * g.width);
  const Tensor spans = roi_tiles::spans<float>(rois, g, images);
  // Raw storage: minidet's tensors have no uint64 dtype. Zero is the key of no pixel.
  const Tensor keys =
      empty({g.num_rois * bins * g.channels * int64_t(sizeof(Key))}, TensorOptions(kUInt8, input.device()));
  Key* key_data = reinterpret_cast<Key*>(keys.data<uint8_t>());
  MINIDET_CUDA_CHECK(cudaMemsetAsync(key_data, 0, size_t(keys.numel()), stream));

  const TileGrid grid{(g.height + kTileSide - 1) / kTileSide, (g.width + kTileSide - 1) / kTileSide,
                      (g.channels + kGroupChannels - 1) / kGroupChannels};
  const int64_t items = grid.items(images);
  cuda::opt_in_to_shared_memory(forward_tiles_kernel, kTileBytes);
  forward_tiles_kernel<<<cuda::blocks_for(items, 1), kTileWarps * 32, kTileBytes, stream>>>(
      items, nhwc.data<float>(), rois.data<float>(), reinterpret_cast<const int4*>(spans.data<int64_t>()), key_data, g,
      grid);
  MINIDET_CUDA_LAUNCH_CHECK("roi_pool forward_tiles_kernel");

  const int64_t tiles = g.num_rois * ((bins + roi_nhwc::kTile - 1) / roi_nhwc::kTile) *
                        ((g.channels + roi_nhwc::kTile - 1) / roi_nhwc::kTile);
  decode_kernel<<<cuda::blocks_for(tiles, 1), dim3(roi_nhwc::kTile, roi_nhwc::kTileRows), 0, stream>>>(
      key_data, input.data<float>(), rois.data<float>(), output.data<float>(), argmax.data<int64_t>(), g);
  MINIDET_CUDA_LAUNCH_CHECK("roi_pool decode_kernel");
}

}  // namespace minidet::ops::detail
