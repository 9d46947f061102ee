// V neighbouring elements in 16-byte accesses where the type allows: float4 for float32 (V a multiple of 4),
// double2 for float64 (V even), else V scalar accesses. One 16-byte access is one instruction and, for a
// team of lanes reading consecutive vectors, whole 32-byte sectors: the reason the channel-last kernels give
// each lane a vector of channels. The caller makes p 16-byte aligned whenever a vector access is taken.
#pragma once

#include <cuda_runtime.h>  // float4, double2

#include <type_traits>

namespace minidet::ops::detail::vectors {

template <int V, typename T>
__device__ inline void load_vector(const T* p, T out[V]) {
  if constexpr (std::is_same_v<T, float> && V % 4 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 4) {
      const float4 f = reinterpret_cast<const float4*>(p)[i / 4];
      out[i] = f.x, out[i + 1] = f.y, out[i + 2] = f.z, out[i + 3] = f.w;
    }
  } else if constexpr (std::is_same_v<T, double> && V % 2 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      const double2 f = reinterpret_cast<const double2*>(p)[i / 2];
      out[i] = f.x, out[i + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = p[i];
  }
}

template <int V, typename T>
__device__ inline void store_vector(T* p, const T v[V]) {
  if constexpr (std::is_same_v<T, float> && V % 4 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 4)
      reinterpret_cast<float4*>(p)[i / 4] = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
  } else if constexpr (std::is_same_v<T, double> && V % 2 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 2) reinterpret_cast<double2*>(p)[i / 2] = make_double2(v[i], v[i + 1]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = v[i];
  }
}

}  // namespace minidet::ops::detail::vectors
