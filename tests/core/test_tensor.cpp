// Tensor basics: factories, metadata, element access, dtype conversion, fill_/copy_, clone/contiguous,
// the version counter and printing. Random factories live in test_random.cpp, views in test_views.cpp.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <vector>

#include "core/factories.h"
#include "tests/support.h"

using namespace minidet;
using minidet::test::allclose;

TEST_CASE("values/factories: empty zeros ones full have the requested shape dtype and values") {
  const Tensor e = empty({2, 3}, kFloat64);
  CHECK(e.sizes() == Shape{2, 3});
  CHECK(e.strides() == Shape{3, 1});  // fresh tensors are row-major contiguous
  CHECK(e.dtype() == kFloat64);
  CHECK(e.device() == Device::cpu());
  CHECK(e.storage_offset() == 0);

  CHECK(zeros({2, 2}).to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  CHECK(ones({3}, kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1});
  CHECK(full({2}, -2.5).to_vector<float>() == std::vector<float>{-2.5f, -2.5f});
  CHECK(zeros({2}).dtype() == kFloat32);  // the default dtype is float32
}

TEST_CASE("values/factories: scalar_tensor is 0-dim with one element") {
  const Tensor s = scalar_tensor(4.5, kFloat64);
  CHECK(s.dim() == 0);
  CHECK(s.sizes().empty());
  CHECK(s.numel() == 1);  // the empty product
  CHECK(s.item() == 4.5);
}

TEST_CASE("values/factories: the _like factories copy shape dtype and device but not values") {
  const Tensor src = from_vector<int64_t>({7, 8, 9, 10, 11, 12}, {3, 2});
  for (const Tensor& t : {empty_like(src), zeros_like(src), ones_like(src), full_like(src, 5)}) {
    CHECK(t.sizes() == src.sizes());
    CHECK(t.dtype() == kInt64);
    CHECK(t.device() == src.device());
    CHECK(t.storage() != src.storage());  // a new buffer, never a view of src
  }
  CHECK(zeros_like(src).to_vector<int64_t>() == std::vector<int64_t>(6, 0));
  CHECK(full_like(src, 5).to_vector<int64_t>() == std::vector<int64_t>(6, 5));
}

TEST_CASE("values/factories: arange follows Python range") {
  CHECK(arange(5).dtype() == kInt64);  // indices by default
  CHECK(arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(2, 11, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 5, 8});  // end is exclusive
  CHECK(arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});  // counting down
  CHECK(arange(3, 3).numel() == 0);   // empty range
  CHECK(arange(5, 1).numel() == 0);   // end before start with a positive step: empty, not an error
  CHECK(arange(0, 1, 0.25, kFloat64).to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75});
}

TEST_CASE("values/factories: from_vector keeps row-major order and the element type") {
  const Tensor t = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.dtype() == kFloat64);
  CHECK(t.sizes() == Shape{2, 3});
  CHECK(t.select(0, 1).select(0, 0).item() == 4);  // element (1, 0) is the 4th value
  CHECK(from_vector<uint8_t>({1, 2, 3}).sizes() == Shape{3});  // no shape: 1-D
  CHECK(from_vector<bool>({true, false}).to_vector<bool>() == std::vector<bool>{true, false});
  // The options overload converts afterwards.
  CHECK(from_vector<int64_t>({1, 2}, {2}, kFloat32).to_vector<float>() == std::vector<float>{1, 2});
}

TEST_CASE("values/tensor: metadata accessors") {
  const Tensor t = zeros({2, 3, 4}, kUInt8);
  CHECK(t.dim() == 3);
  CHECK(t.numel() == 24);
  CHECK(t.size(0) == 2);
  CHECK(t.size(-1) == 4);  // negative dims count from the end
  CHECK(t.stride(0) == 12);
  CHECK(t.stride(-2) == 4);
  CHECK(t.options().dtype == kUInt8);
  CHECK_FALSE(t.is_cuda());
  CHECK(t.storage()->nbytes() == 24);  // uint8: one byte per element
  CHECK(zeros({5}, kFloat64).storage()->nbytes() == 40);
}

