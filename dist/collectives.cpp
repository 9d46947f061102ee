// ProcessGroup's collectives (see process_group.h): MPI on host memory, NCCL (or a host copy and MPI) on
// CUDA memory. Without MPI every collective is the identity on a group of one.
#include <climits>

#include "core/error.h"
#include "dist/nccl_communicator.h"
#include "dist/process_group.h"

#if MINIDET_WITH_MPI
#include <mpi.h>
#endif

namespace minidet::dist {

namespace {

#if MINIDET_WITH_MPI
// The mean from the sum, on a host tensor (contiguous, float32 or float64).
void divide_in_place(const Tensor& t, int by) {
  if (t.dtype() == kFloat64) {
    for (double *p = t.data<double>(), *end = p + t.numel(); p != end; ++p) *p /= by;
  } else {
    MINIDET_CHECK(t.dtype() == kFloat32, "dist: the mean over ranks needs a floating tensor, got ", t.dtype());
    for (float *p = t.data<float>(), *end = p + t.numel(); p != end; ++p) *p /= static_cast<float>(by);
  }
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case kFloat32: return MPI_FLOAT;
    case kFloat64: return MPI_DOUBLE;
    case kInt64: return MPI_INT64_T;
    default: MINIDET_FAIL("dist: dtype ", dtype, " cannot be all-reduced (float32, float64, int64)");
  }
}

// An MPI_Iallreduce in flight. MPI makes progress on it only inside MPI calls (Open MPI has no progress
// thread for collectives by default), so the overlap on the CPU is partial: the reduction advances at each
// poll() (DDP polls from every gradient hook), during later MPI calls and at wait().
class MpiWork final : public Work {
 public:
  // divide_by > 1: a mean, finished on the host once the sum has arrived.
  MpiWork(const Tensor& t, int divide_by, Watchdog& watchdog, std::string what)
      : tensor_(t), divide_by_(divide_by), watchdog_(watchdog), what_(std::move(what)) {}
  void wait() override {
    {
      Watchdog::Scope scope(watchdog_, what_);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
    if (divide_by_ > 1) divide_in_place(tensor_, divide_by_);
    divide_by_ = 1;  // a second wait() must not divide again
  }
  void poll() override {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);  // a finished request becomes MPI_REQUEST_NULL: wait() returns
  }
  MPI_Request request = MPI_REQUEST_NULL;

 private:
  Tensor tensor_;
  int divide_by_;
  Watchdog& watchdog_;
  std::string what_;
};
#endif

class DoneWork final : public Work {  // a collective that completed before it was returned
 public:
  void wait() override {}
};

void check_collective_tensor(const Tensor& t, const std::string& what) {
  MINIDET_CHECK(t.defined() && t.is_contiguous(), "dist: ", what, ": the tensor must be defined and contiguous");
  MINIDET_CHECK(t.numel() <= INT_MAX, "dist: ", what, ": ", t.numel(), " elements, more than one MPI call takes");
}

}  // namespace

NcclCommunicator& ProcessGroup::nccl_for(const Tensor& t) {
  if (!nccl_) {
    // Collective: every rank joins here with the same first CUDA tensor (DDP's first broadcast).
    Watchdog::Scope scope = watch("creation of the NCCL communicator");
    nccl_ = std::make_unique<NcclCommunicator>(rank_, size_, t.device());
    install_nccl_check();
  }
  // The training thread forgets finished collectives too (the watchdog may be off), and stops on an error.
  const std::string problem = nccl_->check(watchdog_->timeout_seconds());
  if (!problem.empty()) abort(problem, 124);
  return *nccl_;
}

std::unique_ptr<Work> ProcessGroup::start_all_reduce_sum(const Tensor& t, const std::string& what) {
  return start_all_reduce(t, false, what);
}

std::unique_ptr<Work> ProcessGroup::start_all_reduce_mean(const Tensor& t, const std::string& what) {
  MINIDET_CHECK(is_floating(t.dtype()), "dist: ", what, ": the mean over ranks needs a floating tensor, got ",
                t.dtype());
  return start_all_reduce(t, true, what);
}

