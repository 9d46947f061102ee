// Whether CUDA is usable, asked without including any CUDA header, so CPU-only code and tests can ask.
#pragma once

namespace minidet::cuda {

// True when minidet was built with CUDA and at least one GPU answers. Never throws.
bool is_available();
// Number of visible GPUs; 0 when built without CUDA or when no driver or device is present.
int device_count();
// Blocks until all work on the current GPU has finished. No-op without CUDA.
void synchronize();

}  // namespace minidet::cuda
