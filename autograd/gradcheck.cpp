#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "core/factories.h"

namespace minidet::autograd {
namespace {

// Direct element access to a float64 CPU input, in logical row-major order, whatever its strides.
struct ElementAccess {
  double* base;
  Shape sizes, strides;
  int64_t numel;

  explicit ElementAccess(const Tensor& t)
      : base(t.data<double>()), sizes(t.sizes()), strides(t.strides()), numel(t.numel()) {}
  double& at(int64_t linear) const {
    int64_t offset = 0;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      offset += (linear % sizes[d]) * strides[d];
      linear /= sizes[d];
    }
    return base[offset];
  }
};

std::string coords(int64_t linear, const Shape& sizes) {
  Shape c(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    c[d] = linear % sizes[d];
    linear /= sizes[d];
  }
  return detail::compose(c);
}

class Checker {
 public:
  Checker(const GradcheckFn& fn, const TensorList& inputs, const GradcheckOptions& options)
      : fn_(fn), inputs_(inputs), options_(options), generator_(options.seed) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& x = inputs[i];
      if (!x.defined() || !x.requires_grad()) continue;
      MINIDET_CHECK(x.dtype() == kFloat64 && x.device().is_cpu(), "gradcheck: input ", i,
                    " must be a float64 CPU tensor, got ", x.dtype(), " on ", x.device());
      for (int64_t d = 0; d < x.dim(); ++d)
        MINIDET_CHECK(x.stride(d) != 0 || x.size(d) <= 1, "gradcheck: input ", i,
                      " has overlapping memory (stride 0); perturbing one element would move several");
      checked_.push_back(i);
      input_numel_ += x.numel();
    }
    MINIDET_CHECK(!checked_.empty(), "gradcheck: no input requires grad");
    numeric_nonzero_.assign(checked_.size(), false);
    analytic_nonzero_.assign(checked_.size(), false);
  }

  GradcheckResult run() {
    const Tensor y = evaluate();
    MINIDET_CHECK(y.dtype() == kFloat64, "gradcheck: fn must return float64, got ", y.dtype());
    output_sizes_ = y.sizes();
    const int64_t outputs = y.numel();
    std::string mode;
    if (outputs == 0) {
      mode = "empty output: nothing to compare";
    } else if (input_numel_ * outputs <= options_.full_jacobian_limit &&
               outputs <= options_.full_jacobian_max_outputs) {
      mode = "full Jacobian";
      check_full_jacobian(outputs);
    } else if (input_numel_ <= options_.per_element_limit) {
      mode = "per-element gradient of a random projection";
      check_projected(outputs);
    } else {
      mode = "random directional derivatives";
      for (int p = 0; p < options_.projections; ++p) check_directional(outputs);
    }
    for (size_t k = 0; k < checked_.size(); ++k) check_not_all_zero(k);
    std::ostringstream report;
    report << "gradcheck (" << mode << ", " << result_.entries_checked << " entries, max |analytic - numeric| "
           << result_.max_abs_error << ")";
    if (!result_.ok) report << " FAILED: " << failure_;
    result_.report = report.str();
    return result_;
  }

 private:
  Tensor evaluate() {
    EnableGradGuard grad_on;
    Tensor y = fn_(inputs_);
    MINIDET_CHECK(y.defined(), "gradcheck: fn returned an undefined tensor");
    return y;
  }

  // Plain value of <v, fn(inputs)> without recording.
  double projected_value(const std::vector<double>& v) {
    NoGradGuard no_grad;
    const std::vector<double> y = fn_(inputs_).to_vector<double>();
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i) sum += v[i] * y[i];
    return sum;
  }

  // Analytic gradients of <v, fn(inputs)> for each checked input, flattened row-major.
  std::vector<std::vector<double>> analytic(const std::vector<double>& v) {
    for (size_t i : checked_) zero_grad(inputs_[i]);
    const Tensor y = evaluate();
    MINIDET_CHECK(y.requires_grad(), "gradcheck: the output does not require grad; fn did not record its ops");
    backward({y}, {from_vector<double>(v, y.sizes())});
    std::vector<std::vector<double>> grads;
    for (size_t i : checked_) {
      const Tensor g = inputs_[i].grad();
      grads.push_back(g.defined() ? g.to_vector<double>() : std::vector<double>(inputs_[i].numel(), 0.0));
    }
    return grads;
  }

  // Central difference of <v, fn> along element j of checked input k.
  double numeric(size_t k, int64_t j, const std::vector<double>& v) {
    ElementAccess x(inputs_[checked_[k]]);
    const double original = x.at(j);
    x.at(j) = original + options_.eps;
    const double plus = projected_value(v);
    x.at(j) = original - options_.eps;
    const double minus = projected_value(v);
    x.at(j) = original;
    return (plus - minus) / (2 * options_.eps);
  }

  void compare(double analytic_value, double numeric_value, const std::string& where, size_t k) {
    ++result_.entries_checked;
    const double err = std::fabs(analytic_value - numeric_value);
    if (std::fabs(numeric_value) > options_.atol) numeric_nonzero_[k] = true;
    if (analytic_value != 0.0) analytic_nonzero_[k] = true;
    const bool bad = !(err <= options_.atol + options_.rtol * std::fabs(numeric_value));  // NaN fails too
    if (err > result_.max_abs_error || std::isnan(err)) result_.max_abs_error = err;
    if (bad && (result_.ok || err > worst_failure_)) {
      result_.ok = false;
      worst_failure_ = err;
      std::ostringstream out;
      out << where << ": analytic " << analytic_value << " vs numeric " << numeric_value << " (|diff| " << err
          << " > atol " << options_.atol << " + rtol " << options_.rtol << " * |numeric|)";
      failure_ = out.str();
    }
  }

  std::vector<double> random_vector(int64_t n) {
    std::vector<double> v(n);
    for (double& x : v) x = generator_.next_normal();
    return v;
  }

  void check_full_jacobian(int64_t outputs) {
    // Rows of J from backward with one-hot v; columns from finite differences of each output element.
    std::vector<std::vector<std::vector<double>>> rows(outputs);  // rows[o][k][j]
    for (int64_t o = 0; o < outputs; ++o) {
      std::vector<double> onehot(outputs, 0.0);
      onehot[o] = 1.0;
      rows[o] = analytic(onehot);
    }
    for (size_t k = 0; k < checked_.size(); ++k) {
      ElementAccess x(inputs_[checked_[k]]);
      for (int64_t j = 0; j < x.numel; ++j) {
        const double original = x.at(j);
        std::vector<double> plus, minus;
        {
          NoGradGuard no_grad;
          x.at(j) = original + options_.eps;
          plus = fn_(inputs_).to_vector<double>();
          x.at(j) = original - options_.eps;
          minus = fn_(inputs_).to_vector<double>();
          x.at(j) = original;
        }
        for (int64_t o = 0; o < outputs; ++o) {
          const double num = (plus[o] - minus[o]) / (2 * options_.eps);
          compare(rows[o][k][j], num,
                  "d output" + coords(o, output_sizes_) + " / d input " + std::to_string(checked_[k]) +
                      coords(j, inputs_[checked_[k]].sizes()),
                  k);
        }
      }
    }
  }

  void check_projected(int64_t outputs) {
    const std::vector<double> v = random_vector(outputs);
    const auto grads = analytic(v);
    for (size_t k = 0; k < checked_.size(); ++k)
      for (int64_t j = 0; j < inputs_[checked_[k]].numel(); ++j)
        compare(grads[k][j], numeric(k, j, v),
                "input " + std::to_string(checked_[k]) + coords(j, inputs_[checked_[k]].sizes()), k);
  }

  void check_directional(int64_t outputs) {
    const std::vector<double> v = random_vector(outputs);
    const auto grads = analytic(v);
    for (size_t k = 0; k < checked_.size(); ++k) {
      ElementAccess x(inputs_[checked_[k]]);
      const std::vector<double> u = random_vector(x.numel);
      double predicted = 0;
      for (int64_t j = 0; j < x.numel; ++j) predicted += grads[k][j] * u[j];
      std::vector<double> original(x.numel);
      for (int64_t j = 0; j < x.numel; ++j) original[j] = x.at(j);
      auto shift = [&](double scale) {
        for (int64_t j = 0; j < x.numel; ++j) x.at(j) = original[j] + scale * u[j];
      };
      shift(options_.eps);
      const double plus = projected_value(v);
      shift(-options_.eps);
      const double minus = projected_value(v);
      shift(0.0);
      compare(predicted, (plus - minus) / (2 * options_.eps),
              "directional derivative of input " + std::to_string(checked_[k]), k);
    }
  }

  void check_not_all_zero(size_t k) {
    if (numeric_nonzero_[k] && !analytic_nonzero_[k]) {
      result_.ok = false;
      failure_ = "the analytic gradient of input " + std::to_string(checked_[k]) +
                 " is all zero but the numeric one is not (a backward that never writes its result?)";
    }
  }

  const GradcheckFn& fn_;
  TensorList inputs_;
  GradcheckOptions options_;
  Generator generator_;
  std::vector<size_t> checked_;
  int64_t input_numel_ = 0;
  Shape output_sizes_;
  GradcheckResult result_;
  double worst_failure_ = 0;
  std::string failure_;
  std::vector<bool> numeric_nonzero_;   // per checked input: some numeric entry is clearly nonzero
  std::vector<bool> analytic_nonzero_;  // per checked input: some analytic entry is nonzero
};

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const TensorList& inputs, const GradcheckOptions& options) {
  // gradcheck runs backward on the caller's tensors: leave their gradients as it found them.
  std::vector<Tensor> saved_grads;
  for (const Tensor& t : inputs) saved_grads.push_back(t.defined() ? t.grad() : Tensor());
  auto restore = [&] {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined() && (saved_grads[i].defined() || inputs[i].grad().defined()))
        inputs[i].autograd_meta().grad = saved_grads[i];
  };
  try {
    GradcheckResult result = Checker(fn, inputs, options).run();
    restore();
    return result;
  } catch (...) {
    restore();
    throw;
  }
}

GradcheckResult gradcheck(const GradcheckFn& fn, const TensorList& inputs, double eps, double atol, double rtol) {
  GradcheckOptions options;
  options.eps = eps;
  options.atol = atol;
  options.rtol = rtol;
  return gradcheck(fn, inputs, options);
}

}  // namespace minidet::autograd
