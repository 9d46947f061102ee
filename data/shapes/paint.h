// Painting a synthetic image: the two steps both shapes datasets (shapes_dataset.h, rotated_shapes_dataset.h)
// share once their objects are placed and rasterized.
#pragma once

#include <cstdint>

#include "core/generator.h"
#include "data/image/image.h"
#include "data/shapes/rasterize.h"

namespace minidet::data {

// A colour with each channel uniform in 0..255 (three draws from `generator`, red first).
Color random_color(Generator& generator);

// An object's colour: random colours drawn until one differs from the background by at least 160 of the 765
// levels summed over the channels (so the object stands out of the noisy background), giving up after 20
// draws. The draws are the layout's, so they are part of what a seed fixes.
Color contrasting_color(Generator& generator, Color background);

// Sets every pixel of the mask to `color` (a later object covers an earlier one where they overlap).
void paint_mask(Image& image, const Mask& mask, Color color);

// Adds independent uniform noise in [-amplitude, amplitude] to every channel of every pixel, clamped to
// 0..255. The draws come from their own stream, mix_seed(image_seed ^ "noise"), so the noise never shifts
// the layout's draws (and a dataset can compute an image's targets without painting it). Each pixel takes
// one 64-bit draw, 16 bits per channel, mapped to the 2 * amplitude + 1 levels by a multiply and shift.
void add_uniform_noise(Image& image, int amplitude, uint64_t image_seed);

}  // namespace minidet::data
