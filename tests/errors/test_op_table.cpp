// The bad-input table of the public ops: every op, called with what it must refuse, throws minidet::Error
// whose message names the op. Rows are generated where the pattern is the same for a family of ops
// (an undefined tensor for every op; wrong shapes, dtypes and ranks for the binary ops; NaN/Inf for the ops
// whose values index memory), and written out where each op has its own rules. Empty inputs are legal and
// have documented results: the last case checks them.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/factories.h"
#include "ops/batch_norm/batch_norm.h"
#include "ops/box_coding/box_coding.h"
#include "ops/boxes/boxes.h"
#include "ops/conv2d/conv2d.h"
#include "ops/deform_conv2d/deform_conv2d.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/indexing/gather.h"
#include "ops/indexing/index_select.h"
#include "ops/indexing/nonzero.h"
#include "ops/indexing/where.h"
#include "ops/loss/cross_entropy.h"
#include "ops/loss/pointwise_loss.h"
#include "ops/matmul/linear.h"
#include "ops/matmul/matmul.h"
#include "ops/nms/nms.h"
#include "ops/pooling/pool2d.h"
#include "ops/reduction/reduction.h"
#include "ops/roi_align/roi_align.h"
#include "ops/roi_align_rotated/roi_align_rotated.h"
#include "ops/roi_pool/roi_pool.h"
#include "ops/shape/shape.h"
#include "ops/softmax/softmax.h"
#include "ops/sort/sort.h"
#include "tests/errors/bad_call.h"
#include "tests/support.h"

using namespace minidet;

