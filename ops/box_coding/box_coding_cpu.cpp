// CPU encode_boxes / decode_boxes: one loop over the boxes (formulas in box_coding_kernels.h).
#include "ops/box_coding/box_coding_kernels.h"

namespace minidet::ops::detail {
namespace {

constexpr int64_t kParallelAboveBoxes = 16384;  // boxes; below, waking a thread team costs more than the loop

template <typename T>
void encode_loop(int64_t boxes, const T* target, const T* reference, const BoxCodingParams& p, T* out) {
#pragma omp parallel for if (boxes > kParallelAboveBoxes)
  for (int64_t i = 0; i < boxes; ++i) encode_box(target + 4 * i, reference + 4 * i, p, out + 4 * i);
}

template <typename T>
void decode_loop(int64_t boxes, int64_t per_reference, const T* deltas, const T* reference, const BoxCodingParams& p,
                 T* out) {
#pragma omp parallel for if (boxes > kParallelAboveBoxes)
  for (int64_t i = 0; i < boxes; ++i) decode_box(deltas + 4 * i, reference + 4 * (i / per_reference), p, out + 4 * i);
}

}  // namespace

void encode_boxes_cpu(const Tensor& target, const Tensor& reference, const BoxCodingParams& p, const Tensor& out) {
  MINIDET_DISPATCH_FLOATING(out.dtype(), "encode_boxes", [&] {
    encode_loop<scalar_t>(out.numel() / 4, target.data<scalar_t>(), reference.data<scalar_t>(), p,
                          out.data<scalar_t>());
  });
}

void decode_boxes_cpu(const Tensor& deltas, const Tensor& reference, const BoxCodingParams& p, const Tensor& out) {
  MINIDET_DISPATCH_FLOATING(out.dtype(), "decode_boxes", [&] {
    decode_loop<scalar_t>(out.numel() / 4, deltas.size(1) / 4, deltas.data<scalar_t>(), reference.data<scalar_t>(), p,
                          out.data<scalar_t>());
  });
}

}  // namespace minidet::ops::detail
