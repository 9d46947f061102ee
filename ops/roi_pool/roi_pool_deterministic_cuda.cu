// CUDA RoIPool, the deterministic backward (roi_pool.h; selected by core/deterministic.h): dx written with
// no floating-point atomics, each element's terms added in the CPU's order (roi_pool_cpu.cpp: k, then p,
// then q), so the bits are the CPU's and the same every run. Element (n, c, y, x) of dx is the sum of dy over
// the bins of channel c of image n's RoIs whose argmax is pixel (y, x); the CPU adds them in the order of the
// bins' flat index e = (k * C + c) * bins + p * pooled_w + q.
//
// Sorted buckets, for planes up to about 44 x 44 (a detector's RoI feature maps):
//   Block (c, n) owns plane (n, c) of dx and keeps its running sums in shared memory. It takes the bins of
//   channel c of image n's RoIs (listed in k order as in roi_pool_plane.cuh) in chunks, in order, and sorts
//   each chunk's bins by their argmax pixel with a stable counting sort, each warp taking a quarter of the
//   chunk in order:
//   1. load each bin's dy and argmax (coalesced: a RoI's bins are contiguous) and count the bins per
//      (pixel, warp); a warp's lanes of one pixel are counted by the first of them, so no two threads ever
//      add to one count and no atomics are needed;
//   2. an exclusive scan of the counts, pixel by pixel and within a pixel warp by warp, gives each (pixel,
//      warp) its first slot;
//   3. each warp places its bins in order, a pixel's lanes in lane order: every pixel's bucket comes out in
//      bin order with no sort;
//   4. a thread per pixel adds its bucket's dy to the pixel's sum in that order.
//   The chunks come in order and each sum goes on from the last chunk's, so every element of dx receives its
//   terms in the CPU's order, from 0: the CPU's bits. The block then writes its whole plane (no zero fill).
//
// A gather over tiles of dx, for larger planes (no scratch lists):
//   Work item = (image b, tile of tile_h x tile_w pixels, chunk of 32 channels): one warp, lane = channel.
//   The warp keeps the tile's gradient for its 32 channels in shared memory, walks the RoIs in order
//   k = 0..K-1 (32 at a time: each lane tests one RoI against the tile, a ballot keeps the hits in k
//   order), and for each hit the bins (p, q) that meet the tile, in (p, q) order; a lane adds dy[k, c, p, q]
//   to its tile pixel when argmax[k, c, p, q] lies in the tile. Lane c alone owns channel c of the tile, so
//   each element of dx receives its terms in the CPU's order (k, p, q), starting from 0: the CPU's bits,
//   every run. Then the warp writes its whole tile (zeros included), so dx needs no zero fill.
//   Each argmax is read once per tile its bin meets: tiles are as large as shared memory allows (16 x 16
//   in float32) and shrink only when there would be too few work items to fill the GPU (small maps).
//   The RoIs' outer extents, in a map where the N images are stacked vertically (image b's rows are
//   b*H .. b*H + H - 1, so one test checks the image and the rows), are computed once by span_kernel.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align_nhwc.cuh"  // kLanes
#include "ops/roi_pool/roi_pool_kernels.h"
#include "ops/roi_pool/roi_pool_plane.cuh"

