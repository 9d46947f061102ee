// The scalar math of every elementwise op, written once for both the CPU loops and the CUDA kernels.
//
// Each op's formula is a compile-time branch (unary_formula<Op> and its binary and compare twins), and one
// switch per family (visit_*_op) turns a runtime op code into that compile-time constant. The CUDA kernel
// switches per element (apply_*: the op is the same for every thread, so the branch costs nothing
// measurable); the CPU switches once per call and runs a loop compiled for the op, whose contiguous case
// the compiler can vectorise. Adding an op means one enum value, one formula branch and one visit case.
#pragma once

#include <cmath>
#include <type_traits>

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

// ---- unary ----------------------------------------------------------------------------------------------
// The formula of op Op, fixed at compile time. A loop instantiated for one op (the CPU's) then has no
// switch inside, and its contiguous case can vectorise.
template <UnaryOp Op, typename T>
MINIDET_HOST_DEVICE inline T unary_formula(T x, double a, double b) {
  using std::cos;
  using std::exp;
  using std::floor;
  using std::log;
  using std::pow;
  using std::sin;
  using std::sqrt;
  using std::tanh;
  if constexpr (Op == UnaryOp::Neg) {
    return -x;
  } else if constexpr (Op == UnaryOp::Exp) {
    return static_cast<T>(exp(x));
  } else if constexpr (Op == UnaryOp::Log) {
    return static_cast<T>(log(x));
  } else if constexpr (Op == UnaryOp::Sqrt) {
    return static_cast<T>(sqrt(x));
  } else if constexpr (Op == UnaryOp::Abs) {
    return x < T(0) ? -x : x;
  } else if constexpr (Op == UnaryOp::Sign) {
    return static_cast<T>((x > T(0)) - (x < T(0)));
  } else if constexpr (Op == UnaryOp::Floor) {
    return static_cast<T>(floor(x));
  } else if constexpr (Op == UnaryOp::Relu) {
    // x != x is the NaN test (it works in device code too): relu(NaN) is NaN, as in PyTorch, not 0.
    return (x > T(0) || x != x) ? x : T(0);
  } else if constexpr (Op == UnaryOp::Sigmoid) {
    // 1 / (1 + e^-x) overflows e^-x for very negative x; use e^x / (1 + e^x) there instead.
    if (x >= T(0)) return static_cast<T>(T(1) / (T(1) + exp(-x)));
    const T e = static_cast<T>(exp(x));
    return e / (T(1) + e);
  } else if constexpr (Op == UnaryOp::Tanh) {
    return static_cast<T>(tanh(x));
  } else if constexpr (Op == UnaryOp::Sin) {
    return static_cast<T>(sin(x));
  } else if constexpr (Op == UnaryOp::Cos) {
    return static_cast<T>(cos(x));
  } else if constexpr (Op == UnaryOp::AddScalar) {
    return static_cast<T>(x + static_cast<T>(a));
  } else if constexpr (Op == UnaryOp::MulScalar) {
    return static_cast<T>(x * static_cast<T>(a));
  } else if constexpr (Op == UnaryOp::RSubScalar) {
    return static_cast<T>(static_cast<T>(a) - x);
  } else if constexpr (Op == UnaryOp::DivScalar) {
    return static_cast<T>(x / static_cast<T>(a));
  } else if constexpr (Op == UnaryOp::RDivScalar) {
    return static_cast<T>(static_cast<T>(a) / x);
  } else if constexpr (Op == UnaryOp::PowScalar) {
    return static_cast<T>(pow(x, static_cast<T>(a)));
  } else if constexpr (Op == UnaryOp::Clamp) {
    const T lo = static_cast<T>(a), hi = static_cast<T>(b);
    return x < lo ? lo : (x > hi ? hi : x);
  } else if constexpr (Op == UnaryOp::InRange) {
    return static_cast<T>(static_cast<T>(a) <= x && x <= static_cast<T>(b));
  } else {
    static_assert(Op == UnaryOp::Positive, "unary_formula: an op without a formula");
    return static_cast<T>(x > T(0));
  }
}

