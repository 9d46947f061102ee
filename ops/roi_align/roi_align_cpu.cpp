// CPU RoIAlign, forward and backward (formulas in roi_align.h).
//
// RoIs are processed in chunks. For a chunk, every sample of every (RoI, bin) is located once: its four
// neighbours, bilinear weights and weight derivatives (RoiSample), stored in one flat buffer. Then all
// channels reuse that buffer, so the geometry costs 1/C of what recomputing it per output would.
//   forward       on a channel-last copy of the input, parallel over (RoI, block of 64 channels): each task
//                 writes only its own output planes, reads each sample's geometry once for the block, and
//                 its four neighbours as four runs of contiguous channels (a loop the compiler vectorises).
//                 The block's bins are gathered in a small tile first, so that each output plane is then
//                 written in one contiguous run rather than one value per bin at a stride of ph * pw.
//   grad input    channel-last too, into an (N, H, W, C) buffer, parallel over (image, block of channels): a
//                 thread owns those channels of the image and adds the image's RoIs in RoI order, each
//                 neighbour's share to a run of contiguous channels (vectorised); at the end it copies its
//                 channels into the (N, C, H, W) gradient. No atomics, no races, and each element's terms
//                 are added in one fixed order, so the result is deterministic. The buffer is a second
//                 gradient-sized tensor while the backward runs.
//   grad rois     parallel over RoIs: each RoI's four coordinates are owned by one thread that sums over
//                 channels, bins and samples in a fixed order.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/factories.h"
#include "ops/roi_align/roi_align_kernels.h"

namespace minidet::ops::detail {
namespace {

// Samples per chunk: bounds the geometry buffer (~150 bytes per sample in float64) whatever K is.
constexpr int64_t kSamplesPerChunk = int64_t(1) << 16;

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
#pragma omp parallel
    {
      // The task's results, bin by bin: tile[bin * kForwardChannels + i] for channel c0 + i.
      std::vector<T> tile(static_cast<size_t>(bins * kForwardChannels));
      std::vector<int64_t> best_tile(g.max_mode ? tile.size() : 0);
#pragma omp for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) {
        // A task is one RoI and a block of channels: each sample's geometry is read once for the whole block.
        const int64_t r = task / blocks, c0 = task % blocks * kForwardChannels, k = chunk.first_roi + r;
        const int64_t width = std::min(kForwardChannels, C - c0);
        const RoiBox<T>& box = chunk.boxes[r];
        const T* features = input_nhwc + box.batch * plane * C + c0;  // pixel o, channel c0 + i: o * C + i
        const RoiSample<T>* sample = chunk.samples.data() + chunk.sample_start[r];
        const int64_t count = box.count();
        for (int64_t bin = 0; bin < bins; ++bin, sample += count) {
          // Per channel, the samples in order, each value bilinear_interpolate's (the bits of roi_align.h's
          // formula) read at stride C: avg sums them from 0 then divides by the count; max keeps the first
          // sample that wins (max_sample_wins), starting from sample 0.
          T* value = tile.data() + bin * kForwardChannels;
          if (!g.max_mode)
            for (int64_t i = 0; i < width; ++i) value[i] = T(0);
          for (int64_t s = 0; s < count; ++s) {
            const BilinearSample<T> w = sample[s].bilinear;  // a copy: the compiler sees no store can change it
            T v[kForwardChannels];
            for (int64_t i = 0; i < width; ++i) v[i] = bilinear_interpolate(w, features + i, C);
            if (!g.max_mode) {
              for (int64_t i = 0; i < width; ++i) value[i] += v[i];
            } else if (s == 0) {
              int64_t* best = best_tile.data() + bin * kForwardChannels;
              for (int64_t i = 0; i < width; ++i) {
                value[i] = v[i];
                best[i] = 0;
              }
            } else {
              int64_t* best = best_tile.data() + bin * kForwardChannels;
              for (int64_t i = 0; i < width; ++i)
                if (max_sample_wins(v[i], value[i])) {
                  value[i] = v[i];
                  best[i] = s;
                }
            }
          }
          if (!g.max_mode)
            for (int64_t i = 0; i < width; ++i) value[i] /= T(count);
        }
        // Each output plane (channel c0 + i of RoI k, its bins contiguous) in one run.
        for (int64_t i = 0; i < width; ++i) {
          T* out = output + ((k * C + c0 + i) * bins);
          for (int64_t bin = 0; bin < bins; ++bin) out[bin] = tile[bin * kForwardChannels + i];
          if (g.max_mode) {
            int64_t* arg = argmax + ((k * C + c0 + i) * bins);
            for (int64_t bin = 0; bin < bins; ++bin) arg[bin] = best_tile[bin * kForwardChannels + i];
          }
        }
      }
    }
  }
}

