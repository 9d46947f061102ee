// pad_proposals: per-image proposals into one PaddedProposals table (see padded_proposals.h).
#include "models/common/padded_proposals.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/common/checks.h"
#include "ops/elementwise/shared_scalar.h"

namespace minidet::models {

void check_proposal_list(const char* op, const std::vector<Tensor>& proposals) {
  MINIDET_CHECK(!proposals.empty(), op, ": expected one proposals tensor per image, got none");
  // Axis-aligned (4 columns) or rotated (5), as proposals[0] says; every image the same.
  const Tensor& first = proposals[0];
  const int64_t width = first.defined() && first.dim() == 2 && first.size(1) == 5 ? 5 : 4;
  for (size_t n = 0; n < proposals.size(); ++n) {
    const Tensor& p = proposals[n];
    MINIDET_CHECK(p.defined(), op, ": proposals[", n, "] is undefined");
    ops::check_floating(op, p, "proposals");
    MINIDET_CHECK(p.dim() == 2 && p.size(1) == width, op, ": expected proposals[", n, "] of shape (P, ", width,
                  "), got ", p.sizes());
    ops::check_same_dtype(op, p, "proposals", proposals[0], "proposals[0]");
    ops::check_same_device(op, p, "proposals", proposals[0], "proposals[0]");
  }
}

std::vector<Tensor> checked_slots(const char* op, const PaddedProposals& proposals, int64_t d, const char* layout) {
  MINIDET_CHECK(proposals.boxes.defined(), op, ": the padded proposals' boxes are undefined");
  MINIDET_CHECK(proposals.boxes.dim() == 3 && proposals.boxes.size(2) == d, op,
                ": expected padded proposals of shape (N, P, ", d, ") ", layout, ", got ", proposals.boxes.sizes());
  const int64_t n = proposals.boxes.size(0);
  MINIDET_CHECK(proposals.counts.defined() && proposals.counts.dtype() == kInt64 &&
                    proposals.counts.sizes() == Shape{n} && proposals.counts.device() == proposals.boxes.device(),
                op, ": expected int64 proposal counts of shape (", n, ") on ", proposals.boxes.device());
  const Tensor boxes = proposals.boxes.detach();  // the views are for checks: a table that requires grad is fine
  std::vector<Tensor> slots;
  for (int64_t i = 0; i < n; ++i) slots.push_back(boxes.select(0, i));
  check_proposal_list(op, slots);
  return slots;
}

Tensor slot_images(int64_t images, int64_t per_image, const TensorOptions& options) {
  return shared_arange(images, options).unsqueeze(1).expand({images, per_image}).reshape({images * per_image});
}

PaddedProposals pad_proposals(const std::vector<Tensor>& proposals) {
  const char* op = "pad_proposals";
  check_proposal_list(op, proposals);
  int64_t widest = 0;
  std::vector<int64_t> counts;
  for (const Tensor& p : proposals) {
    counts.push_back(p.size(0));
    widest = std::max(widest, p.size(0));
  }
  NoGradGuard no_grad;  // the table is detached, as the RPN's
  const int64_t images = static_cast<int64_t>(proposals.size());
  PaddedProposals out;
  out.boxes = zeros({images, widest, proposals[0].size(1)}, proposals[0].options());
  for (int64_t n = 0; n < images; ++n)
    if (counts[n] > 0) out.boxes.select(0, n).narrow(0, 0, counts[n]).copy_(proposals[n].detach());
  out.counts = from_vector<int64_t>(counts).to(proposals[0].device());
  return out;
}

}  // namespace minidet::models
