// Backbone: a small ResNet-style feature extractor, images (N, C_in, H, W) -> features (N, F, H/s, W/s).
//
//   stem      conv 3x3, stride 2 -> norm -> ReLU                                    (N, stem, H/2, W/2)
//   stage i   blocks[i] basic blocks of width widths[i]; the first one has stride strides[i]
//   output    the last stage: F = widths.back() channels, total stride s = 2 * prod(strides)
//
// The defaults (stem 32, widths 32-64-128-128, one block per stage, strides 1-2-2-1) give stride 8 and 128
// channels: a 128 px image becomes a 16 x 16 feature map, the RPN's and RoI heads' input.
//
// A basic block (He et al. 2016, the block of ResNet-18/34), with x its input:
//   y = ReLU( norm2(conv2(ReLU(norm1(conv1(x))))) + shortcut(x) )
//   conv1: 3x3, stride s; conv2: 3x3, stride 1 (both padding 1)
//   shortcut(x) = x, or norm(conv 1x1 stride s (x)) when the stride or the width changes (the projection
//   shortcut, so the sum has matching shapes).
//
// Deformable last stage (options.deformable_last_stage, on by default): in every block of the last stage,
// conv1 is an nn::DeformConv2d (nn/layers/deform_conv2d.h; the op's math: ops/deform_conv2d/deform_conv2d.h).
// A zero-initialised 3x3 conv predicts, from the block's input, a (dy, dx) offset for each of the 9 taps at
// every output position, and the conv samples its input there by bilinear interpolation, so the last
// features can follow an object's shape instead of a fixed square grid. Because the offsets start at 0, a
// fresh DCNv1 block computes exactly the plain block; options.modulated_deformable (DCNv2) also predicts a
// sigmoid mask per tap, which starts at 0.5 everywhere. The offsets get their gradient through the bilinear
// weights (dS/dy, dS/dx), so the loss teaches the network where to look.
//
// Norm layers, by options.norm:
// - BatchNorm: nn::BatchNorm2d, batch statistics in training and running ones in eval. Convs that feed a
//   norm have no bias (the norm's own bias replaces it), as in torchvision's ResNet.
// - SyncBatchNorm: nn::SyncBatchNorm2d, BatchNorm whose training statistics are those of every rank's images
//   in a data-parallel job (ops/sync_batch_norm/sync_batch_norm.h), as detectron2 and mmdet train detectors
//   on a few images per GPU; with one rank it is BatchNorm.
// - FrozenBatchNorm: nn::FrozenBatchNorm2d, a fixed affine map (identity until statistics are loaded), as
//   detection backbones use when a batch of a few images gives unreliable statistics. It has nothing to
//   learn, so the convs in front of it keep their bias.
//
// Weights: convs use Kaiming-normal (fan_out, ReLU gain), as torchvision's ResNet; norms start at weight 1,
// bias 0. All draws come from options.generator (the default generator when null), so a seed fixes them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "nn/layers/sequential.h"
#include "nn/module/module.h"

namespace minidet::models {

enum class NormKind { BatchNorm, SyncBatchNorm, FrozenBatchNorm };

struct BackboneOptions {
  int64_t in_channels = 3;
  int64_t stem_channels = 32;
  std::vector<int64_t> widths = {32, 64, 128, 128};  // output channels of each stage
  std::vector<int64_t> blocks = {1, 1, 1, 1};        // basic blocks per stage
  std::vector<int64_t> strides = {1, 2, 2, 1};       // stride of each stage's first block
  NormKind norm = NormKind::BatchNorm;
  bool deformable_last_stage = true;  // conv1 of every last-stage block is a DeformConv2d
  bool modulated_deformable = false;  // DCNv2: the deformable convs also predict a mask
  Generator* generator = nullptr;     // weight initialisation
};

const char* norm_kind_name(NormKind kind);

// How a block builds its convs: norm kind, deformable conv1 (DCNv1 or v2), the generator for the weights.
struct BlockOptions {
  NormKind norm = NormKind::BatchNorm;
  bool deformable = false;
  bool modulated = false;
  Generator* generator = nullptr;
};

// One basic block (see above).
class BasicBlock final : public nn::UnaryModule {
 public:
  BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride, const BlockOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  std::shared_ptr<nn::UnaryModule> conv1, norm1, conv2, norm2;  // conv1: Conv2d or DeformConv2d
  std::shared_ptr<nn::Sequential> shortcut;  // null for the identity shortcut
  int64_t stride;
};

class Backbone final : public nn::UnaryModule {
 public:
  explicit Backbone(BackboneOptions options = {});
  // images (N, in_channels, H, W), float32 or float64, on the module's device -> (N, out_channels, h, w).
  // Every stride-2 conv maps a size S to ceil(S / 2), so h = H / stride() when stride() divides H.
  Tensor forward(const Tensor& images) override;
  int64_t out_channels() const { return options_.widths.back(); }
  int64_t stride() const;  // total stride: 2 (the stem) times every stage's stride
  const BackboneOptions& options() const { return options_; }

  std::shared_ptr<nn::Sequential> stem;
  std::vector<std::shared_ptr<nn::Sequential>> stages;  // registered as stage1, stage2, ...

 private:
  BackboneOptions options_;
};

}  // namespace minidet::models
