// CUDA roi_align_rotated: the forward, the fast input gradient and, under DeterministicMode, the sorted
// terms or the tile gather. Same sample positions and bilinear rules as the CPU (roi_align_rotated_kernels.h,
// ops/common/bilinear.h).
//
// RoIAlign (Mask R-CNN: He et al. 2017) over a rotated box (detectron2's ROIAlignRotated; the math is in
// roi_align_rotated.h) differs from the axis-aligned op only in where a bin's samples sit: the grid is laid
// out in the box's own frame (u, v) and turned by the angle into the map. So this op runs roi_align's
// channel-last kernels (ops/roi_align/roi_align_nhwc.cuh, roi_align_backward.cuh) with RotatedSampler below doing that
// turn, and is fast for the same reasons:
//   - the input (and, in backward, the gradient buffer) is NHWC, and the 32 lanes of a warp are 32
//     consecutive channels of one bin: each bilinear read and each atomicAdd of a warp is one 128-byte
//     line, not 32 addresses H*W apart; on small maps the backward adds into a copy of the map in shared
//     memory first;
//   - a lane serves 8 channels, so one sample-geometry computation (rotation, floor, weights) serves up to
//     256 channels instead of one;
//   - each RoI's frame (centre, cos, sin, steps, grid) is computed once, by frames_kernel, not in every work
//     item: no sin/cos in the hot loops.
//
// DeterministicMode with a fixed sampling ratio runs roi_align's sorted terms
// (ops/roi_align/roi_align_sorted.cuh) with the same sampler: the terms sorted by pixel, then added in the
// CPU's order by a team of lanes per pixel. With adaptive sampling (the number of terms depends on the
// boxes, unknown to the host without a synchronisation) it runs roi_align's tile gather
// (ops/roi_align/roi_align_gather.cuh) with the same sampler: one warp per tile of dx and 32 channels walks the RoIs in
// order and adds each term in the CPU's order (RoI, bin, sample, neighbour), so the input gradient has the same bits
// every run, and the CPU's bits wherever the two devices' sin and cos agree (they may differ in the last bit). To find
// the samples of a RoI that can reach a tile, RotatedSampler::ranges turns the tile into the box's frame (u, v) and
// takes the samples inside its bounding box there.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/roi_align/roi_align_backward.cuh"
#include "ops/roi_align/roi_align_gather.cuh"
#include "ops/roi_align/roi_align_nhwc.cuh"
#include "ops/roi_align/roi_align_sorted.cuh"
#include "ops/roi_align_rotated/roi_align_rotated_kernels.h"

namespace minidet::ops::detail {
namespace {

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
// precomputed frame, and sample (iy, ix) of bin (p, q) is the CPU's rotated_bin_sample. extent and ranges
// serve the gather (roi_align_gather.cuh): sample (i, j) sits at u = start_u + (j + 0.5) * step_u,
// v = start_v + (i + 0.5) * step_v in the box frame, so |u| <= |start_u| and |v| <= |start_v|.
template <typename T>
struct RotatedSampler {
  const RotatedFrame<T>* frames;
  RotatedGeometry g;
  __device__ RotatedFrame<T> roi(int64_t k) const { return frames[k]; }
  __device__ BilinearSample<T> sample(const RotatedFrame<T>& f, int64_t p, int64_t q, int64_t iy, int64_t ix) const {
    return rotated_bin_sample(f, g, p, q, iy, ix);
  }
  __device__ T divisor(const RotatedFrame<T>& f) const { return f.count; }

  // The box's bounding box in the map.
  __device__ roi_gather::MapBox extent(const RotatedFrame<T>& f) const {
    const double c = fabs(double(f.cos_theta)), s = fabs(double(f.sin_theta));
    const double hu = fabs(double(f.start_u)), hv = fabs(double(f.start_v));
    const double ex = hu * c + hv * s, ey = hu * s + hv * c;
    return roi_gather::widened(f.center_y - ey, f.center_y + ey, f.center_x - ex, f.center_x + ex,
                               fabs(double(f.center_x)) + fabs(double(f.center_y)) + hu + hv);
  }
  // The reach's corners turned into the box frame, u = dx cos - dy sin, v = dx sin + dy cos (the inverse of
  // rotated_sample's turn), bound the (u, v) of every point of the reach.
  __device__ roi_gather::SampleRanges ranges(const RotatedFrame<T>& f, const roi_gather::MapBox& reach) const {
    const double c = f.cos_theta, s = f.sin_theta;
    double u_lo = INFINITY, u_hi = -INFINITY, v_lo = INFINITY, v_hi = -INFINITY;
    for (int corner = 0; corner < 4; ++corner) {
      const double dx = (corner & 1 ? reach.x1 : reach.x0) - double(f.center_x);
      const double dy = (corner & 2 ? reach.y1 : reach.y0) - double(f.center_y);
      const double u = dx * c - dy * s, v = dx * s + dy * c;
      u_lo = fmin(u_lo, u);
      u_hi = fmax(u_hi, u);
      v_lo = fmin(v_lo, v);
      v_hi = fmax(v_hi, v);
    }
    const roi_gather::MapBox r = roi_gather::widened(
        v_lo, v_hi, u_lo, u_hi,
        fabs(double(f.center_x)) + fabs(double(f.center_y)) + fabs(double(f.start_u)) + fabs(double(f.start_v)) +
            fabs(reach.x1) + fabs(reach.y1));
    roi_gather::SampleRanges out;
    roi_gather::samples_between(f.start_v, f.step_v, g.pooled_h * f.grid_h, r.y0, r.y1, &out.row0, &out.row1);
    roi_gather::samples_between(f.start_u, f.step_u, g.pooled_w * f.grid_w, r.x0, r.x1, &out.col0, &out.col1);
    return out;
  }
};

template <typename T>
RotatedSampler<T> sampler_of(const Tensor& frames, const RotatedGeometry& g) {
  return {reinterpret_cast<const RotatedFrame<T>*>(frames.data<uint8_t>()), g};
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
    const roi_sorted::TermShape terms{grad_input.size(0), g.num_rois, g.channels,       g.height,        g.width,
                                      g.pooled_h,         g.pooled_w, g.sampling_ratio, g.sampling_ratio};
    if (deterministic && roi_sorted::fits(terms, false))
      roi_sorted::backward<scalar_t>(grad_output, sampler, terms, grad_input);
    else if (deterministic)
      roi_gather::backward<scalar_t, false>(grad_output, sampler, Tensor(), grad_input, "roi_align_rotated");
    else
      roi_nhwc::backward<scalar_t, false>(grad_output, sampler, Tensor(), grad_input, "roi_align_rotated backward kernel");
  });
}

}  // namespace minidet::ops::detail
