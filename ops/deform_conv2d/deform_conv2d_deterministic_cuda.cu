// dx of deform_conv2d on CUDA under DeterministicMode (deform_conv2d_cuda.cu says when it runs).
//
// It replaces the atomic scatter of dx with a gather in a fixed order:
//   1. list every (sample, neighbour r) pair, entry id = sample*4 + r, keyed by the grad_input pixel it
//      feeds, (image, offset group, y, x) flattened; pairs that feed nothing get a key past every pixel;
//   2. sort the keys with a stable radix sort (CUB), carrying the ids: each pixel's pairs become one
//      contiguous run, in increasing id;
//   3. mark where each pixel's run begins and ends;
//   4. a team of lanes per pixel, over its channels, sums m * weight * dcols over the run in that order, into
//      an NHWC buffer, transposed to grad_input at the end.
// The run order depends only on the data, so the bits are the same every run. It costs a sort of 4 entries
// per sample, the stored weights and dcols written once more by sample (the backward pass does that,
// deform_conv2d_backward_cuda.cu): slower than atomics, the price of reproducibility.
#include <algorithm>
#include <type_traits>

#include "core/factories.h"
#include "ops/common/radix_sort.cuh"
#include "ops/common/transpose.cuh"
#include "ops/common/vectors.cuh"
#include "ops/deform_conv2d/deform_conv2d_lanes.cuh"

