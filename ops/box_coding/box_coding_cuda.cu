// CUDA encode_boxes / decode_boxes: one thread per box (formulas in box_coding_kernels.h).
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/box_coding/box_coding_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void encode_boxes_kernel(int64_t boxes, const T* target, const T* reference, BoxCodingParams p, T* out) {
  MINIDET_KERNEL_LOOP(i, boxes) encode_box(target + 4 * i, reference + 4 * i, p, out + 4 * i);
}

template <typename T>
__global__ void decode_boxes_kernel(int64_t boxes, int64_t per_reference, const T* deltas, const T* reference,
                                    BoxCodingParams p, T* out) {
  MINIDET_KERNEL_LOOP(i, boxes) decode_box(deltas + 4 * i, reference + 4 * (i / per_reference), p, out + 4 * i);
}

}  // namespace

void encode_boxes_cuda(const Tensor& target, const Tensor& reference, const BoxCodingParams& p, const Tensor& out) {
  cuda::DeviceGuard guard(out.device());
  const int64_t boxes = out.numel() / 4;
  MINIDET_DISPATCH_FLOATING(out.dtype(), "encode_boxes", [&] {
    encode_boxes_kernel<scalar_t><<<cuda::blocks_for(boxes), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        boxes, target.data<scalar_t>(), reference.data<scalar_t>(), p, out.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("encode_boxes_kernel");
  });
}

void decode_boxes_cuda(const Tensor& deltas, const Tensor& reference, const BoxCodingParams& p, const Tensor& out) {
  cuda::DeviceGuard guard(out.device());
  const int64_t boxes = out.numel() / 4, per_reference = deltas.size(1) / 4;
  MINIDET_DISPATCH_FLOATING(out.dtype(), "decode_boxes", [&] {
    decode_boxes_kernel<scalar_t><<<cuda::blocks_for(boxes), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        boxes, per_reference, deltas.data<scalar_t>(), reference.data<scalar_t>(), p, out.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("decode_boxes_kernel");
  });
}

}  // namespace minidet::ops::detail
