// CPU RoIAlign, forward and backward (formulas in roi_align.h).
//
// RoIs are processed in chunks. For a chunk, every sample of every (RoI, bin) is located once: its four
// neighbours, bilinear weights and weight derivatives (RoiSample), stored in one flat buffer. Then all
// channels reuse that buffer, so the geometry costs 1/C of what recomputing it per output would.
//   forward       on a channel-last copy of the input, parallel over (RoI, block of 64 channels): each task
//                 writes only its own output planes, reads each sample's geometry once for the block, and
//                 its four neighbours as four runs of contiguous channels (a loop the compiler vectorises).
//   grad input    parallel over (image, block of 8 channels): a thread owns those planes of the input
//                 gradient and adds the chunk's RoIs of that image in RoI order, reading each sample's
//                 neighbours once for the block. No atomics, no races, and the sums run in one fixed
//                 order, so the result is deterministic.
//   grad rois     parallel over RoIs: each RoI's four coordinates are owned by one thread that sums over
//                 channels, bins and samples in a fixed order.
#include <algorithm>
#include <vector>

#include "ops/roi_align/roi_align_kernels.h"

namespace minidet::ops::detail {
namespace {

// Samples per chunk: bounds the geometry buffer (~150 bytes per sample in float64) whatever K is.
constexpr int64_t kSamplesPerChunk = int64_t(1) << 16;
// Channels per task of the forward and of the input gradient: one read of a sample's geometry serves them all.
constexpr int64_t kChannelBlock = 8;

template <typename T>
struct ChunkGeometry {
  int64_t first_roi = 0, end_roi = 0;
  std::vector<RoiBox<T>> boxes;       // per RoI of the chunk
  std::vector<int64_t> sample_start;  // per RoI: index of its (bin 0, sample 0) in `samples`
  std::vector<RoiSample<T>> samples;  // [RoI][bin][sample], bins row-major, samples row-major in the bin
};

// Splits [0, K) into chunks of consecutive RoIs holding about kSamplesPerChunk samples (at least one RoI).
template <typename T>
std::vector<int64_t> chunk_bounds(const T* rois, const RoiAlignGeometry& g) {
  std::vector<int64_t> bounds = {0};
  int64_t in_chunk = 0;
  for (int64_t k = 0; k < g.rois; ++k) {
    const int64_t samples = roi_box(rois + k * 5, g).count() * g.bins();
    if (in_chunk > 0 && in_chunk + samples > kSamplesPerChunk) {
      bounds.push_back(k);
      in_chunk = 0;
    }
    in_chunk += samples;
  }
  bounds.push_back(g.rois);
  return bounds;
}

template <typename T>
void build_chunk(const T* rois, int64_t first, int64_t end, const RoiAlignGeometry& g, ChunkGeometry<T>& c) {
  c.first_roi = first;
  c.end_roi = end;
  c.boxes.resize(end - first);
  c.sample_start.resize(end - first + 1);
  c.sample_start[0] = 0;
  for (int64_t r = 0; r < end - first; ++r) {
    c.boxes[r] = roi_box(rois + (first + r) * 5, g);
    c.sample_start[r + 1] = c.sample_start[r] + c.boxes[r].count() * g.bins();
  }
  c.samples.resize(c.sample_start.back());
#pragma omp parallel for schedule(dynamic, 4) if (end - first > 1)
  for (int64_t r = 0; r < end - first; ++r) {
    const RoiBox<T>& box = c.boxes[r];
    RoiSample<T>* out = c.samples.data() + c.sample_start[r];
    for (int64_t p = 0; p < g.pooled_h; ++p)
      for (int64_t q = 0; q < g.pooled_w; ++q)
        for (int64_t s = 0; s < box.count(); ++s) *out++ = roi_sample(box, p, q, s, g);
  }
}

// Channels per task of the forward, whose channels are contiguous in the channel-last copy of the input.
constexpr int64_t kForwardChannels = 64;

// input_nhwc: the input channel-last, (N, H, W, C), so that one sample's four neighbours are four runs of
// contiguous channels and the loop over a block of channels vectorises.
template <typename T>
void forward_kernel(const T* input_nhwc, const T* rois, T* output, int64_t* argmax, const RoiAlignGeometry& g) {
  const int64_t plane = g.height * g.width, bins = g.bins(), C = g.channels;
  const int64_t blocks = (C + kForwardChannels - 1) / kForwardChannels;
  const std::vector<int64_t> bounds = chunk_bounds(rois, g);
  ChunkGeometry<T> chunk;
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    build_chunk(rois, bounds[b], bounds[b + 1], g, chunk);
    const int64_t tasks = (chunk.end_roi - chunk.first_roi) * blocks;
#pragma omp parallel for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      // A task is one RoI and a block of channels: each sample's geometry is read once for the whole block.
      const int64_t r = task / blocks, c0 = task % blocks * kForwardChannels, k = chunk.first_roi + r;
      const int64_t width = std::min(kForwardChannels, C - c0);
      const RoiBox<T>& box = chunk.boxes[r];
      const T* features = input_nhwc + box.batch * plane * C + c0;  // pixel o, channel c0 + i: o * C + i
      const RoiSample<T>* sample = chunk.samples.data() + chunk.sample_start[r];
      T* out = output + (k * C + c0) * bins;  // channel c0 + i at i * bins
      int64_t* arg = argmax ? argmax + (k * C + c0) * bins : nullptr;
      const int64_t count = box.count();
      for (int64_t bin = 0; bin < bins; ++bin, sample += count) {
        // Per channel, the samples in order, each value bilinear_interpolate's (the bits of roi_align.h's
        // formula) read at stride C: avg sums them from 0 then divides by the count; max keeps the first
        // sample that wins (max_sample_wins), starting from sample 0.
        T value[kForwardChannels];
        int64_t best_index[kForwardChannels] = {};
        if (!g.max_mode)
          for (int64_t i = 0; i < width; ++i) value[i] = T(0);
        for (int64_t s = 0; s < count; ++s) {
          const BilinearSample<T> w = sample[s].bilinear;  // a copy: the compiler sees no store can change it
          T v[kForwardChannels];
          for (int64_t i = 0; i < width; ++i) v[i] = bilinear_interpolate(w, features + i, C);
          if (!g.max_mode) {
            for (int64_t i = 0; i < width; ++i) value[i] += v[i];
          } else if (s == 0) {
            for (int64_t i = 0; i < width; ++i) value[i] = v[i];
          } else {
            for (int64_t i = 0; i < width; ++i)
              if (max_sample_wins(v[i], value[i])) {
                value[i] = v[i];
                best_index[i] = s;
              }
          }
        }
        for (int64_t i = 0; i < width; ++i) {
          out[i * bins + bin] = g.max_mode ? value[i] : value[i] / T(count);
          if (g.max_mode) arg[i * bins + bin] = best_index[i];
        }
      }
    }
  }
}

