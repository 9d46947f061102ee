// The backward of deform_conv2d on CUDA: one pass over the samples, with the lanes over channels
// (deform_conv2d_lanes.cuh says why and how the work is split). From dcols it makes dx (unless
// DeterministicMode sums dx elsewhere, deform_conv2d_deterministic_cuda.cu), the offset and mask gradients,
// and the recomputed columns for dW.
//
// dx is a scatter: each (sample, channel) adds into four pixels. Its atomicAdds go into an NHWC gradient
// buffer, so a team's adds of one neighbour cover consecutive words of one pixel, and with V = 4 on compute
// capability 9.0 and above each lane adds its 4 channels with one 16-byte atomic (`atomicAdd` on float4): four times
// fewer requests for L2's atomic units. Each block:
//   1. loads the slice's dcols for its positions into shared memory, and under DeterministicMode writes them
//      out again laid out (sample, channel) for the sorted gather of dx;
//   2. each team serves its sample over the slice's channels: it reads the four neighbours, adds
//      m * weight_r * dcols into the NHWC gradient, keeps the recomputed column entry (for dW) in shared
//      memory, and sums dcols * dS/dy, dcols * dS/dx and dcols * S; a butterfly of shuffles adds the
//      lanes' sums, in a fixed order;
//   3. stores the recomputed columns.
// The offset and mask gradients sum over the whole group: with one slice the block writes them, with more
// each slice writes its partial sums and sum_slices_kernel adds them in slice order. Every sum but dx's
// atomics is in a fixed order, so DeterministicMode uses this pass as it is, without dx.
// Around the kernel: the input NCHW -> NHWC, and the gradient NHWC -> NCHW (ops/common/transpose.cuh).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/factories.h"
#include "ops/common/transpose.cuh"
#include "ops/deform_conv2d/deform_conv2d_lanes.cuh"

namespace minidet::ops::detail {
namespace {

using lanes::kThreads;

// V neighbouring channels' adds at once: one 16-byte atomic in float32 with V = 4 on compute capability 9.0,
// else V scalar ones.
template <int V, typename T>
__device__ inline void add_channels(T* p, const T v[V]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kVectorAtomic = V == 4 && std::is_same_v<T, float>;
#else
  constexpr bool kVectorAtomic = false;
#endif
  if constexpr (kVectorAtomic) {
    atomicAdd(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) atomicAdd(p + k, v[k]);
  }
}

// Grid: lanes::Geometry::grid. partial: (slices, 3, samples), or null when one slice holds the group (then
// the block writes grad_offset and grad_mask itself). Index: int32_t when every offset fits (the launcher
// checks), else int64_t. In float32 with 32-bit offsets the kernel is held to 64 registers, for four blocks
// a multiprocessor: it waits on its gathers, so warps in flight are what speed it up.
template <typename T, typename Index, int V>
__global__ void __launch_bounds__(kThreads, sizeof(T) == 4 && sizeof(Index) == 4 ? 4 : 1)
    deform_col2im_lanes_kernel(const T* __restrict__ grad_cols, const T* __restrict__ input_nhwc,
                               const T* __restrict__ offset, const T* __restrict__ mask, T* grad_nhwc,
                               T* __restrict__ partial, T* __restrict__ grad_offset, T* __restrict__ grad_mask,
                               T* __restrict__ cols, T* __restrict__ dcols_by_sample, ColumnLayout layout,
                               DeformGeometry g, lanes::Geometry t) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* staged_dcols = reinterpret_cast<T*>(shared_bytes);  // (position, slice channel)
  T* staged_cols = staged_dcols + t.positions * t.stride;
  const lanes::Block<Index> block(g, t);
  const Index out_hw = Index(g.out_hw()), channels = Index(g.channels);
  const Index group_channels = Index(g.channels_per_offset_group());
  const Index samples = Index(gridDim.x) / Index(t.tiles) * out_hw;
  block.load_columns(grad_cols, layout, g, t, staged_dcols);
  __syncthreads();
  if (dcols_by_sample) {  // (sample, group channel): the sorted gather's operand, coalesced along c
    for (int i = threadIdx.x; i < block.count * int(t.positions); i += kThreads) {
      const int c = i % block.count, p = i / block.count;
      if (p < block.positions)
        dcols_by_sample[block.sample(p, g) * group_channels + block.first + c] = staged_dcols[p * t.stride + c];
    }
  }