namespace minidet::ops::detail {
namespace {

using roi_nhwc::kLanes;

// Rows [y0, y1) (in the stacked map) and columns [x0, x1) that RoI k's bins can reach: the union of its bins.
// An inverted or degenerate RoI gets an empty span, so it meets no tile.
template <typename T>
__global__ void span_kernel(const T* rois, int4* spans, RoIPoolGeometry g) {
  MINIDET_KERNEL_LOOP(k, g.num_rois) {
    const T* roi = rois + k * 5;
    const RoIPoolFrame<T> f = roi_pool_frame(roi, g);
    const int top = static_cast<int>(static_cast<int64_t>(roi[0]) * g.height);
    spans[k] = f.empty ? make_int4(0, 0, 0, 0)
                       : make_int4(top + int(f.row_start(0)), top + int(f.row_end(g.pooled_height - 1)),
                                   int(f.col_start(0)), int(f.col_end(g.pooled_width - 1)));
  }
}

// The bins i in [first, last) whose extent [start(i), end(i)) meets [lo, hi). Both edges are nondecreasing
// in i, so those bins form one range. `guess` (any float, NaN included) is only where the walk starts: the
// walk is exact from anywhere, and a guess from the bin size keeps it to a step or two.
template <typename Start, typename End>
__device__ int2 bins_meeting(Start start, End end, int64_t lo, int64_t hi, int pooled, float guess) {
  int first = static_cast<int>(fminf(fmaxf(guess, 0.0f), float(pooled - 1)));
  while (first > 0 && end(first - 1) > lo) --first;
  while (first < pooled && end(first) <= lo) ++first;
  int last = first;
  while (last < pooled && start(last) < hi) ++last;
  return make_int2(first, last);
}

// Shared memory of one warp: tile pixel i, lane l at acc[i * kAccStride + l]. The extra column keeps both
// the lanes' accumulation (same pixel, 32 lanes) and the write-out (32 pixels, one lane's channel) free of
// bank conflicts.
constexpr int kAccStride = kLanes + 1;

struct Tiling {
  int tile_h, tile_w;
  int64_t tiles_y, tiles_x, chunks;
  int64_t items(int64_t batch) const { return batch * tiles_y * tiles_x * chunks; }
};

template <typename T>
__global__ void backward_gather_kernel(int64_t items, const T* grad_output, const T* rois, const int4* spans,
                                       const int64_t* argmax, T* grad_input, RoIPoolGeometry g, Tiling tiling) {
  extern __shared__ unsigned char shared_bytes[];
  T* acc = reinterpret_cast<T*>(shared_bytes);  // one warp per block
  const int lane = threadIdx.x;
  const int tile_pixels = tiling.tile_h * tiling.tile_w, bins = int(g.pooled_height * g.pooled_width);
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t chunk = item % tiling.chunks, tile = item / tiling.chunks;
    const int64_t tx = tile % tiling.tiles_x, ty = tile / tiling.tiles_x % tiling.tiles_y;
    const int64_t batch = tile / (tiling.tiles_x * tiling.tiles_y);
    const int64_t c = chunk * kLanes + lane;
    const bool live = c < g.channels;
    // The tile: rows [y0, y1) of image `batch`, columns [x0, x1); `top` is its first row in the stacked map.
    const int64_t y0 = ty * tiling.tile_h, y1 = min(y0 + tiling.tile_h, g.height);
    const int64_t x0 = tx * tiling.tile_w, x1 = min(x0 + tiling.tile_w, g.width);
    const int64_t top = batch * g.height + y0, bottom = batch * g.height + y1;
    const int64_t band = y0 * g.width, band_size = (y1 - y0) * g.width;  // the tile's rows, as flat indices
    const bool narrow = band_size <= int64_t(UINT32_MAX);
    for (int i = 0; i < tile_pixels; ++i) acc[i * kAccStride + lane] = T(0);

    for (int64_t k0 = 0; k0 < g.num_rois; k0 += kLanes) {
      // Each lane tests one RoI; the hits' bin ranges are found in parallel, then visited in k order.
      const int64_t mine = k0 + lane;
      int2 rows = make_int2(0, 0), cols = make_int2(0, 0);
      if (mine < g.num_rois) {
        const int4 s = spans[mine];  // (row start, row end, column start, column end)
        if (s.y > top && s.x < bottom && s.w > x0 && s.z < x1) {
          const RoIPoolFrame<T> f = roi_pool_frame(rois + mine * 5, g);
          rows = bins_meeting([&](int p) { return f.row_start(p); }, [&](int p) { return f.row_end(p); }, y0, y1,
                              int(g.pooled_height), float((T(y0) - f.y1) / f.bin_height));
          cols = bins_meeting([&](int q) { return f.col_start(q); }, [&](int q) { return f.col_end(q); }, x0, x1,
                              int(g.pooled_width), float((T(x0) - f.x1) / f.bin_width));
        }
      }
      unsigned hits = __ballot_sync(0xffffffffu, rows.x < rows.y && cols.x < cols.y);
      while (hits) {
        const int src = __ffs(hits) - 1;
        hits &= hits - 1;
        const int p0 = __shfl_sync(0xffffffffu, rows.x, src), p1 = __shfl_sync(0xffffffffu, rows.y, src);
        const int q0 = __shfl_sync(0xffffffffu, cols.x, src), q1 = __shfl_sync(0xffffffffu, cols.y, src);
        if (!live) continue;
        const int64_t base = ((k0 + src) * g.channels + c) * bins;  // dy[k, c, 0, 0]
        for (int p = p0; p < p1; ++p) {
          const int64_t row = base + p * g.pooled_width;
          for (int q = q0; q < q1; q += 4) {
            // Four bins' loads issued together, then their adds in (p, q) order.
            int64_t where[4];
            T value[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              where[u] = q + u < q1 ? argmax[row + q + u] - band : -1;
              value[u] = q + u < q1 ? grad_output[row + q + u] : T(0);
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              if (where[u] < 0 || where[u] >= band_size) continue;  // empty bin, or a maximum above or below
              // 32-bit division where it is exact (always, short of a map 2^28 pixels wide): several times cheaper.
              const int64_t y = narrow ? int64_t(uint32_t(where[u]) / uint32_t(g.width)) : where[u] / g.width;
              const int64_t x = where[u] - y * g.width;
              if (x < x0 || x >= x1) continue;  // a maximum left or right of the tile
              acc[(y * tiling.tile_w + x - x0) * kAccStride + lane] += value[u];
            }
          }
        }
      }
    }
    __syncwarp();
    // Write the tile: consecutive lanes take consecutive pixels of one channel (coalesced rows).
    for (int i = lane; i < kLanes * tile_pixels; i += kLanes) {
      const int channel = i / tile_pixels, pixel = i % tile_pixels;
      const int64_t y = y0 + pixel / tiling.tile_w, x = x0 + pixel % tiling.tile_w, cc = chunk * kLanes + channel;
      if (y < y1 && x < x1 && cc < g.channels)
        grad_input[((batch * g.channels + cc) * g.height + y) * g.width + x] = acc[pixel * kAccStride + channel];
    }
    __syncwarp();  // the next item zeroes acc
  }
}

// Enough work items for this many warps per multiprocessor, before tiles shrink below the largest size.
constexpr int64_t kItemsPerMultiprocessor = 16;

// The largest tile whose accumulators fit kMaxSharedBytes (16 x 16 in float32, 8 x 16 in float64), halved
// (rows first) while the work items would not fill the GPU.
template <typename T>
Tiling choose_tiling(int64_t batch, const RoIPoolGeometry& g) {
  constexpr int64_t kMaxSharedBytes = 48 * 1024;  // the default limit of one block's dynamic shared memory
  Tiling t{16, 16, 0, 0, (g.channels + kLanes - 1) / kLanes};
  const auto fit = [&] {
    t.tiles_y = (g.height + t.tile_h - 1) / t.tile_h;
    t.tiles_x = (g.width + t.tile_w - 1) / t.tile_w;
  };
  while (int64_t(t.tile_h) * t.tile_w * kAccStride * int64_t(sizeof(T)) > kMaxSharedBytes) t.tile_h /= 2;
  fit();
  const int64_t wanted = cuda::multiprocessor_count() * kItemsPerMultiprocessor;
  while (t.items(batch) < wanted && t.tile_h * t.tile_w > 1) {
    if (t.tile_h >= t.tile_w) t.tile_h /= 2;
    else t.tile_w /= 2;
    fit();
  }
  return t;
}

template <typename T>
void backward_gather(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax, const Tensor& grad_input,
                     const RoIPoolGeometry& g) {
  const int64_t batch = grad_input.size(0);
  // The stacked map's rows and every column are int32 in span_kernel.
  MINIDET_CHECK(batch * g.height < (int64_t(1) << 31) && g.width < (int64_t(1) << 31),
                "roi_pool: deterministic backward needs N*H and W below 2^31, got N*H = ", batch * g.height,
                ", W = ", g.width);
  const cudaStream_t stream = cuda::current_stream();
  // 16 bytes (an int4) per RoI; a fresh allocation is aligned far beyond the 16 bytes an int4 needs.
  Tensor spans = empty({g.num_rois, 2}, TensorOptions(kInt64, grad_input.device()));
  span_kernel<T><<<cuda::blocks_for(g.num_rois), cuda::kThreadsPerBlock, 0, stream>>>(
      rois.data<T>(), reinterpret_cast<int4*>(spans.data<int64_t>()), g);
  MINIDET_CUDA_LAUNCH_CHECK("roi_pool span_kernel");
  const Tiling tiling = choose_tiling<T>(batch, g);
  const int64_t items = tiling.items(batch);
  const size_t shared = size_t(tiling.tile_h) * tiling.tile_w * kAccStride * sizeof(T);
  backward_gather_kernel<T><<<cuda::blocks_for(items, 1), kLanes, shared, stream>>>(
      items, grad_output.data<T>(), rois.data<T>(), reinterpret_cast<const int4*>(spans.data<int64_t>()),
      argmax.data<int64_t>(), grad_input.data<T>(), g, tiling);
  MINIDET_CUDA_LAUNCH_CHECK("roi_pool backward_gather_kernel");
}

// ---- sorted buckets ----------------------------------------------------------------------------------------

// The sorted buckets take a plane when its arrays and a chunk of kSortedChunk bins fit kSortedBytes of shared
// memory (float32: planes up to 1,945 pixels, 44 x 44; float64: 1,450), in blocks of kSortedWarps warps;
// larger planes take the gather. A warp takes a quarter of each chunk. Every chunk zeroes, scans and adds up
// the whole plane's counts once, so fewer, larger chunks cost less, but they take room in shared memory that
// other blocks would have had: sorted_chunk() doubles the chunk, up to kMaxSortedChunk, only while its bytes
// fit kSortedBytes and every block of the grid still fits the GPU at once (4,096 bins fit only float32
// planes of 102 pixels or fewer).
constexpr int kSortedWarps = 4;
constexpr int kSortedThreads = 32 * kSortedWarps;
constexpr int kSortedChunk = 1024;
constexpr int kMaxSortedChunk = 4096;
constexpr int kSortedUnroll = 4;  // a lane's bins whose loads are in flight together
constexpr size_t kSortedBytes = size_t(54) << 10;

// counts[0, n) becomes its exclusive prefix sum, in a block of kSortedThreads (exactly kSortedWarps warps).
// Warp w scans the w-th of kSortedWarps contiguous segments, 32 neighbouring entries at a time (one
// conflict-free row of shared memory), after the warps' totals have given each segment its offset.
__device__ void exclusive_scan(int* counts, int n) {
  __shared__ int warp_totals[kSortedWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int segment = (n + 32 * kSortedWarps - 1) / (32 * kSortedWarps) * 32;
  const int lo = min(n, warp * segment), hi = min(n, lo + segment);
  int total = 0;
  for (int i = lo + lane; i < hi; i += 32) total += counts[i];
  for (int d = 16; d > 0; d /= 2) total += __shfl_xor_sync(0xffffffffu, total, d);
  if (lane == 0) warp_totals[warp] = total;
  __syncthreads();
  int carry = 0;
  for (int w = 0; w < warp; ++w) carry += warp_totals[w];
  for (int i0 = lo; i0 < hi; i0 += 32) {
    const int i = i0 + lane, count = i < hi ? counts[i] : 0;
    int inclusive = count;  // over the lanes up to this one
    for (int d = 1; d < 32; d *= 2) {
      const int other = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += other;
    }
    if (i < hi) counts[i] = carry + inclusive - count;
    carry += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  __syncthreads();
}

// Shared memory of block (c, n): the plane's running sums, a count per (pixel, warp), one chunk of bins (their
// dy, pixel and bucket slot) and one piece's list of RoIs. T arrays first, for their alignment.
template <typename T>
struct SortedScratch {
  T* sums;      // [plane]          dx so far
  T* value;     // [chunk]          bin j's dy
  int* slots;   // [plane * warps]  (pixel p, warp w) at p * warps + w: a count, then a first slot, then an end
  int* pixel;   // [chunk]          bin j's argmax, or -1
  int* bucket;  // [chunk]          the buckets, back to back, each in bin order
  int* list;    // [kPiece]
  __device__ SortedScratch(unsigned char* shared, int plane, int chunk)
      : sums(reinterpret_cast<T*>(shared)),
        value(sums + plane),
        slots(reinterpret_cast<int*>(value + chunk)),
        pixel(slots + plane * kSortedWarps),
        bucket(pixel + chunk),
        list(bucket + chunk) {}
  static size_t bytes(int64_t plane, int64_t chunk) {
    return size_t(plane + chunk) * sizeof(T) +
           size_t(plane * kSortedWarps + 2 * chunk + roi_plane::kPiece) * sizeof(int);
  }
};

template <typename T>
__global__ void __launch_bounds__(kSortedThreads)
    backward_sorted_kernel(const T* grad_output, const T* rois, const int64_t* argmax, T* grad_input, RoIPoolGeometry g,
                           int64_t images, int chunk) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int plane_size = int(g.height * g.width), bins = int(g.pooled_height * g.pooled_width);
  const int64_t c = blockIdx.x, image = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int span = chunk / kSortedWarps;
  const SortedScratch<T> s(shared, plane_size, chunk);
  const int slot_count = plane_size * kSortedWarps;
  for (int i = threadIdx.x; i < plane_size; i += blockDim.x) s.sums[i] = T(0);
  for (int64_t first = 0; first < g.num_rois; first += roi_plane::kPiece) {
    const int items = roi_plane::list_rois(rois, g.num_rois, images, first, s.list) * bins;
    for (int base = 0; base < items; base += chunk) {
      const int n = min(chunk, items - base);
      for (int i = threadIdx.x; i < slot_count; i += blockDim.x) s.slots[i] = 0;
      __syncthreads();
      // 1. Load the warp's bins (coalesced: a RoI's bins of channel c are contiguous), kSortedUnroll rounds of
      //    32 with their loads in flight together, and count them per (pixel, warp). The lanes of one pixel
      //    are counted by the lowest of them: no two lanes touch one count, so no atomics.
      const int lo = warp * span, hi = min(n, lo + span);
      for (int j0 = lo; j0 < hi; j0 += 32 * kSortedUnroll) {
        int64_t where[kSortedUnroll];
        T dy[kSortedUnroll];
#pragma unroll
        for (int u = 0; u < kSortedUnroll; ++u) {
          const int j = j0 + 32 * u + lane;
          const int entry = j < hi ? s.list[(base + j) / bins] : -1;
          where[u] = -1;
          dy[u] = T(0);
          if (entry >= 0) {  // else past the warp's bins, or a row naming no image: its bins are empty
            const int64_t e = (int64_t(entry) * g.channels + c) * bins + (base + j) % bins;
            where[u] = argmax[e];
            dy[u] = grad_output[e];
          }
        }
#pragma unroll
        for (int u = 0; u < kSortedUnroll; ++u) {
          const int j = j0 + 32 * u + lane;
          const int p = where[u] >= 0 && where[u] < plane_size ? int(where[u]) : -1;
          const unsigned group = __match_any_sync(0xffffffffu, p);
          if (j < hi) {
            s.pixel[j] = p;
            s.value[j] = dy[u];
          }
          if (p >= 0 && lane == __ffs(group) - 1) s.slots[p * kSortedWarps + warp] += __popc(group);
          __syncwarp();  // the next round's first lane of a pixel reads this count
        }
      }
      __syncthreads();
      // 2. Each (pixel, warp)'s first slot: pixels in order, and each pixel's warps in order.
      exclusive_scan(s.slots, slot_count);
      // 3. Each bin into its slot, the warp's bins in order: a pixel's bucket holds warp 0's bins of it in bin
      //    order, then warp 1's, and so on, so every bucket is in bin order without a sort.
      for (int j0 = lo; j0 < hi; j0 += 32) {
        const int j = j0 + lane, p = j < hi ? s.pixel[j] : -1;
        const unsigned group = __match_any_sync(0xffffffffu, p);
        const int leader = __ffs(group) - 1;
        int at = 0;
        if (p >= 0 && lane == leader) {
          at = s.slots[p * kSortedWarps + warp];
          s.slots[p * kSortedWarps + warp] = at + __popc(group);
        }
        at = __shfl_sync(0xffffffffu, at, leader);
        if (p >= 0) s.bucket[at + __popc(group & ((1u << lane) - 1))] = j;
        __syncwarp();  // the next round's first lane of a pixel reads this slot
      }
      __syncthreads();
      // 4. Each pixel's bucket added to its sum in bin order. After step 3 each (pixel, warp) entry holds
      //    the end of its slots, so pixel p's bucket ends at its last warp's entry and starts at p - 1's.
      for (int p = threadIdx.x; p < plane_size; p += blockDim.x) {
        const int start = p > 0 ? s.slots[p * kSortedWarps - 1] : 0, end = s.slots[(p + 1) * kSortedWarps - 1];
        T sum = s.sums[p];
        for (int i = start; i < end; ++i) sum += s.value[s.bucket[i]];
        s.sums[p] = sum;
      }
      __syncthreads();  // the next chunk reuses the counts and the buckets
    }
  }
  T* dx = grad_input + (image * g.channels + c) * plane_size;
  for (int i = threadIdx.x; i < plane_size; i += blockDim.x) dx[i] = s.sums[i];
}

template <typename T>
bool sorted_buckets_take(const RoIPoolGeometry& g, int64_t images) {
  return SortedScratch<T>::bytes(g.height * g.width, kSortedChunk) <= kSortedBytes && images <= 65535 &&
         g.channels <= INT32_MAX && g.num_rois < INT32_MAX &&
         g.pooled_height * g.pooled_width * roi_plane::kPiece + kMaxSortedChunk < INT32_MAX;
}

template <typename T>
int sorted_chunk(int64_t plane, int64_t blocks) {
  cuda::opt_in_to_shared_memory(backward_sorted_kernel<T>, kSortedBytes);
  int chunk = kSortedChunk;
  while (chunk < kMaxSortedChunk) {
    const size_t bytes = SortedScratch<T>::bytes(plane, 2 * chunk);
    if (bytes > kSortedBytes) break;
    int resident = 0;  // blocks per multiprocessor at those bytes
    MINIDET_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, backward_sorted_kernel<T>, kSortedThreads, bytes));
    if (int64_t(resident) * cuda::multiprocessor_count() < blocks) break;
    chunk *= 2;
  }
  return chunk;
}

