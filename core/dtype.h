// Element types. Training uses float32; float64 exists for gradient checks; int64 for indices and labels;
// bool (stored as one byte) for masks; uint8 for decoded images.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "core/error.h"

namespace minidet {

enum class DType : int8_t { Float32, Float64, Int64, Bool, UInt8 };

constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kInt64 = DType::Int64;
constexpr DType kBool = DType::Bool;
constexpr DType kUInt8 = DType::UInt8;

size_t element_size(DType dtype);
const char* dtype_name(DType dtype);
DType parse_dtype(const std::string& name);
inline bool is_floating(DType dtype) { return dtype == kFloat32 || dtype == kFloat64; }
std::ostream& operator<<(std::ostream& out, DType dtype);

// The C++ type that stores each DType, and back.
template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = kFloat64; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = kInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = kBool; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = kUInt8; };

}  // namespace minidet

// Dispatch: run a generic lambda with `scalar_t` bound to the C++ type of a runtime dtype.
//
//   MINIDET_DISPATCH_FLOATING(x.dtype(), "relu", [&] { relu_kernel<scalar_t>(...); });
//
// An unsupported dtype throws an Error that names the op, so no kernel ever sees a type it was not written
// for. Bool is dispatched as bool (one byte, like uint8_t).
#define MINIDET_DTYPE_CASE(ENUM, TYPE, ...) \
  case ::minidet::DType::ENUM: {            \
    using scalar_t = TYPE;                  \
    return __VA_ARGS__();                   \
  }

#define MINIDET_DISPATCH_FAIL(DT, NAME, WHAT)                                                       \
  default:                                                                                          \
    MINIDET_FAIL(NAME, ": unsupported dtype ", ::minidet::dtype_name(DT), " (expected ", WHAT, ")")

#define MINIDET_DISPATCH_FLOATING(DT, NAME, ...)          \
  [&] {                                                   \
    switch (DT) {                                         \
      MINIDET_DTYPE_CASE(Float32, float, __VA_ARGS__)     \
      MINIDET_DTYPE_CASE(Float64, double, __VA_ARGS__)    \
      MINIDET_DISPATCH_FAIL(DT, NAME, "float32 or float64"); \
    }                                                     \
  }()

// Every dtype with arithmetic (all but bool).
#define MINIDET_DISPATCH_NUMERIC(DT, NAME, ...)           \
  [&] {                                                   \
    switch (DT) {                                         \
      MINIDET_DTYPE_CASE(Float32, float, __VA_ARGS__)     \
      MINIDET_DTYPE_CASE(Float64, double, __VA_ARGS__)    \
      MINIDET_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)     \
      MINIDET_DTYPE_CASE(UInt8, uint8_t, __VA_ARGS__)     \
      MINIDET_DISPATCH_FAIL(DT, NAME, "a numeric dtype (not bool)"); \
    }                                                     \
  }()

#define MINIDET_DISPATCH_ALL(DT, NAME, ...)               \
  [&] {                                                   \
    switch (DT) {                                         \
      MINIDET_DTYPE_CASE(Float32, float, __VA_ARGS__)     \
      MINIDET_DTYPE_CASE(Float64, double, __VA_ARGS__)    \
      MINIDET_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)     \
      MINIDET_DTYPE_CASE(Bool, bool, __VA_ARGS__)         \
      MINIDET_DTYPE_CASE(UInt8, uint8_t, __VA_ARGS__)     \
      MINIDET_DISPATCH_FAIL(DT, NAME, "any dtype");       \
    }                                                     \
  }()
