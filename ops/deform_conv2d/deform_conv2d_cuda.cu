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
#include <cub/device/device_radix_sort.cuh>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/deform_conv2d/deform_conv2d_kernels.h"

namespace minidet::ops::detail {
namespace {

// The coordinates of sample s = ((b*G + group)*taps + tap)*out_hw + pos, the thread index of both kernels.
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
  // Column entry (and grad_cols entry) of channel c of this image.
  __device__ int64_t column_index(const DeformGeometry& g, int64_t c) const {
    return ((b * g.channels + c) * g.taps() + tap) * g.out_hw() + pos;
  }
};

template <typename T>
__device__ BilinearSample<T> locate(const SampleIndex& si, const T* offset, const DeformGeometry& g) {
  const int64_t dy = si.dy_index(g);
  return locate_sample<T>(g, si.tap / g.kernel_w, si.tap % g.kernel_w, si.pos / g.out_w, si.pos % g.out_w,
                          offset[dy], offset[dy + g.out_hw()]);
}

template <typename T>
__global__ void deform_im2col_kernel(int64_t samples, const T* input, const T* offset, const T* mask, T* cols,
                                     DeformGeometry g) {
  MINIDET_KERNEL_LOOP(s, samples) {
    const SampleIndex si(s, g);
    const BilinearSample<T> sample = locate(si, offset, g);
    const T m = mask ? mask[si.mask_index(g)] : T(1);
    const int64_t group_channels = g.channels_per_offset_group(), plane_size = g.height * g.width;
    for (int64_t c = si.group * group_channels; c < (si.group + 1) * group_channels; ++c) {
      T value = T(0);
      if (sample.valid) {
        T v[4];
        read_neighbours(input + (si.b * g.channels + c) * plane_size, sample, g.height, g.width, v);
        value = m * interpolate(sample, v);
      }
      cols[si.column_index(g, c)] = value;
    }
  }
}

// Any output pointer may be null (not needed). grad_input: atomicAdd into a zeroed buffer.
template <typename T>
__global__ void deform_col2im_fused_kernel(int64_t samples, const T* grad_cols, const T* input, const T* offset,
                                           const T* mask, T* grad_input, T* grad_offset, T* grad_mask, T* cols,
                                           DeformGeometry g) {
  MINIDET_KERNEL_LOOP(s, samples) {
    const SampleIndex si(s, g);
    const BilinearSample<T> sample = locate(si, offset, g);
    const T m = mask ? mask[si.mask_index(g)] : T(1);
    const int64_t group_channels = g.channels_per_offset_group(), plane_size = g.height * g.width;
    T sum_dy = 0, sum_dx = 0, sum_value = 0;
    for (int64_t c = si.group * group_channels; c < (si.group + 1) * group_channels; ++c) {
      const int64_t column = si.column_index(g, c);
      if (!sample.valid) {
        if (cols) cols[column] = T(0);
        continue;
      }
      const int64_t plane = (si.b * g.channels + c) * plane_size;
      T v[4];
      read_neighbours(input + plane, sample, g.height, g.width, v);
      const T value = interpolate(sample, v), grad_col = grad_cols[column];
      if (cols) cols[column] = m * value;
      sum_value += grad_col * value;
      sum_dy += grad_col * interpolate_dy(sample, v);
      sum_dx += grad_col * interpolate_dx(sample, v);
      if (grad_input) {
        for (int r = 0; r < 4; ++r) {
          const int64_t y = sample.y0 + r / 2, x = sample.x0 + r % 2;
          if (neighbour_inside(y, x, g.height, g.width))
            atomicAdd(grad_input + plane + y * g.width + x, m * neighbour_weight(sample, r) * grad_col);
        }
      }
    }
    if (grad_offset) {
      const int64_t dy = si.dy_index(g);
      grad_offset[dy] = m * sum_dy;
      grad_offset[dy + g.out_hw()] = m * sum_dx;
    }
    if (grad_mask) grad_mask[si.mask_index(g)] = sum_value;
  }
}

// Deterministic step 1: entry id = s*4 + r -> (pixel key, weight). key_none marks an entry that feeds nothing.
template <typename T>
__global__ void list_neighbours_kernel(int64_t samples, const T* offset, const T* mask, DeformGeometry g,
                                       int64_t key_none, int64_t* keys, int64_t* ids, T* weights) {
  MINIDET_KERNEL_LOOP(s, samples) {
    const SampleIndex si(s, g);
    const BilinearSample<T> sample = locate(si, offset, g);
    const T m = mask ? mask[si.mask_index(g)] : T(1);
    for (int r = 0; r < 4; ++r) {
      const int64_t id = s * 4 + r, y = sample.y0 + r / 2, x = sample.x0 + r % 2;
      const bool feeds = sample.valid && neighbour_inside(y, x, g.height, g.width);
      keys[id] = feeds ? (si.b_group * g.height + y) * g.width + x : key_none;
      ids[id] = id;
      weights[id] = feeds ? m * neighbour_weight(sample, r) : T(0);
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
                        const DeformGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  const int64_t samples = input.size(0) * g.offset_groups * g.taps() * g.out_hw();
  if (samples == 0 || cols.numel() == 0) return;
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    deform_im2col_kernel<scalar_t><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        samples, input.data<scalar_t>(), offset.data<scalar_t>(), data_or_null<scalar_t>(mask),
        cols.data<scalar_t>(), g);
    MINIDET_CUDA_LAUNCH_CHECK("deform_im2col_kernel");
  });
}

void deform_col2im_cuda(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                        const DeformGeometry& g, const DeformBackwardOutputs& out, bool deterministic) {
  cuda::DeviceGuard guard(input.device());
  const int64_t samples = input.size(0) * g.offset_groups * g.taps() * g.out_hw();
  if (samples == 0) return;
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    const bool atomic_input = out.grad_input.defined() && !deterministic;
    if (atomic_input || out.grad_offset.defined() || out.grad_mask.defined() || out.cols.defined()) {
      deform_col2im_fused_kernel<scalar_t><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0,
                                             cuda::current_stream()>>>(
          samples, grad_cols.data<scalar_t>(), input.data<scalar_t>(), offset.data<scalar_t>(),
          data_or_null<scalar_t>(mask), atomic_input ? out.grad_input.data<scalar_t>() : nullptr,
          data_or_null<scalar_t>(out.grad_offset), data_or_null<scalar_t>(out.grad_mask),
          data_or_null<scalar_t>(out.cols), g);
      MINIDET_CUDA_LAUNCH_CHECK("deform_col2im_fused_kernel");
    }
    if (out.grad_input.defined() && deterministic)
      deterministic_input_grad<scalar_t>(grad_cols, offset, mask, out.grad_input, g);
  });
}

}  // namespace minidet::ops::detail
