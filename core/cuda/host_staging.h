// Host-to-device copies that do not make the host wait: a pinned staging ring per GPU.
//
// cudaMemcpy from pageable (ordinary) host memory is synchronous: the driver first waits for the work
// already queued on the stream, then stages the bytes through its own pinned buffer, and only then returns.
// A training step that uploads its batch (images, boxes, labels: a few copies per image) therefore waits for
// the previous step's kernels to finish before it can queue anything: the host never runs ahead of the GPU.
//
// Here each copy goes instead through a ring of page-locked host memory:
//
//   host:  memcpy src -> ring[begin, end)      (returns at once)
//   GPU:   cudaMemcpyAsync ring -> dst, then record `done` on minidet's stream (stream order: the kernels
//          that read dst run after it)
//
// The host writes a region of the ring again only after the `done` event of every copy that used it has
// completed. All copies are queued on the one stream, so they complete in order: waiting for the oldest
// chunks first is waiting for exactly what is needed. The ring is 64 MiB per GPU, allocated on the first
// copy; a copy larger than a quarter of it (or any copy, when pinned memory cannot be had) is left to the
// caller's plain cudaMemcpy.
//
// Semantics are unchanged for the caller: when the call returns, `src` may be modified or freed (its bytes
// are in the ring), and every later kernel or copy on the stream sees the new values of `dst`.
#pragma once

#include <cstddef>

namespace minidet::cuda {

inline constexpr size_t kStagingRingBytes = size_t{64} << 20;
inline constexpr size_t kMaxStagedCopyBytes = kStagingRingBytes / 4;

// Copies nbytes from host memory src to device memory dst on GPU `device` through the ring, in the order of
// the device's stream. Returns false, doing nothing, when the copy is too large for the ring or pinned memory
// is not available; the caller then copies synchronously. Thread-safe.
bool copy_to_device_staged(void* dst, const void* src, size_t nbytes, int device);

}  // namespace minidet::cuda