namespace minidet::ops::detail {
namespace {

// Deterministic step 1: entry id = s*4 + r -> (pixel key, weight). key_none marks an entry that feeds nothing.
// Index: int32_t when every offset fits (deform_conv2d_cuda.cuh), else int64_t; keys and ids stay 64-bit.
template <typename T, typename Index>
__global__ void list_neighbours_kernel(Index samples, const T* offset, const T* mask, DeformGeometry g,
                                       int64_t key_none, int64_t* keys, int64_t* ids, T* weights) {
  const Index plane_size = Index(g.height * g.width);
  MINIDET_KERNEL_LOOP_AS(Index, s, samples) {
    const LocatedSample<T, Index> si(s, offset, mask, g);
    for (int r = 0; r < 4; ++r) {
      const Index id = s * 4 + r;
      keys[id] = si.inside[r] ? int64_t(si.b_group * plane_size + si.neighbour[r]) : key_none;
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

// Steps 1 to 3: every pixel's run of (sample, neighbour) entries, sorted.
struct SortedNeighbours {
  Tensor sorted_ids, weights, begin, end;
  const int64_t* ids() const { return sorted_ids.data<int64_t>(); }
};

template <typename T>
SortedNeighbours sort_neighbours(const Tensor& offset, const Tensor& mask, const DeformGeometry& g, int64_t batch,
                                 int64_t largest_other) {
  const int64_t samples = batch * g.offset_groups * g.taps() * g.out_hw();
  const int64_t entries = samples * 4, key_none = batch * g.offset_groups * g.height * g.width;
  const TensorOptions index_options(kInt64, offset.device());
  Tensor keys = empty({entries}, index_options), ids = empty({entries}, index_options);
  Tensor sorted_keys = empty({entries}, index_options), sorted_ids = empty({entries}, index_options);
  SortedNeighbours sorted;
  sorted.weights = empty({entries}, offset.options());
  const cudaStream_t stream = cuda::current_stream();
  const int64_t largest = std::max({entries, largest_other, offset.numel()});
  const auto list = [&](auto index) {
    using Index = decltype(index);
    list_neighbours_kernel<T, Index><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0, stream>>>(
        Index(samples), offset.data<T>(), data_or_null<T>(mask), g, key_none, keys.data<int64_t>(), ids.data<int64_t>(),
        sorted.weights.data<T>());
  };
  cuda::with_index(largest, list);
  MINIDET_CUDA_LAUNCH_CHECK("list_neighbours_kernel");
  // Only the bits that can be set: key_none is the largest key.
  cub::DoubleBuffer<int64_t> key_buffers(keys.data<int64_t>(), sorted_keys.data<int64_t>());
  cub::DoubleBuffer<int64_t> id_buffers(ids.data<int64_t>(), sorted_ids.data<int64_t>());
  radix_sort_pairs(key_buffers, id_buffers, entries, uint64_t(key_none), offset.device());
  sorted.sorted_ids = id_buffers.Current() == ids.data<int64_t>() ? ids : sorted_ids;
  sorted.begin = zeros({key_none}, index_options);
  sorted.end = zeros({key_none}, index_options);
  run_bounds_kernel<<<cuda::blocks_for(entries), cuda::kThreadsPerBlock, 0, stream>>>(
      entries, key_buffers.Current(), key_none, sorted.begin.data<int64_t>(), sorted.end.data<int64_t>());
  MINIDET_CUDA_LAUNCH_CHECK("run_bounds_kernel");
  return sorted;
}

// Step 4: a team of `lanes` lanes per pixel key (image, offset group, y, x), over the group's channels, V at
// a time (16-byte loads in float32); each lane sums its channels over the pixel's run in the sorted order.
// dcols comes laid out (sample, channel of its group), so a team's reads of one entry are consecutive words:
// with lanes over pixels instead, every lane would read a word of its own sector. grad_nhwc: (B, H, W, C).
template <typename T, typename Index, int V>
__global__ void gather_nhwc_kernel(Index pixels, int lanes, const T* __restrict__ by_sample,
                                   const int64_t* __restrict__ sorted_ids, const T* __restrict__ weights,
                                   const int64_t* __restrict__ begin, const int64_t* __restrict__ end,
                                   T* __restrict__ grad_nhwc, DeformGeometry g) {
  const Index group_channels = Index(g.channels_per_offset_group()), plane_size = Index(g.height * g.width);
  const int me = threadIdx.x % lanes;
  const Index teams = Index(blockDim.x / lanes);
  for (Index key = Index(blockIdx.x) * teams + threadIdx.x / lanes; key < pixels; key += Index(gridDim.x) * teams) {
    const Index b_group = key / plane_size, pixel = key % plane_size;
    const Index b = b_group / Index(g.offset_groups), group = b_group % Index(g.offset_groups);
    T* out = grad_nhwc + (b * plane_size + pixel) * Index(g.channels) + group * group_channels;
    const Index first = Index(begin[key]), last = Index(end[key]);
    for (Index c = Index(me) * V; c < group_channels; c += Index(lanes) * V) {
      T sum[V];
#pragma unroll
      for (int k = 0; k < V; ++k) sum[k] = T(0);
      for (Index i = first; i < last; ++i) {
        const Index id = Index(sorted_ids[i]);
        const T w = weights[id];
        T d[V];
        vectors::load_vector<V>(by_sample + (id / 4) * group_channels + c, d);
#pragma unroll
        for (int k = 0; k < V; ++k) sum[k] += w * d[k];
      }
#pragma unroll
      for (int k = 0; k < V; ++k) out[c + k] = sum[k];
    }
  }
}

template <typename T>
void gather_input_grad(const Tensor& by_sample, const Tensor& offset, const Tensor& mask, const Tensor& grad_input,
                       const DeformGeometry& g) {
  const int64_t batch = grad_input.size(0), plane_size = g.height * g.width;
  const SortedNeighbours sorted =
      sort_neighbours<T>(offset, mask, g, batch, std::max(by_sample.numel(), grad_input.numel()));
  const int64_t largest = std::max({by_sample.numel(), grad_input.numel(), sorted.weights.numel(), offset.numel()});
  const int vector = lanes::vector_width<T>(g);
  int lanes = 1;
  while (lanes < 32 && lanes * vector < g.channels_per_offset_group()) lanes *= 2;
  Tensor grad_nhwc = empty({batch, g.height, g.width, g.channels}, grad_input.options());
  const int64_t pixels = batch * g.offset_groups * plane_size, teams = cuda::kThreadsPerBlock / lanes;
  const auto gather = [&](auto index) {
    using Index = decltype(index);
    auto* kernel = gather_nhwc_kernel<T, Index, 1>;
    if constexpr (std::is_same_v<T, float>)
      if (vector == 4) kernel = gather_nhwc_kernel<T, Index, 4>;
    kernel<<<cuda::blocks_for((pixels + teams - 1) / teams, 1), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        Index(pixels), lanes, by_sample.data<T>(), sorted.ids(), sorted.weights.data<T>(), sorted.begin.data<int64_t>(),
        sorted.end.data<int64_t>(), grad_nhwc.data<T>(), g);
  };
  cuda::with_index(largest, gather);
  MINIDET_CUDA_LAUNCH_CHECK("gather_nhwc_kernel");
  tiled_transpose::transpose(grad_nhwc.data<T>(), grad_input.data<T>(), batch, plane_size, g.channels);
}

}  // namespace

void deform_input_grad_sorted_cuda(const Tensor& grad_cols_by_sample, const Tensor& offset, const Tensor& mask,
                                   const Tensor& grad_input, const DeformGeometry& g) {
  cuda::DeviceGuard guard(grad_input.device());
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "deform_conv2d",
                            [&] { gather_input_grad<scalar_t>(grad_cols_by_sample, offset, mask, grad_input, g); });
}

}  // namespace minidet::ops::detail
