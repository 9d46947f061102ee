// The (height, width) of each image before padding (data::Batch::image_sizes), as the detector's blocks take
// it (ImageSizes), and the one check they share on it (detail::check_image_sizes, internal).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace minidet::models {

// (height, width) of each image before padding, as data::Batch::image_sizes.
using ImageSizes = std::vector<std::array<int64_t, 2>>;

}  // namespace minidet::models

namespace minidet::models::detail {

// Throws, naming `op`, unless there is exactly one size per image and every height and width is positive.
void check_image_sizes(const char* op, const std::vector<std::array<int64_t, 2>>& image_sizes, int64_t images);

}  // namespace minidet::models::detail
