// Transforms: the per-sample changes a detector's input pipeline makes, with the boxes kept in step.
//
//   horizontal_flip   pixel column x moves to W - 1 - x; a box (x1, y1, x2, y2) becomes (W - x2, y1, W - x1, y2)
//                     (continuous coordinates, so flipping twice gives the same box back exactly); it
//                     toggles Sample::flipped, so the loader can report which images were mirrored; a
//                     rotated box (cx, cy, w, h, a) becomes (W - cx, cy, w, h, -a), the angle normalised
//                     into [-pi/2, pi/2)
//   resize            bilinear, sampling the source at ((x + 0.5) * W / W' - 0.5, ...), the half-pixel
//                     convention of torchvision and OpenCV; boxes scale by (W' / W, H' / H); rotated boxes
//                     need W' / W = H' / H (a stretched rotated rectangle is no rectangle) and keep their angle
//   normalize         (image - mean[c]) / stddev[c] per channel of a (3, H, W) or (N, 3, H, W) float tensor
//
// A Transform is what the loader applies to each sample; random ones draw from the Generator the loader
// hands them, which is seeded per (epoch, sample) so the result never depends on thread timing.
#pragma once

#include <array>
#include <functional>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "data/dataset/dataset.h"

namespace minidet::data {

Sample horizontal_flip(Sample sample);
Sample resize(Sample sample, int64_t width, int64_t height);

// ImageNet statistics, the usual choice for inputs in [0, 1].
constexpr std::array<float, 3> kImageNetMean = {0.485f, 0.456f, 0.406f};
constexpr std::array<float, 3> kImageNetStd = {0.229f, 0.224f, 0.225f};
// A new float32 tensor on the input's device; the input is not changed.
Tensor normalize(const Tensor& images, const std::array<float, 3>& mean = kImageNetMean,
                 const std::array<float, 3>& stddev = kImageNetStd);

using Transform = std::function<Sample(Sample, Generator&)>;

Transform random_horizontal_flip(double probability = 0.5);
Transform resize_to(int64_t width, int64_t height);
// Applies `transforms` in order.
Transform compose(std::vector<Transform> transforms);

}  // namespace minidet::data
