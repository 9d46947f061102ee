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

  // Packs the bucket's gradients (zeros for a parameter without one) and starts its all-reduce.
  void start(size_t b) {
    Bucket& bucket = buckets[b];
    NoGradGuard no_grad;
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      const Tensor& param = params[bucket.params[k]];
      Tensor slot = bucket.flat.narrow(0, bucket.offsets[k], param.numel()).view(param.sizes());
      const Tensor grad = param.grad();
      if (grad.defined()) slot.copy_(grad);
      else slot.zero_();
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
        const Tensor slot = bucket.flat.narrow(0, bucket.offsets[k], param.numel()).view(param.sizes());
        if (param.grad().defined()) param.grad().copy_(slot);
        else param.set_grad(slot.clone());
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
  loss.backward();
  finish_gradient_sync();
}

void DistributedDataParallel::finish_gradient_sync() {
  reducer_->finish();
  if (!options_.broadcast_buffers || !reducer_->active()) return;
  NoGradGuard no_grad;
  for (const auto& [name, buffer] : module_.named_buffers())
    group_.broadcast(buffer.detach(), 0, "broadcast of buffer '" + name + "' from rank 0");
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
