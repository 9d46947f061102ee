// CPU RoIPool kernels. Forward: parallel over (RoI, channel) planes of the output, each bin a max scan.
// Backward: parallel over channels. Only channel c's thread writes dx[:, c], and it visits RoIs in order
// k = 0..K-1 and bins in (p, q) order, so there are no races and the sums are deterministic (the CUDA
// deterministic kernel adds in the same order).
#include <vector>

#include "ops/roi_pool/roi_pool_kernels.h"

namespace minidet::ops::detail {
namespace {

// Below this many output elements, waking a thread team costs more than the loop.
constexpr int64_t kParallelAboveBins = 4096;

template <typename T>
void forward(const T* input, const T* rois, T* output, int64_t* argmax, const RoIPoolGeometry& g) {
  const int64_t planes = g.num_rois * g.channels, plane_size = g.height * g.width;
  const int64_t bins = g.pooled_height * g.pooled_width;
  // A bin's extent depends on its RoI, not on the channel: cut every RoI's bins once (roi_pool_bin's exact
  // arithmetic, whose std::fma is a slow library call on CPUs built without FMA instructions) and share them.
  std::vector<RoIPoolBin> extents(g.num_rois * bins);
#pragma omp parallel for schedule(static) if (g.num_rois * bins > kParallelAboveBins)
  for (int64_t k = 0; k < g.num_rois; ++k)
    for (int64_t b = 0; b < bins; ++b)
      extents[k * bins + b] = roi_pool_bin(rois + k * 5, g, b / g.pooled_width, b % g.pooled_width);
#pragma omp parallel for schedule(static) if (planes * bins > kParallelAboveBins)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const int64_t k = plane / g.channels, c = plane % g.channels;
    const int64_t batch = static_cast<int64_t>(rois[k * 5]);
    const T* source = input + (batch * g.channels + c) * plane_size;
    for (int64_t b = 0; b < bins; ++b)
      roi_pool_bin_max(source, g.width, extents[k * bins + b], &output[plane * bins + b], &argmax[plane * bins + b]);
  }
}

template <typename T>
void backward(const T* grad_output, const T* rois, const int64_t* argmax, T* grad_input, const RoIPoolGeometry& g) {
  const int64_t plane_size = g.height * g.width, bins = g.pooled_height * g.pooled_width;
  std::vector<int64_t> batch(g.num_rois);
  for (int64_t k = 0; k < g.num_rois; ++k) batch[k] = static_cast<int64_t>(rois[k * 5]);
#pragma omp parallel for schedule(static) if (g.num_rois * g.channels * bins > kParallelAboveBins)
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t k = 0; k < g.num_rois; ++k) {
      T* destination = grad_input + (batch[k] * g.channels + c) * plane_size;
      const int64_t first = (k * g.channels + c) * bins;
      for (int64_t b = 0; b < bins; ++b)
        if (argmax[first + b] >= 0) destination[argmax[first + b]] += grad_output[first + b];
    }
  }
}

}  // namespace

void roi_pool_forward_cpu(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                          const RoIPoolGeometry& g) {
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_pool", [&] {
    forward<scalar_t>(input.data<scalar_t>(), rois.data<scalar_t>(), output.data<scalar_t>(), argmax.data<int64_t>(),
                      g);
  });
}

void roi_pool_backward_cpu(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                           const Tensor& grad_input, const RoIPoolGeometry& g) {
  grad_input.zero_();  // the loop below adds into it
  MINIDET_DISPATCH_FLOATING(grad_output.dtype(), "roi_pool", [&] {
    backward<scalar_t>(grad_output.data<scalar_t>(), rois.data<scalar_t>(), argmax.data<int64_t>(),
                       grad_input.data<scalar_t>(), g);
  });
}

}  // namespace minidet::ops::detail
