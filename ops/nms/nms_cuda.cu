// CUDA NMS: the bitmask kernel of py-faster-rcnn's nms_kernel.cu (docs/references.md), and the greedy pass
// on the GPU instead of the host.
//
// Boxes arrive sorted by score (nms.cpp). Cut them into blocks of 64 (the bits of one word). For a row box i
// and a column block c, one 64-bit word holds bit k = "box i suppresses box 64c + k" (only for 64c + k > i:
// a box can only be suppressed by a better one). The words form tiles of 64 x 64 pairs, one per (row block r,
// column block c); tiles below the diagonal (c < r) would only hold pairs with j < i, so they are never
// launched.
//
//   1. nms_gather_kernel   boxes, areas and classes into score order; finite-value flags per thread block
//   2. nms_mask_kernel     one 64-thread block per tile on or above the diagonal: thread t tests row box
//                          64r + t against the tile's 64 column boxes (staged in shared memory) and writes
//                          one word. An all-zero tile off the diagonal is not written, only flagged empty.
//                          It lives in nms_bitmask.cuh as a template on the pair test (here AxisAlignedRule),
//                          so that nms_rotated runs the same mask pass and this file's walk on its own boxes.
//   3. nms_reduce_kernel   one 512-thread block runs the greedy pass over the tiles (see below) and writes
//                          the kept indices and their count.
//   4. one copy of (count, flags) to the host: the only synchronisation, because the result's size depends
//      on it. The kept indices stay on the GPU.
//
// Mask layout: tile (r, c), c >= r, is stored at tile_index(r, c) = c (c + 1) / 2 + r (the upper triangle,
// column by column), its 64 words (one per row box of block r) contiguous. py-faster-rcnn and torchvision
// store a full N x (N / 64) matrix, one row per box; tile order instead makes a block's 64 words one 512-byte
// stretch: written in one coalesced store by the mask kernel, read by one warp with two coalesced loads.
// Beside the mask, one byte per tile says whether it holds any set bit (row-major, blocks x blocks).
//
// The greedy pass (nms_reduce_kernel). removed[c] (shared memory) has bit k set once box 64c + k is
// suppressed. For each row block b in order:
//   a. warp 0 resolves block b alone: which of its rows not yet removed survive the diagonal tile (a box
//      can suppress a later box of its own block). nms_kernel.cu walks the rows one by one; kept_rows gets
//      the same answer in a few warp-wide rounds.
//   b. every warp then ORs the words of the kept boxes of block b into removed[c] for the non-empty tiles
//      (b, c), c > b (warp w takes columns b + 1 + 32 w .. b + 32 (w + 1)), each lane with a set bit by a
//      shared-memory atomicOr: OR is order-free, so the result is the same bits on every run.
// The tile loads of step b do not depend on which boxes step a keeps (only on removed[b], known by then), so
// each warp issues them before step a and they arrive while warp 0 resolves; rows already removed and empty
// tiles are skipped, so only the words that can matter cross the memory bus. Each block costs two
// __syncthreads. nms_kernel.cu does this pass on the host after copying the whole N x N/64 mask there (50 MB
// at 20000 boxes); here only one int64 count crosses.
#include <algorithm>
#include <climits>
#include <cmath>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/nms/nms_bitmask.cuh"
#include "ops/nms/nms_kernels.h"

