#include "models/common/image_sizes.h"

#include "core/error.h"

namespace minidet::models::detail {

void check_image_sizes(const char* op, const std::vector<std::array<int64_t, 2>>& image_sizes, int64_t images) {
  MINIDET_CHECK(static_cast<int64_t>(image_sizes.size()) == images, op, ": expected one image size per image (",
                images, "), got ", image_sizes.size());
  for (int64_t n = 0; n < images; ++n)
    MINIDET_CHECK(image_sizes[n][0] > 0 && image_sizes[n][1] > 0, op,
                  ": expected a positive (height, width) for image ", n, ", got (", image_sizes[n][0], ", ",
                  image_sizes[n][1], ")");
}

}  // namespace minidet::models::detail