template <typename T>
void backward_input_kernel(const T* grad_output, const T* rois, const int64_t* argmax, T* grad_input,
                           const RoiAlignGeometry& g) {
  const int64_t plane = g.height * g.width, bins = g.bins(), planes = g.batch * g.channels;
  std::fill(grad_input, grad_input + planes * plane, T(0));
  // A task owns a block of kChannelBlock planes of one image: each sample's geometry is read once for the
  // whole block instead of once per plane (the geometry is larger than the gradients it routes).
  const int64_t blocks_per_image = (g.channels + kChannelBlock - 1) / kChannelBlock;
  const std::vector<int64_t> bounds = chunk_bounds(rois, g);
  ChunkGeometry<T> chunk;
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    build_chunk(rois, bounds[b], bounds[b + 1], g, chunk);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t task = 0; task < g.batch * blocks_per_image; ++task) {
      const int64_t n = task / blocks_per_image, c0 = task % blocks_per_image * kChannelBlock;
      const int64_t width = std::min(kChannelBlock, g.channels - c0);
      for (int64_t k = chunk.first_roi; k < chunk.end_roi; ++k) {
        const int64_t r = k - chunk.first_roi;
        const RoiBox<T>& box = chunk.boxes[r];
        if (box.batch != n) continue;
        const RoiSample<T>* sample = chunk.samples.data() + chunk.sample_start[r];
        const int64_t count = box.count();
        const T* grad = grad_output + (k * g.channels + c0) * bins;  // channel c0 + i at i * bins
        T* dst = grad_input + (n * g.channels + c0) * plane;          // channel c0 + i at i * plane
        // Per element, the additions run in (RoI, bin, sample, neighbour) order: deterministic, and the
        // order that the CUDA gather (roi_align_gather.cuh) reproduces. The channels of the block touch
        // disjoint planes, so which of them goes first within a sample changes no element's order.
        for (int64_t bin = 0; bin < bins; ++bin, sample += count) {
          if (!g.max_mode) {
            // avg: every sample gets g / count. Each sample's neighbours and weights are read once and
            // routed to all the block's channels.
            T share[kChannelBlock];
            for (int64_t i = 0; i < width; ++i) share[i] = grad[i * bins + bin] / T(count);
            for (int64_t s = 0; s < count; ++s) {
              const BilinearSample<T>& w = sample[s].bilinear;
              if (!w.inside) continue;
              const int64_t o0 = w.offset[0], o1 = w.offset[1], o2 = w.offset[2], o3 = w.offset[3];
              const T w0 = w.weight[0], w1 = w.weight[1], w2 = w.weight[2], w3 = w.weight[3];
              for (int64_t i = 0; i < width; ++i) {
                T* plane_i = dst + i * plane;
                plane_i[o0] += share[i] * w0;
                plane_i[o1] += share[i] * w1;
                plane_i[o2] += share[i] * w2;
                plane_i[o3] += share[i] * w3;
              }
            }
          } else {
            // max: only the winning sample, with g; the winner differs per channel.
            for (int64_t i = 0; i < width; ++i) {
              const BilinearSample<T>& w = sample[argmax[(k * g.channels + c0 + i) * bins + bin]].bilinear;
              if (!w.inside) continue;
              const T share = grad[i * bins + bin];
              for (int j = 0; j < 4; ++j) dst[i * plane + w.offset[j]] += share * w.weight[j];
            }
          }
        }
      }
    }
  }
}

