// The two GPU passes of bitmask NMS that do not depend on what a box is, shared by ops/nms (axis-aligned
// boxes) and ops/nms_rotated. nms_cuda.cu explains the design (py-faster-rcnn's nms_kernel.cu, the tile
// layout, the greedy walk); this file holds the mask kernel as a template on the pair test, and declares the
// greedy walk (nms_cuda.cu defines it), which only ever reads the mask's bits.
//
// A Rule is a small struct, passed to the kernel by value, that says how one box is read and how a pair is
// tested:
//   using Box = ...;                                     what the test reads of one box; it is staged in
//                                                        shared memory, so it must be a plain aggregate
//   __device__ Box load(int64_t p) const;                the box at score position p (0 = best score)
//   __device__ bool suppresses(const Box& kept, const Box& later) const;    "IoU(kept, later) > threshold"
// `kept` is always the better-scored box of the pair (row i before column j in score order), so a test that is
// not symmetric to the bit (rotated IoU is computed about the first box's centre) is asked the same way round
// as on the CPU. The class test of batched NMS ("same class AND ...") is the same for every rule and lives here.
//
// An op's launcher gathers its boxes into score order with its own kernel (which also flags NaN and Inf per
// thread block, as nms_gather_kernel does), then calls launch_nms_bitmask: mask, walk, and nothing copied to
// the host.
#pragma once

#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/factories.h"

