#include "models/common/image_sizes.h"

#include "core/error.h"
#include "core/factories.h"

namespace minidet::models {

Tensor image_of_rows(const std::vector<int64_t>& rows_per_image, const TensorOptions& options) {
  std::vector<int64_t> index;
  for (size_t n = 0; n < rows_per_image.size(); ++n) {
    MINIDET_CHECK(rows_per_image[n] >= 0, "image_of_rows: image ", n, " has a negative row count ", rows_per_image[n]);
    index.insert(index.end(), static_cast<size_t>(rows_per_image[n]), static_cast<int64_t>(n));
  }
  return from_vector<int64_t>(index, {static_cast<int64_t>(index.size())}).to(options);
}

}  // namespace minidet::models

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