template <typename T>
void backward_rois_kernel(const T* grad_output, const T* input, const T* rois, const int64_t* argmax,
                          T* grad_rois, const RoiAlignGeometry& g) {
  const int64_t plane = g.height * g.width, bins = g.bins();
  const T scale = T(g.spatial_scale);
  const std::vector<int64_t> bounds = chunk_bounds(rois, g);
  ChunkGeometry<T> chunk;
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    build_chunk(rois, bounds[b], bounds[b + 1], g, chunk);
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t k = chunk.first_roi; k < chunk.end_roi; ++k) {
      const int64_t r = k - chunk.first_roi;
      const RoiBox<T>& box = chunk.boxes[r];
      const int64_t count = box.count();
      T box_grad[4] = {0, 0, 0, 0};  // x1, y1, x2, y2
      for (int64_t c = 0; c < g.channels; ++c) {
        const T* features = input + (box.batch * g.channels + c) * plane;
        const T* grad = grad_output + (k * g.channels + c) * bins;
        const RoiSample<T>* sample = chunk.samples.data() + chunk.sample_start[r];
        for (int64_t bin = 0; bin < bins; ++bin, sample += count) {
          const int64_t first = g.max_mode ? argmax[(k * g.channels + c) * bins + bin] : 0;
          const int64_t last = g.max_mode ? first + 1 : count;
          const T share = g.max_mode ? grad[bin] : grad[bin] / T(count);
          for (int64_t s = first; s < last; ++s) {
            const BilinearSample<T>& w = sample[s].bilinear;
            if (!w.inside) continue;
            T dv_dy = 0, dv_dx = 0;  // how fast the sampled value changes as the sample moves
            for (int j = 0; j < 4; ++j) {
              dv_dy += w.dweight_dy[j] * features[w.offset[j]];
              dv_dx += w.dweight_dx[j] * features[w.offset[j]];
            }
            add_box_gradient(box, sample[s], dv_dy, dv_dx, share, scale, box_grad);
          }
        }
      }
      T* out = grad_rois + k * 5;
      out[0] = T(0);  // the batch index is not differentiable
      for (int j = 0; j < 4; ++j) out[1 + j] = box_grad[j];
    }
  }
}

}  // namespace

void roi_align_forward_cpu(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                           const RoiAlignGeometry& g) {
  const Tensor input_nhwc = input.permute({0, 2, 3, 1}).contiguous();  // the caller runs without grad
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_align", [&] {
    forward_kernel<scalar_t>(input_nhwc.data<scalar_t>(), rois.data<scalar_t>(), output.data<scalar_t>(),
                             argmax.defined() ? argmax.data<int64_t>() : nullptr, g);
  });
}

void roi_align_backward_cpu(const Tensor& grad_output, const Tensor& input, const Tensor& rois,
                            const Tensor& argmax, const Tensor& grad_input, const Tensor& grad_rois,
                            const RoiAlignGeometry& g) {
  MINIDET_DISPATCH_FLOATING(grad_output.dtype(), "roi_align", [&] {
    const int64_t* arg = argmax.defined() ? argmax.data<int64_t>() : nullptr;
    if (grad_input.defined())
      backward_input_kernel<scalar_t>(grad_output.data<scalar_t>(), rois.data<scalar_t>(), arg,
                                      grad_input.data<scalar_t>(), g);
    if (grad_rois.defined())
      backward_rois_kernel<scalar_t>(grad_output.data<scalar_t>(), input.data<scalar_t>(), rois.data<scalar_t>(),
                                     arg, grad_rois.data<scalar_t>(), g);
  });
}

}  // namespace minidet::ops::detail