namespace minidet::ops::detail::nms_bitmask {

using Word = unsigned long long;
constexpr int kBoxesPerBlock = 64;  // = bits per Word

// Tile (r, c), c >= r, of the upper triangle, stored column by column (nms_cuda.cu, "Mask layout").
__host__ __device__ inline int64_t tile_index(int64_t row_block, int64_t col_block) {
  return col_block * (col_block + 1) / 2 + row_block;
}

// The mask pass: one block of 64 threads per tile (r, c) with c >= r, numbered by tile_index; blockIdx.y is
// the segment (0 when not segmented), whose n rows, tiles and flags start at its own offsets. Thread t tests
// row box 64r + t against the tile's 64 column boxes (staged in shared memory) and writes one word; an
// all-zero tile off the diagonal is not written, only flagged empty.
template <typename Rule>
__global__ void __launch_bounds__(kBoxesPerBlock)
    nms_mask_kernel(int64_t n, Rule rule, const int64_t* sorted_classes, Word* mask, unsigned char* tile_nonzero,
                    int64_t blocks) {
  using Box = typename Rule::Box;
  const int64_t segment = blockIdx.y;
  const int64_t first = segment * n;  // the segment's first score position
  mask += segment * (blocks * (blocks + 1) / 2) * kBoxesPerBlock;
  tile_nonzero += segment * blocks * blocks;
  // Invert tile_index: the column c is the largest with c (c + 1) / 2 <= t (the float estimate is fixed up).
  const int64_t t = blockIdx.x;
  int64_t col = static_cast<int64_t>((sqrt(8.0 * static_cast<double>(t) + 1.0) - 1.0) / 2.0);
  while (col * (col + 1) / 2 > t) --col;
  while ((col + 1) * (col + 2) / 2 <= t) ++col;
  const int64_t row = t - col * (col + 1) / 2;

  __shared__ Box col_boxes[kBoxesPerBlock];
  __shared__ int64_t col_classes[kBoxesPerBlock];
  const int k = threadIdx.x;
  const int64_t col_start = col * kBoxesPerBlock;
  const int col_count = n - col_start < kBoxesPerBlock ? static_cast<int>(n - col_start) : kBoxesPerBlock;
  if (k < col_count) {
    col_boxes[k] = rule.load(first + col_start + k);
    if (sorted_classes) col_classes[k] = sorted_classes[col_start + k];
  }
  __syncthreads();

  Word bits = 0;
  const int64_t i = row * kBoxesPerBlock + k;  // this thread's row box
  if (i < n) {
    const Box box = rule.load(first + i);
    const int64_t cls = sorted_classes ? sorted_classes[i] : 0;
    // On the diagonal only the boxes after this one: a box is suppressed by better boxes only.
    for (int j = row == col ? k + 1 : 0; j < col_count; ++j) {
      const bool same_class = !sorted_classes || col_classes[j] == cls;
      if (same_class && rule.suppresses(box, col_boxes[j])) bits |= Word(1) << j;
    }
  }
  const int nonzero = __syncthreads_or(bits != 0);
  // Diagonal tiles are always written: the greedy pass loads them before it could look at their flag.
  if (nonzero || row == col) mask[t * kBoxesPerBlock + k] = bits;
  if (k == 0) tile_nonzero[row * blocks + col] = static_cast<unsigned char>(nonzero);
}

// What the passes read and write besides the boxes (all device pointers).
struct Pass {
  int64_t length = 0;                       // boxes per segment (all of them when segments == 1)
  int64_t segments = 1;                     // > 1: independent runs of `length` rows (segmented_nms_mask)
  const int64_t* sorted_classes = nullptr;  // classes in score order, or null: no class test
  const int64_t* order = nullptr;           // input index of each score position (within its segment)
  const unsigned char* bad_flags = nullptr;  // the gather kernel's NaN / Inf flags, one byte per thread block
  int bad_flag_count = 0;
  int64_t* keep = nullptr;     // the kept input indices in order, or null when keep_mask is given
  bool* keep_mask = nullptr;   // or: keep_mask[i] = true for each kept row i (all false before)
  int64_t* status = nullptr;   // (2): the kept count is added into status[0]; status[1] = the bad-input flags
};

// A Pass over an op's scratch tensors, filled the same way by every op: order (int64, score position -> input
// index), bad_flags (uint8, one per gather block), status (int64 (2)), and either keep (int64) or keep_mask
// (bool), the other undefined. sorted_classes may be null (no class test).
inline Pass make_pass(int64_t length, int64_t segments, const int64_t* sorted_classes, const Tensor& order,
                      const Tensor& bad_flags, const Tensor& keep, const Tensor& keep_mask, const Tensor& status) {
  Pass pass;
  pass.length = length;
  pass.segments = segments;
  pass.sorted_classes = sorted_classes;
  pass.order = order.data<int64_t>();
  pass.bad_flags = bad_flags.data<uint8_t>();
  pass.bad_flag_count = static_cast<int>(bad_flags.numel());
  pass.keep = keep.defined() ? keep.data<int64_t>() : nullptr;
  pass.keep_mask = keep_mask.defined() ? keep_mask.data<bool>() : nullptr;
  pass.status = status.data<int64_t>();
  return pass;
}

// The greedy walk over a finished mask (nms_cuda.cu's nms_reduce_kernel), one thread block per segment.
void launch_nms_reduce(const Pass& pass, int64_t blocks, const Word* mask, const unsigned char* tile_nonzero);

// Queues the mask pass for `rule` and the greedy walk; the mask's scratch comes from the caching allocator.
template <typename Rule>
void launch_nms_bitmask(const char* op, const Rule& rule, const Pass& pass, Device device) {
  const int64_t blocks = (pass.length + kBoxesPerBlock - 1) / kBoxesPerBlock;  // per segment
  const int64_t tiles = blocks * (blocks + 1) / 2;
  // The walk indexes column blocks in int (blocks * blocks flags); the mask itself (32 bytes per pair of
  // boxes) outgrows any GPU long before this bound.
  MINIDET_CHECK(blocks <= 46340, op, ": at most ", 46340 * kBoxesPerBlock, " boxes on CUDA, got ",
                pass.length * pass.segments);
  // Words of empty off-diagonal tiles are never written nor read, so the mask needs no clearing.
  const Tensor mask = empty({pass.segments * tiles * kBoxesPerBlock}, TensorOptions(kInt64, device));
  // One flag per tile, row-major (blocks x blocks, upper triangle used) so that a warp reads its row's flags
  // with one coalesced load; the mask kernel writes every flag the walk reads.
  const Tensor tile_nonzero = empty({pass.segments * blocks * blocks}, TensorOptions(kUInt8, device));
  Word* mask_words = static_cast<Word*>(mask.raw_data());
  unsigned char* nonzero = tile_nonzero.data<uint8_t>();
  nms_mask_kernel<Rule><<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(pass.segments)), kBoxesPerBlock,
                          0, cuda::current_stream()>>>(pass.length, rule, pass.sorted_classes, mask_words, nonzero,
                                                       blocks);
  MINIDET_CUDA_LAUNCH_CHECK("nms_mask_kernel");
  launch_nms_reduce(pass, blocks, mask_words, nonzero);
}

}  // namespace minidet::ops::detail::nms_bitmask