  const int team = t.lanes, me = threadIdx.x % team, p = threadIdx.x / team;  // a team per position
  const Index plane_size = Index(g.height * g.width);
  const T* image = input_nhwc + block.b * plane_size * channels + block.c0;
  T* grad_image = grad_nhwc ? grad_nhwc + block.b * plane_size * channels + block.c0 : nullptr;
  T sum_dy = 0, sum_dx = 0, sum_value = 0;
  T m = 1;
  if (p < block.positions) {
    const LocatedSample<T, Index> si(block.where(p, g), offset, mask, g);
    m = si.mask;
    T weight[4];  // m * bilinear weight: what one unit of dcols sends to each neighbour
#pragma unroll
    for (int r = 0; r < 4; ++r) weight[r] = si.mask * neighbour_weight(si.at, r);
    for (int c = me * V; c < block.count; c += team * V) {
      T* col = staged_cols + p * t.stride + c;
      if (!si.at.valid) {
#pragma unroll
        for (int k = 0; k < V; ++k) col[k] = T(0);
        continue;
      }
      T v[4][V];
      lanes::load_neighbours<V>(si, image, channels, c, v);
      const T* dcol = staged_dcols + p * t.stride + c;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const T n[4] = {v[0][k], v[1][k], v[2][k], v[3][k]};
        const T value = interpolate(si.at, n);
        col[k] = si.mask * value;
        sum_value += dcol[k] * value;
        sum_dy += dcol[k] * interpolate_dy(si.at, n);
        sum_dx += dcol[k] * interpolate_dx(si.at, n);
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        if (!grad_image || !si.inside[r]) continue;
        T share[V];
#pragma unroll
        for (int k = 0; k < V; ++k) share[k] = weight[r] * dcol[k];
        add_channels<V>(grad_image + si.neighbour[r] * channels + c, share);
      }
    }
  }
  // A team is t.lanes aligned lanes of one warp, so xor distances below that stay inside it.
  for (int d = team / 2; d > 0; d /= 2) {
    sum_dy += __shfl_xor_sync(0xffffffffu, sum_dy, d);
    sum_dx += __shfl_xor_sync(0xffffffffu, sum_dx, d);
    sum_value += __shfl_xor_sync(0xffffffffu, sum_value, d);
  }
  if (me == 0 && p < block.positions) {
    const Index s = block.sample(p, g);
    if (partial) {
      T* out = partial + Index(blockIdx.y) * 3 * samples + s;
      out[0] = sum_dy;
      out[samples] = sum_dx;
      out[2 * samples] = sum_value;
    } else {
      const SampleIndex<Index> si = block.where(p, g);
      if (grad_offset) {
        grad_offset[si.dy_index(g)] = m * sum_dy;
        grad_offset[si.dy_index(g) + out_hw] = m * sum_dx;
      }
      if (grad_mask) grad_mask[si.mask_index(g)] = sum_value;
    }
  }
  if (!cols) return;
  __syncthreads();
  block.store_columns(staged_cols, layout, g, t, cols);
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

}  // namespace

void deform_col2im_lanes_cuda(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                              const ColumnLayout& layout, const DeformGeometry& g, const DeformBackwardOutputs& out,
                              const Tensor& grad_cols_by_sample) {
  cuda::DeviceGuard guard(input.device());
  const int64_t batch = input.size(0), plane_size = g.height * g.width;
  const int64_t samples = batch * g.offset_groups * g.taps() * g.out_hw();
  if (samples == 0) return;
  const bool coordinates = out.grad_offset.defined() || out.grad_mask.defined();
  cudaStream_t stream = cuda::current_stream();
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    using T = scalar_t;
    const lanes::Geometry t = lanes::geometry<T>(g);
    const Tensor input_nhwc = lanes::channels_last<T>(input, g);
    const bool dx = out.grad_input.defined();
    const Tensor grad_nhwc = dx ? zeros({batch, g.height, g.width, g.channels}, input.options()) : Tensor();
    const Tensor partial = coordinates && t.slices > 1 ? empty({t.slices * 3 * samples}, input.options()) : Tensor();
    const int64_t largest = std::max({input.numel(), grad_cols.numel(), offset.numel(), 3 * t.slices * samples,
                                      out.cols.defined() ? out.cols.numel() : int64_t(0)});
    const auto launch = [&](auto index) {
      using Index = decltype(index);
      auto* kernel = deform_col2im_lanes_kernel<T, Index, 1>;
      if constexpr (std::is_same_v<T, float>)
        if (t.vector == 4) kernel = deform_col2im_lanes_kernel<T, Index, 4>;
      kernel<<<t.grid(g, batch), kThreads, 2 * t.array_bytes(sizeof(T)), stream>>>(
          grad_cols.data<T>(), input_nhwc.data<T>(), offset.data<T>(), data_or_null<T>(mask),
          data_or_null<T>(grad_nhwc), data_or_null<T>(partial), data_or_null<T>(out.grad_offset),
          data_or_null<T>(out.grad_mask), data_or_null<T>(out.cols), data_or_null<T>(grad_cols_by_sample), layout, g,
          t);
      MINIDET_CUDA_LAUNCH_CHECK("deform_col2im_lanes_kernel");
    };
    cuda::with_index(largest, launch);
    if (partial.defined()) {
      sum_slices_kernel<T><<<cuda::blocks_for(samples), cuda::kThreadsPerBlock, 0, stream>>>(
          samples, t.slices, partial.data<T>(), data_or_null<T>(mask), data_or_null<T>(out.grad_offset),
          data_or_null<T>(out.grad_mask), g);
      MINIDET_CUDA_LAUNCH_CHECK("sum_slices_kernel");
    }
    if (dx) tiled_transpose::transpose(grad_nhwc.data<T>(), out.grad_input.data<T>(), batch, plane_size, g.channels);
  });
}

}  // namespace minidet::ops::detail
