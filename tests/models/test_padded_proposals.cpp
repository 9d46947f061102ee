// PaddedProposals (models/common/padded_proposals.h): pad_proposals lays per-image proposals out as the RPN's
// training table, and sampling that table samples the list's rows; its errors; the table on the GPU.
#include <vector>

#include "core/factories.h"
#include "models/common/padded_proposals.h"
#include "models/roi_heads/roi_heads.h"
#include "tests/models/roi_heads_helpers.h"
#include "tests/support.h"

using namespace minidet;
using minidet::test::bools;
using minidet::test::hand_case;
using minidet::test::HandCase;
using minidet::test::ints;
using minidet::test::values;
using models::RoIHeadsOptions;
using models::RoISample;

TEST_CASE("values/padded_proposals: pad_proposals lays per-image proposals out as the RPN's table") {
  // Image 0 has 3 proposals, image 1 none, image 2 one: P = 3, each image's rows first, zeros after them.
  const Tensor first = from_vector<double>({0, 0, 10, 5, 20, 20, 30, 28, 1, 2, 3, 4}, {3, 4});
  const Tensor third = from_vector<double>({5, 6, 7, 8}, {1, 4});
  const models::PaddedProposals table = models::pad_proposals({first, zeros({0, 4}, kFloat64), third});
  REQUIRE(table.boxes.sizes() == Shape({3, 3, 4}));
  CHECK(table.boxes.dtype() == kFloat64);
  CHECK(table.counts.dtype() == kInt64);
  CHECK(ints(table.counts) == std::vector<int64_t>{3, 0, 1});
  CHECK(values(table.boxes.select(0, 0)) == values(first));
  CHECK(values(table.boxes.select(0, 1)) == std::vector<double>(12, 0.0));
  CHECK(values(table.boxes.select(0, 2)) == std::vector<double>{5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0});
  // Detached, as the RPN's table: the second stage never moves the proposals.
  CHECK_FALSE(models::pad_proposals({first.clone().requires_grad_()}).boxes.requires_grad());
  // No image with a proposal: P = 0.
  const models::PaddedProposals none = models::pad_proposals({zeros({0, 4}), zeros({0, 4})});
  CHECK(none.boxes.sizes() == Shape({2, 0, 4}));
  CHECK(ints(none.counts) == std::vector<int64_t>{0, 0});
  // With a slot for every candidate, sampling the table samples the list's rows (as values/roi_heads: padded proposals sample the rows of per-image proposals, on a table with fewer slots).
  RoIHeadsOptions o = test::tiny_roi_heads_options();
  o.batch_size_per_image = 1000;
  o.positive_fraction = 1.0;
  const HandCase c = hand_case();
  Generator a(4), b(4);
  const RoISample padded =
      models::sample_rois_padded(models::pad_proposals(c.proposals), c.gt_boxes, c.gt_labels, o, &a);
  const RoISample listed = models::sample_rois(c.proposals, c.gt_boxes, c.gt_labels, o, &b);
  const std::vector<bool> valid = bools(padded.valid);
  std::vector<double> sampled_rois;
  for (size_t row = 0; row < valid.size(); ++row)
    if (valid[row]) {
      const std::vector<double> r = values(padded.rois.select(0, static_cast<int64_t>(row)));
      sampled_rois.insert(sampled_rois.end(), r.begin(), r.end());
    }
  CHECK(sampled_rois == values(listed.rois));  // 6 rows of image 0 (4 proposals, 2 objects), 2 of image 1
}

TEST_CASE("values/padded_proposals: slot_images gives every slot its image's index") {
  CHECK(models::slot_images(3, 2, TensorOptions(kInt64)).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 1, 1, 2, 2});
  const Tensor as_float = models::slot_images(2, 3, TensorOptions(kFloat32));
  CHECK(as_float.dtype() == kFloat32);
  CHECK(as_float.to_vector<float>() == std::vector<float>{0, 0, 0, 1, 1, 1});
  CHECK(models::slot_images(2, 0, TensorOptions(kInt64)).sizes() == Shape{0});
  // A shared arange underneath: the result is a fresh tensor, which may be written.
  Tensor mine = models::slot_images(3, 2, TensorOptions(kInt64));
  mine.fill_(7);
  CHECK(models::slot_images(3, 2, TensorOptions(kInt64)).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 1, 1, 2, 2});
}

TEST_CASE("errors/padded_proposals: pad_proposals names what is wrong") {
  CHECK_THROWS_CONTAINING(models::pad_proposals({}),
                          "pad_proposals: expected one proposals tensor per image, got none");
  CHECK_THROWS_CONTAINING(models::pad_proposals({zeros({1, 4}), Tensor()}), "pad_proposals: proposals[1] is undefined");
  CHECK_THROWS_CONTAINING(models::pad_proposals({zeros({2, 6})}),
                          "pad_proposals: expected proposals[0] of shape (P, 4), got (2, 6)");
  // Rotated proposals (P, 5) are fine, but every image must have the first one's width.
  CHECK(models::pad_proposals({zeros({2, 5}), zeros({1, 5})}).boxes.sizes() == Shape{2, 2, 5});
  CHECK_THROWS_CONTAINING(models::pad_proposals({zeros({2, 5}), zeros({1, 4})}),
                          "pad_proposals: expected proposals[1] of shape (P, 5), got (1, 4)");
  CHECK_THROWS_CONTAINING(models::pad_proposals({zeros({1, 4}, kInt64)}), "pad_proposals");
  CHECK_THROWS_CONTAINING(models::pad_proposals({zeros({1, 4}, kFloat64), zeros({1, 4}, kFloat32)}), "pad_proposals");
}

MINIDET_CUDA_TEST_CASE("cuda/padded_proposals: pad_proposals keeps the table and its counts on the GPU") {
  const std::vector<Tensor> proposals = {from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}).cuda(),
                                         zeros({0, 4}, TensorOptions(kFloat32, Device::cuda()))};
  const models::PaddedProposals table = models::pad_proposals(proposals);
  CHECK(table.boxes.is_cuda());
  CHECK(table.counts.is_cuda());
  CHECK(ints(table.counts.cpu()) == std::vector<int64_t>{2, 0});
  CHECK(values(table.boxes.cpu()) == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK_THROWS_CONTAINING(models::pad_proposals({proposals[0], zeros({1, 4})}), "pad_proposals");
}
