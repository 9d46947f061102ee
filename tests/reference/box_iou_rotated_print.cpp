// box_iou_rotated_print: prints minidet's CPU box_iou_rotated matrix for boxes read from a text file, for
// tests/reference/box_iou_rotated_reference.py to compare with shapely's polygon areas.
//
//   box_iou_rotated_print BOXES_FILE [float32|float64]
//
// BOXES_FILE holds "N M", then N rows and M rows of 5 numbers (cx cy w h angle), whitespace-separated. The
// output is N lines of M IoUs, each printed with %.17g (enough digits to give back a float64 exactly).
// The computation runs in the dtype named (float64 by default); the boxes are read as float64 first.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "core/factories.h"
#include "ops/box_iou_rotated/box_iou_rotated.h"

int main(int argc, char** argv) {
  using namespace minidet;
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s BOXES_FILE [float32|float64]\n", argv[0]);
    return 2;
  }
  const std::string dtype_name = argc == 3 ? argv[2] : "float64";
  if (dtype_name != "float32" && dtype_name != "float64") {
    std::fprintf(stderr, "box_iou_rotated_print: unknown dtype '%s' (float32 or float64)\n", dtype_name.c_str());
    return 2;
  }
  std::FILE* file = std::fopen(argv[1], "r");
  if (!file) {
    std::fprintf(stderr, "box_iou_rotated_print: cannot open %s\n", argv[1]);
    return 2;
  }
  int64_t n = -1, m = -1;
  bool ok = std::fscanf(file, "%" SCNd64 " %" SCNd64, &n, &m) == 2 && n >= 0 && m >= 0;
  std::vector<double> values(ok ? static_cast<size_t>(5 * (n + m)) : 0);
  for (size_t k = 0; ok && k < values.size(); ++k) ok = std::fscanf(file, "%lf", &values[k]) == 1;
  std::fclose(file);
  if (!ok) {
    std::fprintf(stderr, "box_iou_rotated_print: %s is not \"N M\" followed by N + M rows of 5 numbers\n", argv[1]);
    return 2;
  }
  try {
    const DType dtype = dtype_name == "float32" ? kFloat32 : kFloat64;
    const std::vector<double> first(values.begin(), values.begin() + 5 * n), second(values.begin() + 5 * n, values.end());
    const Tensor boxes1 = from_vector<double>(first, {n, 5}).to(dtype);
    const Tensor boxes2 = from_vector<double>(second, {m, 5}).to(dtype);
    const std::vector<double> iou = box_iou_rotated(boxes1, boxes2).to(kFloat64).to_vector<double>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) std::printf("%.17g%c", iou[i * m + j], j + 1 < m ? ' ' : '\n');
  } catch (const std::exception& e) {
    std::fprintf(stderr, "box_iou_rotated_print: %s\n", e.what());
    return 1;
  }
  return 0;
}