// The one switch from a runtime op code to a compile-time one: calls f(std::integral_constant<UnaryOp, op>{}),
// so f can instantiate unary_formula<op> (or a whole loop) for exactly that op.
template <typename F>
MINIDET_HOST_DEVICE inline decltype(auto) visit_unary_op(UnaryOp op, F&& f) {
  using O = UnaryOp;
  switch (op) {
    case O::Neg: return f(std::integral_constant<O, O::Neg>{});
    case O::Exp: return f(std::integral_constant<O, O::Exp>{});
    case O::Log: return f(std::integral_constant<O, O::Log>{});
    case O::Sqrt: return f(std::integral_constant<O, O::Sqrt>{});
    case O::Abs: return f(std::integral_constant<O, O::Abs>{});
    case O::Sign: return f(std::integral_constant<O, O::Sign>{});
    case O::Floor: return f(std::integral_constant<O, O::Floor>{});
    case O::Relu: return f(std::integral_constant<O, O::Relu>{});
    case O::Sigmoid: return f(std::integral_constant<O, O::Sigmoid>{});
    case O::Tanh: return f(std::integral_constant<O, O::Tanh>{});
    case O::Sin: return f(std::integral_constant<O, O::Sin>{});
    case O::Cos: return f(std::integral_constant<O, O::Cos>{});
    case O::AddScalar: return f(std::integral_constant<O, O::AddScalar>{});
    case O::MulScalar: return f(std::integral_constant<O, O::MulScalar>{});
    case O::RSubScalar: return f(std::integral_constant<O, O::RSubScalar>{});
    case O::DivScalar: return f(std::integral_constant<O, O::DivScalar>{});
    case O::RDivScalar: return f(std::integral_constant<O, O::RDivScalar>{});
    case O::PowScalar: return f(std::integral_constant<O, O::PowScalar>{});
    case O::Clamp: return f(std::integral_constant<O, O::Clamp>{});
    case O::InRange: return f(std::integral_constant<O, O::InRange>{});
    case O::Positive: break;
  }
  return f(std::integral_constant<O, O::Positive>{});  // the last op (every other one returned above)
}

// One element with the op chosen at run time (the CUDA kernel, box coding).
template <typename T>
MINIDET_HOST_DEVICE inline T apply_unary(UnaryOp op, T x, double a, double b) {
  return visit_unary_op(op, [&](auto kind) { return unary_formula<decltype(kind)::value>(x, a, b); });
}

// ---- binary -----------------------------------------------------------------------------------------------
template <BinaryOp Op, typename T>
MINIDET_HOST_DEVICE inline T binary_formula(T x, T y) {
  if constexpr (Op == BinaryOp::Add) {
    return x + y;
  } else if constexpr (Op == BinaryOp::Sub) {
    return x - y;
  } else if constexpr (Op == BinaryOp::Mul) {
    return x * y;
  } else if constexpr (Op == BinaryOp::Div) {
    // Reached with floating operands only: div() rejects integer dtypes, because an integer x / 0 traps
    // (SIGFPE) on the CPU, INT64_MIN / -1 is undefined behaviour, and the GPU returns garbage for both.
    return x / y;
  } else if constexpr (Op == BinaryOp::Maximum) {
    // A NaN on either side wins (x != x is the NaN test; always false for integers). Without the tests,
    // x >= y is false whenever either is NaN, so the result would depend on the operand order.
    return x != x ? x : (y != y ? y : (x >= y ? x : y));
  } else {
    static_assert(Op == BinaryOp::Minimum, "binary_formula: an op without a formula");
    return x != x ? x : (y != y ? y : (x <= y ? x : y));
  }
}

template <typename F>
MINIDET_HOST_DEVICE inline decltype(auto) visit_binary_op(BinaryOp op, F&& f) {
  using O = BinaryOp;
  switch (op) {
    case O::Add: return f(std::integral_constant<O, O::Add>{});
    case O::Sub: return f(std::integral_constant<O, O::Sub>{});
    case O::Mul: return f(std::integral_constant<O, O::Mul>{});
    case O::Div: return f(std::integral_constant<O, O::Div>{});
    case O::Maximum: return f(std::integral_constant<O, O::Maximum>{});
    case O::Minimum: break;
  }
  return f(std::integral_constant<O, O::Minimum>{});
}

template <typename T>
MINIDET_HOST_DEVICE inline T apply_binary(BinaryOp op, T x, T y) {
  return visit_binary_op(op, [&](auto kind) { return binary_formula<decltype(kind)::value>(x, y); });
}

// ---- compare ----------------------------------------------------------------------------------------------
template <CompareOp Op, typename T>
MINIDET_HOST_DEVICE inline bool compare_formula(T x, T y) {
  if constexpr (Op == CompareOp::Gt) {
    return x > y;
  } else if constexpr (Op == CompareOp::Lt) {
    return x < y;
  } else if constexpr (Op == CompareOp::Ge) {
    return x >= y;
  } else if constexpr (Op == CompareOp::Le) {
    return x <= y;
  } else if constexpr (Op == CompareOp::Eq) {
    return x == y;
  } else {
    static_assert(Op == CompareOp::Ne, "compare_formula: an op without a formula");
    return x != y;
  }
}

template <typename F>
MINIDET_HOST_DEVICE inline decltype(auto) visit_compare_op(CompareOp op, F&& f) {
  using O = CompareOp;
  switch (op) {
    case O::Gt: return f(std::integral_constant<O, O::Gt>{});
    case O::Lt: return f(std::integral_constant<O, O::Lt>{});
    case O::Ge: return f(std::integral_constant<O, O::Ge>{});
    case O::Le: return f(std::integral_constant<O, O::Le>{});
    case O::Eq: return f(std::integral_constant<O, O::Eq>{});
    case O::Ne: break;
  }
  return f(std::integral_constant<O, O::Ne>{});
}

template <typename T>
MINIDET_HOST_DEVICE inline bool apply_compare(CompareOp op, T x, T y) {
  return visit_compare_op(op, [&](auto kind) { return compare_formula<decltype(kind)::value>(x, y); });
}

}  // namespace minidet::ops