namespace minidet::ops::detail {
namespace {

using nms_bitmask::kBoxesPerBlock;
using nms_bitmask::tile_index;
using nms_bitmask::Word;
constexpr int kReduceWarps = 16;
constexpr int kColumnsPerWarp = 32;  // warp w watches the 32 column blocks b + 1 + 32 w + lane
constexpr int kPrefetchTiles = 16;   // non-empty tiles per warp whose loads are issued before step a
constexpr int kGatherThreads = 256;
constexpr unsigned kFullWarp = 0xffffffffu;

enum BadInput : unsigned char { kBadBox = kNmsBadBoxFlag, kBadScore = kNmsBadScoreFlag };

// Step 1. Also ORs, per thread block, whether any coordinate or score is NaN or Inf into bad_flags[block]
// (every block writes its entry, so the buffer needs no clearing).
template <typename T>
__global__ void nms_gather_kernel(int64_t n, const T* boxes, const T* scores, const int64_t* classes,
                                  const int64_t* order, int64_t segment_length, T offset, T* sorted_boxes, T* areas,
                                  int64_t* sorted_classes, unsigned char* bad_flags) {
  int bad_box = 0, bad_score = 0;
  MINIDET_KERNEL_LOOP(p, n) {
    // Segmented: order holds indices within each segment of segment_length rows (see NmsArgs).
    const int64_t i = (p / segment_length) * segment_length + order[p];
    const T* box = boxes + 4 * i;
    for (int c = 0; c < 4; ++c) {
      bad_box |= !isfinite(box[c]);
      sorted_boxes[4 * p + c] = box[c];
    }
    bad_score |= !isfinite(scores[i]);
    areas[p] = box_math::box_area(box, offset);
    if (classes) sorted_classes[p] = classes[i];
  }
  bad_box = __syncthreads_or(bad_box);
  bad_score = __syncthreads_or(bad_score);
  if (threadIdx.x == 0) bad_flags[blockIdx.x] = (bad_box ? kBadBox : 0) | (bad_score ? kBadScore : 0);
}

// Step 2's pair test for nms_bitmask.cuh's mask kernel: a box is its 4 coordinates and its area.
template <typename T>
struct AxisAlignedRule {
  struct Box {
    T coords[4];
    T area;
  };
  const T* sorted_boxes;  // (N, 4) in score order
  const T* areas;
  T threshold, offset;
  __device__ Box load(int64_t p) const {
    Box box;
    for (int c = 0; c < 4; ++c) box.coords[c] = sorted_boxes[4 * p + c];
    box.area = areas[p];
    return box;
  }
  __device__ bool suppresses(const Box& a, const Box& b) const {
    return detail::suppresses(a.coords, a.area, b.coords, b.area, threshold, offset);
  }
};

__device__ inline Word warp_or(Word v) {
#if __CUDA_ARCH__ >= 800
  const unsigned lo = __reduce_or_sync(kFullWarp, static_cast<unsigned>(v));
  const unsigned hi = __reduce_or_sync(kFullWarp, static_cast<unsigned>(v >> 32));
  return (static_cast<Word>(hi) << 32) | lo;
#else
  for (int width = 16; width > 0; width /= 2) v |= __shfl_xor_sync(kFullWarp, v, width);
  return v;
#endif
}

// Lane l's two words of a tile: rows l and l + 32 of its row block, or 0 for rows already removed (they cannot
// be kept, so their words can never matter) and for an empty tile (never written, so never read).
struct TileRows {
  Word low = 0, high = 0;
};

__device__ inline TileRows load_tile_rows(const Word* mask, int64_t tile, bool nonzero, Word removed_rows, int lane) {
  TileRows rows;
  if (!nonzero) return rows;
  const Word* words = mask + tile * kBoxesPerBlock;
  if (!((removed_rows >> lane) & 1)) rows.low = words[lane];
  if (!((removed_rows >> (lane + 32)) & 1)) rows.high = words[lane + 32];
  return rows;
}

// ORs the words of block b's kept rows in one of its tiles into removed[col]. Within a non-empty tile usually
// only a row or two have a set bit, so each lane ORs its own non-zero words with a shared-memory atomic: no
// warp-wide reduction per tile, and OR gives the same bits in any order.
__device__ inline void or_kept_rows(const TileRows& rows, Word kept, int lane, Word* removed_col) {
  const Word mine = (((kept >> lane) & 1) ? rows.low : 0) | (((kept >> (lane + 32)) & 1) ? rows.high : 0);
  if (mine) atomicOr(removed_col, mine);
}

// Which rows of a block are kept, given the rows removed by earlier blocks and the block's diagonal tile
// (lane l holds rows l and l + 32). The greedy rule, row by row, is
//     kept(k) = not removed(k) and no kept row j < k suppresses k.
// Walking k = 0..63 would be 64 dependent steps. Instead start from "every row not removed is kept" and
// repeat  kept = not removed and not (OR of the kept rows' words)  until nothing changes. Row k's word only
// has bits above k, so the OR's bit k comes from rows before k only; each round therefore fixes at least the
// next row in order (after r rounds rows 0..r-1 are final), and the rule's unique solution is reached in as
// many rounds as the longest chain of "kept row suppresses a later row" inside the block, usually 1 to 3. A
// round is one warp-wide OR, so the whole step takes a few dozen cycles instead of hundreds.
__device__ inline Word kept_rows(const TileRows& diagonal, Word removed_rows, int lane) {
  Word kept = ~removed_rows;
  while (true) {
    const Word suppressed = warp_or((((kept >> lane) & 1) ? diagonal.low : 0) |
                                    (((kept >> (lane + 32)) & 1) ? diagonal.high : 0));
    const Word next = ~removed_rows & ~suppressed;
    if (next == kept) return kept;  // the same on every lane: warp_or returns one value to all
    kept = next;
  }
}

// Loads up to kPrefetchTiles of the tiles (b, first_column + l) named by the bits l of `pending`, lowest
// first, clears their bits and returns them. The loads are all issued before any is used.
__device__ inline unsigned load_tiles(TileRows (&rows)[kPrefetchTiles], unsigned& pending, const Word* mask, int b,
                                      int first_column, Word removed_b, int lane) {
  const unsigned before = pending;
#pragma unroll
  for (int s = 0; s < kPrefetchTiles; ++s) {
    if (pending) {
      const int col = first_column + __ffs(pending) - 1;
      pending &= pending - 1;
      rows[s] = load_tile_rows(mask, tile_index(b, col), true, removed_b, lane);
    }
  }
  return before & ~pending;
}

// ORs the kept rows of the tiles load_tiles returned as `loaded` into removed[].
__device__ inline void or_tiles(const TileRows (&rows)[kPrefetchTiles], unsigned loaded, Word kept, int first_column,
                                int lane, Word* removed) {
#pragma unroll
  for (int s = 0; s < kPrefetchTiles; ++s) {
    if (loaded) {
      const int col = first_column + __ffs(loaded) - 1;
      loaded &= loaded - 1;
      or_kept_rows(rows[s], kept, lane, &removed[col]);
    }
  }
}

// Step 3: the greedy pass (see the top of the file). One block of kReduceWarps warps; `removed` has one word
// per column block in dynamic shared memory. tile_nonzero is row-major: entry (b, c) at b * blocks + c. Writes
// keep[0 .. count) (or, when keep_mask is given, sets keep_mask[i] for each kept input row i) and
// status = {count, bad-input flags}.
//
// What each step costs, and why it is laid out this way. The whole pass runs on one SM, so it is bound by
// instructions issued and by memory latency (hundreds of cycles per dependent global load), not by bandwidth:
// - Only non-empty tiles are touched. Lane l of warp w holds the flag of column b + 1 + 32 w + l; one ballot
//   gives the warp its non-empty columns, and only those are loaded and ORed (most tiles are empty when the
//   boxes are spread out).
// - Nothing waits for a load it could have issued earlier: the flags of block b + 1 are loaded during block
//   b, and so are warp 0's diagonal words and input indices for block b + 1; the words of block b's tiles are
//   issued before warp 0's walk and arrive while it runs.
// - Step a is a few warp-wide rounds (kept_rows), not 64 dependent steps.
// Columns further right than 32 * kReduceWarps blocks (more than 32768 boxes) take a plain loop.
__global__ void __launch_bounds__(kReduceWarps * 32)
    nms_reduce_kernel(int64_t n, int blocks, const Word* mask, const unsigned char* tile_nonzero,
                      const int64_t* order, const unsigned char* bad_flags, int bad_flag_count, int64_t* keep,
                      bool* keep_mask, int64_t* status) {
  // Segmented (mask mode only): block s runs the pass of segment s, its n rows, tiles and flags at their own
  // offsets; the segments never interact, so they run side by side on as many SMs.
  const int64_t segment = blockIdx.x;
  mask += segment * (int64_t(blocks) * (blocks + 1) / 2) * kBoxesPerBlock;
  tile_nonzero += segment * int64_t(blocks) * blocks;
  order += segment * n;
  if (keep_mask) keep_mask += segment * n;  // order holds indices within the segment
  extern __shared__ Word removed[];
  __shared__ Word kept_shared;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // Rows past n in the last block do not exist: mark them removed so they are never kept.
  for (int c = threadIdx.x; c < blocks; c += blockDim.x) {
    const int64_t tail = n - int64_t(c) * kBoxesPerBlock;
    removed[c] = tail >= kBoxesPerBlock ? Word(0) : ~Word(0) << tail;
  }
  // This lane's column of row block b, and whether that tile is non-empty (loaded one block ahead).
  auto lane_column = [&](int b) { return b + 1 + kColumnsPerWarp * warp + lane; };
  auto column_flag = [&](int b) {
    const int col = lane_column(b);
    return col < blocks && tile_nonzero[int64_t(b) * blocks + col] != 0;
  };
  bool flag = column_flag(0);
  TileRows diagonal;  // warp 0: block b's diagonal tile (always written by the mask kernel)
  int64_t order_low = 0, order_high = 0;  // warp 0: input indices of block b's rows lane and lane + 32
  if (warp == 0) {
    diagonal = load_tile_rows(mask, tile_index(0, 0), true, 0, lane);
    order_low = lane < n ? order[lane] : 0;
    order_high = lane + 32 < n ? order[lane + 32] : 0;
  }
  // The gather kernel's per-block verdicts on NaN / Inf, merged by the whole block (the barrier of this
  // start-up as well).
  int bad_box = 0, bad_score = 0;
  for (int f = threadIdx.x; f < bad_flag_count; f += blockDim.x) {
    bad_box |= bad_flags[f] & kBadBox;
    bad_score |= bad_flags[f] & kBadScore;
  }
  bad_box = __syncthreads_or(bad_box);
  bad_score = __syncthreads_or(bad_score);

  int64_t count = 0;  // kept so far (warp 0's copy is the one used)
  for (int b = 0; b < blocks; ++b) {
    const Word removed_b = removed[b];  // final: every earlier block has ORed into it
    // This warp's non-empty tiles of row block b (bit l: column lane_column(b) of lane l). A block whose rows
    // are all removed keeps nothing and so suppresses nothing.
    const unsigned nonempty = removed_b == ~Word(0) ? 0u : __ballot_sync(kFullWarp, flag);
    flag = column_flag(b + 1);
    // Issue the loads of the first kPrefetchTiles of them; they are consumed after step a.
    const int first_column = b + 1 + kColumnsPerWarp * warp;
    TileRows prefetched[kPrefetchTiles];
    unsigned pending = nonempty;
    const unsigned loaded = load_tiles(prefetched, pending, mask, b, first_column, removed_b, lane);
    // Step a: warp 0 finds which rows of block b are kept.
    if (warp == 0) {
      const Word kept = kept_rows(diagonal, removed_b, lane);
      // Kept boxes of this block, in row order, after the `count` kept before.
      const Word below_low = (Word(1) << lane) - 1;
      if (keep_mask) {  // mask mode: mark the kept input rows (the mask starts all false)
        if ((kept >> lane) & 1) keep_mask[order_low] = true;
        if ((kept >> (lane + 32)) & 1) keep_mask[order_high] = true;
      } else {
        if ((kept >> lane) & 1) keep[count + __popcll(kept & below_low)] = order_low;
        if ((kept >> (lane + 32)) & 1) keep[count + __popcll(kept & ((below_low << 32) | 0xffffffffull))] = order_high;
      }
      count += __popcll(kept);
      if (lane == 0) kept_shared = kept;
      // Next block's diagonal words and input indices.
      if (b + 1 < blocks) {
        diagonal = load_tile_rows(mask, tile_index(b + 1, b + 1), true, 0, lane);
        const int64_t row0 = int64_t(b + 1) * kBoxesPerBlock;
        order_low = row0 + lane < n ? order[row0 + lane] : 0;
        order_high = row0 + lane + 32 < n ? order[row0 + lane + 32] : 0;
      }
    }
    __syncthreads();
    const Word kept = kept_shared;
    // Step b: OR the kept rows of this warp's non-empty tiles into removed[column]: the prefetched ones, then
    // any further ones, then the far columns.
    if (kept) {
      or_tiles(prefetched, loaded, kept, first_column, lane, removed);
      while (pending) {  // more than kPrefetchTiles non-empty tiles: the rest, a batch of loads at a time
        const unsigned batch = load_tiles(prefetched, pending, mask, b, first_column, removed_b, lane);
        or_tiles(prefetched, batch, kept, first_column, lane, removed);
      }
      for (int col = b + 1 + kColumnsPerWarp * kReduceWarps + warp; col < blocks; col += kReduceWarps)
        if (tile_nonzero[int64_t(b) * blocks + col])
          or_kept_rows(load_tile_rows(mask, tile_index(b, col), true, removed_b, lane), kept, lane, &removed[col]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(reinterpret_cast<unsigned long long*>(&status[0]), static_cast<unsigned long long>(count));
    status[1] = (bad_box ? kBadBox : 0) | (bad_score ? kBadScore : 0);  // the same value from every segment
  }
}

// Queues the four steps; writes the kept rows as a list (keep) or as a mask (keep_mask, all false before),
// and (count, flags) into status. Nothing is copied to the host here.
template <typename T>
void launch_nms(const char* op, const NmsArgs& args, const Tensor& keep, const Tensor& keep_mask,
                const Tensor& status) {
  const int64_t n = args.boxes.size(0), segments = args.segments, length = n / segments;
  const Device device = args.boxes.device();
  const bool batched = args.class_ids.defined();

  // Scratch from the caching allocator (no cudaMalloc once warm), returned when these tensors die.
  const Tensor sorted_boxes = empty({n, 4}, args.boxes.options());
  const Tensor areas = empty({n}, args.boxes.options());
  const Tensor sorted_classes = batched ? empty({n}, TensorOptions(kInt64, device)) : Tensor();
  const int gather_blocks = static_cast<int>(std::min<int64_t>((n + kGatherThreads - 1) / kGatherThreads, 1024));
  const Tensor bad_flags = empty({gather_blocks}, TensorOptions(kUInt8, device));
  const int64_t* classes = batched ? args.class_ids.data<int64_t>() : nullptr;
  int64_t* sorted_class_data = batched ? sorted_classes.data<int64_t>() : nullptr;

  nms_gather_kernel<T><<<gather_blocks, kGatherThreads, 0, cuda::current_stream()>>>(
      n, args.boxes.data<T>(), args.scores.data<T>(), classes, args.order.data<int64_t>(),
      segments > 1 ? length : n, T(args.offset), sorted_boxes.data<T>(), areas.data<T>(), sorted_class_data,
      bad_flags.data<uint8_t>());
  MINIDET_CUDA_LAUNCH_CHECK("nms_gather_kernel");
  const nms_bitmask::Pass pass =
      nms_bitmask::make_pass(length, segments, sorted_class_data, args.order, bad_flags, keep, keep_mask, status);
  const AxisAlignedRule<T> rule{sorted_boxes.data<T>(), areas.data<T>(), static_cast<T>(args.iou_threshold),
                                T(args.offset)};
  nms_bitmask::launch_nms_bitmask(op, rule, pass, device);  // steps 2 and 3
}

template <typename T>
Tensor nms_cuda_typed(const char* op, const NmsArgs& args) {
  const Tensor keep = empty({args.boxes.size(0)}, TensorOptions(kInt64, args.boxes.device()));
  const Tensor status = zeros({2}, TensorOptions(kInt64, args.boxes.device()));  // the count is added into
  launch_nms<T>(op, args, keep, Tensor(), status);
  // The one synchronisation: the result's length (and the finite-value check) must reach the host.
  const std::vector<int64_t> host_status = status.to_vector<int64_t>();
  check_nms_status(op, host_status);
  return keep.narrow(0, 0, host_status[0]);
}

}  // namespace

// Step 3's launch, for every rule's mask (nms_bitmask.cuh).
void nms_bitmask::launch_nms_reduce(const Pass& pass, int64_t blocks, const Word* mask,
                                    const unsigned char* tile_nonzero) {
  const size_t removed_bytes = static_cast<size_t>(blocks) * sizeof(Word);
  cuda::opt_in_to_shared_memory(nms_reduce_kernel, removed_bytes);  // up to 227 KB on Hopper
  nms_reduce_kernel<<<static_cast<unsigned>(pass.segments), kReduceWarps * 32, removed_bytes,
                      cuda::current_stream()>>>(pass.length, static_cast<int>(blocks), mask, tile_nonzero, pass.order,
                                                pass.bad_flags, pass.bad_flag_count, pass.keep, pass.keep_mask,
                                                pass.status);
  MINIDET_CUDA_LAUNCH_CHECK("nms_reduce_kernel");
}

Tensor nms_cuda(const char* op, const NmsArgs& args) {
  cuda::DeviceGuard guard(args.boxes.device());
  return MINIDET_DISPATCH_FLOATING(args.boxes.dtype(), op, [&] { return nms_cuda_typed<scalar_t>(op, args); });
}

NmsMask nms_mask_cuda(const char* op, const NmsArgs& args) {
  cuda::DeviceGuard guard(args.boxes.device());
  NmsMask result;
  result.keep_mask = zeros({args.boxes.size(0)}, TensorOptions(kBool, args.boxes.device()));
  result.status = zeros({2}, TensorOptions(kInt64, args.boxes.device()));  // the count is added into
  MINIDET_DISPATCH_FLOATING(args.boxes.dtype(), op,
                            [&] { launch_nms<scalar_t>(op, args, Tensor(), result.keep_mask, result.status); });
  return result;
}

}  // namespace minidet::ops::detail