TEST_CASE("values/tensor: item and to_vector convert to the requested type") {
  CHECK(scalar_tensor(3.75).item<float>() == 3.75f);
  CHECK(scalar_tensor(-3.75).item<int64_t>() == -3);  // conversion truncates toward zero
  CHECK(from_vector<int64_t>({42}).item() == 42.0);   // a 1-element 1-D tensor works too
  // to_vector reads in row-major order of the *view*, not of the storage.
  const Tensor m = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  CHECK(m.t().to_vector<int64_t>() == std::vector<int64_t>{1, 3, 2, 4});
  CHECK(m.to_vector<double>() == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("values/dtype: conversions with to(DType)") {
  const Tensor f = from_vector<float>({-2.7f, -0.5f, 0.0f, 0.5f, 2.9f});
  // float -> int64 truncates toward zero, like C++ and PyTorch (not floor: -2.7 -> -2).
  CHECK(f.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{-2, 0, 0, 0, 2});
  // to bool: any nonzero value is true, including small negatives.
  CHECK(f.to(kBool).to_vector<bool>() == std::vector<bool>{true, true, false, true, true});
  // to uint8 (in range): truncation again.
  CHECK(from_vector<float>({0.0f, 3.9f, 255.0f}).to(kUInt8).to_vector<uint8_t>() ==
        std::vector<uint8_t>{0, 3, 255});
  // bool -> float gives exactly 0 and 1.
  CHECK(from_vector<bool>({true, false}).to(kFloat32).to_vector<float>() == std::vector<float>{1, 0});
  // int64 -> float: exact below 2^24 in float32; 2^24 + 1 is not representable and rounds to 2^24.
  const Tensor big = from_vector<int64_t>({16777216 + 1, -123});
  CHECK(big.to(kFloat32).to_vector<float>() == std::vector<float>{16777216.0f, -123.0f});
  CHECK(big.to(kFloat64).to_vector<double>() == std::vector<double>{16777217.0, -123.0});
  // Converting to the dtype it already has returns the same tensor, not a copy.
  CHECK(f.to(kFloat32).is_same(f));
  CHECK(dtype_name(f.to(kFloat64).dtype()) == std::string("float64"));
}

TEST_CASE("values/dtype: names sizes and parse round trip") {
  for (DType d : {kFloat32, kFloat64, kInt64, kBool, kUInt8}) CHECK(parse_dtype(dtype_name(d)) == d);
  CHECK(element_size(kFloat32) == 4);
  CHECK(element_size(kFloat64) == 8);
  CHECK(element_size(kInt64) == 8);
  CHECK(element_size(kBool) == 1);
  CHECK(element_size(kUInt8) == 1);
  CHECK(is_floating(kFloat64));
  CHECK_FALSE(is_floating(kInt64));
}

TEST_CASE("values/copy: fill_ writes only the elements of the view") {
  Tensor base = zeros({3, 4}, kInt64);
  base.slice(1, 0, 4, 2).fill_(7);  // columns 0 and 2: a non-contiguous view
  CHECK(base.to_vector<int64_t>() == std::vector<int64_t>{7, 0, 7, 0, 7, 0, 7, 0, 7, 0, 7, 0});
  Tensor b = zeros({3}, kBool);
  b.fill_(0.25);  // nonzero -> true, as in a conversion
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, true, true});
}

