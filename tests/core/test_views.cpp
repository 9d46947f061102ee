// Views: stride arithmetic over one shared storage. Each case asserts sizes, strides and storage_offset
// exactly, because a wrong stride reads the wrong memory without any error.
#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "tests/support.h"

using namespace minidet;

namespace {
std::vector<int64_t> values(const Tensor& t) { return t.to_vector<int64_t>(); }
}  // namespace

TEST_CASE("values/views: view regroups a contiguous tensor and infers -1") {
  const Tensor base = arange(24);
  const Tensor v = base.view({2, 3, 4});
  CHECK(v.sizes() == Shape{2, 3, 4});
  CHECK(v.strides() == Shape{12, 4, 1});
  CHECK(v.storage() == base.storage());  // no copy
  CHECK(base.view({-1, 6}).sizes() == Shape{4, 6});
  CHECK(base.view({2, -1, 2}).sizes() == Shape{2, 6, 2});
  CHECK(v.view({24}).to_vector<int64_t>() == values(base));
}

TEST_CASE("values/views: view of a non-contiguous tensor when the new dims stay inside contiguous chunks") {
  // permute (2, 3, 4) -> (3, 2, 4): strides (4, 12, 1). The last dim is still contiguous, so splitting it
  // is a view; merging dims 0 and 1 would need one stride for memory that is not evenly spaced.
  const Tensor p = arange(24).view({2, 3, 4}).permute({1, 0, 2});
  CHECK(p.strides() == Shape{4, 12, 1});
  CHECK_FALSE(p.is_contiguous());
  const Tensor v = p.view({3, 2, 2, 2});
  CHECK(v.strides() == Shape{4, 12, 2, 1});
  CHECK(v.storage() == p.storage());
  CHECK(values(v) == values(p));  // same elements in the same order

  // Every other row of (4, 6) is (2, 6) with strides (12, 1): rows are contiguous, so (2, 2, 3) is a view.
  const Tensor rows = arange(24).view({4, 6}).slice(0, 0, 4, 2);
  CHECK(rows.view({2, 2, 3}).strides() == Shape{12, 3, 1});
}

TEST_CASE("errors/views: view that would cross non-adjacent memory points to reshape") {
  const Tensor p = arange(24).view({2, 3, 4}).permute({1, 0, 2});
  CHECK_THROWS_CONTAINING(p.view({6, 4}), "use reshape()");
  CHECK_THROWS_CONTAINING(p.view({24}), "not compatible");
}

