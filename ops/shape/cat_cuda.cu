#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/shape/cat_kernels.h"

namespace minidet::ops::detail {
namespace {

// A contiguous piece seen as `rows` rows of `row_words` words: rows = the product of the sizes before dim,
// a row = the piece's size along dim times the sizes after it. Its row r lands at out + offset + r * (the
// output's row), since the output's rows are the same rows, longer.
struct CatPiece {
  const void* source;
  int64_t rows, row_words, offset;
};

// Passed by value as a kernel parameter (64 x 32 bytes, within the 4 KB a launch may pass): no upload.
struct CatPieces {
  CatPiece piece[kCatPiecesPerLaunch];
  int64_t out_row_words;
};

// blockIdx.y picks the piece; the blocks along x stride over its words. Consecutive threads take consecutive
// words of a row, so both reads and writes coalesce.
template <typename Word>
__global__ void cat_kernel(CatPieces pieces, Word* out) {
  const CatPiece piece = pieces.piece[blockIdx.y];
  const Word* source = static_cast<const Word*>(piece.source);
  const int64_t n = piece.rows * piece.row_words;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / piece.row_words, c = i - r * piece.row_words;
    out[piece.offset + r * pieces.out_row_words + c] = source[i];
  }
}

template <typename Word>
void launch(const Tensor& out, const std::vector<Tensor>& pieces, const std::vector<int64_t>& offsets, int64_t dim) {
  int64_t rows = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) rows *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  CatPieces batch{};
  batch.out_row_words = out.size(dim) * inner;
  for (size_t first = 0; first < pieces.size(); first += kCatPiecesPerLaunch) {
    const size_t count = std::min(pieces.size() - first, static_cast<size_t>(kCatPiecesPerLaunch));
    int64_t largest = 0;
    for (size_t i = 0; i < count; ++i) {
      const Tensor& p = pieces[first + i];
      batch.piece[i] = {p.raw_data(), rows, p.size(dim) * inner, offsets[first + i] * inner};
      largest = std::max(largest, rows * p.size(dim) * inner);
    }
    const dim3 grid(cuda::blocks_for(largest), static_cast<unsigned>(count));
    cat_kernel<Word>
        <<<grid, cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(batch, static_cast<Word*>(out.raw_data()));
    MINIDET_CUDA_LAUNCH_CHECK("cat_kernel");
  }
}

}  // namespace

void cat_cuda(const Tensor& out, const std::vector<Tensor>& all_pieces, const std::vector<int64_t>& all_offsets,
              int64_t dim) {
  cuda::DeviceGuard guard(out.device());
  std::vector<Tensor> pieces;  // the contiguous ones, for the kernel; the others through copy_
  std::vector<int64_t> offsets;
  for (size_t i = 0; i < all_pieces.size(); ++i) {
    if (all_pieces[i].is_contiguous()) {
      pieces.push_back(all_pieces[i]);
      offsets.push_back(all_offsets[i]);
    } else {
      out.narrow(dim, all_offsets[i], all_pieces[i].size(dim)).copy_(all_pieces[i]);
    }
  }
  if (pieces.empty()) return;
  // Only the bytes move, so a word of the element's size serves every dtype.
  switch (element_size(out.dtype())) {
    case 1:
      return launch<uint8_t>(out, pieces, offsets, dim);
    case 2:
      return launch<uint16_t>(out, pieces, offsets, dim);
    case 4:
      return launch<uint32_t>(out, pieces, offsets, dim);
    case 8:
      return launch<uint64_t>(out, pieces, offsets, dim);
    default:
      MINIDET_FAIL("cat: no CUDA copy for elements of ", element_size(out.dtype()), " bytes");
  }
}

}  // namespace minidet::ops::detail
