// CUDA roi_align_rotated: the forward, the atomic input gradient and, under DeterministicMode, a sorted
// fixed-order gather. Same sample positions and bilinear rules as the CPU (roi_align_rotated_kernels.h,
// ops/common/bilinear.h).
//
// RoIAlign (Mask R-CNN: He et al. 2017) over a rotated box (detectron2's ROIAlignRotated; the math is in
// roi_align_rotated.h) differs from the axis-aligned op only in where a bin's samples sit: the grid is laid
// out in the box's own frame (u, v) and turned by the angle into the map. So this op runs roi_align's
// channel-last kernels (ops/roi_align/roi_align_nhwc.cuh) with RotatedSampler below doing that turn, and is
// fast for the same reasons:
//   - the input (and, in backward, the gradient buffer) is NHWC, and the 32 lanes of a warp are 32
//     consecutive channels of one bin: each bilinear read and each atomicAdd of a warp is one 128-byte
//     line, not 32 addresses H*W apart;
//   - a lane serves 8 channels, so one sample-geometry computation (rotation, floor, weights) serves up to
//     256 channels instead of one;
//   - each RoI's frame (centre, cos, sin, steps, grid) is computed once, by frames_kernel, not in every work
//     item: no sin/cos in the hot loops.
//
// DeterministicMode. The atomic scatter "sample neighbour -> input pixel" becomes a gather "input pixel <- its
// contributions", in three steps (roi_align_cuda_sorted.cu does the same in NCHW):
//   1. list every contribution as an entry (key = the destination pixel n*H*W + y*W + x, source = the bin
//      k*bins + bin, weight = w_j / count), in the order (RoI, bin, sample, neighbour). Neighbours with zero
//      weight and samples outside the band get the key N*H*W, past every pixel: they sort last and are skipped;
//   2. sort the entries by key with a STABLE radix sort: the entries of one pixel become one run, in the
//      order they were listed (the CPU's order), whatever the thread schedule;
//   3. one warp per (run, slab of channels) sums the run in that order, channel-last as above: the upstream
//      gradient is first transposed to (K, bins, C), so each entry is one coalesced read per 32 channels,
//      and the sums go to an NHWC buffer that one transpose turns back into NCHW.
// No atomics, so the same bits every run. The entry count is known on the host for a fixed sampling ratio;
// with adaptive sampling it depends on the RoI sizes on the device: one scan gives each RoI's first entry and
// ONE 8-byte copy brings the total back (a host synchronisation, in deterministic mode only).
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align_nhwc.cuh"
#include "ops/roi_align/roi_align_sort.cuh"
#include "ops/roi_align_rotated/roi_align_rotated_kernels.h"