namespace {

using test::BadCall;  // here the fragment is the op's name

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Tensor f32(const Shape& s) { return rand(s, kFloat32); }
Tensor i64(const Shape& s) { return zeros(s, kInt64); }

std::vector<BadCall> unary_rows() {
  const Tensor U;
  std::vector<BadCall> rows;
  const std::vector<std::pair<std::string, std::function<void(const Tensor&)>>> ops = {
      {"neg", [](const Tensor& x) { neg(x); }},           {"exp", [](const Tensor& x) { exp(x); }},
      {"log", [](const Tensor& x) { log(x); }},           {"sqrt", [](const Tensor& x) { sqrt(x); }},
      {"abs", [](const Tensor& x) { abs(x); }},           {"sign", [](const Tensor& x) { sign(x); }},
      {"floor", [](const Tensor& x) { floor(x); }},
      {"relu", [](const Tensor& x) { relu(x); }},         {"sigmoid", [](const Tensor& x) { sigmoid(x); }},
      {"tanh", [](const Tensor& x) { tanh(x); }},         {"square", [](const Tensor& x) { square(x); }},
      {"pow", [](const Tensor& x) { pow(x, 2.0); }},      {"clamp", [](const Tensor& x) { clamp(x, 0, 1); }},
      {"softmax", [](const Tensor& x) { softmax(x, 0); }}, {"log_softmax", [](const Tensor& x) { log_softmax(x, 0); }},
      {"sum", [](const Tensor& x) { sum(x); }},           {"mean", [](const Tensor& x) { mean(x); }},
      {"max", [](const Tensor& x) { max(x); }},           {"min", [](const Tensor& x) { min(x); }},
      {"argmax", [](const Tensor& x) { argmax(x, 0); }},  {"argmin", [](const Tensor& x) { argmin(x, 0); }},
      {"topk", [](const Tensor& x) { topk(x, 1); }},      {"sort", [](const Tensor& x) { sort(x); }},
      {"argsort", [](const Tensor& x) { argsort(x); }},   {"nonzero", [](const Tensor& x) { nonzero(x); }},
      {"box_area", [](const Tensor& x) { box_area(x); }},
      {"box_xyxy_to_cxcywh", [](const Tensor& x) { box_xyxy_to_cxcywh(x); }},
      {"box_cxcywh_to_xyxy", [](const Tensor& x) { box_cxcywh_to_xyxy(x); }},
      {"clip_boxes_to_image", [](const Tensor& x) { clip_boxes_to_image(x, 10, 10); }},
      {"remove_small_boxes", [](const Tensor& x) { remove_small_boxes(x, 1); }},
      {"flatten", [](const Tensor& x) { flatten(x); }},   {"unsqueeze", [](const Tensor& x) { unsqueeze(x, 0); }},
      {"permute", [](const Tensor& x) { permute(x, {0}); }}, {"reshape", [](const Tensor& x) { reshape(x, {-1}); }},
  };
  for (const auto& [name, fn] : ops) rows.push_back({name, "an undefined input", [fn = fn, U] { fn(U); }});
  // Floating-only math on integers.
  for (const auto& [name, fn] : ops) {
    if (name != "exp" && name != "log" && name != "sqrt" && name != "sigmoid" && name != "tanh" && name != "softmax" &&
        name != "log_softmax" && name != "mean")
      continue;
    rows.push_back({name, "an int64 input", [fn = fn] { fn(i64({3})); }});
  }
  // A dim out of range.
  rows.push_back({"softmax", "dim 2 of a 2-D tensor", [] { softmax(f32({2, 3}), 2); }});
  rows.push_back({"argmax", "dim -3 of a 2-D tensor", [] { argmax(f32({2, 3}), -3); }});
  rows.push_back({"topk", "k larger than the dim", [] { topk(f32({2, 3}), 4); }});
  rows.push_back({"topk", "negative k", [] { topk(f32({2, 3}), -1); }});
  rows.push_back({"sort", "dim 5", [] { sort(f32({2, 3}), 5); }});
  rows.push_back({"sum", "a repeated dim", [] { sum(f32({2, 3}), {1, 1}); }});
  return rows;
}

std::vector<BadCall> binary_rows() {
  const Tensor U;
  std::vector<BadCall> rows;
  const std::vector<std::pair<std::string, std::function<void(const Tensor&, const Tensor&)>>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { div(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { minimum(a, b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { gt(a, b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { lt(a, b); }},
      {"eq", [](const Tensor& a, const Tensor& b) { eq(a, b); }},
      {"box_iou", [](const Tensor& a, const Tensor& b) { box_iou(a, b); }},
      {"mm", [](const Tensor& a, const Tensor& b) { mm(a, b); }},
      {"smooth_l1_loss", [](const Tensor& a, const Tensor& b) { smooth_l1_loss(a, b); }},
      {"l1_loss", [](const Tensor& a, const Tensor& b) { l1_loss(a, b); }},
      {"binary_cross_entropy_with_logits", [](const Tensor& a, const Tensor& b) { binary_cross_entropy_with_logits(a, b); }},
  };
  for (const auto& [name, fn] : ops) {
    const Shape shape = name == "box_iou" ? Shape{3, 4} : Shape{4, 4};
    rows.push_back({name, "an undefined first input", [fn = fn, U, shape] { fn(U, f32(shape)); }});
    rows.push_back({name, "an undefined second input", [fn = fn, U, shape] { fn(f32(shape), U); }});
    rows.push_back({name, "float32 with float64", [fn = fn, shape] { fn(f32(shape), rand(shape, kFloat64)); }});
  }
  // Shapes that do not broadcast or do not chain.
  for (const char* name : {"add", "sub", "mul", "div", "maximum", "eq"}) {
    const std::string op = name;
    rows.push_back({op, "shapes (2, 3) and (4, 3)", [op] {
                      const Tensor a = f32({2, 3}), b = f32({4, 3});
                      if (op == "add") add(a, b);
                      if (op == "sub") sub(a, b);
                      if (op == "mul") mul(a, b);
                      if (op == "div") div(a, b);
                      if (op == "maximum") maximum(a, b);
                      if (op == "eq") eq(a, b);
                    }});
  }
  rows.push_back({"mm", "inner sizes 3 and 4", [] { mm(f32({2, 3}), f32({4, 5})); }});
  rows.push_back({"mm", "a 3-D input", [] { mm(f32({2, 2, 3}), f32({3, 5})); }});
  rows.push_back({"bmm", "batch sizes 2 and 3", [] { bmm(f32({2, 2, 3}), f32({3, 3, 5})); }});
  rows.push_back({"bmm", "a 2-D input", [] { bmm(f32({2, 3}), f32({3, 5})); }});
  rows.push_back({"matmul", "a 0-dim input", [] { matmul(f32({}), f32({3})); }});
  rows.push_back({"smooth_l1_loss", "beta <= 0", [] { smooth_l1_loss(f32({3}), f32({3}), -1.0); }});
  rows.push_back({"smooth_l1_loss", "shapes (3) and (4)", [] { smooth_l1_loss(f32({3}), f32({4})); }});
  rows.push_back({"box_iou", "boxes of shape (3, 5)", [] { box_iou(f32({3, 5}), f32({2, 4})); }});
  rows.push_back({"box_iou", "int64 boxes", [] { box_iou(i64({3, 4}), i64({2, 4})); }});
  return rows;
}

std::vector<BadCall> indexing_rows() {
  const Tensor x = f32({4, 3});
  return {
      {"index_select", "an index out of range", [x] { index_select(x, 0, from_vector<int64_t>({0, 4}, {2})); }},
      {"index_select", "a negative index", [x] { index_select(x, 0, from_vector<int64_t>({-1}, {1})); }},
      {"index_select", "a float index", [x] { index_select(x, 0, f32({2})); }},
      {"index_select", "a 2-D index", [x] { index_select(x, 0, i64({2, 2})); }},
      {"index_select", "dim 2", [x] { index_select(x, 2, i64({1})); }},
      {"gather", "an index out of range", [x] { gather(x, 1, from_vector<int64_t>({3}, {1, 1})); }},
      {"gather", "an index of another rank", [x] { gather(x, 1, i64({2})); }},
      {"gather", "a float index", [x] { gather(x, 1, f32({1, 1})); }},
      {"where", "a float condition", [x] { where(x, x, x); }},
      {"where", "shapes that do not broadcast", [x] { where(gt(x, 0.5), x, f32({5, 3})); }},
      {"masked_fill", "a float mask", [x] { masked_fill(x, x, 0.0); }},
      {"masked_fill", "a mask that does not broadcast", [x] { masked_fill(x, gt(f32({2, 2}), 0.5), 0.0); }},
      {"cat", "no tensors", [] { cat({}, 0); }},
      {"cat", "sizes that differ off the dim", [] { cat({f32({2, 3}), f32({2, 4})}, 0); }},
      {"cat", "dtypes that differ", [] { cat({f32({2, 3}), rand({2, 3}, kFloat64)}, 0); }},
      {"stack", "shapes that differ", [] { stack({f32({2, 3}), f32({3, 2})}, 0); }},
      {"view", "a size that does not divide", [] { view(f32({4, 3}), {5, -1}); }},
      {"view", "two -1", [] { view(f32({4, 3}), {-1, -1}); }},
      {"reshape", "12 elements into 10", [] { reshape(f32({4, 3}), {10}); }},
      {"permute", "a repeated dim", [] { permute(f32({4, 3}), {0, 0}); }},
      {"permute", "too few dims", [] { permute(f32({4, 3}), {0}); }},
      {"transpose", "dim 2", [] { transpose(f32({4, 3}), 0, 2); }},
      {"slice", "step 0", [] { slice(f32({4, 3}), 0, 0, 2, 0); }},
      {"narrow", "a length past the end", [] { narrow(f32({4, 3}), 0, 2, 3); }},
      {"select", "index 4 of size 4", [] { select(f32({4, 3}), 0, 4); }},
      {"expand", "a non-singleton size changed", [] { expand(f32({4, 3}), {4, 5}); }},
      {"squeeze", "dim 3 of a 2-D tensor", [] { squeeze(f32({4, 1}), 3); }},
      {"unsqueeze", "dim 4 of a 2-D tensor", [] { unsqueeze(f32({4, 3}), 4); }},
      {"flatten", "start after end", [] { flatten(f32({4, 3, 2}), 2, 1); }},
  };
}

std::vector<BadCall> cnn_rows() {
  const Tensor img = f32({1, 4, 6, 6}), w = f32({2, 4, 3, 3});
  return {
      {"conv2d", "a 3-D input", [=] { conv2d(f32({4, 6, 6}), w); }},
      {"conv2d", "channels 4 against a weight for 3", [=] { conv2d(img, f32({2, 3, 3, 3})); }},
      {"conv2d", "groups that do not divide the channels", [=] { conv2d(img, f32({2, 4, 3, 3}), Tensor(), Conv2dOptions().set_groups(3)); }},
      {"conv2d", "a bias of the wrong size", [=] { conv2d(img, w, f32({3})); }},
      {"conv2d", "a kernel larger than the padded input", [=] { conv2d(img, f32({2, 4, 9, 9})); }},
      {"conv2d", "stride 0", [=] { conv2d(img, w, Tensor(), Conv2dOptions().set_stride(0)); }},
      {"conv2d", "float64 weight for a float32 input", [=] { conv2d(img, rand({2, 4, 3, 3}, kFloat64)); }},
      {"deform_conv2d", "offset channels that do not match the kernel", [=] { deform_conv2d(img, f32({1, 10, 4, 4}), w); }},
      {"deform_conv2d", "offset of the wrong spatial size", [=] { deform_conv2d(img, f32({1, 18, 5, 5}), w); }},
      {"deform_conv2d", "a mask of the wrong channels", [=] { deform_conv2d(img, f32({1, 18, 4, 4}), w, Tensor(), f32({1, 8, 4, 4})); }},
      {"deform_conv2d", "a 3-D input", [=] { deform_conv2d(f32({4, 6, 6}), f32({1, 18, 4, 4}), w); }},
      {"deform_conv2d", "int64 offsets", [=] { deform_conv2d(img, i64({1, 18, 4, 4}), w); }},
      {"max_pool2d", "a 2-D input", [] { max_pool2d(f32({6, 6}), Pool2dOptions(2)); }},
      {"max_pool2d", "kernel 0", [=] { max_pool2d(img, Pool2dOptions(0)); }},
      {"max_pool2d", "padding above half the kernel", [=] { Pool2dOptions o(2); o.pad_h = o.pad_w = 2; max_pool2d(img, o); }},
      {"avg_pool2d", "a kernel larger than the input", [=] { avg_pool2d(img, Pool2dOptions(9)); }},
      {"adaptive_avg_pool2d", "output size 0", [=] { adaptive_avg_pool2d(img, 0, 2); }},
      {"batch_norm2d", "running stats of the wrong size", [=] { batch_norm2d(img, f32({3}), f32({3}), f32({4}), f32({4}), true); }},
      {"batch_norm2d", "a 2-D input", [=] { batch_norm2d(f32({4, 6}), f32({4}), f32({4}), f32({4}), f32({4}), true); }},
      {"frozen_batch_norm2d", "a weight of the wrong size", [=] { frozen_batch_norm2d(img, f32({3}), f32({4}), f32({4}), f32({4})); }},
      {"linear", "in-features 3 against 4", [] { linear(f32({2, 3}), f32({5, 4})); }},
      {"linear", "a bias of the wrong size", [] { linear(f32({2, 4}), f32({5, 4}), f32({4})); }},
      {"cross_entropy", "a target out of range", [] { cross_entropy(f32({2, 3}), from_vector<int64_t>({0, 3}, {2})); }},
      {"cross_entropy", "a float target", [] { cross_entropy(f32({2, 3}), f32({2})); }},
      {"cross_entropy", "a target of the wrong length", [] { cross_entropy(f32({2, 3}), i64({3})); }},
      {"cross_entropy", "1-D logits", [] { cross_entropy(f32({3}), i64({1})); }},
  };
}

std::vector<BadCall> detection_rows() {
  const Tensor feat = f32({2, 3, 8, 8});
  auto rois = [](std::vector<float> v) { return from_vector<float>(v, {static_cast<int64_t>(v.size() / 5), 5}); };
  auto rrois = [](std::vector<float> v) { return from_vector<float>(v, {static_cast<int64_t>(v.size() / 6), 6}); };
  auto boxes = [](std::vector<float> v) { return from_vector<float>(v, {static_cast<int64_t>(v.size() / 4), 4}); };
  const float nan = static_cast<float>(kNaN), inf = static_cast<float>(kInf);
  std::vector<BadCall> rows = {
      {"encode_boxes", "boxes of shapes (2, 4) and (3, 4)", [] { encode_boxes(f32({2, 4}), f32({3, 4}), {1, 1, 1, 1}); }},
      {"encode_boxes", "a zero weight", [] { encode_boxes(f32({2, 4}), f32({2, 4}), {1, 0, 1, 1}); }},
      {"decode_boxes", "deltas of shape (2, 6)", [] { decode_boxes(f32({2, 6}), f32({2, 4}), {1, 1, 1, 1}, 4.0); }},
      {"decode_boxes", "a NaN clip", [] { decode_boxes(f32({2, 4}), f32({2, 4}), {1, 1, 1, 1}, kNaN); }},
      {"roi_align", "rois of shape (1, 4)", [=] { roi_align(feat, f32({1, 4})); }},
      {"roi_align", "a batch index out of range", [=] { roi_align(feat, rois({2, 0, 0, 4, 4})); }},
      {"roi_align", "a negative batch index", [=] { roi_align(feat, rois({-1, 0, 0, 4, 4})); }},
      {"roi_align", "a fractional batch index", [=] { roi_align(feat, rois({0.5f, 0, 0, 4, 4})); }},
      {"roi_align", "a NaN coordinate", [=] { roi_align(feat, rois({0, nan, 0, 4, 4})); }},
      {"roi_align", "an infinite coordinate", [=] { roi_align(feat, rois({0, 0, 0, inf, 4})); }},
      {"roi_align", "a 3-D input", [=] { roi_align(f32({3, 8, 8}), rois({0, 0, 0, 4, 4})); }},
      {"roi_align", "float64 rois for float32 features", [=] { roi_align(feat, rand({1, 5}, kFloat64)); }},
      {"roi_align", "output size 0", [=] { roi_align(feat, rois({0, 0, 0, 4, 4}), RoIAlignOptions().set_output_size(0)); }},
      {"roi_align", "a negative spatial scale", [=] { roi_align(feat, rois({0, 0, 0, 4, 4}), RoIAlignOptions().set_spatial_scale(-1)); }},
      {"roi_pool", "a batch index out of range", [=] { roi_pool(feat, rois({5, 0, 0, 4, 4}), {2, 2}); }},
      {"roi_pool", "a NaN coordinate", [=] { roi_pool(feat, rois({0, 0, nan, 4, 4}), {2, 2}); }},
      {"roi_pool", "output size 0", [=] { roi_pool(feat, rois({0, 0, 0, 4, 4}), {0, 2}); }},
      {"roi_pool", "rois of shape (1, 6)", [=] { roi_pool(feat, f32({1, 6}), {2, 2}); }},
      {"roi_align_rotated", "rois of shape (1, 5)", [=] { roi_align_rotated(feat, f32({1, 5})); }},
      {"roi_align_rotated", "a NaN angle", [=] { roi_align_rotated(feat, rrois({0, 4, 4, 2, 2, nan})); }},
      {"roi_align_rotated", "a batch index out of range", [=] { roi_align_rotated(feat, rrois({3, 4, 4, 2, 2, 0})); }},
      {"roi_align_rotated", "an infinite width", [=] { roi_align_rotated(feat, rrois({0, 4, 4, inf, 2, 0})); }},
      {"nms", "boxes of shape (2, 5)", [] { nms(f32({2, 5}), f32({2}), 0.5); }},
      {"nms", "scores of another length", [=] { nms(boxes({0, 0, 1, 1, 0, 0, 2, 2}), f32({3}), 0.5); }},
      {"nms", "a NaN score", [=] { nms(boxes({0, 0, 1, 1}), from_vector<float>({nan}, {1}), 0.5); }},
      {"nms", "an infinite coordinate", [=] { nms(boxes({0, 0, inf, 1}), f32({1}), 0.5); }},
      {"nms", "a NaN threshold", [=] { nms(boxes({0, 0, 1, 1}), f32({1}), kNaN); }},
      {"nms", "offset 2", [=] { nms(boxes({0, 0, 1, 1}), f32({1}), 0.5, 2); }},
      {"nms", "float64 scores for float32 boxes", [=] { nms(boxes({0, 0, 1, 1}), rand({1}, kFloat64), 0.5); }},
      {"batched_nms", "class ids of another length", [=] { batched_nms(boxes({0, 0, 1, 1}), f32({1}), i64({2}), 0.5); }},
      {"batched_nms", "non-integer class ids", [=] { batched_nms(boxes({0, 0, 1, 1}), f32({1}), from_vector<float>({0.5f}, {1}), 0.5); }},
      {"batched_nms", "a NaN coordinate", [=] { batched_nms(boxes({nan, 0, 1, 1}), f32({1}), i64({1}), 0.5); }},
      {"clip_boxes_to_image", "a negative height", [=] { clip_boxes_to_image(boxes({0, 0, 1, 1}), -1, 5); }},
      {"clip_boxes_to_image", "boxes of shape (1, 3)", [] { clip_boxes_to_image(f32({1, 3}), 5, 5); }},
      {"remove_small_boxes", "a NaN min size", [=] { remove_small_boxes(boxes({0, 0, 1, 1}), kNaN); }},
      {"box_area", "boxes of shape (2, 3)", [] { box_area(f32({2, 3})); }},
      {"box_xyxy_to_cxcywh", "a last dim of 5", [] { box_xyxy_to_cxcywh(f32({2, 5})); }},
  };
  return rows;
}

}  // namespace

TEST_CASE("errors/op_table: every public op refuses bad inputs with an error that names it") {
  const auto unary = unary_rows(), binary = binary_rows(), indexing = indexing_rows(), cnn = cnn_rows(),
             detection = detection_rows();
  const size_t total = unary.size() + binary.size() + indexing.size() + cnn.size() + detection.size();
  MESSAGE(total << " bad calls: " << unary.size() << " unary/reduction, " << binary.size() << " binary, "
                << indexing.size() << " indexing/shape, " << cnn.size() << " CNN, " << detection.size()
                << " detection");
  test::check_bad_calls(unary);
  test::check_bad_calls(binary);
  test::check_bad_calls(indexing);
  test::check_bad_calls(cnn);
  test::check_bad_calls(detection);
  CHECK(total >= 150);
}

TEST_CASE("values/op_table: empty inputs are legal and give documented results") {
  CHECK(nms(zeros({0, 4}), zeros({0}), 0.5).sizes() == Shape{0});
  CHECK(nms(zeros({0, 4}), zeros({0}), 0.5).dtype() == kInt64);
  CHECK(box_iou(zeros({0, 4}), zeros({3, 4})).sizes() == Shape{0, 3});
  CHECK(roi_align(rand({1, 2, 4, 4}), zeros({0, 5})).sizes() == Shape{0, 2, 7, 7});
  CHECK(roi_pool(rand({1, 2, 4, 4}), zeros({0, 5}), {2, 2}).sizes() == Shape{0, 2, 2, 2});
  CHECK(sort(zeros({0})).values.numel() == 0);
  CHECK(sum(zeros({0})).item<float>() == 0.0f);
  CHECK(conv2d(rand({0, 3, 5, 5}), rand({2, 3, 3, 3})).sizes() == Shape{0, 2, 3, 3});
  CHECK(cat({zeros({0, 3}), rand({2, 3})}, 0).sizes() == Shape{2, 3});
  CHECK(remove_small_boxes(zeros({0, 4}), 1.0).sizes() == Shape{0});
  CHECK(encode_boxes(zeros({0, 4}), zeros({0, 4}), {1, 1, 1, 1}).sizes() == Shape{0, 4});
  CHECK(decode_boxes(zeros({0, 8}), zeros({0, 4}), {1, 1, 1, 1}, 4.0).sizes() == Shape{0, 8});
}

MINIDET_CUDA_TEST_CASE("cuda/op_table: inputs on two devices are refused by name") {
  const Tensor cpu = rand({4, 4}), gpu = rand({4, 4}).to(Device::cuda());
  CHECK_THROWS_CONTAINING(add(cpu, gpu), "add");
  CHECK_THROWS_CONTAINING(mm(cpu, gpu), "mm");
  CHECK_THROWS_CONTAINING(box_iou(rand({2, 4}), rand({2, 4}).to(Device::cuda())), "box_iou");
  CHECK_THROWS_CONTAINING(nms(rand({2, 4}).to(Device::cuda()), rand({2}), 0.5), "nms");
  CHECK_THROWS_CONTAINING(roi_align(rand({1, 2, 4, 4}).to(Device::cuda()), zeros({1, 5})), "roi_align");
  CHECK_THROWS_CONTAINING(conv2d(rand({1, 3, 5, 5}), rand({2, 3, 3, 3}).to(Device::cuda())), "conv2d");
  CHECK_THROWS_CONTAINING(index_select(gpu, 0, zeros({1}, kInt64)), "index_select");
}
