// The scalar math of every elementwise op, written once for both the CPU loops and the CUDA kernels.
//
// An op code selects the formula inside one generic kernel (a switch on a value that is the same for every
// thread costs nothing measurable), so adding an elementwise op means adding one enum value and one case.
#pragma once

#include <cmath>

#include "core/macros.h"

namespace minidet::ops {

enum class UnaryOp {
  Neg,
  Exp,
  Log,
  Sqrt,
  Abs,
  Sign,
  Floor,
  Relu,
  Sigmoid,
  Tanh,
  Sin,
  Cos,
  AddScalar,   // x + a
  MulScalar,   // x * a
  RSubScalar,  // a - x
  DivScalar,   // x / a
  RDivScalar,  // a / x
  PowScalar,   // x ^ a
  Clamp,       // min(max(x, a), b)
  InRange,     // 1 where a <= x <= b, else 0 (clamp's gradient mask)
  Positive,    // 1 where x > 0, else 0 (relu's gradient mask)
};

enum class BinaryOp { Add, Sub, Mul, Div, Maximum, Minimum };

enum class CompareOp { Gt, Lt, Ge, Le, Eq, Ne };

template <typename T>
MINIDET_HOST_DEVICE inline T apply_unary(UnaryOp op, T x, double a, double b) {
  using std::exp;
  using std::floor;
  using std::log;
  using std::pow;
  using std::sqrt;
  using std::tanh;
  using std::sin;
  using std::cos;
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return static_cast<T>(exp(x));
    case UnaryOp::Log: return static_cast<T>(log(x));
    case UnaryOp::Sqrt: return static_cast<T>(sqrt(x));
    case UnaryOp::Abs: return x < T(0) ? -x : x;
    case UnaryOp::Sign: return static_cast<T>((x > T(0)) - (x < T(0)));
    case UnaryOp::Floor: return static_cast<T>(floor(x));
    // x != x is the NaN test (it works in device code too): relu(NaN) is NaN, as in PyTorch, not 0.
    case UnaryOp::Relu: return (x > T(0) || x != x) ? x : T(0);
    // 1 / (1 + e^-x) overflows e^-x for very negative x; use e^x / (1 + e^x) there instead.
    case UnaryOp::Sigmoid: {
      if (x >= T(0)) return static_cast<T>(T(1) / (T(1) + exp(-x)));
      const T e = static_cast<T>(exp(x));
      return e / (T(1) + e);
    }
    case UnaryOp::Tanh: return static_cast<T>(tanh(x));
    case UnaryOp::Sin: return static_cast<T>(sin(x));
    case UnaryOp::Cos: return static_cast<T>(cos(x));
    case UnaryOp::AddScalar: return static_cast<T>(x + static_cast<T>(a));
    case UnaryOp::MulScalar: return static_cast<T>(x * static_cast<T>(a));
    case UnaryOp::RSubScalar: return static_cast<T>(static_cast<T>(a) - x);
    case UnaryOp::DivScalar: return static_cast<T>(x / static_cast<T>(a));
    case UnaryOp::RDivScalar: return static_cast<T>(static_cast<T>(a) / x);
    case UnaryOp::PowScalar: return static_cast<T>(pow(x, static_cast<T>(a)));
    case UnaryOp::Clamp: {
      const T lo = static_cast<T>(a), hi = static_cast<T>(b);
      return x < lo ? lo : (x > hi ? hi : x);
    }
    case UnaryOp::InRange: return static_cast<T>(static_cast<T>(a) <= x && x <= static_cast<T>(b));
    case UnaryOp::Positive: return static_cast<T>(x > T(0));
  }
  return x;
}

template <typename T>
MINIDET_HOST_DEVICE inline T apply_binary(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::Add: return x + y;
    case BinaryOp::Sub: return x - y;
    case BinaryOp::Mul: return x * y;
    // Reached with floating operands only: div() rejects integer dtypes, because an integer x / 0 traps
    // (SIGFPE) on the CPU, INT64_MIN / -1 is undefined behaviour, and the GPU returns garbage for both.
    case BinaryOp::Div: return x / y;
    // A NaN on either side wins (x != x is the NaN test; always false for integers). Without the tests,
    // x >= y is false whenever either is NaN, so the result would depend on the operand order.
    case BinaryOp::Maximum: return x != x ? x : (y != y ? y : (x >= y ? x : y));
    case BinaryOp::Minimum: return x != x ? x : (y != y ? y : (x <= y ? x : y));
  }
  return x;
}

template <typename T>
MINIDET_HOST_DEVICE inline bool apply_compare(CompareOp op, T x, T y) {
  switch (op) {
    case CompareOp::Gt: return x > y;
    case CompareOp::Lt: return x < y;
    case CompareOp::Ge: return x >= y;
    case CompareOp::Le: return x <= y;
    case CompareOp::Eq: return x == y;
    case CompareOp::Ne: return x != y;
  }
  return false;
}

}  // namespace minidet::ops
