// CUDA rotated NMS: ops/nms's bitmask NMS (py-faster-rcnn's nms_kernel.cu, with the greedy pass on the GPU;
// ops/nms/nms_cuda.cu explains it) with the rotated pair test.
//
//   1. nms_rotated_gather_kernel   one thread per box: the box at score position p is prepared
//                                  (prepare_rotated_box: corners, area, bounds, one sin and one cos) into
//                                  score order, its class beside it; finite-value flags per thread block
//   2. nms_bitmask.cuh's mask kernel with RotatedRule: the IoU test of every pair (i < j in score order) as
//      one 64-bit word per (box, block of 64 boxes), only the tiles on and above the diagonal; the 64 column
//      boxes of a tile are staged in shared memory already prepared, so the pair loop only moves, clips and
//      measures (no sin or cos, which is where most of a rotated IoU's time would go otherwise)
//   3. ops/nms's greedy walk (nms_reduce_kernel) over the mask, on the GPU
//   4. one copy of (count, flags) to the host: the only synchronisation.
// The mask form (nms_rotated_mask_cuda) stops after step 3: the walk marks the kept rows in a keep mask and
// leaves (count, flags) in a status on the device. Segmented, each run of `length` rows was sorted on its
// own, step 1 maps score position p to input row (p / length) length + order[p], step 2 launches only each
// run's tiles (one grid row per run) and step 3 one thread block per run.
// Why share steps 2 and 3 rather than write rotated ones: the mask layout and the walk do not depend on what
// a box is, and the walk is the subtle part of the design; a rule (how to load a box, how to test a pair) is
// all that differs. detectron2's nms_rotated_cuda.cu instead copies the whole kernel for rotated boxes and
// does the greedy pass on the host.
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/nms/nms_bitmask.cuh"
#include "ops/nms/nms_checks.h"
#include "ops/nms/nms_mask.h"
#include "ops/nms_rotated/nms_rotated_kernels.h"

