// See inference_memory.h.
#include "examples/minidet/inference_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/allocator.h"
#include "core/error.h"

namespace minidet::cli {

namespace {

constexpr double kFloatBytes = 4;

// The working set of a 3x3 convolution (padding 1) at `stride`: one image's im2col columns and the batch's
// output. Updates height and width to the output's.
double conv_bytes(double images, double in_channels, double out_channels, double stride, double& height,
                  double& width) {
  height = std::ceil(height / stride);
  width = std::ceil(width / stride);
  const double positions = height * width;
  return kFloatBytes * (in_channels * 9 * positions + images * out_channels * positions);
}

// "1.50 GiB"; sizes past what 64 bits count print as the largest (they are lower bounds anyway).
std::string bytes_text(double bytes) {
  const double largest = static_cast<double>(std::numeric_limits<uint64_t>::max());
  return format_bytes(bytes >= largest ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(bytes));
}

}  // namespace

double inference_bytes(const models::BackboneOptions& backbone, Device device, double images, double height,
                       double width) {
  const double batch = kFloatBytes * 3 * images * height * width;
  if (device.is_cuda()) return batch;
  double peak = conv_bytes(images, static_cast<double>(backbone.in_channels),
                           static_cast<double>(backbone.stem_channels), 2, height, width);
  double channels = static_cast<double>(backbone.stem_channels);
  for (size_t i = 0; i < backbone.widths.size(); ++i) {
    const double out = static_cast<double>(backbone.widths[i]);
    // The first block's conv1 carries the stage's stride; every other conv keeps the size.
    peak = std::max(peak, conv_bytes(images, channels, out, static_cast<double>(backbone.strides[i]), height, width));
    peak = std::max(peak, conv_bytes(images, out, out, 1, height, width));
    channels = out;
  }
  return batch + peak;
}

void check_inference_memory(const models::BackboneOptions& backbone, Device device, double images, double height,
                            double width, const std::string& what, const std::string& advice) {
  const double needed = inference_bytes(backbone, device, images, height, width);
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (memory <= 0) return;  // unknown: nothing to compare with
  MINIDET_CHECK(needed <= memory, what, " needs at least ", bytes_text(needed), " of memory for the forward pass (",
                device.is_cuda() ? "the float32 input, on the host"
                                 : "the float32 input and the backbone's largest convolution",
                "), more than this machine's ", bytes_text(memory), "; ", advice);
}

}  // namespace minidet::cli
