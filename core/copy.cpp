// Tensor::copy_, fill_, contiguous, clone and to: the functions of core that move or convert data.
#include <cstring>

#include "core/copy_kernels.h"
#include "core/transfer_counts.h"
#if MINIDET_WITH_CUDA
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/host_staging.h"
#endif

namespace minidet {
namespace detail {

void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
#if MINIDET_WITH_CUDA
  // cudaMemcpy on the legacy stream waits for queued kernels, so the bytes read are the final ones. Uploads
  // go through the pinned staging ring instead when they fit, so that they do not wait.
  const cudaMemcpyKind kind = dst_device.is_cpu()   ? cudaMemcpyDeviceToHost
                              : src_device.is_cpu() ? cudaMemcpyHostToDevice
                                                    : cudaMemcpyDeviceToDevice;
  // A graph records a copy's addresses, not its bytes: a replay would copy whatever the host buffer then
  // holds, and a download cannot finish while nothing runs. Inputs enter a graph through device tensors.
  MINIDET_CHECK(kind == cudaMemcpyDeviceToDevice || !cuda::stream_overridden(),
                "CUDA graph capture: the captured code copies between the host and the device (",
                kind == cudaMemcpyDeviceToHost ? "a download: it reads a value on the host" : "an upload",
                "), which a graph cannot replay; copy inputs to the device before the captured call and read "
                "results after it");
  count_transfer(kind == cudaMemcpyDeviceToHost   ? TransferKind::DeviceToHost
                 : kind == cudaMemcpyHostToDevice ? TransferKind::HostToDevice
                                                  : TransferKind::DeviceToDevice);
  if (kind == cudaMemcpyDeviceToDevice && dst_device != src_device) {
    MINIDET_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes));
  } else if (kind == cudaMemcpyHostToDevice && cuda::copy_to_device_staged(dst, src, nbytes, dst_device.index)) {
    count_transfer(TransferKind::HostToDeviceStaged);  // queued: the host did not wait (core/cuda/host_staging.h)
  } else if (kind == cudaMemcpyDeviceToDevice) {
    // Ordered on the stream like a kernel (and recordable in a graph capture); the host does not wait.
    cuda::DeviceGuard guard(dst_device);
    MINIDET_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, cuda::current_stream()));
  } else {
    cuda::DeviceGuard guard(dst_device.is_cuda() ? dst_device : src_device);
    MINIDET_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, kind));
  }
#else
  MINIDET_FAIL("copy: minidet was built without CUDA, cannot copy between ", src_device, " and ", dst_device);
#endif
}

}  // namespace detail

namespace {

// True when the element ranges that a and b touch in one storage may overlap.
bool may_overlap(const Tensor& a, const Tensor& b) {
  if (a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0) return false;
  auto span = [](const Tensor& t) {
    int64_t last = t.storage_offset();
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.sizes()[d] - 1) * t.strides()[d];
    return std::make_pair(t.storage_offset(), last);
  };
  const auto [a_first, a_last] = span(a);
  const auto [b_first, b_last] = span(b);
  return a_first <= b_last && b_first <= a_last;
}

void copy_same_device(const Tensor& dst, const Tensor& src) {
  if (dst.device().is_cpu()) return detail::copy_strided_cpu(dst, src);
#if MINIDET_WITH_CUDA
  detail::copy_strided_cuda(dst, src);
#endif
}

// In-place writes are raw: they are never recorded. So while grad mode is on they must not touch a tensor
// that is part of the graph (a leaf that requires grad, or an op's output whose grad_fn would then describe
// values that are gone), nor take their values from one (the gradient would silently stop there).
void check_writable(const Tensor& t, const char* what, const Tensor* src = nullptr) {
  t.storage()->check_writable();  // a read-only constant throws, naming itself, before anything is written
  if (!GradMode::is_enabled()) return;
  MINIDET_CHECK(!t.requires_grad(), "Tensor::", what, ": ",
                t.is_leaf() ? "a leaf that requires grad" : "a tensor produced by a recorded op",
                " cannot be modified in place while grad mode is on (in-place writes are not recorded; "
                "wrap parameter updates in NoGradGuard, or write into a clone)");
  MINIDET_CHECK(src == nullptr || !src->requires_grad(), "Tensor::", what,
                ": the source requires grad, and an in-place copy is not recorded, so its gradient would be "
                "lost; use the differentiable minidet::clone / to from ops/, or copy inside NoGradGuard");
}

// A destination where several elements share one memory location (a stride-0, expanded dim) would receive
// racing writes of different values.
void check_no_internal_overlap(const Tensor& t, const char* what) {
  for (int64_t d = 0; d < t.dim(); ++d)
    MINIDET_CHECK(t.stride(d) != 0 || t.size(d) <= 1, "Tensor::", what, ": more than one element of the ",
                  "written-to tensor refers to a single memory location (dim ", d, " is expanded); clone it first");
}

}  // namespace

const Tensor& Tensor::copy_(const Tensor& src) const {
  check_defined("copy_");
  MINIDET_CHECK(src.defined(), "Tensor::copy_: the source tensor is undefined");
  check_writable(*this, "copy_", &src);
  check_no_internal_overlap(*this, "copy_");
  Tensor source = src;
  {
    NoGradGuard raw;  // the broadcasting view below is internal and never reaches the graph
    if (source.sizes() != sizes()) source = source.expand(sizes());
    if (source.device() != device()) {
      Tensor dense = source.contiguous();
      if (is_contiguous() && dense.dtype() == dtype()) {  // the common case (x.cuda(), .cpu()): one transfer
        detail::copy_bytes(raw_data(), device(), dense.raw_data(), dense.device(), numel() * element_size(dtype()));
        bump_version();
        return *this;
      }
      // Otherwise bytes cross devices in a dense buffer of the source dtype; conversion happens on arrival.
      Tensor arrived = make_tensor(dense.sizes(), TensorOptions(dense.dtype(), device()));
      detail::copy_bytes(arrived.raw_data(), device(), dense.raw_data(), dense.device(),
                         dense.numel() * element_size(dense.dtype()));
      source = arrived;
    } else if (may_overlap(*this, source) && !(source.storage_offset() == storage_offset() &&
                                               source.strides() == strides() && source.dtype() == dtype())) {
      source = source.clone();  // e.g. t.copy_(t.t()): reading while writing the same memory is undefined
    }
  }
  copy_same_device(*this, source);
  bump_version();
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  check_defined("fill_");
  check_writable(*this, "fill_");
  if (device().is_cpu()) {
    detail::fill_cpu(*this, value);
  } else {
#if MINIDET_WITH_CUDA
    detail::fill_cuda(*this, value);
#endif
  }
  bump_version();
  return *this;
}

Tensor Tensor::contiguous() const {
  check_not_recording(*this, "contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  check_not_recording(*this, "clone");
  Tensor out = make_tensor(sizes(), options());
  copy_same_device(out, *this);
  return out;
}

Tensor Tensor::to(const TensorOptions& target) const {
  check_not_recording(*this, "to");
  if (target.dtype == dtype() && target.device == device()) return *this;
  Tensor out = make_tensor(sizes(), target);
  NoGradGuard raw;
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(const Device& device) const { return to(TensorOptions(dtype(), device)); }
Tensor Tensor::to(DType dtype) const { return to(TensorOptions(dtype, device())); }

}  // namespace minidet