template <typename T>
void backward_sorted(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax, const Tensor& grad_input,
                     const RoIPoolGeometry& g) {
  const int64_t images = grad_input.size(0), plane = g.height * g.width;
  const int chunk = sorted_chunk<T>(plane, g.channels * images);  // also opts the kernel in past 48 KB
  const size_t bytes = SortedScratch<T>::bytes(plane, chunk);
  backward_sorted_kernel<T>
      <<<dim3(unsigned(g.channels), unsigned(images)), kSortedThreads, bytes, cuda::current_stream()>>>(
          grad_output.data<T>(), rois.data<T>(), argmax.data<int64_t>(), grad_input.data<T>(), g, images, chunk);
  MINIDET_CUDA_LAUNCH_CHECK("roi_pool backward_sorted_kernel");
}

}  // namespace

void roi_pool_backward_deterministic_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                                          const Tensor& grad_input, const RoIPoolGeometry& g) {
  cuda::DeviceGuard guard(grad_input.device());
  if (grad_input.numel() == 0) return;
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_pool", [&] {
    if (sorted_buckets_take<scalar_t>(g, grad_input.size(0)))
      backward_sorted<scalar_t>(grad_output, rois, argmax, grad_input, g);
    else
      backward_gather<scalar_t>(grad_output, rois, argmax, grad_input, g);
  });
}

}  // namespace minidet::ops::detail
