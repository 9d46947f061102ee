// CPU roi_align_rotated kernels. The sample positions, neighbours and bilinear weights depend on the RoI,
// not on the channel, so they are computed once per RoI into a table and reused by every channel. Tables
// are built for a chunk of RoIs at a time (bounded memory whatever K and the adaptive grids are), then:
//   forward:  parallel over (RoI, channel) of the chunk, each output a weighted sum read from the table;
//   backward: parallel over channels. Only channel c's thread writes d input[:, c], and it walks the RoIs in
//             order k and the samples in (p, q, iy, ix) order, so there are no races and the result is
//             the same every run.
#include <vector>

#include "ops/roi_align_rotated/roi_align_rotated_kernels.h"

namespace minidet::ops::detail {
namespace {

// Below this much work (samples x channels), waking a thread team costs more than the loop.
constexpr int64_t kParallelAboveRotatedSamples = 16384;
// Samples whose tables one chunk may hold: 2^18 samples are 16 MiB of offsets and weights in float64.
constexpr int64_t kChunkSamples = int64_t(1) << 18;

// One RoI's bilinear reads. Samples outside the band read 0, so they are left out of the table; they still
// count in the divisor (count).
template <typename T>
struct RoISamples {
  int64_t batch = 0;
  T count = T(1);
  std::vector<int64_t> bin_begin;  // samples of bin b are [bin_begin[b], bin_begin[b + 1])
  std::vector<int64_t> offset;     // 4 neighbour offsets per sample, within the plane
  std::vector<T> weight;           // their 4 bilinear weights
};

template <typename T>
void build_samples(const T* roi, const RotatedGeometry& g, RoISamples<T>* table) {
  const RotatedFrame<T> f = rotated_frame(roi, g);
  table->batch = f.batch;
  table->count = f.count;
  table->bin_begin.assign(1, 0);
  table->offset.clear();
  table->weight.clear();
  for (int64_t p = 0; p < g.pooled_h; ++p)
    for (int64_t q = 0; q < g.pooled_w; ++q) {
      for_each_bin_sample(f, g, p, q, [&](const BilinearSample<T>& s) {
        if (!s.inside) return;
        for (int n = 0; n < 4; ++n) {
          table->offset.push_back(s.offset[n]);
          table->weight.push_back(s.weight[n]);
        }
      });
      table->bin_begin.push_back(static_cast<int64_t>(table->offset.size() / 4));
    }
}

// RoIs [first, end) whose sample tables fit the chunk budget (always at least one RoI).
template <typename T>
int64_t chunk_end(const T* rois, const RotatedGeometry& g, int64_t first) {
  int64_t end = first, samples = 0;
  while (end < g.num_rois) {
    const RotatedFrame<T> f = rotated_frame(rois + end * 6, g);
    samples += g.pooled_h * g.pooled_w * f.grid_h * f.grid_w;
    if (end > first && samples > kChunkSamples) break;
    ++end;
  }
  return end;
}

// Builds the tables of one chunk of RoIs after another and hands each chunk to work(first, end, tables),
// where tables[k - first] belongs to RoI k.
template <typename T, typename Work>
void for_each_chunk(const T* rois, const RotatedGeometry& g, Work&& work) {
  for (int64_t first = 0; first < g.num_rois;) {
    const int64_t end = chunk_end(rois, g, first);
    std::vector<RoISamples<T>> tables(end - first);
#pragma omp parallel for schedule(dynamic) if (end - first > 1)
    for (int64_t k = first; k < end; ++k) build_samples(rois + k * 6, g, &tables[k - first]);
    work(first, end, tables);
    first = end;
  }
}

template <typename T>
void forward(const T* input, const T* rois, T* output, const RotatedGeometry& g) {
  const int64_t plane_size = g.height * g.width, bins = g.pooled_h * g.pooled_w;
  for_each_chunk(rois, g, [&](int64_t first, int64_t end, const std::vector<RoISamples<T>>& tables) {
    const int64_t planes = (end - first) * g.channels;
#pragma omp parallel for schedule(static) if (planes * bins > kParallelAboveRotatedSamples)
    for (int64_t plane = 0; plane < planes; ++plane) {
      const RoISamples<T>& t = tables[plane / g.channels];
      const int64_t c = plane % g.channels, k = first + plane / g.channels;
      const T* source = input + (t.batch * g.channels + c) * plane_size;
      T* out = output + (k * g.channels + c) * bins;
      for (int64_t b = 0; b < bins; ++b) {
        T sum = 0;
        for (int64_t s = t.bin_begin[b]; s < t.bin_begin[b + 1]; ++s) {
          const int64_t* o = &t.offset[4 * s];
          const T* w = &t.weight[4 * s];
          sum += w[0] * source[o[0]] + w[1] * source[o[1]] + w[2] * source[o[2]] + w[3] * source[o[3]];
        }
        out[b] = sum / t.count;
      }
    }
  });
}

template <typename T>
void backward(const T* grad_output, const T* rois, T* grad_input, const RotatedGeometry& g) {
  const int64_t plane_size = g.height * g.width, bins = g.pooled_h * g.pooled_w;
  for_each_chunk(rois, g, [&](int64_t first, int64_t end, const std::vector<RoISamples<T>>& tables) {
#pragma omp parallel for schedule(static) if (g.channels * (end - first) * bins > kParallelAboveRotatedSamples)
    for (int64_t c = 0; c < g.channels; ++c) {
      for (int64_t k = first; k < end; ++k) {
        const RoISamples<T>& t = tables[k - first];
        T* destination = grad_input + (t.batch * g.channels + c) * plane_size;
        const T* upstream = grad_output + (k * g.channels + c) * bins;
        for (int64_t b = 0; b < bins; ++b) {
          const T share = upstream[b] / t.count;
          for (int64_t s = t.bin_begin[b]; s < t.bin_begin[b + 1]; ++s)
            for (int n = 0; n < 4; ++n) destination[t.offset[4 * s + n]] += share * t.weight[4 * s + n];
        }
      }
    }
  });
}

}  // namespace

void roi_align_rotated_forward_cpu(const Tensor& input, const Tensor& rois, const Tensor& output,
                                   const RotatedGeometry& g) {
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_align_rotated", [&] {
    forward<scalar_t>(input.data<scalar_t>(), rois.data<scalar_t>(), output.data<scalar_t>(), g);
  });
}

void roi_align_rotated_backward_cpu(const Tensor& grad_output, const Tensor& rois, const Tensor& grad_input,
                                    const RotatedGeometry& g) {
  grad_input.zero_();  // the kernel adds every sample's share into it
  MINIDET_DISPATCH_FLOATING(grad_output.dtype(), "roi_align_rotated", [&] {
    backward<scalar_t>(grad_output.data<scalar_t>(), rois.data<scalar_t>(), grad_input.data<scalar_t>(), g);
  });
}

}  // namespace minidet::ops::detail
