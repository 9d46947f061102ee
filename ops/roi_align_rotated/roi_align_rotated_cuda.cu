// CUDA roi_align_rotated kernels, the same sample positions and bilinear rules as the CPU
// (roi_align_rotated_kernels.h, ops/common/bilinear.h).
//   forward:                one thread per output element (k, c, p, q) averages its bin's samples.
//   backward (default):     one thread per output element; each in-band sample atomically adds
//                           dy * w_j / count into its four neighbours.
//   backward (determin.):   a gather. One thread per input pixel (n, y, x) owns d input[n, :, y, x]. It walks
//                           the RoIs in order k, skips those of other images or too far away, turns the
//                           pixel into the RoI's own frame to find the few samples that can touch it (a
//                           sample reaches only pixels within one pixel of it), and sums their weights on
//                           this pixel per bin in (p, q, iy, ix) order. Then, for every channel, it adds
//                           dy[k, c, p, q] / count times that weight. Fixed order, no atomics: the same
//                           bits every run. The RoI frames (cos, sin, steps) are computed once by a small
//                           kernel rather than once per (pixel, RoI) pair.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/roi_align_rotated/roi_align_rotated_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void forward_kernel(int64_t n, const T* input, const T* rois, T* output, RotatedGeometry g) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t q = e % g.pooled_w, p = (e / g.pooled_w) % g.pooled_h;
    const int64_t c = (e / (g.pooled_w * g.pooled_h)) % g.channels;
    const int64_t k = e / (g.pooled_w * g.pooled_h * g.channels);
    const RotatedFrame<T> f = rotated_frame(rois + k * 6, g);
    const T* plane = input + (f.batch * g.channels + c) * g.height * g.width;
    T sum = 0;
    for_each_bin_sample(f, g, p, q, [&](const BilinearSample<T>& s) { sum += bilinear_interpolate(s, plane); });
    output[e] = sum / f.count;
  }
}

template <typename T>
__global__ void backward_atomic_kernel(int64_t n, const T* grad_output, const T* rois, T* grad_input,
                                       RotatedGeometry g) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t q = e % g.pooled_w, p = (e / g.pooled_w) % g.pooled_h;
    const int64_t c = (e / (g.pooled_w * g.pooled_h)) % g.channels;
    const int64_t k = e / (g.pooled_w * g.pooled_h * g.channels);
    const RotatedFrame<T> f = rotated_frame(rois + k * 6, g);
    T* plane = grad_input + (f.batch * g.channels + c) * g.height * g.width;
    const T share = grad_output[e] / f.count;
    for_each_bin_sample(f, g, p, q, [&](const BilinearSample<T>& s) {
      if (!s.inside) return;
      for (int j = 0; j < 4; ++j) atomicAdd(&plane[s.offset[j]], share * s.weight[j]);
    });
  }
}

template <typename T>
__global__ void frames_kernel(int64_t n, const T* rois, RotatedFrame<T>* frames, RotatedGeometry g) {
  MINIDET_KERNEL_LOOP(k, n) { frames[k] = rotated_frame(rois + k * 6, g); }
}

// Sample indices along one box axis whose coordinate lies within `reach` of `local`: samples sit at
// start + (j + 0.5) * step for j in [0, samples). Writes [*lo, *hi]; empty when *lo > *hi. Computed in
// floating point and clamped before the integer cast, so a huge or infinite quotient cannot overflow.
template <typename T>
__device__ void samples_near(T local, T reach, T start, T step, int64_t samples, int64_t* lo, int64_t* hi) {
  T first, last;
  if (step == T(0)) {  // a zero-size axis: every sample sits at `start`
    const bool near = fabs(local - start) <= reach;
    first = near ? T(0) : T(1);
    last = near ? T(samples - 1) : T(0);
  } else {
    const T a = (local - reach - start) / step - T(0.5), b = (local + reach - start) / step - T(0.5);
    first = ceil(a < b ? a : b);
    last = floor(a < b ? b : a);
    first = first > T(0) ? first : T(0);
    last = last < T(samples - 1) ? last : T(samples - 1);
  }
  *lo = static_cast<int64_t>(first);
  *hi = first <= last ? static_cast<int64_t>(last) : *lo - 1;
}