namespace minidet::ops::detail {
namespace {

using roi_nhwc::channel_slabs;
using roi_nhwc::kChannelsPerLane;
using roi_nhwc::kChannelsPerSlab;
using roi_nhwc::kLanes;

template <typename T>
__global__ void frames_kernel(int64_t n, const T* rois, RotatedFrame<T>* frames, RotatedGeometry g) {
  MINIDET_KERNEL_LOOP(k, n) { frames[k] = rotated_frame(rois + k * 6, g); }
}

// The frames of all K RoIs, in a byte tensor that owns them (sampler_of reads them as RotatedFrame<T>).
template <typename T>
Tensor compute_frames(const Tensor& rois, const RotatedGeometry& g) {
  const Tensor bytes = empty({g.num_rois * static_cast<int64_t>(sizeof(RotatedFrame<T>))},
                             TensorOptions(kUInt8, rois.device()));
  frames_kernel<T><<<cuda::blocks_for(g.num_rois), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
      g.num_rois, rois.data<T>(), reinterpret_cast<RotatedFrame<T>*>(bytes.data<uint8_t>()), g);
  MINIDET_CUDA_LAUNCH_CHECK("roi_align_rotated frames_kernel");
  return bytes;
}

// roi_align_rotated's sample positions as a roi_nhwc sampler (see roi_align_nhwc.cuh): RoI k is its
// precomputed frame, and sample (iy, ix) of bin (p, q) is the CPU's rotated_bin_sample.
template <typename T>
struct RotatedSampler {
  const RotatedFrame<T>* frames;
  RotatedGeometry g;
  __device__ RotatedFrame<T> roi(int64_t k) const { return frames[k]; }
  __device__ BilinearSample<T> sample(const RotatedFrame<T>& f, int64_t p, int64_t q, int64_t iy, int64_t ix) const {
    return rotated_bin_sample(f, g, p, q, iy, ix);
  }
  __device__ T divisor(const RotatedFrame<T>& f) const { return f.count; }
};

template <typename T>
RotatedSampler<T> sampler_of(const Tensor& frames, const RotatedGeometry& g) {
  return {reinterpret_cast<const RotatedFrame<T>*>(frames.data<uint8_t>()), g};
}

// ---- DeterministicMode: the sorted gather ---------------------------------------------------------------

// Entries of RoI k: bins * samples per bin * 4 neighbours; a trailing 0 at index K, so that the exclusive
// scan's last element is the total.
template <typename T>
__global__ void count_entries_kernel(RotatedSampler<T> sampler, int64_t* counts) {
  const int64_t rois = sampler.g.num_rois, bins = sampler.g.pooled_h * sampler.g.pooled_w;
  MINIDET_KERNEL_LOOP(k, rois + 1) {
    counts[k] = k < rois ? sampler.frames[k].grid_h * sampler.frames[k].grid_w * bins * 4 : 0;
  }
}

// Step 1: one thread per (RoI, bin) lists its entries, in (sample, neighbour) order, from first_entry[k].
template <typename T>
__global__ void list_entries_kernel(RotatedSampler<T> sampler, int64_t batch, const int64_t* first_entry,
                                    int64_t* keys, int64_t* sources, T* weights) {
  const RotatedGeometry& g = sampler.g;
  const int64_t bins = g.pooled_h * g.pooled_w, plane = g.height * g.width, outside = batch * plane;
  MINIDET_KERNEL_LOOP(kb, g.num_rois * bins) {
    const int64_t k = kb / bins, bin = kb % bins;
    const RotatedFrame<T> f = sampler.roi(k);
    int64_t e = first_entry[k] + bin * f.grid_h * f.grid_w * 4;
    for (int64_t iy = 0; iy < f.grid_h; ++iy) {
      for (int64_t ix = 0; ix < f.grid_w; ++ix) {
        const BilinearSample<T> w = sampler.sample(f, bin / g.pooled_w, bin % g.pooled_w, iy, ix);
        for (int j = 0; j < 4; ++j, ++e) {
          keys[e] = w.inside && w.weight[j] != T(0) ? f.batch * plane + w.offset[j] : outside;
          sources[e] = kb;
          weights[e] = w.weight[j] / f.count;
        }
      }
    }
  }
}

// Step 3. Work item i is (sorted entry e, slab, lane), lane fastest, so a warp shares one entry (like
// roi_nhwc's WorkItem, with the entry in place of (RoI, bin)). Only the warps at the head of a run work: they
// walk the run in sorted order and write the pixel's channels once. grad_t is the upstream gradient as
// (K, bins, C), so the 32 lanes read 32 consecutive channels of one bin.
template <typename T, typename Index>
__global__ void gather_runs_kernel(Index n, int64_t entries, const int64_t* keys, const int64_t* order,
                                   const int64_t* sources, const T* weights, const T* grad_t, T* grad_nhwc,
                                   int64_t outside, int64_t channels) {
  const Index slabs = Index(channel_slabs(channels));
  for (Index i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += Index(blockDim.x) * gridDim.x) {
    const Index warp = i / kLanes, e = warp / slabs, slab = warp - e * slabs, lane = i - warp * kLanes;
    const int64_t key = keys[e];
    if (key == outside || (e > 0 && keys[e - 1] == key)) continue;  // only run heads work
    const int64_t c0 = int64_t(slab) * kChannelsPerSlab + lane;  // this thread's channels: c0 + 32 j
    T sum[kChannelsPerLane];
#pragma unroll
    for (int j = 0; j < kChannelsPerLane; ++j) sum[j] = T(0);
    for (int64_t r = e; r < entries && keys[r] == key; ++r) {
      const int64_t id = order[r];
      const T weight = weights[id];
      const T* upstream = grad_t + sources[id] * channels + c0;
#pragma unroll
      for (int j = 0; j < kChannelsPerLane; ++j)
        if (c0 + kLanes * j < channels) sum[j] += weight * upstream[kLanes * j];
    }
    T* pixel = grad_nhwc + key * channels + c0;  // key = n*H*W + y*W + x: NHWC row of that pixel
#pragma unroll
    for (int j = 0; j < kChannelsPerLane; ++j)
      if (c0 + kLanes * j < channels) pixel[kLanes * j] = sum[j];
  }
}

template <typename T>
void backward_sorted(const Tensor& grad_output, const RotatedSampler<T>& sampler, const Tensor& grad_input) {
  const RotatedGeometry& g = sampler.g;
  const int64_t batch = grad_input.size(0), bins = g.pooled_h * g.pooled_w;
  const TensorOptions index_options(kInt64, grad_input.device());
  const cudaStream_t stream = cuda::current_stream();
  // 1. Each RoI's first entry (an exclusive scan of the counts), the total, and the entries themselves.
  Tensor counts = empty({g.num_rois + 1}, index_options), first_entry = empty({g.num_rois + 1}, index_options);
  count_entries_kernel<T><<<cuda::blocks_for(g.num_rois + 1), cuda::kThreadsPerBlock, 0, stream>>>(
      sampler, counts.data<int64_t>());
  MINIDET_CUDA_LAUNCH_CHECK("roi_align_rotated count_entries_kernel");
  exclusive_sum(counts, first_entry);
  const int64_t entries = g.sampling_ratio > 0
                              ? g.num_rois * bins * g.sampling_ratio * g.sampling_ratio * 4
                              : first_entry.select(0, g.num_rois).item<int64_t>();  // the documented sync
  Tensor keys = empty({entries}, index_options), sources = empty({entries}, index_options);
  Tensor weights = empty({entries}, grad_input.options());
  list_entries_kernel<T><<<cuda::blocks_for(g.num_rois * bins), cuda::kThreadsPerBlock, 0, stream>>>(
      sampler, batch, first_entry.data<int64_t>(), keys.data<int64_t>(), sources.data<int64_t>(),
      weights.data<T>());
  MINIDET_CUDA_LAUNCH_CHECK("roi_align_rotated list_entries_kernel");

  // 2. Stable sort by destination: the entries of one pixel become one run, in their listed order.
  const int64_t outside = batch * g.height * g.width;
  const SortedEntries sorted = stable_sort_entries(keys, outside);

  // 3. Upstream gradient channel-last, the run heads' gather into NHWC, and back to NCHW.
  Tensor grad_t = empty({g.num_rois, bins, g.channels}, grad_input.options());
  roi_nhwc::transpose(grad_output.data<T>(), grad_t.data<T>(), g.num_rois, g.channels, bins);
  Tensor grad_nhwc = zeros({batch, g.height, g.width, g.channels}, grad_input.options());  // untouched pixels
  const int64_t n = entries * channel_slabs(g.channels) * kLanes;
  roi_nhwc::with_index(n, [&](auto index) {
    using Index = decltype(index);
    gather_runs_kernel<T, Index><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, stream>>>(
        Index(n), entries, sorted.keys.data<int64_t>(), sorted.order.data<int64_t>(), sources.data<int64_t>(),
        weights.data<T>(), grad_t.data<T>(), grad_nhwc.data<T>(), outside, g.channels);
  });
  MINIDET_CUDA_LAUNCH_CHECK("roi_align_rotated gather_runs_kernel");
  roi_nhwc::transpose(grad_nhwc.data<T>(), grad_input.data<T>(), batch, g.height * g.width, g.channels);
}

}  // namespace

void roi_align_rotated_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output,
                                    const RotatedGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  if (output.numel() == 0) return;
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_align_rotated", [&] {
    const Tensor frames = compute_frames<scalar_t>(rois, g);
    roi_nhwc::forward<scalar_t, false>(input, sampler_of<scalar_t>(frames, g), output, Tensor(),
                                       "roi_align_rotated forward_kernel");
  });
}

void roi_align_rotated_backward_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& grad_input,
                                     const RotatedGeometry& g, bool deterministic) {
  cuda::DeviceGuard guard(grad_input.device());
  if (grad_input.numel() == 0) return;
  if (grad_output.numel() == 0) {
    grad_input.zero_();
    return;
  }
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_align_rotated", [&] {
    const Tensor frames = compute_frames<scalar_t>(rois, g);
    const RotatedSampler<scalar_t> sampler = sampler_of<scalar_t>(frames, g);
    if (deterministic) backward_sorted(grad_output, sampler, grad_input);
    else roi_nhwc::backward_atomic<scalar_t, false>(grad_output, sampler, Tensor(), grad_input,
                                                     "roi_align_rotated backward_atomic_kernel");
  });
}

}  // namespace minidet::ops::detail
