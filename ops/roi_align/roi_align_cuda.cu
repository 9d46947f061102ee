// CUDA RoIAlign: forward, the input-gradient backward, and the RoI-coordinate gradient.
//
// The forward and the fast input gradient are the channel-last kernels of roi_align_nhwc.cuh and
// roi_align_backward.cuh (shared with roi_align_rotated; the first says why channel-last is fast), with
// AxisAlignedSampler below placing the samples on the axis-aligned box. The average of up to 7x7 bins (a
// detector's box head) takes the separable form instead where its scratch fits in shared memory
// (roi_align_separable.cuh: Y = Aᵀ · X · B and dX = A · dY · Bᵀ per RoI and channel, which the rotated op's
// turned samples do not allow; the backward also needs the map there). DeterministicMode
// replaces the atomics by kernels that add every term in the CPU's order (both shared with
// roi_align_rotated): the sorted terms of roi_align_sorted.cuh for the average with a fixed sampling ratio,
// the tile gather of roi_align_gather.cuh for adaptive sampling and max mode.
//
// The RoI-coordinate gradient needs a sum over channels, bins and samples per RoI: one block per RoI, each
// thread a fixed strided part of that sum, then a fixed-shape tree in shared memory. No atomics, so it is
// deterministic in every mode.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align_backward.cuh"
#include "ops/roi_align/roi_align_gather.cuh"
#include "ops/roi_align/roi_align_kernels.h"
#include "ops/roi_align/roi_align_nhwc.cuh"
#include "ops/roi_align/roi_align_separable.cuh"
#include "ops/roi_align/roi_align_sorted.cuh"

namespace minidet::ops::detail {
namespace {

// roi_align's sample positions (roi_align_kernels.h) as a roi_nhwc sampler: the same functions the CPU uses.
// extent and ranges serve the deterministic gather (roi_align_gather.cuh): along each axis the samples sit
// at start + (i + 0.5) * size / (pooled * grid), i = bin * grid + sample, between start and start + size.
template <typename T>
struct AxisAlignedSampler {
  const T* rois;
  RoiAlignGeometry g;
  __device__ RoiBox<T> roi(int64_t k) const { return roi_box(rois + k * 5, g); }
  __device__ BilinearSample<T> sample(const RoiBox<T>& b, int64_t p, int64_t q, int64_t iy, int64_t ix) const {
    return roi_sample_at(b, p, q, iy, ix, g).bilinear;
  }
  __device__ T divisor(const RoiBox<T>& b) const { return T(b.count()); }

  __device__ roi_gather::MapBox extent(const RoiBox<T>& b) const {
    const double y0 = b.start_y, y1 = y0 + double(b.roi_h), x0 = b.start_x, x1 = x0 + double(b.roi_w);
    return roi_gather::widened(fmin(y0, y1), fmax(y0, y1), fmin(x0, x1), fmax(x0, x1),
                               fabs(y0) + fabs(y1) + fabs(x0) + fabs(x1));
  }
  __device__ roi_gather::SampleRanges ranges(const RoiBox<T>& b, const roi_gather::MapBox& reach) const {
    const int64_t rows = g.pooled_h * b.grid_h, cols = g.pooled_w * b.grid_w;
    const roi_gather::MapBox r = roi_gather::widened(reach.y0, reach.y1, reach.x0, reach.x1,
                                                     fabs(b.start_y) + fabs(b.roi_h) + fabs(b.start_x) + fabs(b.roi_w));
    roi_gather::SampleRanges s;
    roi_gather::samples_between(b.start_y, double(b.roi_h) / double(rows), rows, r.y0, r.y1, &s.row0, &s.row1);
    roi_gather::samples_between(b.start_x, double(b.roi_w) / double(cols), cols, r.x0, r.x1, &s.col0, &s.col1);
    return s;
  }
};

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

}  // namespace

void roi_align_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                            const RoiAlignGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  if (output.numel() == 0) return;
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_align", [&] {
    if (roi_separable::forward_fits<scalar_t>(g)) {  // average, <= 7x7 bins, small map
      roi_separable::forward<scalar_t>(input, rois, g, output, "roi_align forward kernel");
      return;
    }
    const AxisAlignedSampler<scalar_t> sampler{rois.data<scalar_t>(), g};
    if (g.max_mode) roi_nhwc::forward<scalar_t, true>(input, sampler, output, argmax, "roi_align forward_kernel");
    else  // the staged average up to 256 channels: its coalesced writes pay for the axis-aligned samples
      roi_nhwc::forward<scalar_t, false>(input, sampler, output, argmax, "roi_align forward_kernel", 256);
  });
}

void roi_align_backward_input_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                                   const Tensor& grad_input, const RoiAlignGeometry& g, bool deterministic) {
  cuda::DeviceGuard guard(grad_input.device());
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_align", [&] {
    const AxisAlignedSampler<scalar_t> sampler{rois.data<scalar_t>(), g};
    if (deterministic) {
      const roi_sorted::TermShape terms{grad_input.size(0), g.rois,     g.channels,       g.height,        g.width,
                                        g.pooled_h,         g.pooled_w, g.sampling_ratio, g.sampling_ratio};
      if (roi_sorted::fits(terms, g.max_mode))
        roi_sorted::backward<scalar_t>(grad_output, sampler, terms, grad_input);
      else if (g.max_mode)
        roi_gather::backward<scalar_t, true>(grad_output, sampler, argmax, grad_input, "roi_align");
      else roi_gather::backward<scalar_t, false>(grad_output, sampler, argmax, grad_input, "roi_align");
      return;
    }
    const char* name = "roi_align backward kernel";
    if (roi_separable::backward_fits<scalar_t>(g)) {  // average, <= 7x7 bins, small map
      roi_separable::backward<scalar_t>(grad_output, rois, g, grad_input, name);
      return;
    }
    if (g.max_mode) roi_nhwc::backward<scalar_t, true>(grad_output, sampler, argmax, grad_input, name);
    else roi_nhwc::backward<scalar_t, false>(grad_output, sampler, argmax, grad_input, name);
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
