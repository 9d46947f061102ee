// The (height, width) of each image before padding (data::Batch::image_sizes), as the detector's blocks take
// it (ImageSizes), the one check they share on it (detail::check_image_sizes, internal), and the image index
// of each row of a table that holds several images' rows one image after the other (image_of_rows).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace minidet::models {

// (height, width) of each image before padding, as data::Batch::image_sizes.
using ImageSizes = std::vector<std::array<int64_t, 2>>;

// (R) with value n on image n's rows, R = sum of rows_per_image: rows_per_image[0] zeros, then
// rows_per_image[1] ones, and so on, in `options`' dtype and device. Built on the host and copied once (one
// host-to-device copy on CUDA, however many images), where a fill per image would cost a launch each.
Tensor image_of_rows(const std::vector<int64_t>& rows_per_image, const TensorOptions& options);

}  // namespace minidet::models

namespace minidet::models::detail {

// Throws, naming `op`, unless there is exactly one size per image and every height and width is positive.
void check_image_sizes(const char* op, const std::vector<std::array<int64_t, 2>>& image_sizes, int64_t images);

}  // namespace minidet::models::detail
