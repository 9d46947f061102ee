// write_explorer_fixture PAGE RECORD: the small page the browser test (tests/browser/test_explorer.py) plays.
//
// One backward pass of a 2-layer MLP, recorded and written twice: the page (autograd::write_backward_html)
// to PAGE and the record it shows as JSON (BackwardRecord::to_json) to RECORD, which the test reads as the
// truth the page must agree with. The graph is small but has what the page must handle:
//   - named parameters (mlp.fc1.weight, ...) whose AccumulateGrad nodes are the leaves the page searches;
//   - nested module scopes (mlp, mlp.fc1, mlp.fc2, loss) for the clusters;
//   - a gradient with every value (the logits' (256, 3)) and one too large to keep its values, which gets a
//     block-mean heat map (the hidden layer's (256, 64) = 16,384 elements > RecordOptions::max_values);
//   - a parameter used twice (fc1.weight, by linear and by the weight-decay term), so its leaf sums two
//     gradients, and two losses that meet at one add.
// Exits 77 (CTest's skip code) when this build has no Graphviz, so the test is reported Skipped; with
// --available it only says that (0 or 77), for the driver of the detector page's test.
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "autograd/backward_html.h"
#include "autograd/backward_record.h"
#include "autograd/engine.h"
#include "autograd/scope.h"
#include "core/factories.h"
#include "core/generator.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/loss/cross_entropy.h"
#include "ops/matmul/linear.h"
#include "ops/reduction/reduction.h"

using namespace minidet;

namespace {

Tensor parameter(const Shape& shape, double scale, Generator& g, const std::string& name) {
  Tensor t = randn(shape, kFloat32, &g) * scale;  // made with no input requiring grad: a leaf
  t.requires_grad_();
  autograd::set_name(t, name);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const bool probe = argc == 2 && std::string(argv[1]) == "--available";
  if (argc != 3 && !probe) {
    std::fprintf(stderr, "usage: write_explorer_fixture PAGE.html RECORD.json | --available\n");
    return 2;
  }
  if (!autograd::backward_html_available()) {
    std::printf("SKIPPED: this build has no Graphviz (libgraphviz-dev), so it cannot write the explorer page\n");
    return 77;
  }
  if (probe) return 0;  // the test driver asks before it runs a program that writes a page
  try {
    Generator g(29);
    const int64_t batch = 256, in = 8, hidden = 64, classes = 3;
    Tensor x = randn({batch, in}, kFloat32, &g);
    Tensor labels = randint(0, classes, {batch}, kInt64, &g);
    Tensor w1 = parameter({hidden, in}, 0.35, g, "mlp.fc1.weight");
    Tensor b1 = parameter({hidden}, 0.1, g, "mlp.fc1.bias");
    Tensor w2 = parameter({classes, hidden}, 0.15, g, "mlp.fc2.weight");
    Tensor b2 = parameter({classes}, 0.1, g, "mlp.fc2.bias");

    autograd::ScopeRecordingGuard scopes;
    Tensor logits;
    {
      autograd::ScopeGuard mlp("mlp");
      Tensor h;
      {
        autograd::ScopeGuard fc1("fc1");
        h = relu(linear(x, w1, b1));  // (256, 64): its gradient gets a heat map, not values
        autograd::set_name(h, "hidden");
      }
      {
        autograd::ScopeGuard fc2("fc2");
        logits = linear(tanh(h), w2, b2);
        autograd::set_name(logits, "logits");
      }
    }
    Tensor loss;
    {
      autograd::ScopeGuard losses("loss");
      Tensor classification = cross_entropy(logits, labels);
      Tensor decay = sum(w1 * w1) * 1e-3;  // fc1.weight is used twice
      loss = classification + decay;
      autograd::set_name(loss, "loss");
    }

    autograd::RecordOptions options;
    options.title = "browser test fixture: one backward pass of a 2-layer MLP";
    const autograd::BackwardRecord record = autograd::record_backward({loss}, options);

    std::ofstream json(argv[2], std::ios::binary);
    json << record.to_json();
    json.close();
    if (!json) {
      std::fprintf(stderr, "write_explorer_fixture: could not write %s\n", argv[2]);
      return 1;
    }
    autograd::write_backward_html(record, argv[1]);
    std::printf("write_explorer_fixture: %zu nodes; page %s, record %s\n", record.nodes.size(), argv[1], argv[2]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_explorer_fixture: %s\n", e.what());
    return 1;
  }
}
