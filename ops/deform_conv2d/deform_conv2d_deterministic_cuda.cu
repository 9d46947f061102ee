// dx of deform_conv2d on CUDA under DeterministicMode (deform_conv2d_cuda.cu says when it runs).
//
// It replaces the atomic scatter of dx with a gather in a fixed order:
//   1. list every (sample, neighbour r) pair, entry id = sample*4 + r, keyed by the grad_input pixel it
//      feeds, (image, offset group, y, x) flattened; pairs that feed nothing get a key past every pixel;
//   2. sort the keys with a stable radix sort (CUB), carrying the ids: each pixel's pairs become one
//      contiguous run, in increasing id;
//   3. mark where each pixel's run begins and ends;
//   4. one thread per grad_input element (channel c of that pixel) sums m * weight * dcols over the run.
// The run order depends only on the data, so the bits are the same every run. It costs a sort of 4 entries
// per sample and the stored weights: slower than atomics, the price of reproducibility.
#include <algorithm>

#include "core/factories.h"
#include "ops/common/radix_sort.cuh"
#include "ops/deform_conv2d/deform_conv2d_cuda.cuh"

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

// Deterministic step 4: one thread per grad_input element (b, c, y, x), summing its pixel's run in order.
// The sums run in the sorted order whatever Index is, so the bits do not depend on it.
template <typename T, typename Index>
__global__ void gather_input_grad_kernel(Index n, const T* grad_cols, ColumnLayout layout, const int64_t* sorted_ids,
                                         const T* weights, const int64_t* begin, const int64_t* end, T* grad_input,
                                         DeformGeometry g) {
  const Index plane_size = Index(g.height * g.width), out_hw = Index(g.out_hw()), taps = Index(g.taps());
  const Index channels = Index(g.channels), row_stride = Index(layout.row_stride);
  MINIDET_KERNEL_LOOP_AS(Index, e, n) {
    const Index pixel = e % plane_size, c = (e / plane_size) % channels, b = e / (plane_size * channels);
    const Index key = (b * Index(g.offset_groups) + c / Index(g.channels_per_offset_group())) * plane_size + pixel;
    const T* grad_cols_c = grad_cols + Index(layout.index(b, c * taps, 0));  // tap t of channel c: t * row_stride
    T sum = 0;
    const Index last = Index(end[key]);
    for (Index i = Index(begin[key]); i < last; ++i) {
      const Index id = Index(sorted_ids[i]), s = id / 4;
      sum += weights[id] * grad_cols_c[(s / out_hw) % taps * row_stride + s % out_hw];
    }
    grad_input[e] = sum;
  }
}

template <typename T>
void deterministic_input_grad(const Tensor& grad_cols, const ColumnLayout& layout, const Tensor& offset,
                              const Tensor& mask, const Tensor& grad_input, const DeformGeometry& g) {
  const int64_t batch = grad_input.size(0), samples = batch * g.offset_groups * g.taps() * g.out_hw();
  const int64_t entries = samples * 4, key_none = batch * g.offset_groups * g.height * g.width;
  const TensorOptions index_options(kInt64, grad_input.device());
  Tensor keys = empty({entries}, index_options), ids = empty({entries}, index_options);
  Tensor sorted_keys = empty({entries}, index_options), sorted_ids = empty({entries}, index_options);
  Tensor weights = empty({entries}, grad_input.options());
  const cudaStream_t stream = cuda::current_stream();
  // 32-bit offsets when the largest tensor indexed allows: the entries (4 per sample), grad_cols, grad_input
  // and offset; keys, begin and end stay under key_none, at most grad_input's size since C >= G.
  const int64_t largest = std::max({entries, grad_cols.numel(), grad_input.numel(), offset.numel()});
  const auto list = [&](auto index) {
    using Index = decltype(index);
    list_neighbours_kernel<T, Index><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0, stream>>>(
        Index(samples), offset.data<T>(), data_or_null<T>(mask), g, key_none, keys.data<int64_t>(), ids.data<int64_t>(),
        weights.data<T>());
  };
  cuda::with_index(largest, list);
  MINIDET_CUDA_LAUNCH_CHECK("list_neighbours_kernel");
  // Only the bits that can be set: key_none is the largest key.
  cub::DoubleBuffer<int64_t> key_buffers(keys.data<int64_t>(), sorted_keys.data<int64_t>());
  cub::DoubleBuffer<int64_t> id_buffers(ids.data<int64_t>(), sorted_ids.data<int64_t>());
  radix_sort_pairs(key_buffers, id_buffers, entries, uint64_t(key_none), grad_input.device());
  Tensor begin = zeros({key_none}, index_options), end = zeros({key_none}, index_options);
  run_bounds_kernel<<<cuda::blocks_for(entries), cuda::kThreadsPerBlock, 0, stream>>>(
      entries, key_buffers.Current(), key_none, begin.data<int64_t>(), end.data<int64_t>());
  MINIDET_CUDA_LAUNCH_CHECK("run_bounds_kernel");
  const int64_t n = grad_input.numel();
  const auto gather = [&](auto index) {
    using Index = decltype(index);
    gather_input_grad_kernel<T, Index><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, stream>>>(
        Index(n), grad_cols.data<T>(), layout, id_buffers.Current(), weights.data<T>(), begin.data<int64_t>(),
        end.data<int64_t>(), grad_input.data<T>(), g);
  };
  cuda::with_index(largest, gather);
  MINIDET_CUDA_LAUNCH_CHECK("gather_input_grad_kernel");
}

}  // namespace

void deform_input_grad_sorted_cuda(const Tensor& grad_cols, const ColumnLayout& layout, const Tensor& offset,
                                   const Tensor& mask, const Tensor& grad_input, const DeformGeometry& g) {
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "deform_conv2d", [&] {
    deterministic_input_grad<scalar_t>(grad_cols, layout, offset, mask, grad_input, g);
  });
}

}  // namespace minidet::ops::detail
