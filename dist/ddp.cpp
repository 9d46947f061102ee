// See ddp.h. The Reducer is shared with the hooks through a weak pointer: hooks outlive a destroyed
// DistributedDataParallel (autograd keeps them on the parameters) and then do nothing.
#include "dist/ddp.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <sstream>

#include "autograd/engine.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/grad_mode.h"

namespace minidet::dist {

struct DistributedDataParallel::Reducer {
  struct Bucket {
    std::vector<size_t> params;   // indices into Reducer::params
    std::vector<int64_t> offsets;  // where each starts in flat
    Tensor flat;                  // the gradients, packed; all-reduced in place
    size_t pending = 0;           // gradients still missing in this backward
    std::unique_ptr<Work> work;   // set once started
  };

  ProcessGroup* group = nullptr;
  DDPOptions options;
  std::vector<Tensor> params;
  std::vector<std::string> names;
  std::vector<size_t> bucket_of;
  std::vector<bool> ready;   // this parameter's gradient arrived in this backward
  std::vector<Bucket> buckets;
  std::vector<Tensor> buffer_flats;  // the module's buffers, packed (pack_buffers)
  size_t next_to_start = 0;  // buckets start in index order
  bool sync = true;          // false inside no_sync()

  bool active() const { return group->size() > 1 && sync; }

  void on_gradient(size_t index) {
    if (!active()) return;
    MINIDET_CHECK(!ready[index], "DistributedDataParallel: parameter '", names[index], "' received a gradient twice ",
                  "before finish_gradient_sync(): call ddp.backward(loss) (or finish_gradient_sync() after each ",
                  "backward), or accumulate inside ddp.no_sync()");
    ready[index] = true;
    for (size_t b = 0; b < next_to_start; ++b) buckets[b].work->poll();  // let started reductions advance
    Bucket& bucket = buckets[bucket_of[index]];
    if (--bucket.pending == 0 && options.overlap) start_ready_buckets();
  }

  void start_ready_buckets() {
    while (next_to_start < buckets.size() && buckets[next_to_start].pending == 0) start(next_to_start++);
  }

  // Bucket b's k-th gradient: a view of its flat buffer, shaped like the parameter.
  Tensor slot(const Bucket& bucket, size_t k) const {
    const Tensor& param = params[bucket.params[k]];
    return bucket.flat.narrow(0, bucket.offsets[k], param.numel()).view(param.sizes());
  }

  static bool is_slot(const Tensor& grad, const Tensor& slot) {
    return grad.defined() && grad.storage() == slot.storage() && grad.storage_offset() == slot.storage_offset() &&
           grad.sizes() == slot.sizes() && grad.strides() == slot.strides();
  }

  // Before backward: every .grad becomes its slot in the buckets (PyTorch's gradient_as_bucket_view), so
  // AccumulateGrad adds straight into the flat buffers, and neither packing before the all-reduce nor
  // unpacking after it copies anything. A gradient already there (no_sync, or no zero_grad) is kept: it is
  // copied into its slot once. After the usual zero_grad() (set_to_none) this costs one fill per bucket,
  // where packing and unpacking cost two copies per parameter (plus AccumulateGrad's clone).
  void prepare() {
    if (group->size() == 1) return;
    NoGradGuard no_grad;
    for (Bucket& bucket : buckets) {
      const bool none = std::none_of(bucket.params.begin(), bucket.params.end(),
                                     [&](size_t p) { return params[p].grad().defined(); });
      if (none) bucket.flat.zero_();
      for (size_t k = 0; k < bucket.params.size(); ++k) {
        const Tensor& param = params[bucket.params[k]];
        Tensor view = slot(bucket, k);
        const Tensor grad = param.grad();
        if (is_slot(grad, view)) continue;
        if (grad.defined()) view.copy_(grad);
        else if (!none) view.zero_();
        param.set_grad(view);
      }
    }
  }