namespace minidet::ops::detail {
namespace {

constexpr int kGatherThreads = 256;

// Step 1. Also ORs, per thread block, whether any box value or score is NaN or Inf into bad_flags[block]
// (every block writes its entry, so the buffer needs no clearing): nms_mask.h's flags, which the walk merges
// into the status.
template <typename T>
__global__ void nms_rotated_gather_kernel(int64_t n, const T* boxes, const T* scores, const int64_t* classes,
                                          const int64_t* order, int64_t segment_length,
                                          RotatedNmsBox<T>* sorted_boxes, int64_t* sorted_classes,
                                          unsigned char* bad_flags) {
  int bad_box = 0, bad_score = 0;
  MINIDET_KERNEL_LOOP(p, n) {
    // Segmented: order holds indices within each run of segment_length rows (n itself when not segmented).
    const int64_t i = (p / segment_length) * segment_length + order[p];
    const T* box = boxes + 5 * i;
    const bool finite = rotated_box_math::rotated_box_is_finite(box);
    bad_box |= !finite;
    bad_score |= !isfinite(scores[i]);
    // A box with NaN or Inf makes the call throw after the walk; it is prepared anyway (its pair tests are
    // garbage but bounded: the clip has no data-dependent loop), so every slot is written.
    sorted_boxes[p] = prepare_rotated_box(box);
    if (classes) sorted_classes[p] = classes[i];
  }
  bad_box = __syncthreads_or(bad_box);
  bad_score = __syncthreads_or(bad_score);
  if (threadIdx.x == 0)
    bad_flags[blockIdx.x] =
        static_cast<unsigned char>((bad_box ? kNmsBadBoxFlag : 0) | (bad_score ? kNmsBadScoreFlag : 0));
}

// Step 2's pair test (nms_bitmask.cuh): a box is its prepared form, a pair is rotated_suppresses.
template <typename T>
struct RotatedRule {
  using Box = RotatedNmsBox<T>;
  const Box* sorted_boxes;
  T threshold;
  __device__ Box load(int64_t p) const { return sorted_boxes[p]; }
  __device__ bool suppresses(const Box& kept, const Box& later) const {
    return rotated_suppresses(kept, later, threshold);
  }
};

// Queues steps 1 to 3: the kept rows as a list (keep) or as a mask (keep_mask, all false before), and (count,
// flags) into status (zero before). Nothing is copied to the host here.
template <typename T>
void launch_nms_rotated(const char* op, const NmsRotatedArgs& args, const Tensor& keep, const Tensor& keep_mask,
                        const Tensor& status) {
  const int64_t n = args.boxes.size(0), length = n / args.segments;
  const Device device = args.boxes.device();
  const bool batched = args.class_ids.defined();

  // Scratch from the caching allocator, returned when these tensors die (the stream orders their reuse).
  const int64_t box_bytes = static_cast<int64_t>(sizeof(RotatedNmsBox<T>));
  const Tensor sorted_boxes = empty({n * box_bytes}, TensorOptions(kUInt8, device));  // one prepared box per row
  const Tensor sorted_classes = batched ? empty({n}, TensorOptions(kInt64, device)) : Tensor();
  const int gather_blocks = static_cast<int>(std::min<int64_t>((n + kGatherThreads - 1) / kGatherThreads, 1024));
  const Tensor bad_flags = empty({gather_blocks}, TensorOptions(kUInt8, device));
  auto* boxes_data = static_cast<RotatedNmsBox<T>*>(sorted_boxes.raw_data());
  int64_t* sorted_class_data = batched ? sorted_classes.data<int64_t>() : nullptr;

  nms_rotated_gather_kernel<T><<<gather_blocks, kGatherThreads, 0, cuda::current_stream()>>>(
      n, args.boxes.data<T>(), args.scores.data<T>(), batched ? args.class_ids.data<int64_t>() : nullptr,
      args.order.data<int64_t>(), length, boxes_data, sorted_class_data, bad_flags.data<uint8_t>());
  MINIDET_CUDA_LAUNCH_CHECK("nms_rotated_gather_kernel");
  const nms_bitmask::Pass pass = nms_bitmask::make_pass(length, args.segments, sorted_class_data, args.order,
                                                        bad_flags, keep, keep_mask, status);
  nms_bitmask::launch_nms_bitmask(op, RotatedRule<T>{boxes_data, static_cast<T>(args.iou_threshold)}, pass, device);
}

template <typename T>
Tensor nms_rotated_cuda_typed(const char* op, const NmsRotatedArgs& args) {
  const Device device = args.boxes.device();
  const Tensor keep = empty({args.boxes.size(0)}, TensorOptions(kInt64, device));
  const Tensor status = zeros({2}, TensorOptions(kInt64, device));  // the count is added into status[0]
  launch_nms_rotated<T>(op, args, keep, Tensor(), status);
  // The one synchronisation: the result's length (and the finite-value check) must reach the host.
  const std::vector<int64_t> host_status = status.to_vector<int64_t>();
  check_nms_status(op, host_status);
  return keep.narrow(0, 0, host_status[0]);
}

}  // namespace

Tensor nms_rotated_cuda(const char* op, const NmsRotatedArgs& args) {
  cuda::DeviceGuard guard(args.boxes.device());
  return MINIDET_DISPATCH_FLOATING(args.boxes.dtype(), op,
                                   [&] { return nms_rotated_cuda_typed<scalar_t>(op, args); });
}

NmsMask nms_rotated_mask_cuda(const char* op, const NmsRotatedArgs& args) {
  cuda::DeviceGuard guard(args.boxes.device());
  NmsMask result = nothing_kept(args.boxes.size(0), args.boxes.device());  // the count is added into status[0]
  MINIDET_DISPATCH_FLOATING(args.boxes.dtype(), op, [&] {
    launch_nms_rotated<scalar_t>(op, args, Tensor(), result.keep_mask, result.status);
  });
  return result;
}

}  // namespace minidet::ops::detail