// Channels per task of the input gradient: at most 64, and fewer (down to 16) when that is needed to give
// every thread two tasks. Each task reads a sample's geometry once for all its channels.
int64_t gradient_channel_block(int64_t batch, int64_t channels) {
  const int64_t threads = omp_get_max_threads();
  int64_t block = 64;
  while (block > 16 && batch * ((channels + block - 1) / block) < 2 * threads) block /= 2;
  return block;
}

template <typename T>
void backward_input_kernel(const T* grad_output, const T* rois, const int64_t* argmax, T* grad_input,
                           const RoiAlignGeometry& g) {
  const int64_t plane = g.height * g.width, bins = g.bins(), C = g.channels;
  const int64_t block = gradient_channel_block(g.batch, C), blocks_per_image = (C + block - 1) / block;
  const int64_t tasks = g.batch * blocks_per_image;
  // The gradient channel-last, (N, H, W, C): a sample's neighbour adds to a run of contiguous channels. Task
  // (n, c0) owns channels [c0, c0 + block) of image n here and in grad_input, so no two threads share an
  // element; it zeroes its part first, and copies it into grad_input's planes after the last chunk. (Both
  // are written out here rather than as zeros() and copy_ from a permuted view: the generic strided copy
  // moves one element at a time across a stride of C, and measured markedly slower on this transposition.)
  const Tensor buffer = empty({g.batch, g.height, g.width, C}, TensorOptions(DTypeOf<T>::value));
  T* const grad_nhwc = buffer.data<T>();
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t n = task / blocks_per_image, c0 = task % blocks_per_image * block, width = std::min(block, C - c0);
    for (int64_t o = 0; o < plane; ++o) std::fill_n(grad_nhwc + (n * plane + o) * C + c0, width, T(0));
  }
  const std::vector<int64_t> bounds = chunk_bounds(rois, g);
  ChunkGeometry<T> chunk;
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    build_chunk(rois, bounds[b], bounds[b + 1], g, chunk);
#pragma omp parallel
    {
      std::vector<T> shares(static_cast<size_t>(bins * block));  // the RoI's upstream gradient, bin by bin
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t n = task / blocks_per_image, c0 = task % blocks_per_image * block;
        const int64_t width = std::min(block, C - c0);
        T* image = grad_nhwc + n * plane * C + c0;  // pixel o, channel c0 + i: o * C + i
        for (int64_t k = chunk.first_roi; k < chunk.end_roi; ++k) {
          const int64_t r = k - chunk.first_roi;
          const RoiBox<T>& box = chunk.boxes[r];
          if (box.batch != n) continue;
          const RoiSample<T>* sample = chunk.samples.data() + chunk.sample_start[r];
          const int64_t count = box.count();
          const T* grad = grad_output + (k * C + c0) * bins;  // channel c0 + i at i * bins
          // Per element, the additions run in (RoI, bin, sample, neighbour) order: deterministic, and the
          // order that the CUDA deterministic kernels (roi_align_sorted.cuh, roi_align_gather.cuh) reproduce.
          // The channels of a run are different elements, so adding them side by side changes no element's
          // order.
          if (!g.max_mode) {
            // avg: every sample gets g / count, routed to its four neighbours for all the block's channels.
            for (int64_t i = 0; i < width; ++i)
              for (int64_t bin = 0; bin < bins; ++bin) shares[bin * block + i] = grad[i * bins + bin] / T(count);
            for (int64_t bin = 0; bin < bins; ++bin, sample += count) {
              const T* share = shares.data() + bin * block;
              for (int64_t s = 0; s < count; ++s) {
                const BilinearSample<T> w = sample[s].bilinear;  // a copy, as in the forward
                if (!w.inside) continue;
                for (int j = 0; j < 4; ++j) {
                  T* dst = image + w.offset[j] * C;
                  const T weight = w.weight[j];
                  for (int64_t i = 0; i < width; ++i) dst[i] += share[i] * weight;
                }
              }
            }
          } else {
            // max: only the winning sample, with g; the winner differs per channel.
            for (int64_t bin = 0; bin < bins; ++bin, sample += count) {
              for (int64_t i = 0; i < width; ++i) {
                const BilinearSample<T>& w = sample[argmax[(k * C + c0 + i) * bins + bin]].bilinear;
                if (!w.inside) continue;
                const T share = grad[i * bins + bin];
                for (int j = 0; j < 4; ++j) image[w.offset[j] * C + i] += share * w.weight[j];
              }
            }
          }
        }
      }
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t n = task / blocks_per_image, c0 = task % blocks_per_image * block, width = std::min(block, C - c0);
    const T* image = grad_nhwc + n * plane * C + c0;
    for (int64_t i = 0; i < width; ++i) {
      T* dst = grad_input + (n * C + c0 + i) * plane;
      for (int64_t o = 0; o < plane; ++o) dst[o] = image[o * C + i];
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