  // Packs the bucket's gradients that are not already in it (zeros for a parameter without one) and starts
  // its all-reduce.
  void start(size_t b) {
    Bucket& bucket = buckets[b];
    NoGradGuard no_grad;
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      Tensor view = slot(bucket, k);
      const Tensor grad = params[bucket.params[k]].grad();
      if (is_slot(grad, view)) continue;
      if (grad.defined()) view.copy_(grad);
      else view.zero_();
    }
    const std::string what = "all-reduce of gradient bucket " + std::to_string(b) + " (" +
                             std::to_string(bucket.params.size()) + " tensors, first '" + names[bucket.params[0]] + "')";
    bucket.work = group->start_all_reduce_mean(bucket.flat, what);
  }

  void finish() {
    if (!active()) return;
    for (; next_to_start < buckets.size(); ++next_to_start) start(next_to_start);  // unused ones, or overlap off
    NoGradGuard no_grad;
    for (Bucket& bucket : buckets) {
      bucket.work->wait();
      bucket.work.reset();
      for (size_t k = 0; k < bucket.params.size(); ++k) {  // the flat buffer now holds the means
        const Tensor& param = params[bucket.params[k]];
        Tensor view = slot(bucket, k);
        if (!is_slot(param.grad(), view)) param.set_grad(view);  // from here on .grad is its slot
      }
      bucket.pending = bucket.params.size();
    }
    std::fill(ready.begin(), ready.end(), false);
    next_to_start = 0;
  }
};

namespace {

// Names, shapes and dtypes of the parameters and buffers, hashed (FNV-1a), to check all ranks hold the
// same model before the first broadcast silently mixes two different ones.
int64_t model_signature(const nn::Module& module) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](const std::string& text) {
    for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  };
  for (const nn::NamedTensors& list : {module.named_parameters(), module.named_buffers()}) {
    for (const auto& [name, tensor] : list) {
      std::ostringstream text;
      text << name << ' ' << tensor.dtype();
      for (int64_t size : tensor.sizes()) text << ' ' << size;
      text << ';';
      mix(text.str());
    }
  }
  return static_cast<int64_t>(hash >> 1);
}

