// CUDA RoIAlign input gradient under DeterministicMode: the same sums as the atomic scatter, in a fixed order.
//
// The scatter "sample neighbour -> input pixel" is turned into a gather "input pixel <- its contributions":
//   1. list every contribution as an entry (destination key, source gradient index, weight);
//   2. sort the entries by destination with a STABLE radix sort: entries of one pixel become one run, in
//      the order they were listed (RoI, bin, sample, neighbour), whatever the thread schedule;
//   3. the first entry of each run (its "head") sums the run in that order and writes the pixel once.
// Pixels no RoI touches keep the zeros written first. Same result every run, bit for bit.
//
// avg mode: a contribution's destination pixel and weight do not depend on the channel, so entries are
//   listed once per (RoI, bin, sample, neighbour) with key n*H*W + pixel and weight w / count; step 3 runs
//   one thread per (entry, channel), channel fastest, and reads grad_output[k, c, bin].
// max mode: the winning sample differs per channel, so entries are per (RoI, channel, bin, neighbour) with
//   key = the NCHW index of the destination, (n*C + c)*H*W + pixel: K*C*bins*4 entries (more memory).
// Samples outside the map get a key past every pixel, so they sort last and are skipped.
//
// Entry counts: with a fixed sampling_ratio the number of entries is known on the host. With adaptive
// sampling it depends on the RoI sizes, which live on the device: one scan gives every RoI's first entry
// and ONE 8-byte copy brings the total back to size the buffers (a second host sync, deterministic mode only).
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align_kernels.h"
#include "ops/roi_align/roi_align_sort.cuh"