template <typename T>
__global__ void backward_gather_kernel(int64_t n, const T* grad_output, const RotatedFrame<T>* frames,
                                       T* grad_input, RotatedGeometry g) {
  // A sample spreads weight only to pixels within one row and one column of it (bilinear.h, clamping
  // included), i.e. within sqrt(2) < 1.5 in any frame.
  const T reach = T(1.5);
  const int64_t bins = g.pooled_h * g.pooled_w, plane_size = g.height * g.width;
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t px = e % g.width, py = (e / g.width) % g.height, batch = e / plane_size;
    const int64_t self = py * g.width + px;
    for (int64_t k = 0; k < g.num_rois; ++k) {
      const RotatedFrame<T> f = frames[k];
      if (f.batch != batch) continue;
      const T dx = T(px) - f.center_x, dy = T(py) - f.center_y;
      // Every sample is within |start_u| + |start_v| of the centre: farther pixels cannot be touched.
      const T box_reach = fabs(f.start_u) + fabs(f.start_v) + T(2);
      if (fabs(dx) > box_reach || fabs(dy) > box_reach) continue;
      const T u = dx * f.cos_theta - dy * f.sin_theta, v = dx * f.sin_theta + dy * f.cos_theta;
      int64_t j_lo, j_hi, i_lo, i_hi;
      samples_near(u, reach, f.start_u, f.step_u, g.pooled_w * f.grid_w, &j_lo, &j_hi);
      samples_near(v, reach, f.start_v, f.step_v, g.pooled_h * f.grid_h, &i_lo, &i_hi);
      if (j_lo > j_hi || i_lo > i_hi) continue;
      for (int64_t p = i_lo / f.grid_h; p <= i_hi / f.grid_h; ++p)
        for (int64_t q = j_lo / f.grid_w; q <= j_hi / f.grid_w; ++q) {
          // The near samples that belong to bin (p, q).
          const int64_t i_first = i_lo > p * f.grid_h ? i_lo : p * f.grid_h;
          const int64_t i_last = i_hi < (p + 1) * f.grid_h - 1 ? i_hi : (p + 1) * f.grid_h - 1;
          const int64_t j_first = j_lo > q * f.grid_w ? j_lo : q * f.grid_w;
          const int64_t j_last = j_hi < (q + 1) * f.grid_w - 1 ? j_hi : (q + 1) * f.grid_w - 1;
          T weight = 0;  // this bin's total bilinear weight on pixel (py, px)
          for (int64_t i = i_first; i <= i_last; ++i)
            for (int64_t j = j_first; j <= j_last; ++j) {
              T y, x;
              rotated_sample(f, i, j, &y, &x);
              const BilinearSample<T> s = bilinear_sample(y, x, g.height, g.width);
              if (!s.inside) continue;
              for (int corner = 0; corner < 4; ++corner)
                if (s.offset[corner] == self) weight += s.weight[corner];
            }
          if (weight == T(0)) continue;
          for (int64_t c = 0; c < g.channels; ++c) {
            const T dy_bin = grad_output[(k * g.channels + c) * bins + p * g.pooled_w + q];
            grad_input[(batch * g.channels + c) * plane_size + self] += dy_bin / f.count * weight;
          }
        }
    }
  }
}

}  // namespace

void roi_align_rotated_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output,
                                    const RotatedGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  const int64_t n = output.numel();
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_align_rotated", [&] {
    forward_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, input.data<scalar_t>(), rois.data<scalar_t>(), output.data<scalar_t>(), g);
    MINIDET_CUDA_LAUNCH_CHECK("roi_align_rotated forward_kernel");
  });
}

void roi_align_rotated_backward_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& grad_input,
                                     const RotatedGeometry& g, bool deterministic) {
  cuda::DeviceGuard guard(grad_input.device());
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_align_rotated", [&] {
    if (!deterministic) {
      const int64_t n = grad_output.numel();
      backward_atomic_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          n, grad_output.data<scalar_t>(), rois.data<scalar_t>(), grad_input.data<scalar_t>(), g);
      MINIDET_CUDA_LAUNCH_CHECK("roi_align_rotated backward_atomic_kernel");
      return;
    }
    using Frame = RotatedFrame<scalar_t>;
    const Tensor frame_bytes =
        empty({g.num_rois * static_cast<int64_t>(sizeof(Frame))}, TensorOptions(kUInt8, grad_input.device()));
    Frame* frames = reinterpret_cast<Frame*>(frame_bytes.data<uint8_t>());
    frames_kernel<scalar_t><<<cuda::blocks_for(g.num_rois), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        g.num_rois, rois.data<scalar_t>(), frames, g);
    MINIDET_CUDA_LAUNCH_CHECK("roi_align_rotated frames_kernel");
    const int64_t n = grad_input.size(0) * g.height * g.width;  // one thread per (n, y, x), all channels
    backward_gather_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, grad_output.data<scalar_t>(), frames, grad_input.data<scalar_t>(), g);
    MINIDET_CUDA_LAUNCH_CHECK("roi_align_rotated backward_gather_kernel");
  });
}

}  // namespace minidet::ops::detail
