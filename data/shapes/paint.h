// Painting a synthetic image: the two steps both shapes datasets (shapes_dataset.h, rotated_shapes_dataset.h)
// share once their objects are placed and rasterized.
#pragma once

#include <cstdint>

#include "data/image/image.h"
#include "data/shapes/rasterize.h"

namespace minidet::data {

// Sets every pixel of the mask to `color` (a later object covers an earlier one where they overlap).
void paint_mask(Image& image, const Mask& mask, Color color);

// Adds independent uniform noise in [-amplitude, amplitude] to every channel of every pixel, clamped to
// 0..255. The draws come from their own stream, mix_seed(image_seed ^ "noise"), so the noise never shifts
// the layout's draws (and a dataset can compute an image's targets without painting it). Each pixel takes
// one 64-bit draw, 16 bits per channel, mapped to the 2 * amplitude + 1 levels by a multiply and shift.
void add_uniform_noise(Image& image, int amplitude, uint64_t image_seed);

}  // namespace minidet::data