TEST_CASE("values/views: reshape is a view when possible and a copy otherwise") {
  const Tensor base = arange(12).view({3, 4});
  const Tensor r = base.reshape({4, 3});
  CHECK(r.storage() == base.storage());  // viewable: shares memory

  const Tensor t = base.t();  // (4, 3), strides (1, 4)
  const Tensor flat = t.reshape({-1});
  CHECK(flat.storage() != base.storage());  // not viewable: a contiguous copy
  CHECK(values(flat) == std::vector<int64_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
}

TEST_CASE("values/views: permute and transpose swap sizes and strides") {
  const Tensor x = arange(24).view({2, 3, 4});
  const Tensor p = x.permute({2, 0, 1});
  CHECK(p.sizes() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(x.permute({-1, 0, 1}).strides() == p.strides());  // negative dims allowed
  const Tensor tr = x.transpose(0, 2);
  CHECK(tr.sizes() == Shape{4, 3, 2});
  CHECK(tr.strides() == Shape{1, 4, 12});
  // Element (i, j) of t() is element (j, i) of the original.
  const Tensor m = arange(6).view({2, 3});
  CHECK(m.t().sizes() == Shape{3, 2});
  CHECK(m.t().select(0, 2).select(0, 1).item<int64_t>() == 5);  // m[1][2]
}

TEST_CASE("errors/views: permute needs each dim once") {
  const Tensor x = zeros({2, 3});
  CHECK_THROWS_CONTAINING(x.permute({0, 0}), "repeats");
  CHECK_THROWS_CONTAINING(x.permute({0}), "expected 2 dims");
  CHECK_THROWS_CONTAINING(x.transpose(0, 2), "out of range");
}

TEST_CASE("values/views: slice with negatives steps clamping and empty results") {
  const Tensor a = arange(10);
  const Tensor s = a.slice(0, 1, 10, 3);
  CHECK(values(s) == std::vector<int64_t>{1, 4, 7});
  CHECK(s.strides() == Shape{3});
  CHECK(s.storage_offset() == 1);
  CHECK(values(a.slice(0, -3, -1)) == std::vector<int64_t>{7, 8});  // like a[-3:-1] in Python
  CHECK(values(a.slice(0, -100, 100)) == values(a));                 // out-of-range ends clamp
  CHECK(values(a.slice(0, 8, 100)) == std::vector<int64_t>{8, 9});
  CHECK(a.slice(0, 5, 2).numel() == 0);    // end before start: empty, not an error
  CHECK(a.slice(0, 20, 30).numel() == 0);  // entirely past the end
  CHECK(a.slice(0, 9, 10, 5).sizes() == Shape{1});  // the size rounds up: ceil(1 / 5)
  // Slicing the inner dim of a matrix keeps the row stride and moves the offset.
  const Tensor m = arange(12).view({3, 4}).slice(1, 1, 3);
  CHECK(m.sizes() == Shape{3, 2});
  CHECK(m.strides() == Shape{4, 1});
  CHECK(m.storage_offset() == 1);
  CHECK(values(m) == std::vector<int64_t>{1, 2, 5, 6, 9, 10});
  CHECK_THROWS_CONTAINING(a.slice(0, 0, 5, 0), "step must be positive");
}

TEST_CASE("values/views: narrow and select") {
  const Tensor m = arange(12).view({3, 4});
  const Tensor n = m.narrow(1, 1, 2);
  CHECK(values(n) == std::vector<int64_t>{1, 2, 5, 6, 9, 10});
  CHECK(values(m.narrow(0, -1, 1)) == std::vector<int64_t>{8, 9, 10, 11});  // negative start: from the end
  CHECK(m.narrow(1, 4, 0).numel() == 0);  // an empty range at the very end is allowed

  const Tensor row = m.select(0, -1);  // the last row; select removes the dim
  CHECK(row.sizes() == Shape{4});
  CHECK(row.storage_offset() == 8);
  const Tensor col = m.select(1, 2);
  CHECK(col.strides() == Shape{4});
  CHECK(col.storage_offset() == 2);
  CHECK(values(col) == std::vector<int64_t>{2, 6, 10});
}

TEST_CASE("errors/views: narrow and select check bounds strictly") {
  // Unlike slice, narrow and select never clamp: an index past the end is a bug in the caller.
  const Tensor m = zeros({3, 4});
  CHECK_THROWS_CONTAINING(m.narrow(1, 3, 2), "out of bounds for dim 1 of size 4");
  CHECK_THROWS_CONTAINING(m.narrow(0, 0, -1), "out of bounds");
  CHECK_THROWS_CONTAINING(m.select(0, 3), "index 3 is out of range for dim 0 of size 3");
  CHECK_THROWS_CONTAINING(m.select(0, -4), "out of range");
  CHECK_THROWS_CONTAINING(scalar_tensor(1).select(0, 0), "0-dim");
}

TEST_CASE("values/views: expand broadcasts size-1 dims with stride 0") {
  const Tensor c = from_vector<int64_t>({1, 2, 3}, {3, 1});
  const Tensor e = c.expand({3, 4});
  CHECK(e.sizes() == Shape{3, 4});
  CHECK(e.strides() == Shape{1, 0});  // every column reads the same element
  CHECK(values(e) == std::vector<int64_t>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  const Tensor lead = c.expand({2, -1, 4});  // a new leading dim, -1 keeps the size
  CHECK(lead.sizes() == Shape{2, 3, 4});
  CHECK(lead.strides() == Shape{0, 1, 0});
  CHECK(lead.storage() == c.storage());
  CHECK_FALSE(e.is_contiguous());
}

TEST_CASE("errors/views: expand refuses non-1 dims and invalid sizes") {
  const Tensor c = zeros({3, 1});
  CHECK_THROWS_CONTAINING(c.expand({4, 4}), "only size-1 dims broadcast");
  CHECK_THROWS_CONTAINING(c.expand({4}), "fewer dims");
  CHECK_THROWS_CONTAINING(c.expand({-1, 3, 4}), "cannot be -1");
  CHECK_THROWS_CONTAINING(c.expand({3, -2}), "invalid size -2");  // would give a negative numel
}

TEST_CASE("values/views: squeeze unsqueeze and flatten") {
  const Tensor x = zeros({1, 3, 1, 2});
  CHECK(x.squeeze().sizes() == Shape{3, 2});
  CHECK(x.squeeze(0).sizes() == Shape{3, 1, 2});
  CHECK(x.squeeze(1).sizes() == Shape{1, 3, 1, 2});  // size 3: left as is, like PyTorch
  const Tensor m = zeros({3, 2});
  CHECK(m.unsqueeze(0).strides() == Shape{6, 2, 1});
  CHECK(m.unsqueeze(1).strides() == Shape{2, 2, 1});
  CHECK(m.unsqueeze(-1).sizes() == Shape{3, 2, 1});
  CHECK(m.unsqueeze(-1).strides() == Shape{2, 1, 1});

  const Tensor y = arange(24).view({2, 3, 4});
  CHECK(y.flatten().sizes() == Shape{24});
  CHECK(y.flatten(1).sizes() == Shape{2, 12});
  CHECK(y.flatten(0, 1).sizes() == Shape{6, 4});
  CHECK(y.flatten(0, 1).storage() == y.storage());  // contiguous: a view
  const Tensor f = y.permute({2, 1, 0}).flatten();
  CHECK(f.storage() != y.storage());  // not viewable: flatten copies, like reshape
  CHECK(f.to_vector<int64_t>()[1] == 12);  // element (0, 0, 1) of the permuted tensor
}

TEST_CASE("values/views: as_strided makes overlapping windows") {
  const Tensor a = arange(6);
  const Tensor w = a.as_strided({4, 3}, {1, 1}, 0);  // sliding windows of 3
  CHECK(values(w) == std::vector<int64_t>{0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5});
  CHECK(values(a.as_strided({2}, {2}, 1)) == std::vector<int64_t>{1, 3});
  CHECK(a.as_strided({0, 3}, {100, 100}, 6).numel() == 0);  // an empty view touches no memory
}

TEST_CASE("errors/views: as_strided cannot reach past the storage") {
  const Tensor a = arange(6);
  CHECK_THROWS_CONTAINING(a.as_strided({4, 3}, {1, 2}, 0), "reaches element 7 but the storage holds 6");
  CHECK_THROWS_CONTAINING(a.as_strided({2}, {1}, -1), "negative storage offset");
  CHECK_THROWS_CONTAINING(a.as_strided({2}, {1, 1}, 0), "differ in length");
}

TEST_CASE("values/views: writes through a view are visible in the base") {
  Tensor base = zeros({3, 4}, kInt64);
  base.select(0, 1).fill_(5);                              // row 1
  base.t().select(0, 3).copy_(from_vector<int64_t>({7, 8, 9}));  // column 3, via the transpose
  base.slice(0, 0, 3, 2).slice(1, 0, 1).fill_(-1);         // (0, 0) and (2, 0)
  CHECK(values(base) == std::vector<int64_t>{-1, 0, 0, 7, 5, 5, 5, 8, -1, 0, 0, 9});
  // And the other way: writing the base changes what the view reads.
  const Tensor col = base.select(1, 1);
  base.fill_(2);
  CHECK(values(col) == std::vector<int64_t>{2, 2, 2});
}

TEST_CASE("values/views: is_contiguous") {
  const Tensor m = zeros({3, 4});
  CHECK(m.is_contiguous());
  CHECK_FALSE(m.t().is_contiguous());
  CHECK(m.slice(0, 1, 3).is_contiguous());        // whole rows
  CHECK_FALSE(m.slice(1, 0, 2).is_contiguous());  // part of each row: gaps between rows
  CHECK(m.select(0, 1).is_contiguous());
  CHECK_FALSE(m.select(1, 1).is_contiguous());
  // The stride of a size-1 dim never matters: (3, 1).t() is (1, 3) with strides (1, 1), still dense.
  const Tensor col = zeros({3, 1}).t();
  CHECK(col.strides() == Shape{1, 1});
  CHECK(col.is_contiguous());
  CHECK(zeros({2, 0}).t().is_contiguous());  // no elements: trivially contiguous
}

TEST_CASE("values/views: 0-dim tensors through views") {
  const Tensor s = scalar_tensor(3, kInt64);
  const Tensor v = s.view({1, 1});
  CHECK(v.sizes() == Shape{1, 1});
  CHECK(v.storage() == s.storage());
  CHECK(v.view({}).dim() == 0);
  CHECK(s.unsqueeze(0).sizes() == Shape{1});
  CHECK(s.reshape({-1}).sizes() == Shape{1});
  CHECK(s.flatten().sizes() == Shape{1});
  const Tensor e = s.expand({2, 3});
  CHECK(e.strides() == Shape{0, 0});
  CHECK(values(e) == std::vector<int64_t>(6, 3));
  CHECK(s.squeeze().dim() == 0);
  CHECK(s.permute({}).item<int64_t>() == 3);
}

TEST_CASE("values/views: empty tensors through views") {
  const Tensor z = zeros({0, 3});
  CHECK(z.view({3, 0}).sizes() == Shape{3, 0});
  CHECK(z.view({-1}).sizes() == Shape{0});
  CHECK(z.reshape({2, 0, 5}).numel() == 0);
  CHECK(z.t().sizes() == Shape{3, 0});
  CHECK(z.slice(1, 1, 3).sizes() == Shape{0, 2});
  CHECK(zeros({0, 1}).expand({0, 4}).sizes() == Shape{0, 4});
  CHECK(z.contiguous().numel() == 0);
  // -1 cannot be inferred when the other sizes multiply to 0: any value would fit.
  CHECK_THROWS_CONTAINING(z.view({-1, 0}), "is invalid for 0 elements");
}

TEST_CASE("errors/read_only: every write to a read-only storage throws, through any view, and a clone is free") {
  const Tensor x = from_vector<double>({1, 2, 3, 4}).view({2, 2});
  const Tensor view = x.select(0, 1);  // shares the storage: made read-only with it
  x.make_read_only("a test constant");
  CHECK(x.is_read_only());
  CHECK(view.is_read_only());
  const uint64_t version = x.version();
  CHECK_THROWS_CONTAINING(x.fill_(0.0), "cannot write to a read-only tensor: a test constant");
  CHECK_THROWS_CONTAINING(view.copy_(from_vector<double>({7, 8})), "a test constant");
  CHECK_THROWS_CONTAINING(x.bump_version(), "clone() it");
  CHECK_THROWS_CONTAINING(x.set_data(zeros({2, 2}, kFloat64)), "a test constant");
  CHECK(x.version() == version);  // a refused write changes nothing
  CHECK(x.to_vector<double>() == std::vector<double>{1, 2, 3, 4});
  const Tensor copy = x.clone();
  CHECK(!copy.is_read_only());
  copy.fill_(5.0);
  CHECK(copy.to_vector<double>() == std::vector<double>{5, 5, 5, 5});
  CHECK_THROWS_CONTAINING(x.make_read_only(""), "give the reason");
}
