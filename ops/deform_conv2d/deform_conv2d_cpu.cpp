// CPU kernels of deform_conv2d. Both run one (image, offset group, tap) at a time: first the samples of all
// output positions are located (neighbours and weights, shared by every channel of the group), then each
// channel of the group walks them. im2col writes contiguous column rows that way.
//
// Parallelism: im2col over (image, offset group, tap) units, which write disjoint column rows. col2im over
// (image, offset group) units: an offset group's samples only ever touch its own channels of grad_input and
// its own offset and mask channels, so units never write the same element, and inside a unit the sums run
// in one fixed order (tap, channel, position): deterministic, no atomics.
#include <algorithm>
#include <vector>

#include "ops/deform_conv2d/deform_conv2d_kernels.h"

namespace minidet::ops::detail {
namespace {

// Below this many column entries, waking a thread team costs more than the loop.
constexpr int64_t kParallelAbove = 32768;

// The samples of one (image, offset group, tap) at every output position.
template <typename T>
void locate_tap(const DeformGeometry& g, int64_t tap, const T* offset_dy, const T* offset_dx,
                std::vector<BilinearSample<T>>& samples) {
  const int64_t i = tap / g.kernel_w, j = tap % g.kernel_w;
  for (int64_t p = 0; p < g.out_h; ++p)
    for (int64_t q = 0; q < g.out_w; ++q) {
      const int64_t pos = p * g.out_w + q;
      samples[pos] = locate_sample<T>(g, i, j, p, q, offset_dy[pos], offset_dx[pos]);
    }
}

template <typename T>
void im2col_kernel(const T* input, const T* offset, const T* mask, T* cols, int64_t batch, const DeformGeometry& g) {
  const int64_t taps = g.taps(), out_hw = g.out_hw(), group_channels = g.channels_per_offset_group();
  const int64_t units = batch * g.offset_groups * taps;
#pragma omp parallel if (units * group_channels * out_hw > kParallelAbove)
  {
    std::vector<BilinearSample<T>> samples(out_hw);
#pragma omp for schedule(static)
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t tap = unit % taps, group = (unit / taps) % g.offset_groups, b = unit / (taps * g.offset_groups);
      const int64_t b_group = b * g.offset_groups + group;
      const T* dy = offset + (b_group * 2 * taps + 2 * tap) * out_hw;
      locate_tap(g, tap, dy, dy + out_hw, samples);
      const T* tap_mask = mask ? mask + (b_group * taps + tap) * out_hw : nullptr;
      for (int64_t cg = 0; cg < group_channels; ++cg) {
        const int64_t c = group * group_channels + cg;
        const T* plane = input + (b * g.channels + c) * g.height * g.width;
        T* row = cols + ((b * g.channels + c) * taps + tap) * out_hw;
        for (int64_t pos = 0; pos < out_hw; ++pos) {
          const BilinearSample<T>& s = samples[pos];
          T value = T(0);
          if (s.valid) {
            T v[4];
            read_neighbours(plane, s, g.height, g.width, v);
            value = interpolate(s, v) * (tap_mask ? tap_mask[pos] : T(1));
          }
          row[pos] = value;
        }
      }
    }
  }
}

template <typename T>
void col2im_kernel(const T* grad_cols, const T* input, const T* offset, const T* mask, T* grad_input,
                   T* grad_offset, T* grad_mask, T* cols, int64_t batch, const DeformGeometry& g) {
  const int64_t taps = g.taps(), out_hw = g.out_hw(), group_channels = g.channels_per_offset_group();
  const int64_t plane_size = g.height * g.width, units = batch * g.offset_groups;
#pragma omp parallel if (units * taps * group_channels * out_hw > kParallelAbove)
  {
    std::vector<BilinearSample<T>> samples(out_hw);
    std::vector<T> sum_dy(out_hw), sum_dx(out_hw), sum_value(out_hw);  // over the group's channels
#pragma omp for schedule(static)
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t group = unit % g.offset_groups, b = unit / g.offset_groups;
      for (int64_t tap = 0; tap < taps; ++tap) {
        T* grad_dy = grad_offset ? grad_offset + (unit * 2 * taps + 2 * tap) * out_hw : nullptr;
        const T* dy = offset + (unit * 2 * taps + 2 * tap) * out_hw;
        locate_tap(g, tap, dy, dy + out_hw, samples);
        const T* tap_mask = mask ? mask + (unit * taps + tap) * out_hw : nullptr;
        std::fill(sum_dy.begin(), sum_dy.end(), T(0));
        std::fill(sum_dx.begin(), sum_dx.end(), T(0));
        std::fill(sum_value.begin(), sum_value.end(), T(0));
        for (int64_t cg = 0; cg < group_channels; ++cg) {
          const int64_t c = group * group_channels + cg;
          const T* plane = input + (b * g.channels + c) * plane_size;
          T* grad_plane = grad_input ? grad_input + (b * g.channels + c) * plane_size : nullptr;
          const int64_t row = ((b * g.channels + c) * taps + tap) * out_hw;
          for (int64_t pos = 0; pos < out_hw; ++pos) {
            const BilinearSample<T>& s = samples[pos];
            if (!s.valid) {
              if (cols) cols[row + pos] = T(0);
              continue;
            }
            const T m = tap_mask ? tap_mask[pos] : T(1), grad_col = grad_cols[row + pos];
            T v[4];
            read_neighbours(plane, s, g.height, g.width, v);
            const T value = interpolate(s, v);
            if (cols) cols[row + pos] = m * value;
            sum_value[pos] += grad_col * value;
            sum_dy[pos] += grad_col * interpolate_dy(s, v);
            sum_dx[pos] += grad_col * interpolate_dx(s, v);
            if (grad_plane) {
              for (int r = 0; r < 4; ++r) {
                const int64_t y = s.y0 + r / 2, x = s.x0 + r % 2;
                if (neighbour_inside(y, x, g.height, g.width))
                  grad_plane[y * g.width + x] += m * neighbour_weight(s, r) * grad_col;
              }
            }
          }
        }
        // d(m * S)/dy = m * dS/dy; d(m * S)/dm = S. Invalid samples sum nothing and get 0.
        for (int64_t pos = 0; pos < out_hw; ++pos) {
          const T m = tap_mask ? tap_mask[pos] : T(1);
          if (grad_dy) {
            grad_dy[pos] = m * sum_dy[pos];
            grad_dy[out_hw + pos] = m * sum_dx[pos];
          }
          if (grad_mask) grad_mask[(unit * taps + tap) * out_hw + pos] = sum_value[pos];
        }
      }
    }
  }
}

template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void deform_im2col_cpu(const Tensor& input, const Tensor& offset, const Tensor& mask, const Tensor& cols,
                       const DeformGeometry& g) {
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    im2col_kernel<scalar_t>(input.data<scalar_t>(), offset.data<scalar_t>(), data_or_null<scalar_t>(mask),
                            cols.data<scalar_t>(), input.size(0), g);
  });
}

void deform_col2im_cpu(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                       const DeformGeometry& g, const DeformBackwardOutputs& out) {
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    col2im_kernel<scalar_t>(grad_cols.data<scalar_t>(), input.data<scalar_t>(), offset.data<scalar_t>(),
                            data_or_null<scalar_t>(mask), data_or_null<scalar_t>(out.grad_input),
                            data_or_null<scalar_t>(out.grad_offset),
                            data_or_null<scalar_t>(out.grad_mask), data_or_null<scalar_t>(out.cols),
                            input.size(0), g);
  });
}

}  // namespace minidet::ops::detail
