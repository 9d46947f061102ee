// CPU kernels of deform_conv2d. Each works on one (image, offset group, tap) at a time: first the samples of
// all output positions are located (neighbours and weights, shared by every channel of the group), then the
// channels walk them, so column rows are written contiguously.
//
// Parallelism, with no two threads ever writing the same element, so no atomics and a fixed order of sums
// (deterministic): im2col and the offset/mask gradients over (image, offset group, tap) units, which own
// their column rows and their offset and mask channels; the input gradient over (image, channel) planes,
// each unit adding into its own plane only. Backward thus reads the neighbours twice (once per pass), where
// the CUDA kernel does it all in one pass with atomics.
#include <algorithm>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/deform_conv2d/deform_conv2d_kernels.h"

namespace minidet::ops::detail {
namespace {

// The samples of one (image, offset group, tap) at every output position.
template <typename T>
void locate_tap(const DeformGeometry& g, int64_t tap, const T* offset_dy, const T* offset_dx,
                std::vector<DeformSample<T>>& samples) {
  const int64_t i = tap / g.kernel_w, j = tap % g.kernel_w;
  for (int64_t p = 0; p < g.out_h; ++p)
    for (int64_t q = 0; q < g.out_w; ++q) {
      const int64_t pos = p * g.out_w + q;
      samples[pos] = locate_sample<T>(g, i, j, p, q, offset_dy[pos], offset_dx[pos]);
    }
}

template <typename T>
void im2col_kernel(const T* input, const T* offset, const T* mask, T* cols, const ColumnLayout& layout, int64_t batch,
                   const DeformGeometry& g) {
  const int64_t taps = g.taps(), out_hw = g.out_hw(), group_channels = g.channels_per_offset_group();
  const int64_t units = batch * g.offset_groups * taps;
#pragma omp parallel if (units * group_channels * out_hw > kParallelAbove)
  {
    std::vector<DeformSample<T>> samples(out_hw);
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
        T* row = cols + layout.index(b, c * taps + tap, 0);
        for (int64_t pos = 0; pos < out_hw; ++pos) {
          const DeformSample<T>& s = samples[pos];
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

// col2im_coord and the recomputed columns: one unit per (image, offset group, tap) owns its offset and mask
// gradients (summed over the group's channels) and its column rows.
template <typename T>
void coordinate_grad_kernel(const T* grad_cols, const T* input, const T* offset, const T* mask, T* grad_offset,
                            T* grad_mask, T* cols, const ColumnLayout& layout, int64_t batch, const DeformGeometry& g) {
  const int64_t taps = g.taps(), out_hw = g.out_hw(), group_channels = g.channels_per_offset_group();
  const int64_t plane_size = g.height * g.width, units = batch * g.offset_groups * taps;
#pragma omp parallel if (units * group_channels * out_hw > kParallelAbove)
  {
    std::vector<DeformSample<T>> samples(out_hw);
    std::vector<T> sum_dy(out_hw), sum_dx(out_hw), sum_value(out_hw);  // over the group's channels
#pragma omp for schedule(static)
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t tap = unit % taps, b_group = unit / taps;
      const int64_t group = b_group % g.offset_groups, b = b_group / g.offset_groups;
      const T* dy = offset + (b_group * 2 * taps + 2 * tap) * out_hw;
      locate_tap(g, tap, dy, dy + out_hw, samples);
      const T* tap_mask = mask ? mask + (b_group * taps + tap) * out_hw : nullptr;
      std::fill(sum_dy.begin(), sum_dy.end(), T(0));
      std::fill(sum_dx.begin(), sum_dx.end(), T(0));
      std::fill(sum_value.begin(), sum_value.end(), T(0));
      for (int64_t c = group * group_channels; c < (group + 1) * group_channels; ++c) {
        const T* plane = input + (b * g.channels + c) * plane_size;
        const T* grad_row = grad_cols + layout.index(b, c * taps + tap, 0);
        T* cols_row = cols ? cols + layout.index(b, c * taps + tap, 0) : nullptr;
        for (int64_t pos = 0; pos < out_hw; ++pos) {
          const DeformSample<T>& s = samples[pos];
          if (!s.valid) {
            if (cols_row) cols_row[pos] = T(0);
            continue;
          }
          T v[4];
          read_neighbours(plane, s, g.height, g.width, v);
          const T value = interpolate(s, v), grad_col = grad_row[pos];
          if (cols_row) cols_row[pos] = (tap_mask ? tap_mask[pos] : T(1)) * value;
          sum_value[pos] += grad_col * value;
          sum_dy[pos] += grad_col * interpolate_dy(s, v);
          sum_dx[pos] += grad_col * interpolate_dx(s, v);
        }
      }
      // d(m * S)/dy = m * dS/dy; d(m * S)/dm = S. Invalid samples sum nothing and get 0.
      for (int64_t pos = 0; pos < out_hw; ++pos) {
        const T m = tap_mask ? tap_mask[pos] : T(1);
        if (grad_offset) {
          T* grad_dy = grad_offset + (b_group * 2 * taps + 2 * tap) * out_hw;
          grad_dy[pos] = m * sum_dy[pos];
          grad_dy[out_hw + pos] = m * sum_dx[pos];
        }
        if (grad_mask) grad_mask[(b_group * taps + tap) * out_hw + pos] = sum_value[pos];
      }
    }
  }
}

// col2im: one unit per input plane (image, channel) owns it and adds its samples in the order (tap,
// position), so the sums are race-free and deterministic. Each unit locates its samples again: as cheap as
// the scatter itself, and it lets every plane run in parallel.
template <typename T>
void input_grad_kernel(const T* grad_cols, const ColumnLayout& layout, const T* offset, const T* mask, T* grad_input,
                       int64_t batch, const DeformGeometry& g) {
  const int64_t taps = g.taps(), out_hw = g.out_hw(), group_channels = g.channels_per_offset_group();
  const int64_t plane_size = g.height * g.width, planes = batch * g.channels;
#pragma omp parallel if (planes * taps * out_hw > kParallelAbove)
  {
    std::vector<DeformSample<T>> samples(out_hw);
#pragma omp for schedule(static)
    for (int64_t plane = 0; plane < planes; ++plane) {
      const int64_t c = plane % g.channels, b = plane / g.channels;
      const int64_t b_group = b * g.offset_groups + c / group_channels;
      T* grad_plane = grad_input + plane * plane_size;
      for (int64_t tap = 0; tap < taps; ++tap) {
        const T* dy = offset + (b_group * 2 * taps + 2 * tap) * out_hw;
        locate_tap(g, tap, dy, dy + out_hw, samples);
        const T* tap_mask = mask ? mask + (b_group * taps + tap) * out_hw : nullptr;
        const T* grad_row = grad_cols + layout.index(b, c * taps + tap, 0);
        for (int64_t pos = 0; pos < out_hw; ++pos) {
          const DeformSample<T>& s = samples[pos];
          if (!s.valid) continue;
          const T sent = (tap_mask ? tap_mask[pos] : T(1)) * grad_row[pos];
          for (int r = 0; r < 4; ++r) {
            const int64_t y = s.y0 + r / 2, x = s.x0 + r % 2;
            if (neighbour_inside(y, x, g.height, g.width)) grad_plane[y * g.width + x] += neighbour_weight(s, r) * sent;
          }
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
                       const ColumnLayout& layout, const DeformGeometry& g) {
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    im2col_kernel<scalar_t>(input.data<scalar_t>(), offset.data<scalar_t>(), data_or_null<scalar_t>(mask),
                            cols.data<scalar_t>(), layout, input.size(0), g);
  });
}

void deform_col2im_cpu(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                       const ColumnLayout& layout, const DeformGeometry& g, const DeformBackwardOutputs& out) {
  MINIDET_DISPATCH_FLOATING(input.dtype(), "deform_conv2d", [&] {
    using T = scalar_t;
    if (out.grad_offset.defined() || out.grad_mask.defined() || out.cols.defined())
      coordinate_grad_kernel<T>(grad_cols.data<T>(), input.data<T>(), offset.data<T>(), data_or_null<T>(mask),
                                data_or_null<T>(out.grad_offset), data_or_null<T>(out.grad_mask),
                                data_or_null<T>(out.cols), layout, input.size(0), g);
    if (out.grad_input.defined())
      input_grad_kernel<T>(grad_cols.data<T>(), layout, offset.data<T>(), data_or_null<T>(mask),
                           out.grad_input.data<T>(), input.size(0), g);
  });
}

}  // namespace minidet::ops::detail