namespace minidet::ops::detail {
namespace {

// Entries of RoI k in avg mode: bins * samples per bin * 4 neighbours; a trailing 0 at index K, so that the
// exclusive scan's last element is the total.
template <typename T>
__global__ void count_entries_kernel(const T* rois, int64_t* counts, RoiAlignGeometry g) {
  MINIDET_KERNEL_LOOP(k, g.rois + 1) { counts[k] = k < g.rois ? roi_box(rois + k * 5, g).count() * g.bins() * 4 : 0; }
}

template <typename T>
__global__ void list_avg_entries_kernel(const T* rois, const int64_t* first_entry, int64_t* keys, int64_t* sources,
                                        T* weights, RoiAlignGeometry g) {
  const int64_t plane = g.height * g.width, outside = g.batch * plane;
  MINIDET_KERNEL_LOOP(kb, g.rois * g.bins()) {  // one thread per (RoI, bin)
    const int64_t k = kb / g.bins(), bin = kb % g.bins();
    const RoiBox<T> box = roi_box(rois + k * 5, g);
    const int64_t count = box.count();
    int64_t e = first_entry[k] + bin * count * 4;
    for (int64_t s = 0; s < count; ++s) {
      const BilinearSample<T> w = roi_sample(box, bin / g.pooled_w, bin % g.pooled_w, s, g).bilinear;
      for (int j = 0; j < 4; ++j, ++e) {
        keys[e] = w.inside ? box.batch * plane + w.offset[j] : outside;
        sources[e] = k * g.bins() + bin;
        weights[e] = w.weight[j] / T(count);
      }
    }
  }
}

template <typename T>
__global__ void list_max_entries_kernel(const T* rois, const int64_t* argmax, int64_t* keys, int64_t* sources,
                                        T* weights, RoiAlignGeometry g) {
  const int64_t plane = g.height * g.width, outside = g.batch * g.channels * plane;
  MINIDET_KERNEL_LOOP(out, g.rois * g.channels * g.bins()) {  // one thread per output element (k, c, bin)
    const int64_t bin = out % g.bins(), c = (out / g.bins()) % g.channels, k = out / (g.bins() * g.channels);
    const RoiBox<T> box = roi_box(rois + k * 5, g);
    const BilinearSample<T> w = roi_sample(box, bin / g.pooled_w, bin % g.pooled_w, argmax[out], g).bilinear;
    for (int j = 0; j < 4; ++j) {
      const int64_t e = out * 4 + j;
      keys[e] = w.inside ? (box.batch * g.channels + c) * plane + w.offset[j] : outside;
      sources[e] = out;
      weights[e] = w.weight[j];
    }
  }
}

// Step 3. `channels` threads per sorted entry (1 in max mode). In avg mode the key is a pixel of image n and
// the gradient element is (n, c, pixel); in max mode the key already is the NCHW index.
template <typename T>
__global__ void gather_runs_kernel(int64_t n, int64_t entries, const int64_t* keys, const int64_t* order,
                                   const int64_t* sources, const T* weights, const T* grad_output, T* grad_input,
                                   int64_t outside, RoiAlignGeometry g) {
  const int64_t channels = g.max_mode ? 1 : g.channels, plane = g.height * g.width;
  MINIDET_KERNEL_LOOP(i, n) {
    const int64_t e = i / channels, c = i % channels;
    const int64_t key = keys[e];
    if (key == outside || (e > 0 && keys[e - 1] == key)) continue;  // only run heads work
    T sum = 0;
    for (int64_t r = e; r < entries && keys[r] == key; ++r) {
      const int64_t id = order[r];
      // avg: sources[id] = k*bins + bin -> grad_output[(k*C + c)*bins + bin]; max: the output index itself.
      const int64_t src = g.max_mode ? sources[id]
                                     : (sources[id] / g.bins() * g.channels + c) * g.bins() + sources[id] % g.bins();
      sum += weights[id] * grad_output[src];
    }
    const int64_t dst = g.max_mode ? key : ((key / plane) * g.channels + c) * plane + key % plane;
    grad_input[dst] = sum;
  }
}

}  // namespace

void roi_align_backward_input_sorted_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                                          const Tensor& grad_input, const RoiAlignGeometry& g) {
  cuda::DeviceGuard guard(grad_input.device());
  grad_input.zero_();
  if (grad_input.numel() == 0 || grad_output.numel() == 0) return;
  const TensorOptions index_options(kInt64, grad_input.device());
  const cudaStream_t stream = cuda::current_stream();
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_align", [&] {
    using T = scalar_t;
    const T* roi_data = rois.data<T>();
    // 1. List the entries.
    int64_t entries = 0;
    Tensor first_entry;
    if (g.max_mode) {
      entries = g.rois * g.channels * g.bins() * 4;
    } else {
      Tensor counts = empty({g.rois + 1}, index_options);
      first_entry = empty({g.rois + 1}, index_options);
      count_entries_kernel<T><<<cuda::blocks_for(g.rois + 1), cuda::kThreadsPerBlock, 0, stream>>>(
          roi_data, counts.data<int64_t>(), g);
      MINIDET_CUDA_LAUNCH_CHECK("roi_align count_entries_kernel");
      exclusive_sum(counts, first_entry);
      if (g.sampling_ratio > 0) {
        entries = g.rois * g.bins() * g.sampling_ratio * g.sampling_ratio * 4;
      } else {  // the documented extra sync: the scan's last element is the total
        entries = first_entry.select(0, g.rois).item<int64_t>();
      }
    }
    Tensor keys = empty({entries}, index_options), sources = empty({entries}, index_options);
    Tensor weights = empty({entries}, grad_input.options());
    if (g.max_mode) {
      list_max_entries_kernel<T><<<cuda::blocks_for(entries / 4), cuda::kThreadsPerBlock, 0, stream>>>(
          roi_data, argmax.data<int64_t>(), keys.data<int64_t>(), sources.data<int64_t>(), weights.data<T>(), g);
    } else {
      list_avg_entries_kernel<T><<<cuda::blocks_for(g.rois * g.bins()), cuda::kThreadsPerBlock, 0, stream>>>(
          roi_data, first_entry.data<int64_t>(), keys.data<int64_t>(), sources.data<int64_t>(), weights.data<T>(), g);
    }
    MINIDET_CUDA_LAUNCH_CHECK("roi_align list_entries_kernel");

    // 2. Stable sort by destination (LSD radix sort keeps equal keys in their listed order).
    const int64_t outside = g.max_mode ? grad_input.numel() : g.batch * g.height * g.width;
    const SortedEntries sorted = stable_sort_entries(keys, outside);

    // 3. Each run head sums its run in sorted order and writes its pixel.
    const int64_t n = entries * (g.max_mode ? 1 : g.channels);
    gather_runs_kernel<T><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, stream>>>(
        n, entries, sorted.keys.data<int64_t>(), sorted.order.data<int64_t>(), sources.data<int64_t>(),
        weights.data<T>(), grad_output.data<T>(), grad_input.data<T>(), outside, g);
    MINIDET_CUDA_LAUNCH_CHECK("roi_align gather_runs_kernel");
  });
}

}  // namespace minidet::ops::detail
