// cat on the CPU: each piece is one Tensor::copy_ into its slice of the output (cat_kernels.h).
#include "ops/shape/cat_kernels.h"

namespace minidet::ops::detail {

void cat_cpu(const Tensor& out, const std::vector<Tensor>& pieces, const std::vector<int64_t>& offsets, int64_t dim) {
  for (size_t i = 0; i < pieces.size(); ++i) out.narrow(dim, offsets[i], pieces[i].size(dim)).copy_(pieces[i]);
}

}  // namespace minidet::ops::detail
