// Whether CUDA is usable, asked without including any CUDA header, so CPU-only code and tests can ask.
#pragma once

#include <string>

namespace minidet::cuda {

// True when minidet was built with CUDA and at least one GPU answers. Never throws.
bool is_available();
// Number of visible GPUs; 0 when built without CUDA or when no driver or device is present.
int device_count();
// GPU `device`'s PCI bus id ("0000:1b:00.0"): which card it is, whatever CUDA_VISIBLE_DEVICES numbers it.
// Empty when built without CUDA or when the device does not answer.
std::string pci_bus_id(int device);
// Blocks until all work on the current GPU has finished. No-op without CUDA.
void synchronize();
// Throws "<what>: minidet was built without CUDA ...": what a CUDA-only facility does in a CPU-only build.
[[noreturn]] void fail_without_cuda(const char* what);

}  // namespace minidet::cuda
