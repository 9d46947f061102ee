// Module registration, naming, modes, device/dtype moves and initialisers.
#include <cmath>

#include "core/factories.h"
#include "nn/init/init.h"
#include "autograd/node.h"
#include "nn/layers/linear.h"
#include "nn/layers/sequential.h"
#include "nn/layers/simple.h"
#include "nn/module/module.h"
#include "tests/support.h"

using namespace minidet;
using namespace minidet::nn;

namespace {
class Leaf final : public Module {
 public:
  explicit Leaf(int64_t n) : Module("Leaf") {
    weight = register_parameter("weight", zeros({n, 2}));
    bias = register_parameter("bias", zeros({n}));
    steps = register_buffer("steps", zeros({1}, kInt64));
  }
  std::string extra_repr() const override { return "n=" + std::to_string(weight.size(0)); }
  Tensor weight, bias, steps;
};

class Tree final : public Module {
 public:
  Tree() : Module("Tree") {
    scale = register_parameter("scale", ones({1}));
    first = register_module("first", std::make_shared<Leaf>(3));
    second = register_module("second", std::make_shared<Leaf>(1000));
  }
  Tensor scale;
  std::shared_ptr<Leaf> first, second;
};
}  // namespace

TEST_CASE("values/module: dotted names in registration order") {
  Tree tree;
  std::vector<std::string> names;
  for (const auto& [name, t] : tree.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"scale", "first.weight", "first.bias", "second.weight", "second.bias"});
  CHECK(tree.named_buffers().size() == 2);
  CHECK(tree.named_buffers()[1].first == "second.steps");
  CHECK(tree.named_parameters(/*recurse=*/false).size() == 1);
  CHECK(tree.num_parameters() == 1 + 6 + 3 + 2000 + 1000);
  for (const Tensor& p : tree.parameters()) CHECK(p.requires_grad());
}

TEST_CASE("values/module: describe prints the tree with parameter counts") {
  Tree tree;
  const std::string text = tree.describe();
  INFO(text);
  CHECK(text.find("Tree (3,010 parameters)") == 0);
  CHECK(text.find("  (first): Leaf(n=3) (9 parameters)") != std::string::npos);
  CHECK(text.find("  (second): Leaf(n=1000) (3,000 parameters)") != std::string::npos);
}

TEST_CASE("values/module: train and eval are recursive") {
  Tree tree;
  tree.eval();
  CHECK_FALSE(tree.is_training());
  CHECK_FALSE(tree.first->is_training());
  tree.train();
  CHECK(tree.second->is_training());
}

TEST_CASE("values/module: to(dtype) converts floats in place and keeps handles") {
  Tree tree;
  Tensor handle = tree.first->weight;
  tree.to(kFloat64);
  CHECK(handle.dtype() == kFloat64);  // the member, the registry and outside handles are one tensor
  CHECK(tree.named_parameters()[1].second.dtype() == kFloat64);
  CHECK(tree.first->steps.dtype() == kInt64);  // integer buffers stay integers
  CHECK(handle.requires_grad());
}

TEST_CASE("errors/module: duplicate and invalid names") {
  class Bad final : public Module {
   public:
    explicit Bad(int which) : Module("Bad") {
      register_parameter("w", zeros({1}));
      if (which == 0) register_parameter("w", zeros({1}));
      if (which == 1) register_buffer("a.b", zeros({1}));
    }
  };
  CHECK_THROWS_CONTAINING(Bad(0), "already registered");
  CHECK_THROWS_CONTAINING(Bad(1), "invalid name");
}

TEST_CASE("values/init: fans gains and bounds") {
  Tensor conv_w = empty({8, 4, 3, 3});
  CHECK(init::fan_in_and_out(conv_w) == std::pair<int64_t, int64_t>{36, 72});
  CHECK(init::gain("relu") == doctest::Approx(std::sqrt(2.0)));
  CHECK(init::gain("leaky_relu", std::sqrt(5.0)) == doctest::Approx(std::sqrt(1.0 / 3.0)));
  Generator g(3);
  init::kaiming_uniform_(conv_w, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", &g);
  const double bound = 1.0 / std::sqrt(36.0);  // PyTorch's default conv/linear init
  double max_abs = 0;
  for (float v : conv_w.to_vector<float>()) max_abs = std::max(max_abs, std::fabs(double(v)));
  CHECK(max_abs <= bound);
  CHECK(max_abs > 0.9 * bound);  // 288 draws fill the range
  Tensor big = empty({256, 256}, kFloat64);
  init::kaiming_normal_(big, 0.0, init::FanMode::FanIn, "relu", &g);
  double sum_sq = 0;
  for (double v : big.to_vector<double>()) sum_sq += v * v;
  CHECK(std::sqrt(sum_sq / big.numel()) == doctest::Approx(std::sqrt(2.0 / 256)).epsilon(0.02));
  Generator g1(9), g2(9);
  Tensor a = empty({4, 4}), b = empty({4, 4});
  init::xavier_uniform_(a, 1.0, &g1);
  init::xavier_uniform_(b, 1.0, &g2);
  CHECK(a.to_vector<float>() == b.to_vector<float>());  // seeded: identical
}

TEST_CASE("values/module: a weight shared by two layers is listed once") {
  class Tied final : public Module {
   public:
    Tied() : Module("Tied") {
      first = register_module("first", std::make_shared<Leaf>(2));
      second = register_module("second", std::make_shared<Leaf>(2));
      shared = register_parameter("shared", first->weight);  // the same tensor under a second name
    }
    std::shared_ptr<Leaf> first, second;
    Tensor shared;
  };
  Tied tied;
  std::vector<std::string> names;
  for (const auto& [name, t] : tied.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"shared", "first.bias", "second.weight", "second.bias"});
  CHECK(tied.num_parameters() == 4 + 2 + 4 + 2);
}

TEST_CASE("values/module: path() is the dotted prefix of named_parameters, whatever order the tree was built in") {
  Tree tree;  // its children were built (and their own children registered) before the tree registered them
  for (const auto& [name, child] : tree.named_children()) CHECK(child->path() == name);
  CHECK(tree.path().empty());
  Sequential outer;
  auto inner = std::make_shared<Sequential>();
  auto linear = std::make_shared<Linear>(2, 3);
  inner->push_back(linear);   // registered in inner first ("0")...
  outer.push_back(inner);     // ...then inner in outer: the path travels down
  CHECK(inner->path() == "0");
  CHECK(linear->path() == "0.0");
  CHECK(outer.named_parameters().front().first == linear->path() + ".weight");
}

TEST_CASE("values/module: a module's forward opens its path as the scope of the nodes it records") {
  Sequential model;
  model.push_back(std::make_shared<Linear>(2, 3));
  model.push_back(std::make_shared<ReLU>());
  Tensor x = ones({4, 2});
  autograd::ScopeRecordingGuard scopes;
  const Tensor y = model(x);  // Linear "0" records linear, ReLU "1" records relu
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name() == "relu");
  CHECK(y.grad_fn()->scope == "1");
  REQUIRE(y.grad_fn()->next_edges[0].valid());
  CHECK(y.grad_fn()->next_edges[0].node->scope == "0");
  CHECK(autograd::current_scope().empty());  // every scope closed again
}