TEST_CASE("values/copy: copy_ broadcasts the source and converts its dtype") {
  Tensor dst = zeros({2, 3});
  dst.copy_(from_vector<int64_t>({1, 2, 3}));  // (3,) -> (2, 3): every row gets the vector
  CHECK(dst.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
  dst.copy_(from_vector<double>({10, 20}, {2, 1}));  // (2, 1) -> (2, 3): every column
  CHECK(dst.to_vector<float>() == std::vector<float>{10, 10, 10, 20, 20, 20});
  dst.copy_(scalar_tensor(-1, kInt64));  // 0-dim -> anything
  CHECK(dst.to_vector<float>() == std::vector<float>(6, -1.0f));
  // Into a non-contiguous destination (the transpose of a buffer).
  Tensor buf = zeros({3, 2}, kFloat64);
  buf.t().copy_(from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}));
  CHECK(buf.to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("values/copy: copy_ between overlapping views of one storage") {
  // Reading while writing the same memory would corrupt the result; copy_ must detect the overlap.
  Tensor t = arange(9, kFloat32).view({3, 3});
  const Tensor original = t.clone();
  t.copy_(t.t());
  CHECK(t.to_vector<float>() == original.t().to_vector<float>());
  CHECK(t.to_vector<float>() == std::vector<float>{0, 3, 6, 1, 4, 7, 2, 5, 8});

  // A shift by one inside one buffer: a naive forward loop would smear element 0 across the whole tensor.
  Tensor a = arange(6);
  a.slice(0, 1, 6).copy_(a.slice(0, 0, 5));
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 2, 3, 4});

  // Copying a tensor onto itself is a no-op on the values.
  Tensor s = arange(4);
  s.copy_(s);
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("values/copy: clone is independent and contiguous") {
  const Tensor base = arange(6, kFloat32).view({2, 3});
  Tensor c = base.t().clone();
  CHECK(c.is_contiguous());
  CHECK(c.strides() == Shape{2, 1});
  CHECK(c.storage() != base.storage());
  CHECK(c.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  c.fill_(100);  // writing the clone must not touch the original
  CHECK(base.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("values/copy: contiguous returns the same tensor when already contiguous") {
  const Tensor t = zeros({2, 3});
  CHECK(t.contiguous().is_same(t));  // no copy, the very same TensorImpl
  const Tensor nc = t.t();
  const Tensor c = nc.contiguous();
  CHECK_FALSE(c.is_same(nc));
  CHECK(c.storage() != nc.storage());  // a real copy
  CHECK(c.is_contiguous());
  CHECK(c.sizes() == Shape{3, 2});
}

TEST_CASE("values/tensor: the version counter counts in-place writes on the shared storage") {
  // autograd compares versions to detect a saved tensor that was modified before backward.
  Tensor t = zeros({4});
  const uint64_t v0 = t.version();
  t.fill_(1);
  CHECK(t.version() == v0 + 1);
  t.copy_(ones({4}));
  CHECK(t.version() == v0 + 2);
  Tensor view = t.slice(0, 1, 3);
  view.zero_();
  CHECK(t.version() == v0 + 3);  // a write through a view bumps the base too: they share one storage
  CHECK(view.version() == t.version());
  const Tensor c = t.clone();
  const uint64_t vc = c.version();
  t.fill_(2);
  CHECK(c.version() == vc);  // a clone has its own counter
  (void)t.to_vector<float>();
  CHECK(t.version() == v0 + 4);  // reading does not count
}

TEST_CASE("values/print: a small float tensor prints exactly") {
  const Tensor t = from_vector<float>({1, -2.5f, 3, 4}, {2, 2});
  CHECK(t.str() ==
        "tensor([[ 1.0000, -2.5000],\n"
        "        [ 3.0000,  4.0000]], shape=(2, 2), dtype=float32, device=cpu)");
  std::ostringstream out;
  out << t;  // operator<< prints the same text
  CHECK(out.str() == t.str());
}

TEST_CASE("values/print: integer bool 0-dim empty and scientific formats") {
  CHECK(from_vector<int64_t>({1, -20, 3}).str() == "tensor([  1, -20,   3], shape=(3,), dtype=int64, device=cpu)");
  CHECK(from_vector<bool>({true, false}).str() == "tensor([ True, False], shape=(2,), dtype=bool, device=cpu)");
  CHECK(scalar_tensor(1.5).str() == "tensor(1.5000, shape=(), dtype=float32, device=cpu)");
  CHECK(zeros({0, 3}).str() == "tensor([], shape=(0, 3), dtype=float32, device=cpu)");
  // Tiny magnitudes would print as 0.0000, so the whole tensor switches to scientific notation.
  CHECK(from_vector<double>({1e-6, 1}).str() ==
        "tensor([1.0000e-06, 1.0000e+00], shape=(2,), dtype=float64, device=cpu)");
}

TEST_CASE("values/print: tensors over 1000 elements are summarized") {
  CHECK(arange(2000).str() == "tensor([   0,    1,    2, ..., 1997, 1998, 1999], shape=(2000,), dtype=int64, device=cpu)");
  CHECK(arange(1000).str().find("...") == std::string::npos);  // exactly 1000: printed in full
  const std::string s = zeros({40, 40}).str();  // 1600 elements in 2-D: rows and columns both elided
  CHECK(s.find("...") != std::string::npos);
  CHECK(s.find("shape=(40, 40)") != std::string::npos);
  CHECK(s.size() < 1000);  // a summary, not 1600 numbers
}

TEST_CASE("values/print: a tensor that requires grad says so") {
  Tensor w = zeros({1});
  w.requires_grad_();
  CHECK(w.str() == "tensor([0.0000], shape=(1,), dtype=float32, device=cpu, requires_grad=true)");
}

TEST_CASE("values/print: int64 values print exactly beyond 2^53") {
  const std::string text = from_vector<int64_t>({9007199254740993LL, -5}).str();
  INFO(text);
  CHECK(text.find("9007199254740993") != std::string::npos);
}
