#include "core/dtype.h"

namespace minidet {

size_t element_size(DType dtype) {
  switch (dtype) {
    case kFloat32: return 4;
    case kFloat64: return 8;
    case kInt64: return 8;
    case kBool: return 1;
    case kUInt8: return 1;
  }
  MINIDET_FAIL("element_size: unknown dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case kFloat32: return "float32";
    case kFloat64: return "float64";
    case kInt64: return "int64";
    case kBool: return "bool";
    case kUInt8: return "uint8";
  }
  return "unknown";
}

DType parse_dtype(const std::string& name) {
  for (DType d : {kFloat32, kFloat64, kInt64, kBool, kUInt8}) {
    if (name == dtype_name(d)) return d;
  }
  MINIDET_FAIL("parse_dtype: unknown dtype '", name, "' (expected float32, float64, int64, bool or uint8)");
}

std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

}  // namespace minidet
