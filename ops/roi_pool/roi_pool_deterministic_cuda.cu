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
// Sorted terms, for larger planes (the sorted terms section below): every term keyed by its element of dx,
// written plane by plane so that CUB's stable radix sort needs only the pixel's bits, each run of one
// element's terms added in order.
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/common/radix_sort.cuh"
#include "ops/roi_pool/roi_pool_kernels.h"
#include "ops/roi_pool/roi_pool_plane.cuh"

namespace minidet::ops::detail {
namespace {

// ---- sorted buckets ----------------------------------------------------------------------------------------

// The sorted buckets take a plane when its arrays and a chunk of kSortedChunk bins fit kSortedBytes of shared
// memory (float32: planes up to 1,945 pixels, 44 x 44; float64: 1,450), in blocks of kSortedWarps warps;
// larger planes take the sorted terms. A warp takes a quarter of each chunk. Every chunk zeroes, scans and adds up
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

// ---- sorted terms ------------------------------------------------------------------------------------------

// Term e (one per bin and channel, e = (k * C + c) * bins + b) adds dy[e] to pixel argmax[e] of plane (n_k, c)
// of dx, and the CPU adds each element's terms in the order of e. A full sort by element would order every
// term by plane and pixel: 25 bits on the large benchmark map, four passes of CUB's radix sort. But the plane
// can be put in order for free, by the order in which the terms are written: image by image (each image's
// RoIs in k order), and within an image channel by channel. Each term's key is (plane, pixel), the pixel in
// the low bits, and the stable sort runs over the pixel's bits only (16 on that map: two passes). Terms of one
// pixel then keep their written order, so each plane's terms of that pixel stay together, in k and bin
// order: one run per element of dx, in the CPU's order. The first term of each run adds the run's values, in
// order, to what dx holds: the CPU's bits.
//
// The written order needs the RoIs grouped by image: a radix sort of the K rows by batch index (stable, so
// each image keeps k order), and each image's range in that order. A row that names no image (possible only
// with the value check off) sorts last and its terms, like an empty bin's, get the pixel field `none` = H*W,
// which sorts after every pixel and is skipped. dx is zeroed first. The terms go in chunks of at most
// kTermChunk of the written order, in order, each run adding on to dx's running value, so the order holds
// across chunks too.
//
// The tests' inputs fit one chunk, so the 64-bit testing switch (cuda::int64_index_forced) also cuts them
// into small chunks: its runs of the cuda/ cases check the chunk loop along with the 64-bit keys.
// Scratch: a double buffer of keys and of values, 16 bytes a term (float32, 32-bit keys) to 32 (float64,
// 64-bit keys), so 1 to 2 GB for a whole chunk.
constexpr int64_t kTermChunk = int64_t(1) << 26;
constexpr int64_t kForcedTermChunk = 1000;

// The RoIs grouped by image, and where each image's group lies.
struct ImageGroups {
  const uint32_t* image;  // [K] the image of the j-th RoI in group order (`images` for a row naming none)
  const int32_t* roi;     // [K] its k
  const int32_t* first;   // [images + 1] image n's group is j in [first[n], end[n]) (set only for a group
  const int32_t* end;     //              that has RoIs: no term asks for another)
};

template <typename T>
__global__ void roi_images_kernel(const T* rois, int64_t num_rois, int64_t images, uint32_t* image, int32_t* roi) {
  MINIDET_KERNEL_LOOP(k, num_rois) {
    const T batch = rois[k * 5];
    image[k] = roi_plane::names_an_image(batch, images) ? uint32_t(static_cast<int64_t>(batch)) : uint32_t(images);
    roi[k] = int32_t(k);
  }
}

__global__ void group_ranges_kernel(int64_t num_rois, const uint32_t* image, int32_t* first, int32_t* end) {
  MINIDET_KERNEL_LOOP(j, num_rois) {
    const uint32_t n = image[j];
    if (j == 0 || image[j - 1] != n) first[n] = int32_t(j);
    if (j + 1 == num_rois || image[j + 1] != n) end[n] = int32_t(j + 1);
  }
}

// Writes terms [first, first + n) of the written order: the RoIs' j-th group position owns terms
// [j * C * bins, (j + 1) * C * bins), and within image n's groups the terms go channel by channel, each
// channel's RoIs in k order, each RoI's bins in order.
template <typename T, typename Key, typename Index>
__global__ void term_keys_kernel(Index first, Index n, const int64_t* argmax, const T* grad_output, ImageGroups groups,
                                 Key* keys, T* values, RoIPoolGeometry g, int64_t images, int pixel_bits) {
  const Index bins = Index(g.pooled_height * g.pooled_width), channels = Index(g.channels);
  const Index per_roi = channels * bins;
  const int64_t plane = g.height * g.width;
  MINIDET_KERNEL_LOOP_AS(Index, i, n) {
    const Index t = first + i;
    const uint32_t image = groups.image[t / per_roi];
    Key key = Key(plane);  // `none`, in plane 0
    T value = T(0);
    if (image < uint32_t(images)) {
      const Index start = groups.first[image], rois = groups.end[image] - start;
      const Index r = t - start * per_roi, c = r / (rois * bins), in_channel = r - c * rois * bins;
      const Index j = in_channel / bins, b = in_channel - j * bins;
      const Index e = (Index(groups.roi[start + j]) * channels + c) * bins + b;
      const int64_t at = argmax[e];
      key = (Key(int64_t(image) * g.channels + c) << pixel_bits) | Key(at >= 0 && at < plane ? at : plane);
      value = grad_output[e];
    }
    keys[i] = key;
    values[i] = value;
  }
}

// A run's terms loaded together before any is added. On the large benchmark map a bin's maximum is often the
// maximum of a whole neighbourhood, so runs are tens to hundreds of terms long; yet 16 or 32 at a time measured
// slower than 8 (docs/benchmarks.md): the registers they take leave fewer threads in flight.
constexpr int kRunBatch = 8;

// The first term of each run adds the run's values to dx, in order, kRunBatch loaded at a time, so a run
// waits on memory once per kRunBatch terms rather than once per term.
template <typename T, typename Key>
__global__ void run_sums_kernel(int64_t n, const Key* keys, const T* values, T* grad_input, int64_t plane,
                                int pixel_bits) {
  const Key pixel_mask = (Key(1) << pixel_bits) - 1;
  MINIDET_KERNEL_LOOP(i, n) {
    const Key key = keys[i];
    if (int64_t(key & pixel_mask) == plane || (i > 0 && keys[i - 1] == key)) continue;  // none, or not a run's first
    T* element = grad_input + int64_t(key >> pixel_bits) * plane + int64_t(key & pixel_mask);
    T sum = *element;
    for (int64_t j = i;; j += kRunBatch) {
      Key next[kRunBatch];
      T value[kRunBatch];
#pragma unroll
      for (int u = 0; u < kRunBatch; ++u) {
        next[u] = j + u < n ? keys[j + u] : ~key;
        value[u] = j + u < n ? values[j + u] : T(0);
      }
      bool ended = false;
#pragma unroll
      for (int u = 0; u < kRunBatch; ++u) {
        ended = ended || next[u] != key;  // sorted: the run ends at the first other key
        if (!ended) sum += value[u];
      }
      if (ended) break;
    }
    *element = sum;
  }
}

// The RoIs grouped by image (ImageGroups), in raw storage that `storage` keeps alive.
template <typename T>
ImageGroups group_rois_by_image(const Tensor& rois, int64_t num_rois, int64_t images, Tensor& storage) {
  const cudaStream_t stream = cuda::current_stream();
  // [2K] images, [2K] rows (double buffers for the sort), [images + 1] firsts, [images + 1] ends: 4-byte words.
  storage = empty({int64_t(sizeof(int32_t)) * (4 * num_rois + 2 * (images + 1))}, TensorOptions(kUInt8, rois.device()));
  int32_t* words = reinterpret_cast<int32_t*>(storage.data<uint8_t>());
  uint32_t* image = reinterpret_cast<uint32_t*>(words);
  int32_t* roi = words + 2 * num_rois;
  int32_t* first = words + 4 * num_rois;
  roi_images_kernel<T>
      <<<cuda::blocks_for(num_rois), cuda::kThreadsPerBlock, 0, stream>>>(rois.data<T>(), num_rois, images, image, roi);
  MINIDET_CUDA_LAUNCH_CHECK("roi_pool roi_images_kernel");
  cub::DoubleBuffer<uint32_t> image_buffers(image, image + num_rois);
  cub::DoubleBuffer<int32_t> roi_buffers(roi, roi + num_rois);
  radix_sort_pairs(image_buffers, roi_buffers, num_rois, uint64_t(images), rois.device());
  group_ranges_kernel<<<cuda::blocks_for(num_rois), cuda::kThreadsPerBlock, 0, stream>>>(
      num_rois, image_buffers.Current(), first, first + images + 1);
  MINIDET_CUDA_LAUNCH_CHECK("roi_pool group_ranges_kernel");
  return {image_buffers.Current(), roi_buffers.Current(), first, first + images + 1};
}

// Whether every key (plane, pixel) with its `none` fits Key: the planes' bits above the pixel's.
template <typename Key>
bool keys_fit(int64_t planes, int pixel_bits) {
  return bits_for(uint64_t(planes - 1)) + pixel_bits <= int(8 * sizeof(Key));
}

template <typename T, typename Key>
void backward_terms(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax, const Tensor& grad_input,
                    const RoIPoolGeometry& g) {
  const cudaStream_t stream = cuda::current_stream();
  const int64_t images = grad_input.size(0), terms = argmax.numel(), plane = g.height * g.width;
  const int pixel_bits = bits_for(uint64_t(plane));  // room for `none` = plane
  MINIDET_CHECK(keys_fit<Key>(images * g.channels, pixel_bits), "roi_pool: ", images * g.channels, " planes of ", plane,
                " pixels do not fit the deterministic backward's ", 8 * sizeof(Key), "-bit keys");
  MINIDET_CHECK(g.num_rois <= INT32_MAX, "roi_pool: the deterministic backward takes up to 2^31 - 1 RoIs, got ",
                g.num_rois);
  MINIDET_CHECK(images < int64_t(UINT32_MAX), "roi_pool: the deterministic backward takes fewer than 2^32 images, got ",
                images);
  const int64_t chunk = std::min(terms, cuda::int64_index_forced() ? kForcedTermChunk : kTermChunk);
  grad_input.zero_();
  Tensor group_storage;
  const ImageGroups groups = group_rois_by_image<T>(rois, g.num_rois, images, group_storage);
  // Raw storage: minidet's tensors have no unsigned dtypes. Each array is a double buffer for the sort.
  const Tensor keys = empty({2 * chunk * int64_t(sizeof(Key))}, TensorOptions(kUInt8, grad_input.device()));
  const Tensor values = empty({2 * chunk}, grad_input.options());
  Key* key_data = reinterpret_cast<Key*>(keys.data<uint8_t>());
  for (int64_t first = 0; first < terms; first += chunk) {
    const int64_t n = std::min(chunk, terms - first);
    cuda::with_index(terms, [&](auto index) {
      using Index = decltype(index);
      term_keys_kernel<T, Key, Index><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, stream>>>(
          Index(first), Index(n), argmax.data<int64_t>(), grad_output.data<T>(), groups, key_data, values.data<T>(), g,
          images, pixel_bits);
    });
    MINIDET_CUDA_LAUNCH_CHECK("roi_pool term_keys_kernel");
    cub::DoubleBuffer<Key> key_buffers(key_data, key_data + chunk);
    cub::DoubleBuffer<T> value_buffers(values.data<T>(), values.data<T>() + chunk);
    radix_sort_pairs_on_bits(key_buffers, value_buffers, n, pixel_bits, grad_input.device());
    run_sums_kernel<T, Key><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, stream>>>(
        n, key_buffers.Current(), value_buffers.Current(), grad_input.data<T>(), plane, pixel_bits);
    MINIDET_CUDA_LAUNCH_CHECK("roi_pool run_sums_kernel");
  }
}

}  // namespace

void roi_pool_backward_deterministic_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                                          const Tensor& grad_input, const RoIPoolGeometry& g) {
  cuda::DeviceGuard guard(grad_input.device());
  if (grad_input.numel() == 0) return;
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_pool", [&] {
    if (sorted_buckets_take<scalar_t>(g, grad_input.size(0)))
      backward_sorted<scalar_t>(grad_output, rois, argmax, grad_input, g);
    else if (keys_fit<uint32_t>(grad_input.size(0) * g.channels, bits_for(uint64_t(g.height * g.width))) &&
             !cuda::int64_index_forced())
      backward_terms<scalar_t, uint32_t>(grad_output, rois, argmax, grad_input, g);
    else
      backward_terms<scalar_t, uint64_t>(grad_output, rois, argmax, grad_input, g);
  });
}

}  // namespace minidet::ops::detail
