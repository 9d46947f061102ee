// Up-front memory checks for `minidet detect` and `minidet eval`: an image or a batch too large for this
// machine is refused in one line that names the bytes it would need, before they are allocated, instead of
// ending in std::bad_alloc (or the kernel's out-of-memory killer) halfway through a forward pass.
//
// inference_bytes() is a lower bound on the host memory of one forward pass over `images` images padded to
// height x width:
//   the float32 batch, 12 bytes a pixel, alive for the whole pass;
//   on the CPU, plus the backbone's largest 3x3 convolution: its im2col columns for one image
//   (in_channels x 9 floats per output position, ops/conv2d/conv2d_lowering.h) and its output for the batch.
// The real peak is higher (the norms, the shortcuts, the heads), so a size it refuses could never run. On a
// GPU the device's share is the caching allocator's to refuse (its out-of-memory error names the request);
// only the host's share is checked here. Sizes are doubles so that an absurd --resize cannot overflow.
#pragma once

#include <string>

#include "core/device.h"
#include "models/backbone/backbone.h"

namespace minidet::cli {

double inference_bytes(const models::BackboneOptions& backbone, Device device, double images, double height,
                       double width);

// Throws "<what> needs at least <bytes> of memory for the forward pass ..., more than this machine's <bytes>;
// <advice>" when inference_bytes() exceeds the machine's physical memory.
void check_inference_memory(const models::BackboneOptions& backbone, Device device, double images, double height,
                            double width, const std::string& what, const std::string& advice);

}  // namespace minidet::cli