std::unique_ptr<Work> ProcessGroup::start_all_reduce(const Tensor& t, bool mean, const std::string& what) {
  check_collective_tensor(t, what);
  if (size_ == 1) return std::make_unique<DoneWork>();
#if MINIDET_WITH_MPI
  if (t.is_cuda()) {
    if (with_nccl()) return nccl_for(t).start_all_reduce(t, mean, what);
    // No NCCL: stage through the host, blocking.
    const Tensor host = t.to(Device::cpu());
    start_all_reduce(host, mean, what)->wait();
    t.copy_(host);
    return std::make_unique<DoneWork>();
  }
  auto work = std::make_unique<MpiWork>(t, mean ? size_ : 1, *watchdog_, what);
  MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), static_cast<int>(t.numel()), mpi_type(t.dtype()), MPI_SUM,
                 MPI_COMM_WORLD, &work->request);
  return work;
#else
  return std::make_unique<DoneWork>();
#endif
}

void ProcessGroup::all_reduce_sum(const Tensor& t, const std::string& what) {
  start_all_reduce(t, false, what)->wait();
}

void ProcessGroup::broadcast(const Tensor& t, int root, const std::string& what) {
  check_collective_tensor(t, what);
  if (size_ == 1) return;
#if MINIDET_WITH_MPI
  if (t.is_cuda()) {
    if (with_nccl()) {
      return nccl_for(t).broadcast(t, root, what);
    }
    const Tensor host = t.to(Device::cpu());
    broadcast(host, root, what);
    t.copy_(host);
    return;
  }
  Watchdog::Scope scope = watch(what);
  MPI_Bcast(t.raw_data(), static_cast<int>(t.numel()), mpi_type(t.dtype()), root, MPI_COMM_WORLD);
#endif
}

void ProcessGroup::broadcast(std::string& text, int root, const std::string& what) {
  if (size_ == 1) return;
#if MINIDET_WITH_MPI
  Watchdog::Scope scope = watch(what);
  long long length = static_cast<long long>(text.size());
  MPI_Bcast(&length, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD);
  text.resize(static_cast<size_t>(length));
  MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, root, MPI_COMM_WORLD);
#endif
}

void ProcessGroup::barrier(const std::string& what) {
  if (size_ == 1) return;
#if MINIDET_WITH_MPI
  Watchdog::Scope scope = watch(what);
  MPI_Barrier(MPI_COMM_WORLD);
#endif
}

std::vector<double> ProcessGroup::all_reduce_sum(std::vector<double> values, const std::string& what) {
  if (size_ == 1) return values;
#if MINIDET_WITH_MPI
  Watchdog::Scope scope = watch(what);
  MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
  return values;
}

#if MINIDET_WITH_MPI
namespace {
// Rank 0 gets every rank's `count` items of `type`, concatenated in rank order, and each rank's count.
template <typename T>
std::vector<T> gather_v(const T* values, int count, MPI_Datatype type, int rank, int size, std::vector<int>& counts,
                        const std::string& what) {
  std::vector<T> all;
  std::vector<int> offsets(rank == 0 ? size : 0);
  counts.assign(rank == 0 ? size : 0, 0);
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    long long total = 0;
    for (int r = 0; r < size; ++r) {
      offsets[r] = static_cast<int>(total);
      total += counts[r];
    }
    MINIDET_CHECK(total <= INT_MAX, "dist: ", what, ": ", total, " values, more than one MPI call takes");
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(values, count, type, all.data(), counts.data(), offsets.data(), type, 0, MPI_COMM_WORLD);
  return all;
}
}  // namespace
#endif

std::vector<double> ProcessGroup::gather_to_main(const std::vector<double>& values, const std::string& what) {
  if (size_ == 1) return values;
  std::vector<double> all;
#if MINIDET_WITH_MPI
  Watchdog::Scope scope = watch(what);
  std::vector<int> counts;
  all = gather_v(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, rank_, size_, counts, what);
#endif
  return all;
}

std::vector<std::string> ProcessGroup::gather_to_main(const std::string& text, const std::string& what) {
  if (size_ == 1) return {text};
  std::vector<std::string> texts;
#if MINIDET_WITH_MPI
  Watchdog::Scope scope = watch(what);
  std::vector<int> counts;
  const std::vector<char> all = gather_v(text.data(), static_cast<int>(text.size()), MPI_CHAR, rank_, size_, counts, what);
  size_t at = 0;
  for (const int n : counts) {
    texts.emplace_back(all.data() + at, static_cast<size_t>(n));
    at += static_cast<size_t>(n);
  }
#endif
  return texts;
}

}  // namespace minidet::dist