// Packs the module's buffers into one flat tensor per dtype and device and makes each buffer a view of its
// flat tensor (set_data: the layers' own handles follow). Copying rank 0's buffers after each backward then
// costs one broadcast per flat tensor instead of one per buffer: a detector has dozens of buffers (every
// BatchNorm's running mean, variance and count), and each broadcast is a collective of its own. The buffers
// then share a version counter; nothing saves a buffer for backward (BatchNorm saves what it computes from
// them), so no false "modified in place" error can come of it.
std::vector<Tensor> pack_buffers(const nn::Module& module) {
  std::vector<Tensor> buffers = module.buffers(), flats;
  std::vector<bool> packed(buffers.size(), false);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (packed[i]) continue;
    std::vector<size_t> group;  // the buffers of buffers[i]'s dtype and device
    int64_t total = 0;
    for (size_t j = i; j < buffers.size(); ++j) {
      if (packed[j] || buffers[j].dtype() != buffers[i].dtype() || buffers[j].device() != buffers[i].device()) continue;
      group.push_back(j);
      packed[j] = true;
      total += buffers[j].numel();
    }
    Tensor flat = empty({total}, buffers[i].options());
    int64_t offset = 0;
    for (size_t j : group) {
      const Tensor& buffer = buffers[j];
      Tensor view = flat.narrow(0, offset, buffer.numel()).view(buffer.sizes());
      view.copy_(buffer);
      buffer.set_data(view);
      offset += buffer.numel();
    }
    flats.push_back(flat);
  }
  return flats;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(nn::Module& module, ProcessGroup& group, DDPOptions options)
    : module_(module), group_(group), options_(options), reducer_(std::make_shared<Reducer>()) {
  MINIDET_CHECK(options.bucket_mb > 0, "DistributedDataParallel: bucket_mb must be positive, got ", options.bucket_mb);
  NoGradGuard no_grad;
  // Same model everywhere? Each rank compares with rank 0's signature; the count of mismatches is summed so
  // that all ranks stop together instead of some waiting forever in the next collective.
  const Tensor signature = from_vector<int64_t>({model_signature(module)});
  const Tensor root_signature = signature.clone();
  group.broadcast(root_signature, 0, "broadcast of the model signature");
  const std::vector<double> mismatches = group.all_reduce_sum(
      {root_signature.item<int64_t>() == signature.item<int64_t>() ? 0.0 : 1.0}, "model signature check");
  MINIDET_CHECK(mismatches[0] == 0, "DistributedDataParallel: ", mismatches[0], " rank(s) hold a model with other ",
                "parameter or buffer names, shapes or dtypes than rank 0 (", group.describe(), ")");
  for (const nn::NamedTensors& list : {module.named_parameters(), module.named_buffers()})
    for (const auto& [name, tensor] : list) group.broadcast(tensor.detach(), 0, "broadcast of '" + name + "' from rank 0");

  Reducer& r = *reducer_;
  r.group = &group;
  r.options = options;
  const nn::NamedTensors named = module.named_parameters();
  for (auto it = named.rbegin(); it != named.rend(); ++it) {
    if (!it->second.requires_grad()) continue;
    r.names.push_back(it->first);
    r.params.push_back(it->second);
  }
  const int64_t cap_bytes = static_cast<int64_t>(options.bucket_mb * 1024 * 1024);
  int64_t bucket_bytes = 0;
  for (size_t i = 0; i < r.params.size(); ++i) {
    const Tensor& p = r.params[i];
    const bool fits = !r.buckets.empty() && bucket_bytes < cap_bytes &&
                      r.params[r.buckets.back().params[0]].dtype() == p.dtype() &&
                      r.params[r.buckets.back().params[0]].device() == p.device();
    if (!fits) {
      r.buckets.emplace_back();
      bucket_bytes = 0;
    }
    Reducer::Bucket& bucket = r.buckets.back();
    bucket.offsets.push_back(bucket.params.empty() ? 0 : bucket.offsets.back() + r.params[bucket.params.back()].numel());
    bucket.params.push_back(i);
    bucket_bytes += p.numel() * static_cast<int64_t>(element_size(p.dtype()));
    r.bucket_of.push_back(r.buckets.size() - 1);
  }
  r.ready.assign(r.params.size(), false);
  if (group.size() == 1) return;  // alone: no buffers, no hooks; backward's gradients are already the mean
  if (options.broadcast_buffers) r.buffer_flats = pack_buffers(module);
  for (Reducer::Bucket& bucket : r.buckets) {
    const Tensor& last = r.params[bucket.params.back()];
    bucket.flat = zeros({bucket.offsets.back() + last.numel()}, last.options());
    bucket.pending = bucket.params.size();
  }
  std::weak_ptr<Reducer> weak = reducer_;
  for (size_t i = 0; i < r.params.size(); ++i) {
    autograd::register_post_accumulate_grad_hook(r.params[i], [weak, i](const Tensor&) {
      if (std::shared_ptr<Reducer> reducer = weak.lock()) reducer->on_gradient(i);
    });
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::backward(const Tensor& loss) {
  reducer_->prepare();
  loss.backward();
  finish_gradient_sync();
}

void DistributedDataParallel::finish_gradient_sync() {
  reducer_->finish();
  if (!options_.broadcast_buffers || !reducer_->active()) return;
  for (size_t i = 0; i < reducer_->buffer_flats.size(); ++i)
    group_.broadcast(reducer_->buffer_flats[i], 0, "broadcast of the buffers from rank 0 (flat tensor " +
                     std::to_string(i) + ")");
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp) { ddp_.reducer_->sync = false; }
DistributedDataParallel::NoSync::~NoSync() { ddp_.reducer_->sync = true; }

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (const Reducer::Bucket& bucket : reducer_->buckets) {
    out.emplace_back();
    for (size_t index : bucket.params) out.back().push_back(reducer_->names[index]);
  }
  return out;
}

}  // namespace minidet::dist
